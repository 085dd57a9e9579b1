//! The build's revision for `lachesis_build_info{revision}`: the commit
//! being built (`git rev-parse --short=12 HEAD`, with `-dirty` when the tree
//! has changes), `LACHESIS_REVISION` when set (a packager without git), else
//! `unknown`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=LACHESIS_REVISION");
    // A new commit or a changed index moves these.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
    }
    let revision = std::env::var("LACHESIS_REVISION")
        .ok()
        .filter(|r| !r.trim().is_empty())
        .or_else(|| {
            let head = git(&["rev-parse", "--short=12", "HEAD"])?;
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            Some(if dirty { format!("{head}-dirty") } else { head })
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=LACHESIS_REVISION={revision}");
}
