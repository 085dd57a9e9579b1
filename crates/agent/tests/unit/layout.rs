//! The workspace's one module-file style (docs/architecture.md, "Layout"):
//! a module with submodules is a folder with a `mod.rs`, never a `foo.rs`
//! beside a `foo/` folder. Test folders need `mod.rs` anyway (a
//! `tests/foo.rs` would be a test binary of its own), so one style holds
//! everywhere.

use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.with_extension("rs").is_file() {
                out.push(path.clone());
            }
            walk(&path, out);
        }
    }
}

#[test]
fn a_module_with_submodules_is_a_folder_with_mod_rs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("the workspace above crates/agent");
    let crates = root.join("crates");
    let mut both = Vec::new();
    let mut looked = 0;
    for krate in std::fs::read_dir(&crates).expect("the crates folder") {
        let krate = krate.expect("a crate").path();
        for part in ["src", "tests", "examples", "benches"] {
            let dir = krate.join(part);
            if dir.is_dir() {
                looked += 1;
                walk(&dir, &mut both);
            }
        }
    }
    assert!(
        looked > 10,
        "found only {looked} source folders under {}",
        crates.display()
    );
    let both: Vec<String> = both
        .iter()
        .map(|d| {
            let d = d.strip_prefix(root).unwrap_or(d).display();
            format!("{d}.rs beside {d}/")
        })
        .collect();
    assert!(
        both.is_empty(),
        "move each foo.rs to foo/mod.rs:\n{}",
        both.join("\n")
    );
}
