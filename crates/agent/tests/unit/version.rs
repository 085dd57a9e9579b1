//! `lachesis --version` names the build exactly as `lachesis_build_info`
//! does: the package version and the git revision build.rs recorded.

use crate::common;

use common::{code, lachesis, stdout};

/// Issue 19 item 20: `--version` printed `lachesis 0.1.0` alone, so two
/// builds of one version could not be told apart on a node.
#[test]
fn version_prints_the_version_and_the_git_revision() {
    let version = format!(
        "{} (revision {})\n",
        env!("CARGO_PKG_VERSION"),
        env!("LACHESIS_REVISION")
    );
    // clap names a subcommand `lachesis-agent`, `lachesis-plan`.
    for (args, name) in [
        (&["--version"][..], "lachesis"),
        (&["-V"], "lachesis"),
        (&["agent", "--version"], "lachesis-agent"),
        (&["plan", "--version"], "lachesis-plan"),
    ] {
        let out = lachesis(args);
        assert_eq!(code(&out), 0, "{args:?}");
        assert_eq!(stdout(&out), format!("{name} {version}"), "{args:?}");
    }
    // Built from this checkout: a 12-digit commit, `-dirty` when the tree
    // had changes, never `unknown`.
    let revision = env!("LACHESIS_REVISION");
    let commit = revision.strip_suffix("-dirty").unwrap_or(revision);
    assert!(
        commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
        "{revision}"
    );
}
