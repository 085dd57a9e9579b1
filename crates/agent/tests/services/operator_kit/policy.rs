//! `deploy/openstack/` (docs/openstack-access.md) checked with Debian's own
//! OpenStack code: the access rules match exactly the calls the client
//! makes, by keystonemiddleware's own matcher, and the Keystone and
//! Neutron policy overrides, loaded by oslo.policy over each service's
//! registered defaults, let the agent's role read every list and write
//! nothing, while every other caller keeps exactly its rights.

use std::collections::BTreeSet;
use std::process::Command;

use lachesis_planner::Resource;

use crate::common::repo;

/// Runs Debian's Python (`/usr/bin/python3`: the OpenStack packages are
/// installed for it, not for another interpreter on the PATH) on `script`
/// with `args` and `input` on its standard input; its standard output.
fn python(script: &str, args: &[&str], input: &str) -> String {
    use std::io::Write as _;
    use std::process::Stdio;
    let out = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(input.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap_or_else(|e| {
            panic!("/usr/bin/python3 not runnable ({e}): scripts/setup installs it")
        });
    assert!(
        out.status.success(),
        "python failed (python3-keystone, python3-neutron and python3-keystonemiddleware \
         come from scripts/setup-openstack):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The path of each list call below the host, as the client sends it to a
/// catalog endpoint at the service root (docs/openstack.md, "Service
/// roots"), without its query.
fn sent_paths() -> BTreeSet<(String, String)> {
    Resource::ALL
        .into_iter()
        .map(|r| {
            let version = match r.service() {
                "identity" => "/v3",
                "network" => "/v2.0",
                "compute" => "/v2.1",
                "load-balancer" => "/v2",
                other => panic!("a service the access rules do not know: {other}"),
            };
            let path = r.path().split('?').next().unwrap();
            (r.service().to_owned(), format!("{version}/{path}"))
        })
        .collect()
}

const MATCH: &str = r"
import json, sys
from keystonemiddleware.auth_token import _path_matches
rules = json.load(open('deploy/openstack/access-rules.json'))
for line in sys.stdin:
    service, path = line.split()
    hits = [r for r in rules if r['service'] == service and r['method'] == 'GET' and _path_matches(path, r['path'])]
    print(service, path, len(hits))
";

/// Issue 19 item 13: the access rules of the agent's application
/// credential allow each call the client makes (also through a Nova
/// endpoint that carries the project id) and nothing but `GET`s of those
/// lists.
#[test]
fn the_access_rules_allow_exactly_the_calls_the_client_makes() {
    let text = std::fs::read_to_string(repo().join("deploy/openstack/access-rules.json")).unwrap();
    let rules: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    for rule in &rules {
        assert_eq!(rule["method"], "GET", "{rule}");
    }
    let mut calls: Vec<(String, String)> = sent_paths().into_iter().collect();
    calls.push(("compute".into(), "/v2.1/0a1b2c3d/servers/detail".into()));
    let input = calls
        .iter()
        .fold(String::new(), |text, (s, p)| text + s + " " + p + "\n");
    let answers = python(MATCH, &[], &input);
    for line in answers.lines() {
        assert!(!line.ends_with(" 0"), "no access rule allows {line}");
    }
    assert_eq!(answers.lines().count(), calls.len(), "{answers}");
    // No rule for a call the client does not make: one rule per list,
    // plus the project-id form of Nova's.
    assert_eq!(rules.len(), Resource::ALL.len() + 1, "{text}");
}

const ENFORCE: &str = r"
import json, sys, warnings
warnings.simplefilter('ignore')
from oslo_config import cfg
from oslo_policy import policy, opts
namespace, policy_file = sys.argv[1], sys.argv[2]
if namespace == 'neutron':
    from neutron.conf.policies import list_rules
else:
    from keystone.common.policies import list_rules
conf = cfg.ConfigOpts()
opts._register(conf)
conf([], project='lachesis-test')
conf.set_override('policy_file', policy_file, 'oslo_policy')
enforcer = policy.Enforcer(conf)
enforcer.register_defaults(list_rules())
enforcer.load_rules()
cases = json.load(sys.stdin)
print(json.dumps([enforcer.enforce(c['rule'], c['target'], c['creds']) for c in cases]))
";

/// The decisions of `rules` for each caller on another project's objects,
/// with `policy_file` over the service's defaults.
fn decisions(
    namespace: &str,
    policy_file: &str,
    rules: &[&str],
    callers: &[serde_json::Value],
) -> Vec<Vec<bool>> {
    let target = serde_json::json!({
        "project_id": "otherp", "tenant_id": "otherp", "shared": false,
        "router:external": false, "network:tenant_id": "otherp", "network:project_id": "otherp",
    });
    let target = &target;
    let cases: Vec<serde_json::Value> = callers
        .iter()
        .flat_map(|creds| {
            rules.iter().map(
                move |rule| serde_json::json!({"rule": rule, "target": target, "creds": creds}),
            )
        })
        .collect();
    let input = serde_json::to_string(&cases).unwrap();
    let out = python(ENFORCE, &[namespace, policy_file], &input);
    let flat: Vec<bool> = serde_json::from_str(&out).unwrap();
    flat.chunks(rules.len()).map(<[bool]>::to_vec).collect()
}

fn caller(roles: &[&str], project: &str) -> serde_json::Value {
    serde_json::json!({"roles": roles, "project_id": project, "tenant_id": project, "user_id": "u"})
}

/// Issue 19 item 13: the agent's role reads every list across projects and
/// writes nothing; admins, advanced services, owners and strangers decide
/// exactly as without the overrides.
#[test]
fn the_policy_overrides_let_the_agent_read_every_list_and_nothing_else() {
    python("import neutron, keystone, oslo_policy", &[], "");
    let empty = tempfile::NamedTempFile::new().unwrap();
    let empty = empty.path().to_str().unwrap();
    let agent = caller(&["reader", "lachesis_reader"], "agentp");
    let others = [
        caller(&["admin"], "adminp"),
        caller(&["advsvc"], "svcp"),
        caller(&["reader", "member"], "otherp"),
        caller(&["reader", "member"], "thirdp"),
    ];
    for (namespace, file, reads, writes) in [
        (
            "neutron",
            "deploy/openstack/neutron-policy.yaml",
            &[
                "get_network",
                "get_network:router:external",
                "get_subnet",
                "get_port",
                "get_router",
                "get_floatingip",
                "context_is_advsvc",
            ][..],
            &[
                "create_port",
                "update_port",
                "delete_port",
                "create_network",
                "update_network",
                "delete_network",
                "update_subnet",
                "update_router",
                "add_router_interface",
                "update_floatingip",
                "create_floatingip",
            ][..],
        ),
        (
            "keystone",
            "deploy/openstack/keystone-policy.yaml",
            &["identity:list_projects"][..],
            &[
                "identity:create_project",
                "identity:update_project",
                "identity:delete_project",
                "identity:get_project",
                "identity:list_users",
            ][..],
        ),
    ] {
        let all: Vec<&str> = reads.iter().chain(writes).copied().collect();
        let path = repo().join(file);
        let path = path.to_str().unwrap();
        let mine = &decisions(namespace, path, &all, std::slice::from_ref(&agent))[0];
        let without = &decisions(namespace, empty, &all, std::slice::from_ref(&agent))[0];
        for (i, rule) in all.iter().enumerate() {
            if i < reads.len() {
                assert!(mine[i], "{namespace}: the agent may not {rule}");
            } else {
                // No write the defaults did not already give any user in
                // its own project (Neutron lets every user create networks).
                assert!(
                    !mine[i] || without[i],
                    "{namespace}: the overrides let the agent {rule}"
                );
            }
        }
        // What an advanced service may do to other projects' ports is
        // taken back.
        for rule in ["create_port", "update_port", "delete_port"] {
            if let Some(i) = all.iter().position(|r| *r == rule) {
                assert!(!mine[i], "{namespace}: the agent may {rule}");
            }
        }
        assert!(
            without[..reads.len()].iter().any(|d| !d),
            "{namespace}: the defaults alone already let the agent read: {without:?}"
        );
        let with_file = decisions(namespace, path, &all, &others);
        let defaults = decisions(namespace, empty, &all, &others);
        assert_eq!(
            with_file, defaults,
            "{namespace}: another caller's rights changed"
        );
    }
}
