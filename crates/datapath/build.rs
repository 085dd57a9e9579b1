//! Compiles the classifier (and the benchmark baseline) with clang and
//! generates their libbpf skeletons. The object is also copied to
//! `<target>/bpf/lachesis.bpf.o` so operators can inspect it with bpftool.
//!
//! The same source is compiled once more per `flows` variant (a
//! compile-time switch, never a fork of the classifier): the atomic build a
//! `PREEMPT_RT` kernel loads is always embedded; the others, which `make
//! bench-cores` measures and the upgrade tests run as the previous agent,
//! only with the `testing` feature.

use std::env;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

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
    let args = |define: Option<&str>| {
        let mut a = vec![
            multiarch.clone(),
            include.clone(),
            "-O2".into(),
            "-g".into(),
            "-Wall".into(),
            "-Werror".into(),
        ];
        a.extend(define.map(|d| format!("-D{d}")));
        a
    };

    for name in ["lachesis", "baseline"] {
        let src = bpf_dir.join(format!("{name}.bpf.c"));
        let obj = out.join(format!("{name}.bpf.o"));
        SkeletonBuilder::new()
            .source(&src)
            .obj(&obj)
            .clang_args(args(None))
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));
        println!("cargo:rerun-if-changed={}", src.display());
    }
    // The variants' skeletons are generated only for the BTF layout test
    // (the iterator's record type exists only in its object).
    let src = bpf_dir.join("lachesis.bpf.c");
    for (name, define) in [
        ("lachesis_atomic", "LACHESIS_FLOWS_ATOMIC"),
        ("lachesis_percpu", "LACHESIS_FLOWS_PERCPU"),
        ("lachesis_shared", "LACHESIS_FLOWS_SHARED"),
        ("lachesis_iter", "LACHESIS_FLOWS_ITER"),
        ("lachesis_verdict1", "LACHESIS_VERDICT_SLOTS=1"),
        ("lachesis_verdict256", "LACHESIS_VERDICT_SLOTS=256"),
    ] {
        SkeletonBuilder::new()
            .source(&src)
            .obj(out.join(format!("{name}.bpf.o")))
            .clang_args(args(Some(define)))
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {} with -D{define}: {e:#}", src.display()));
    }
    let probe = bpf_dir.join("iter_probe.bpf.c");
    SkeletonBuilder::new()
        .source(&probe)
        .obj(out.join("iter_probe.bpf.o"))
        .clang_args(args(None))
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
