//! Compiles the classifier (and the benchmark baseline) with clang and
//! generates their libbpf skeletons. The object is also copied to
//! `<target>/bpf/lachesis.bpf.o` so operators can inspect it with bpftool.
//!
//! The same source is compiled once more per variant (a compile-time
//! switch, never a fork of the classifier): the atomic build a `PREEMPT_RT`
//! kernel loads is always embedded; the others (other `flows` layouts,
//! which `make bench-cores` measures and the upgrade tests run as the
//! previous agent; the classifier without its verdict cache or with one
//! slot, which `make bench-packet` and `make bench-verdict` compare; the
//! generation load of other architectures) only with the `testing`
//! feature.

use std::env;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

/// The verdict cache's generation read with an ordered atomic fetch.
const GEN_FETCH: &[&str] = &["-DLACHESIS_VERDICT_GEN_FETCH", "-mcpu=v3"];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let bpf_dir = manifest
        .join("../../bpf")
        .canonicalize()
        .expect("bpf/ folder");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    // Debian's kernel headers keep asm/types.h under the multiarch folder.
    let multiarch = format!(
        "-I/usr/include/{}-linux-gnu",
        env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into())
    );
    let include = format!("-I{}", bpf_dir.display());
    // The verdict cache's generation needs an ordered load wherever the CPU
    // may reorder two loads (bpf/lachesis.bpf.c, `load_gen`): everywhere
    // but x86-64, an atomic fetch, which needs the v3 instruction set.
    let ordered_gen = env::var("CARGO_CFG_TARGET_ARCH").map_or(true, |a| a != "x86_64");
    let args = |extra: &[&str]| {
        let mut a = vec![
            multiarch.clone(),
            include.clone(),
            "-O2".into(),
            "-g".into(),
            "-Wall".into(),
            "-Werror".into(),
        ];
        let mut extra: Vec<&str> = extra.to_vec();
        if ordered_gen {
            extra.extend(GEN_FETCH);
        }
        for e in extra {
            if !a.iter().any(|x| x == e) {
                a.push(e.to_owned());
            }
        }
        a
    };

    for name in ["lachesis", "baseline"] {
        let src = bpf_dir.join(format!("{name}.bpf.c"));
        let obj = out.join(format!("{name}.bpf.o"));
        SkeletonBuilder::new()
            .source(&src)
            .obj(&obj)
            .clang_args(args(&[]))
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));
        println!("cargo:rerun-if-changed={}", src.display());
    }
    // The variants' skeletons are generated only for the BTF layout test
    // (the iterator's record type exists only in its object).
    let src = bpf_dir.join("lachesis.bpf.c");
    for (name, extra) in [
        // PREEMPT_RT: atomic adds and the verdict slots' compare-and-swap.
        (
            "lachesis_atomic",
            &["-DLACHESIS_FLOWS_ATOMIC", "-mcpu=v3"][..],
        ),
        ("lachesis_percpu", &["-DLACHESIS_FLOWS_PERCPU"][..]),
        ("lachesis_shared", &["-DLACHESIS_FLOWS_SHARED"][..]),
        ("lachesis_iter", &["-DLACHESIS_FLOWS_ITER"][..]),
        ("lachesis_nocache", &["-DLACHESIS_VERDICT_SLOTS=0"][..]),
        ("lachesis_verdict1", &["-DLACHESIS_VERDICT_SLOTS=1"][..]),
        // What other architectures load, built here so tests run it.
        ("lachesis_genfetch", GEN_FETCH),
    ] {
        SkeletonBuilder::new()
            .source(&src)
            .obj(out.join(format!("{name}.bpf.o")))
            .clang_args(args(extra))
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {} with {extra:?}: {e:#}", src.display()));
    }
    let probe = bpf_dir.join("iter_probe.bpf.c");
    SkeletonBuilder::new()
        .source(&probe)
        .obj(out.join("iter_probe.bpf.o"))
        .clang_args(args(&[]))
        .build()
        .unwrap_or_else(|e| panic!("building {}: {e:#}", probe.display()));
    println!("cargo:rerun-if-changed={}", probe.display());
    println!(
        "cargo:rerun-if-changed={}",
        bpf_dir.join("lachesis.h").display()
    );

    if let Some(target) = target_dir(&out) {
        let dest = target.join("bpf");
        std::fs::create_dir_all(&dest).expect("create target/bpf");
        std::fs::copy(out.join("lachesis.bpf.o"), dest.join("lachesis.bpf.o"))
            .expect("copy object");
    }
}

/// `<target>/<profile>/build/<pkg>-<hash>/out` → `<target>` (also with a
/// `--target` triple folder in between).
fn target_dir(out: &Path) -> Option<PathBuf> {
    let build = out
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))?;
    let profile = build.parent()?;
    let parent = profile.parent()?;
    // With --target, the profile sits under <target>/<triple>/.
    if parent.join("CACHEDIR.TAG").exists() || parent.file_name().is_some_and(|n| n == "target") {
        Some(parent.to_path_buf())
    } else {
        parent.parent().map(Path::to_path_buf)
    }
}
