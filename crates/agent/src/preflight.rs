//! What a valid configuration refers to, resolved before anything touches
//! the kernel (issue 19 items 6 and 7): the cloud entry and its clouds file,
//! every TLS file, the bpffs dir, the state file's place.
//!
//! A configuration can parse and still be unable to boot: `openstack.cloud`
//! names an entry the clouds file lacks, a CA file is missing, the bpffs
//! dir is on tmpfs. Found at start, each is an operator's error like a typo
//! (exit 2, which the unit does not restart), found with every other one at
//! once, and found by `--check-config` too — never, as before, after the
//! program was loaded and a `flows` map pinned, or once the agent was
//! already `running`.

use std::path::Path;
use std::sync::Arc;

use lachesis_listen::Web;

use lachesis_openstack::config::{
    origin_for_process, resolve_for_process, CloudConfig, ConfigError as CloudError, Selection,
};

use crate::config::{Config, ConfigError, Issue};

/// What the configuration's references resolved to.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The cloud the agent syncs from; `None` in relay mode, where the
    /// agent makes no OpenStack request and resolves no cloud entry.
    pub cloud: Option<CloudConfig>,
    /// Where the metadata comes from, for messages that must say which
    /// file and entry to fix: `cloud "prod" in /etc/openstack/clouds.yaml`,
    /// or in relay mode `state stream "lachesis.state" (metadata.source: relay)`.
    pub origin: String,
    /// What both listeners serve with: plain HTTP, or
    /// `listen.web_config_file` loaded.
    pub web: Arc<Web>,
}

/// Resolves every reference of `config` with this process's environment,
/// changing nothing; every problem found, each naming its key.
///
/// # Errors
/// Every reference that does not resolve.
pub fn resolve(config: &Config) -> Result<Resolved, ConfigError> {
    let mut issues = Vec::new();
    let cloud = match config.relay() {
        // DESIGN §17: relay mode reads no clouds.yaml and needs none.
        Some((stream, _)) => Some((
            None,
            format!("state stream {:?} (metadata.source: relay)", stream.stream),
        )),
        None => cloud(config, &mut issues),
    };
    let web = match Web::from_setting(config.listen.web_config_file.as_deref()) {
        Ok(web) => Some(web),
        Err(e) => {
            issues.push(Issue::new("listen.web_config_file", e.to_string()));
            None
        }
    };
    bpffs_dir(&config.datapath.bpffs_dir, &mut issues);
    state_path(&config.state.path, &mut issues);
    issues.extend(crate::daemon::check_notifications(&config.notifications));
    match (cloud, web) {
        (Some((cloud, origin)), Some(web)) if issues.is_empty() => {
            Ok(Resolved { cloud, origin, web })
        }
        _ => Err(ConfigError { issues }),
    }
}

/// The cloud entry and where it came from (for messages).
fn cloud(config: &Config, issues: &mut Vec<Issue>) -> Option<(Option<CloudConfig>, String)> {
    let selection = Selection {
        cloud: config.openstack.cloud.clone(),
        clouds_file: config.openstack.clouds_file.clone(),
    };
    let key = |e: &CloudError| match e {
        CloudError::NothingConfigured | CloudError::UnknownCloud { .. } => "openstack.cloud",
        _ if config.openstack.clouds_file.is_some() => "openstack.clouds_file",
        _ => "openstack.cloud",
    };
    let cloud = match resolve_for_process(&selection) {
        Ok(cloud) => cloud,
        Err(e) => {
            let message = match &e {
                CloudError::NothingConfigured => {
                    "is not set, and neither OS_CLOUD nor OS_AUTH_URL is: \
                     expected the name of an entry of clouds.yaml (docs/openstack.md)"
                        .to_owned()
                }
                other => other.to_string(),
            };
            issues.push(Issue::new(key(&e), message));
            return None;
        }
    };
    let origin = origin_for_process(&selection);
    // Building the client reads the entry's CA file (`cacert`): a missing or
    // empty bundle is found now, not at the first sync.
    if let Err(e) =
        lachesis_openstack::Client::new(cloud.clone(), lachesis_openstack::ApiMetrics::default())
    {
        issues.push(Issue::new("openstack.cloud", format!("{origin}: {e}")));
        return None;
    }
    Some((Some(cloud), origin))
}

fn bpffs_dir(dir: &Path, issues: &mut Vec<Issue>) {
    if let Err(e) = lachesis_datapath::check_bpffs_dir(dir) {
        issues.push(Issue::new("datapath.bpffs_dir", e.to_string()));
    }
}

/// The state file need not exist (the first start writes it), but what
/// exists of its path must be able to hold it.
fn state_path(path: &Path, issues: &mut Vec<Issue>) {
    if path.is_dir() {
        issues.push(Issue::new(
            "state.path",
            format!(
                "{} is a directory; expected the path of a file",
                path.display()
            ),
        ));
        return;
    }
    let mut ancestor = path.parent();
    while let Some(dir) = ancestor {
        if dir.exists() {
            if !dir.is_dir() {
                issues.push(Issue::new(
                    "state.path",
                    format!(
                        "{} is not a directory, so {} cannot be created",
                        dir.display(),
                        path.display()
                    ),
                ));
            }
            return;
        }
        ancestor = dir.parent();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issues(yaml: &str) -> Vec<String> {
        let config = Config::from_yaml(yaml).expect("valid YAML config");
        match resolve(&config) {
            Ok(_) => Vec::new(),
            Err(e) => e.issues.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn every_unresolvable_reference_is_reported_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let clouds = dir.path().join("clouds.yaml");
        std::fs::write(
            &clouds,
            "clouds:\n  lab:\n    auth:\n      auth_url: http://127.0.0.1:5000/v3\n      username: u\n      password: p\n      project_name: admin\n      user_domain_name: Default\n      project_domain_name: Default\n",
        )
        .unwrap();
        let state_dir = dir.path().join("state-is-a-file");
        std::fs::write(&state_dir, "").unwrap();
        let yaml = format!(
            "openstack: {{cloud: prod, clouds_file: {clouds}}}\n\
             datapath: {{bpffs_dir: {tmp}/pins}}\n\
             state: {{path: {state}/state.json}}\n\
             notifications:\n  kafka:\n    brokers: ['k:9093']\n    tls: {{enabled: true, ca_file: {tmp}/absent-ca.pem}}\n",
            clouds = clouds.display(),
            tmp = dir.path().display(),
            state = state_dir.display(),
        );
        let got = issues(&yaml);
        assert_eq!(got.len(), 4, "{got:#?}");
        assert!(
            got[0].starts_with(&format!(
                "openstack.cloud: {}: cloud \"prod\" not found under `clouds` (it defines lab)",
                clouds.display()
            )),
            "{got:#?}"
        );
        assert!(
            got[1].starts_with(&format!(
                "datapath.bpffs_dir: {}/pins is not on a bpf filesystem",
                dir.path().display()
            )),
            "{got:#?}"
        );
        assert!(!dir.path().join("pins").exists(), "the check made the dir");
        assert_eq!(
            got[2],
            format!(
                "state.path: {} is not a directory, so {}/state.json cannot be created",
                state_dir.display(),
                state_dir.display()
            )
        );
        assert!(
            got[3].starts_with("notifications.kafka.tls: ") && got[3].contains("absent-ca.pem"),
            "{got:#?}"
        );
    }

    /// Relay mode resolves no cloud entry: an absent clouds file and no
    /// `OS_*` variable are no problem.
    #[test]
    fn relay_mode_resolves_no_cloud() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::from_yaml(&format!(
            "openstack: {{cloud: prod, clouds_file: {}/absent.yaml}}\n\
             metadata: {{source: relay, stream: {{url: 'amqp://a:b@mq/'}}}}\n\
             datapath: {{bpffs_dir: /sys/fs/bpf/lachesis-check}}\n\
             state: {{path: {}/state.json}}\n",
            dir.path().display(),
            dir.path().display()
        ))
        .unwrap();
        let resolved = resolve(&config).expect("nothing to resolve");
        assert!(resolved.cloud.is_none());
        assert_eq!(
            resolved.origin,
            "state stream \"lachesis.state\" (metadata.source: relay)"
        );
    }

    #[test]
    fn a_missing_clouds_file_and_a_missing_ca_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let absent = dir.path().join("absent.yaml");
        let got = issues(&format!(
            "openstack: {{cloud: prod, clouds_file: {}}}\ndatapath: {{bpffs_dir: /sys/fs/bpf/lachesis-check}}\n",
            absent.display()
        ));
        assert_eq!(got.len(), 1, "{got:#?}");
        assert!(
            got[0].starts_with("openstack.clouds_file: no clouds.yaml found")
                && got[0].contains("absent.yaml"),
            "{got:#?}"
        );
        let clouds = dir.path().join("clouds.yaml");
        std::fs::write(
            &clouds,
            format!(
                "clouds:\n  lab:\n    auth:\n      auth_url: https://k.example:5000/v3\n      application_credential_id: a\n      application_credential_secret: s\n    auth_type: v3applicationcredential\n    cacert: {}/no-ca.pem\n",
                dir.path().display()
            ),
        )
        .unwrap();
        let got = issues(&format!(
            "openstack: {{cloud: lab, clouds_file: {}}}\ndatapath: {{bpffs_dir: /sys/fs/bpf/lachesis-check}}\n",
            clouds.display()
        ));
        assert_eq!(got.len(), 1, "{got:#?}");
        assert!(
            got[0].starts_with(&format!(
                "openstack.cloud: cloud \"lab\" in {}: ",
                clouds.display()
            )) && got[0].contains("no-ca.pem"),
            "{got:#?}"
        );
    }
}
