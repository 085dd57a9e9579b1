//! `lachesis agent --check-config` as an operator runs it: the real binary,
//! a file on disk, a clean environment.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::Sim;

const EXAMPLE: &str = include_str!("../../../../examples/lachesis.yaml");

/// A clouds.yaml in `dir` with the example configuration's cloud,
/// `mycloud`: what an operator writes before the check can pass.
fn mycloud(dir: &tempfile::TempDir) -> PathBuf {
    let path = dir.path().join("clouds.yaml");
    std::fs::write(
        &path,
        "clouds:\n  mycloud:\n    auth_type: v3applicationcredential\n    auth:\n      \
         auth_url: https://keystone.example.org:5000/v3\n      application_credential_id: id\n      \
         application_credential_secret: secret\n",
    )
    .unwrap();
    path
}

/// `--set` flags that point a configuration at [`mycloud`].
fn cloud_flags(clouds: &Path) -> Vec<String> {
    vec![
        "--set".into(),
        "openstack.cloud=mycloud".into(),
        "--set".into(),
        format!("openstack.clouds_file={}", clouds.display()),
    ]
}

/// The `openstack` section for [`mycloud`].
fn cloud_section(clouds: &Path) -> String {
    format!(
        "openstack:\n  cloud: mycloud\n  clouds_file: {}\n",
        clouds.display()
    )
}

/// The example with its cloud at `clouds` and its Kafka TLS files (which
/// exist nowhere) left to the system roots.
fn example_for(clouds: &Path) -> String {
    // The example's web configuration, written beside the clouds file.
    let web = clouds.with_file_name("web.yml");
    std::fs::write(&web, lachesis_lab::tls::basic_auth("prometheus")).unwrap();
    EXAMPLE
        .replace("/etc/openstack/clouds.yaml", clouds.to_str().unwrap())
        .replace("/etc/lachesis/web.yml", web.to_str().unwrap())
        .lines()
        .filter(|l| {
            ![
                "      ca_file: /etc/lachesis/",
                "      cert_file:",
                "      key_file:",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        })
        .flat_map(|l| [l, "\n"])
        .collect()
}

/// Runs the binary with only the given variables in its environment.
fn lachesis(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lachesis"))
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .expect("the binary runs")
}

fn check(file: &Path, extra: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut args = vec![
        "agent",
        "--check-config",
        "--config",
        file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = lachesis(&args, env);
    (
        out.status.code().expect("exited"),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn write(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
    let path = dir.path().join("lachesis.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn good_file_prints_the_effective_config_with_secrets_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let clouds = mycloud(&dir);
    let text = example_for(&clouds)
        .replace("lachesis:change-me@", "lachesis:amqp-hunter2@")
        .replace("password: change-me", "password: sasl-hunter2")
        .replace("scrape_interval: 10s", "scrape_interval: 5s");
    let file = write(&dir, &text);
    let (code, stdout, stderr) = check(&file, &[], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stderr, "", "the example raises no warning");
    assert!(stdout.starts_with(&format!(
        "# lachesis effective configuration (file {};",
        file.display()
    )));
    // The cloud entry the agent would use, under the header.
    assert!(
        stdout.contains(&format!(
            "\n# openstack: cloud \"mycloud\" in {}\n",
            clouds.display()
        )),
        "{stdout}"
    );
    assert!(!stdout.contains("hunter2"), "{stdout}");
    // Every host of the transport URL, each with its password hidden.
    assert!(
        stdout.contains(
            "    url: >-\n      rabbit://lachesis:REDACTED@rabbit1.example.org:5671,\
             lachesis:REDACTED@rabbit2.example.org:5671,\
             lachesis:REDACTED@rabbit3.example.org:5671/?ssl=1\n"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("      password: REDACTED\n"));
    assert!(stdout.contains("  scrape_interval: 5s\n"));
    // Keys the file leaves to defaults are printed too.
    let partial = write(&dir, "log:\n  format: json\n");
    let flags = cloud_flags(&clouds);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = check(&partial, &flags, &[]);
    assert_eq!(code, 0, "{stderr}");
    for line in [
        "  format: json\n",
        "  level: info\n",
        "  reconcile_interval: 5m\n",
        "  flows_memory_budget: 64MiB\n",
        "  metrics: 0.0.0.0:9847\n",
    ] {
        assert!(stdout.contains(line), "{line:?} missing from\n{stdout}");
    }
}

#[test]
fn bad_file_exits_2_naming_the_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "tunables:\n  scrape_interval: 10 parsecs\nlog:\n  level: info\n",
    );
    let (code, stdout, stderr) = check(&file, &[], &[]);
    assert_eq!(code, 2);
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        "lachesis: config error: tunables.scrape_interval: \"10 parsecs\" is not a duration; \
         expected e.g. 200ms, 10s, 5m\n"
    );
    let typo = write(&dir, "tunables:\n  scrape_intervl: 5s\n");
    let (code, _, stderr) = check(&typo, &[], &[]);
    assert_eq!(code, 2);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(
            "lachesis: config error: tunables.scrape_intervl: unknown key; expected one of \
             scrape_interval, reconcile_interval,"
        ),
        "{stderr}"
    );
}

#[test]
fn environment_and_flags_override_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let clouds = mycloud(&dir);
    let file = write(
        &dir,
        &format!(
            "{}tunables:\n  scrape_interval: 7s\n  ghost_grace: 30s\n",
            cloud_section(&clouds)
        ),
    );
    let env = [
        ("LACHESIS_TUNABLES__SCRAPE_INTERVAL", "8s"),
        ("LACHESIS_TUNABLES__GHOST_GRACE", "45s"),
    ];
    let (code, stdout, stderr) = check(
        &file,
        &[
            "--set",
            "tunables.scrape_interval=9s",
            "--log-level",
            "debug",
        ],
        &env,
    );
    assert_eq!(code, 0, "{stderr}");
    for line in [
        "  scrape_interval: 9s\n",
        "  ghost_grace: 45s\n",
        "  level: debug\n",
        "# tunables.ghost_grace set by LACHESIS_TUNABLES__GHOST_GRACE\n",
        "# log.level set by --log-level\n",
    ] {
        assert!(stdout.contains(line), "{line:?} missing from\n{stdout}");
    }
    // An unknown configuration variable stops the agent, by name.
    let (code, stdout, stderr) = check(&file, &[], &[("LACHESIS_TUNABLES__SCRAPE", "1s")]);
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert!(
        stderr.starts_with(
            "lachesis: config error: LACHESIS_TUNABLES__SCRAPE: not a configuration variable"
        ),
        "{stderr}"
    );
}

#[test]
fn missing_explicit_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("absent.yaml");
    let (code, stdout, stderr) = check(&absent, &[], &[]);
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert!(
        stderr.starts_with(&format!(
            "lachesis: config error: {}: cannot read the configuration file: ",
            absent.display()
        )),
        "{stderr}"
    );
}

#[test]
fn non_loopback_debug_listener_is_a_warning_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let clouds = mycloud(&dir);
    let file = write(
        &dir,
        &format!("{}listen:\n  debug: 0.0.0.0:9848\n", cloud_section(&clouds)),
    );
    let (code, stdout, stderr) = check(&file, &[], &[]);
    assert_eq!(code, 0);
    assert!(stdout.contains("  debug: 0.0.0.0:9848\n"));
    assert!(
        stderr
            .starts_with("lachesis: warning: listen.debug: 0.0.0.0:9848 is not a loopback address"),
        "{stderr}"
    );
}

#[test]
fn references_that_cannot_boot_exit_2_each_named_by_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let clouds = mycloud(&dir);
    let tmp = dir.path().display().to_string();
    let cases: Vec<(String, &str)> = vec![
        (
            String::new(),
            "lachesis: config error: openstack.cloud: is not set, and neither OS_CLOUD nor OS_AUTH_URL is",
        ),
        (
            format!("openstack: {{cloud: prod, clouds_file: {}}}\n", clouds.display()),
            "lachesis: config error: openstack.cloud: ",
        ),
        (
            format!("openstack: {{cloud: mycloud, clouds_file: {tmp}/absent.yaml}}\n"),
            "lachesis: config error: openstack.clouds_file: no clouds.yaml found",
        ),
        (
            format!("{}datapath: {{bpffs_dir: {tmp}/pins}}\n", cloud_section(&clouds)),
            "lachesis: config error: datapath.bpffs_dir: ",
        ),
        (
            format!(
                "{}notifications:\n  rabbitmq: {{url: 'amqps://u:p@r:5671/', ca_file: {tmp}/ca.pem}}\n",
                cloud_section(&clouds)
            ),
            "lachesis: config error: notifications.rabbitmq.ca_file: ",
        ),
        (
            format!(
                "{}notifications:\n  kafka:\n    brokers: ['k:9093']\n    tls: {{enabled: true, cert_file: {tmp}/c.pem, key_file: {tmp}/k.pem}}\n",
                cloud_section(&clouds)
            ),
            "lachesis: config error: notifications.kafka.tls: ",
        ),
    ];
    for (text, expected) in cases {
        let file = write(&dir, &text);
        let (code, stdout, stderr) = check(&file, &[], &[]);
        assert_eq!((code, stdout.as_str()), (2, ""), "{text}\n{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{text}\n{stderr}");
        assert!(stderr.starts_with(expected), "{text}\n{stderr}");
    }
    assert!(
        !dir.path().join("pins").exists(),
        "the check made the bpffs dir"
    );
    // OS_CLOUD names the entry when the file does not.
    let file = write(
        &dir,
        &format!("openstack: {{clouds_file: {}}}\n", clouds.display()),
    );
    let (code, stdout, stderr) = check(&file, &[], &[("OS_CLOUD", "mycloud")]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("# openstack: cloud \"mycloud\" in "),
        "{stdout}"
    );
}

#[test]
fn check_openstack_authenticates_once_and_names_what_it_found() {
    let sim = Sim::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let clouds = sim.clouds_yaml(dir.path(), |t| t);
    let file = write(
        &dir,
        &format!(
            "openstack: {{cloud: sim, clouds_file: {}}}\nlisten: {{metrics: 127.0.0.1:9847}}\n",
            clouds.display()
        ),
    );
    let (code, _, stderr) = check(&file, &["--check-openstack"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let origin = format!("cloud \"sim\" in {}", clouds.display());
    assert!(
        stderr.starts_with(&format!(
            "lachesis: openstack: authenticated with {origin}\n"
        )),
        "{stderr}"
    );
    for service in ["identity", "network", "compute"] {
        assert!(
            stderr.contains(&format!(
                "lachesis: openstack: {service} endpoint http://{}",
                sim.addr
            )),
            "{service}: {stderr}"
        );
    }
    // Refused credentials: a configuration error, naming the entry.
    let wrong = sim.clouds_yaml(dir.path(), |t| {
        t.replacen("password: admin-secret", "password: wrong", 1)
    });
    assert_eq!(wrong, clouds);
    let (code, _, stderr) = check(&file, &["--check-openstack"], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "lachesis: config error: openstack.cloud: Keystone refused the credentials of {origin}: "
        )) && stderr.contains("HTTP 401"),
        "{stderr}"
    );
    // Keystone unreachable: a failure, not the configuration's fault.
    drop(sim);
    let (code, _, stderr) = check(&file, &["--check-openstack"], &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("lachesis: error: authenticating with {origin}: ")),
        "{stderr}"
    );
    // Only with --check-config.
    let out = lachesis(
        &[
            "agent",
            "--check-openstack",
            "--config",
            file.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
}

/// `listen.web_config_file` is loaded by the check as at start: a file
/// that cannot be served is exit 2 naming the key, the file and the key
/// inside it; one that can is accepted, and silences the plain-HTTP
/// warning.
#[test]
fn the_web_configuration_is_checked_as_a_start_would_load_it() {
    let dir = tempfile::tempdir().unwrap();
    let clouds = mycloud(&dir);
    let web = dir.path().join("web.yml");
    let config = |web_line: &str| {
        write(
            &dir,
            &format!(
                "openstack: {{cloud: mycloud, clouds_file: {}}}\nlisten:\n{web_line}",
                clouds.display()
            ),
        )
    };
    let file = config("  debug: 127.0.0.1:9848\n");
    let (code, _, stderr) = check(&file, &[], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("lachesis: warning: listen.metrics: 0.0.0.0:9847 is not a loopback address and listen.web_config_file is not set"),
        "{stderr}"
    );

    let file = config(&format!("  web_config_file: {}\n", web.display()));
    let (code, _, stderr) = check(&file, &[], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "lachesis: config error: listen.web_config_file: {}: No such file or directory (os error 2)\n",
            web.display()
        )
    );
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n",
    )
    .unwrap();
    let (code, _, stderr) = check(&file, &[], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "lachesis: config error: listen.web_config_file: {}: tls_server_config.cert_file: {}: ",
            web.display(),
            dir.path().join("server.pem").display()
        )),
        "{stderr}"
    );
    std::fs::write(&web, lachesis_lab::tls::basic_auth("prometheus")).unwrap();
    let (code, stdout, stderr) = check(&file, &[], &[]);
    assert_eq!(
        (code, stderr.as_str()),
        (0, ""),
        "no warning with a web configuration"
    );
    assert!(
        stdout.contains(&format!("  web_config_file: {}\n", web.display())),
        "{stdout}"
    );
}
