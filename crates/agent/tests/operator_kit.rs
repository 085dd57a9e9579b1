//! The operator kit (deploy/, docs/operations.md "Operator kit") checked
//! with the real tools: promtool validates and unit-tests every rule file.
//! The tools come from Debian packages scripts/setup installs; a missing
//! tool fails the test loudly, naming the package.

mod common;

use std::path::Path;
use std::process::Command;

use common::repo;

/// Runs `tool args…`, failing loudly (naming `package`) when the tool is
/// missing and with its whole output when it fails.
fn run_tool(tool: &str, package: &str, args: &[&str]) -> String {
    let out = Command::new(tool)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| {
            panic!("{tool} not runnable ({e}): install Debian's {package} (scripts/setup does)")
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{tool} {args:?} failed:\n{text}");
    text
}

fn files_in(dir: &str, suffix: &str) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(repo().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().is_some_and(|s| s.ends_with(suffix)))
        .map(|p| {
            p.strip_prefix(repo())
                .unwrap_or(Path::new(""))
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no {suffix} file in {dir}");
    files
}

#[test]
fn every_rule_file_passes_promtool_check_and_its_unit_tests() {
    for rules in files_in("deploy/prometheus", ".yml") {
        let text = run_tool("promtool", "prometheus", &["check", "rules", &rules]);
        assert!(text.contains("SUCCESS"), "{text}");
    }
    let tests = files_in("deploy/prometheus/tests", ".test.yml");
    let mut args = vec!["test", "rules"];
    args.extend(tests.iter().map(String::as_str));
    let text = run_tool("promtool", "prometheus", &args);
    assert!(!text.contains("FAILED"), "{text}");
}

#[test]
fn every_alert_has_a_unit_test_firing_and_one_node_not_firing() {
    let rules = std::fs::read_to_string(repo().join("deploy/prometheus/lachesis-rules.yml"))
        .unwrap();
    let tests: String = files_in("deploy/prometheus/tests", ".test.yml")
        .iter()
        .map(|f| std::fs::read_to_string(repo().join(f)).unwrap())
        .collect();
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(alerts.len() >= 9, "{alerts:?}");
    for alert in alerts {
        // Fired on the unhealthy node (n1); the exact-set comparison of
        // promtool's exp_samples is what says n2 did not fire.
        assert!(
            tests.contains(&format!("alertname=\"{alert}\",alertstate=")),
            "no unit test expects {alert} to fire"
        );
    }
}
