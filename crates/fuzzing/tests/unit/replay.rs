//! Every file of `fuzz/corpus/<target>/` (the minimised seeds) and of
//! `fuzz/regressions/<target>/` (every crash found, kept after its fix)
//! through its target, as `make fuzz` would run it, on stable: an input
//! that panics fails here, naming the file. And the three lists agree:
//! every target has a fuzz binary and seeds, every binary a target.

use std::path::{Path, PathBuf};

use lachesis_fuzzing::TARGETS;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[test]
fn every_corpus_and_regression_input_passes_its_target() {
    let mut failed = Vec::new();
    let mut replayed = 0;
    for (name, target) in TARGETS {
        let seeds = files(&fuzz_dir().join("corpus").join(name));
        assert!(!seeds.is_empty(), "fuzz/corpus/{name}/ has no seed");
        let regressions = files(&fuzz_dir().join("regressions").join(name));
        for file in seeds.iter().chain(&regressions) {
            let data = std::fs::read(file).unwrap();
            replayed += 1;
            if std::panic::catch_unwind(|| target(&data)).is_err() {
                failed.push(file.display().to_string());
            }
        }
    }
    assert!(
        failed.is_empty(),
        "inputs that fail their target: {failed:#?}"
    );
    eprintln!(
        "{replayed} inputs replayed through {} targets",
        TARGETS.len()
    );
}

#[test]
fn every_target_has_a_fuzz_binary_and_every_binary_a_target() {
    let mut binaries: Vec<String> = files(&fuzz_dir().join("fuzz_targets"))
        .iter()
        .filter_map(|p| p.file_stem()?.to_str().map(str::to_owned))
        .collect();
    binaries.sort();
    let mut targets: Vec<String> = TARGETS.iter().map(|(n, _)| (*n).to_owned()).collect();
    targets.sort();
    assert_eq!(binaries, targets);
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
    for t in &targets {
        assert!(
            manifest.contains(&format!("name = \"{t}\"")),
            "fuzz/Cargo.toml has no [[bin]] {t}"
        );
    }
}
