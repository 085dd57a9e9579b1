//! What a run leaves on the machine and how it is found again: namespaces
//! `ldemo-<pid>-…`, the run folder `/run/lachesis-demo/<pid>` (agent
//! configuration, state file, log, the agent's pid) and the pin folder
//! `/sys/fs/bpf/lachesis-demo-<pid>`. Everything carries the demo's pid, so
//! a later run can tell a crashed run's leftovers (its pid no longer a
//! running `lachesis demo`) from a demo still running, and touches nothing
//! else.

use std::path::{Path, PathBuf};

use lachesis_lab::netns;

/// Where runs keep their files.
pub const RUN_ROOT: &str = "/run/lachesis-demo";
/// Pin folders are this plus the pid.
pub const BPFFS_PREFIX: &str = "/sys/fs/bpf/lachesis-demo-";
/// Namespaces are this plus the pid and `-`.
pub const NETNS_PREFIX: &str = "ldemo-";

/// One run's names.
#[derive(Debug, Clone)]
pub struct Run {
    /// The demo's pid.
    pub pid: u32,
}

impl Run {
    /// `ldemo-<pid>-`.
    #[must_use]
    pub fn netns_prefix(&self) -> String {
        format!("{NETNS_PREFIX}{}-", self.pid)
    }

    /// `/run/lachesis-demo/<pid>`.
    #[must_use]
    pub fn dir(&self) -> PathBuf {
        Path::new(RUN_ROOT).join(self.pid.to_string())
    }

    /// `/sys/fs/bpf/lachesis-demo-<pid>`.
    #[must_use]
    pub fn bpffs(&self) -> PathBuf {
        PathBuf::from(format!("{BPFFS_PREFIX}{}", self.pid))
    }

    /// The file holding the agent's pid.
    #[must_use]
    pub fn agent_pid_file(&self) -> PathBuf {
        self.dir().join("agent.pid")
    }
}

/// The namespaces under `/run/netns` whose name starts with `prefix`.
#[must_use]
pub fn namespaces_with_prefix(prefix: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return Vec::new();
    };
    let mut out: Vec<String> = dir
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(prefix))
        .collect();
    out.sort();
    out
}

/// The pid in a name `<prefix><pid>…` (up to the first non-digit).
fn pid_after(name: &str, prefix: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The command line of `pid`, split at its NULs (`None` when it is gone).
fn cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// Whether `pid` is a running `lachesis … demo` (a reused pid running
/// something else is not).
#[must_use]
pub fn is_live_demo(pid: u32) -> bool {
    cmdline(pid).is_some_and(|args| {
        args.first().is_some_and(|a| a.contains("lachesis")) && args.iter().any(|a| a == "demo")
    })
}

/// Stops the agent of `run` if it still runs: the pid in its pid file,
/// only when that process's command line names the run's configuration
/// (a reused pid is someone else's process).
#[must_use]
pub fn kill_agent(run: &Run) -> Option<String> {
    let pid: i32 = std::fs::read_to_string(run.agent_pid_file())
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let config = run.dir().join("lachesis.yaml");
    let config = config.to_string_lossy();
    let ours = cmdline(pid.unsigned_abs())?.iter().any(|a| a == &*config);
    if !ours {
        return None;
    }
    // SAFETY: a signal to a process whose command line names our file.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    for _ in 0..50 {
        if cmdline(pid.unsigned_abs()).is_none() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Some(format!("stopped agent pid {pid}"))
}

/// Removes everything of `run`: its agent, namespaces (hosts first), pin
/// folder and run folder. Returns what it did and what failed.
#[must_use]
pub fn remove_run(run: &Run) -> Vec<String> {
    let mut said = Vec::new();
    said.extend(kill_agent(run));
    let prefix = run.netns_prefix();
    let mut spaces = namespaces_with_prefix(&prefix);
    spaces.sort_by_key(|n| n.ends_with("-hv"));
    for ns in spaces {
        match netns::run(&["ip", "netns", "del", &ns]) {
            Ok(_) => said.push(format!("deleted namespace {ns}")),
            Err(e) => said.push(format!("could not delete namespace {ns}: {e}")),
        }
    }
    for (what, path) in [("pin folder", run.bpffs()), ("run folder", run.dir())] {
        if path.exists() {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => said.push(format!("removed {what} {}", path.display())),
                Err(e) => said.push(format!("could not remove {}: {e}", path.display())),
            }
        }
    }
    said.extend(remove_if_empty(Path::new(RUN_ROOT)));
    said
}

/// Removes `dir` if nothing is left in it: the root of the run folders
/// once the last run's is gone (`rmdir` refuses while another demo's
/// folder is there, so a running demo keeps it). Says only a failure: an
/// empty root is nothing the user made.
fn remove_if_empty(dir: &Path) -> Option<String> {
    match std::fs::remove_dir(dir) {
        Ok(()) => None,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::DirectoryNotEmpty
            ) =>
        {
            None
        }
        Err(e) => Some(format!("could not remove {}: {e}", dir.display())),
    }
}

/// Creates `run`'s folder (and the root of run folders). A demo ending at
/// the same moment may remove the root, empty for an instant, between the
/// two `mkdir`s: the root is then made again.
pub fn create_run_dir(run: &Run) -> std::io::Result<()> {
    let mut attempts = 0;
    loop {
        match std::fs::create_dir_all(run.dir()) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempts < 3 => attempts += 1,
            done => return done,
        }
    }
}

/// [`remove_run`]'s lines in one: counts, and every failure in full.
#[must_use]
pub fn summary(said: &[String]) -> String {
    let namespaces = said
        .iter()
        .filter(|l| l.starts_with("deleted namespace"))
        .count();
    let mut parts = vec![format!("{namespaces} namespaces")];
    parts.extend(
        said.iter()
            .filter(|l| !l.starts_with("deleted namespace"))
            .cloned(),
    );
    parts.join(", ")
}

/// Every run that left something behind and is no longer a running demo.
#[must_use]
pub fn crashed_runs() -> Vec<Run> {
    let mut pids: Vec<u32> = namespaces_with_prefix(NETNS_PREFIX)
        .iter()
        .filter_map(|n| pid_after(n, NETNS_PREFIX))
        .collect();
    if let Ok(dir) = std::fs::read_dir(RUN_ROOT) {
        pids.extend(dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()));
    }
    let bpffs = Path::new(BPFFS_PREFIX);
    let (parent, stem) = (
        bpffs.parent().unwrap_or(Path::new("/")),
        bpffs
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    if let Ok(dir) = std::fs::read_dir(parent) {
        pids.extend(dir.filter_map(|e| pid_after(e.ok()?.file_name().to_str()?, &stem)));
    }
    pids.sort_unstable();
    pids.dedup();
    let me = std::process::id();
    pids.into_iter()
        .filter(|&pid| pid != me && !is_live_demo(pid))
        .map(|pid| Run { pid })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_is_read_only_from_a_name_of_the_demo() {
        assert_eq!(pid_after("ldemo-4242-hv", NETNS_PREFIX), Some(4242));
        assert_eq!(pid_after("ldemo-17-a-web", NETNS_PREFIX), Some(17));
        assert_eq!(pid_after("lachesis-77-0", NETNS_PREFIX), None);
        assert_eq!(pid_after("ldemo-x", NETNS_PREFIX), None);
        assert_eq!(pid_after("lachesis-demo-99", "lachesis-demo-"), Some(99));
    }

    #[test]
    fn this_process_is_not_a_demo_and_a_missing_pid_is_not_live() {
        assert!(!is_live_demo(std::process::id()));
        assert!(!is_live_demo(u32::MAX));
    }

    #[test]
    fn a_summary_counts_namespaces_and_keeps_everything_else_whole() {
        let said = [
            "deleted namespace ldemo-1-hv".to_owned(),
            "deleted namespace ldemo-1-a".to_owned(),
            "removed pin folder /sys/fs/bpf/lachesis-demo-1".to_owned(),
            "could not delete namespace ldemo-1-b: busy".to_owned(),
        ];
        assert_eq!(
            summary(&said),
            "2 namespaces, removed pin folder /sys/fs/bpf/lachesis-demo-1, \
             could not delete namespace ldemo-1-b: busy"
        );
    }

    /// Issue 19 item 22: `/run/lachesis-demo` stayed behind, empty, after
    /// every run.
    #[test]
    fn the_root_of_run_folders_goes_with_the_last_run_only() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().join("lachesis-demo");
        std::fs::create_dir_all(root.join("4242")).unwrap();
        // Another run's folder is still there: kept.
        assert_eq!(remove_if_empty(&root), None);
        assert!(root.join("4242").is_dir());
        std::fs::remove_dir(root.join("4242")).unwrap();
        assert_eq!(remove_if_empty(&root), None);
        assert!(!root.exists(), "the empty root stayed");
        // Already gone: nothing to do, nothing to say.
        assert_eq!(remove_if_empty(&root), None);
        // A file where the root should be is not ours to remove.
        std::fs::write(&root, "").unwrap();
        let said = remove_if_empty(&root).unwrap();
        assert!(said.starts_with("could not remove "), "{said}");
        assert!(root.is_file());
    }

    #[test]
    fn a_run_names_everything_with_its_pid() {
        let run = Run { pid: 31 };
        assert_eq!(run.netns_prefix(), "ldemo-31-");
        assert_eq!(run.dir(), Path::new("/run/lachesis-demo/31"));
        assert_eq!(run.bpffs(), Path::new("/sys/fs/bpf/lachesis-demo-31"));
    }
}
