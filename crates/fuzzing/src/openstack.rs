//! Targets for what the `OpenStack` client reads: a list call's response
//! body as the client pages it and the planner parses it into a snapshot
//! (then plans it), and an operator's `clouds.yaml` (with its
//! `secure.yaml`).

use lachesis_openstack::client::paginate::{next_url, read_page, PageError};
use lachesis_openstack::config::{clouds_entry_from_str, CloudConfig, ConfigError};
use lachesis_planner::{
    diff, parse_snapshot, plan, plan_with_previous, ApiBodies, OptionalBody, ParseError,
    ParseReport, Plan, PlanOptions, Resource, Scope, Snapshot, SnapshotParser, Sources,
};
use serde_json::{Map, Value};
use url::Url;

/// The selector (first byte, minus `b'0'`, modulo 10) of the "every list"
/// input: one JSON object holding each list under its key, as in
/// `{"networks": [...], "ports": [...], ...}`. Selectors 0 to 8 pick one
/// list of [`Resource::ALL`] (`'0'` networks … `'8'` amphorae).
const EVERY_LIST: u8 = 9;

/// One list response body (or every list in one object), chosen by the
/// first byte less `b'0'`, modulo 10 (`'0'`–`'8'`: [`Resource::ALL`]'s
/// order; `'9'`: every list). When its tens digit is odd (`':'`–`'C'`, …)
/// the best-effort lists not given are failed rather than not deployed.
/// The rest is the body as the service sends it.
///
/// The body goes through what the client does with a page (`serde_json`,
/// then [`read_page`] and, for a next link, [`next_url`]) and what the
/// planner does with the merged bodies ([`parse_snapshot`], and a
/// [`SnapshotParser`] fed the same items split into pages); a snapshot is
/// then planned.
///
/// Asserts: the whole reading is deterministic; a next page never leaves
/// the catalog endpoint's origin; the client and the planner agree on the
/// items and on which body is malformed, and a [`ParseError`] names that
/// body; page boundaries do not change the snapshot; planning is
/// deterministic (equal plans, equal JSON), its JSON reads back as the same
/// plan (unless a project's id is `*`, see `has_star_tenant`), a plan diffs
/// empty against itself, and with Octavia fetched or
/// not deployed the previous plan is not read.
pub fn openstack_lists(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let n = selector.wrapping_sub(b'0');
    let kind = n % 10;
    let missing = if (n / 10) % 2 == 1 {
        OptionalBody::Failed
    } else {
        OptionalBody::NotDeployed
    };
    let read = read_lists(body, kind, &missing);
    assert_eq!(read, read_lists(body, kind, &missing), "not deterministic");
    let Some(Ok((snapshot, _))) = &read.snapshot else {
        return;
    };
    check_plans(snapshot);
}

/// Everything read of one input, compared whole between two readings.
#[derive(Debug, PartialEq)]
struct Lists {
    /// The body as JSON, or `serde_json`'s message.
    json: Result<Value, String>,
    /// The client's reading of each list's page, with the next URL.
    pages: Vec<(Resource, Page)>,
    /// The planner's reading, when the body is JSON.
    snapshot: Option<Result<(Snapshot, ParseReport), ParseError>>,
}

/// The client's reading of a page: its items and the URL of the next one.
type Page = Result<(Vec<Value>, Option<Url>), PageError>;

/// The first URL of `resource`'s list call as the client builds it from a
/// catalog endpoint, with the query parameters a sync sends.
fn first_url(resource: Resource) -> Url {
    let base = match resource.service() {
        "network" => "https://neutron.example:9696/v2.0/",
        "identity" => "https://keystone.example:5000/v3/",
        "compute" => "https://nova.example:8774/v2.1/",
        _ => "https://octavia.example:9876/v2/",
    };
    let mut url = Url::parse(base)
        .and_then(|b| b.join(resource.path()))
        .expect("a valid URL");
    for field in resource.fields().unwrap_or_default() {
        url.query_pairs_mut().append_pair("fields", field);
    }
    url.query_pairs_mut().append_pair("limit", "2");
    url
}

fn read_lists(bytes: &[u8], kind: u8, missing: &OptionalBody) -> Lists {
    let json: Result<Value, String> = serde_json::from_slice(bytes).map_err(|e| e.to_string());
    let body = match &json {
        Ok(body) => body,
        Err(message) => {
            assert!(!message.is_empty(), "a JSON error without a message");
            return Lists {
                json,
                pages: Vec::new(),
                snapshot: None,
            };
        }
    };
    let chosen: Vec<Resource> = match Resource::ALL.get(usize::from(kind)) {
        Some(&one) => vec![one],
        None => Resource::ALL.to_vec(),
    };
    let pages: Vec<(Resource, Page)> = chosen
        .iter()
        .map(|&resource| (resource, client_page(resource, body)))
        .collect();
    let bodies = if kind == EVERY_LIST {
        every_list(body, missing)
    } else {
        one_list(chosen[0], body, missing)
    };
    let parsed = parse_snapshot(&bodies);
    agree(&bodies, &pages, &parsed);
    if let Ok(whole) = &parsed {
        assert_eq!(
            &in_pages(&bodies),
            whole,
            "page boundaries change the snapshot"
        );
    }
    Lists {
        json,
        pages,
        snapshot: Some(parsed),
    }
}

/// The client's reading of `body` as a page of `resource`'s list.
fn client_page(resource: Resource, body: &Value) -> Page {
    let (items, href) = read_page(body.clone(), resource.collection())?;
    let first = first_url(resource);
    let next = href.and_then(|href| next_url(&first, &href));
    if let Some(next) = &next {
        assert_eq!(
            next.origin(),
            first.origin(),
            "a next link moved the token to another origin: {next}"
        );
    }
    Ok((items, next))
}

/// The bodies of a sync where `resource`'s list is `body` and every other
/// list is empty (required) or `missing` (best-effort).
fn one_list(resource: Resource, body: &Value, missing: &OptionalBody) -> ApiBodies {
    bodies(|r| (r == resource).then(|| body.clone()), missing)
}

/// The bodies of a sync where each list is `{"<key>": value[<key>]}` when
/// the object has the key, and otherwise empty (required) or `missing`
/// (best-effort).
fn every_list(value: &Value, missing: &OptionalBody) -> ApiBodies {
    bodies(
        |r| {
            let items = value.get(r.collection())?;
            let mut body = Map::new();
            body.insert(r.collection().to_owned(), items.clone());
            Some(Value::Object(body))
        },
        missing,
    )
}

fn bodies(given: impl Fn(Resource) -> Option<Value>, missing: &OptionalBody) -> ApiBodies {
    let required =
        |r: Resource| given(r).unwrap_or_else(|| serde_json::json!({ r.collection(): [] }));
    let optional = |r: Resource| given(r).map_or_else(|| missing.clone(), OptionalBody::Fetched);
    ApiBodies {
        networks: required(Resource::Networks),
        subnets: required(Resource::Subnets),
        ports: required(Resource::Ports),
        routers: required(Resource::Routers),
        floatingips: required(Resource::FloatingIps),
        projects: required(Resource::Projects),
        servers: optional(Resource::Servers),
        loadbalancers: optional(Resource::LoadBalancers),
        amphorae: optional(Resource::Amphorae),
    }
}

/// The client and the planner agree on the items of each list and on
/// which body is not a list; a [`ParseError`] names that body.
fn agree(
    bodies: &ApiBodies,
    pages: &[(Resource, Page)],
    parsed: &Result<(Snapshot, ParseReport), ParseError>,
) {
    for (resource, page) in pages {
        let planner = bodies.body(*resource).map(|_| bodies.items(*resource));
        match (page, planner) {
            (Ok((items, _)), Some(Some(planner))) => {
                // The planner's body may be the list cut out of the input
                // (every list in one object): the items are the same.
                assert_eq!(items.as_slice(), planner, "{resource}: other items");
            }
            (Err(PageError::MissingCollection { collection }), Some(None)) => {
                assert_eq!(collection, resource.collection());
            }
            // The client refuses links the planner does not read; a body
            // not given to the planner (every list, key absent) is its own.
            (Err(PageError::Truncated | PageError::BadLinks { .. }), _) | (_, None) => {}
            // In the every-list form an absent key is an empty list to the
            // planner, a missing collection to the client.
            (Err(PageError::MissingCollection { .. }), Some(Some(planner))) => {
                assert!(
                    planner.is_empty(),
                    "{resource}: the planner reads a list the client refuses"
                );
            }
            (Ok(_), Some(None)) => {
                panic!("{resource}: the client reads a list the planner refuses")
            }
        }
        if let Err(e) = page {
            assert!(!e.to_string().is_empty(), "a page error without a message");
        }
    }
    if let Err(e) = parsed {
        let resource = Resource::from_collection(e.body)
            .unwrap_or_else(|| panic!("an error about no list: {e}"));
        assert_eq!(e.key, e.body);
        assert!(
            bodies.body(resource).is_some() && bodies.items(resource).is_none(),
            "{e}, but that body is a list"
        );
        assert!(e.to_string().contains(e.body), "{e} does not name its body");
    }
}

/// [`parse_snapshot`] of `bodies` by a [`SnapshotParser`] fed each list in
/// two pages (the first half, then the rest), the lists interleaved.
fn in_pages(bodies: &ApiBodies) -> (Snapshot, ParseReport) {
    let mut parser = SnapshotParser::new();
    let lists: Vec<(Resource, &[Value])> = Resource::ALL
        .into_iter()
        .filter_map(|r| Some((r, bodies.items(r)?)))
        .collect();
    for &(r, items) in &lists {
        parser.page(r, &items[..items.len() / 2]);
    }
    for &(r, items) in lists.iter().rev() {
        let rest = &items[items.len() / 2..];
        if let [one] = rest {
            parser.item(r, one);
        } else {
            parser.page(r, rest);
        }
    }
    parser.finish(Sources::of(bodies))
}

fn check_plans(snapshot: &Snapshot) {
    let options = PlanOptions::default();
    let planned = plan(snapshot, &options);
    let again = plan(snapshot, &options);
    assert_eq!(planned, again, "planning is not deterministic");
    let json = planned.to_json();
    assert_eq!(json, again.to_json(), "equal plans, other JSON");
    let back: Plan = serde_json::from_str(&json).expect("a plan's JSON reads back");
    if !has_star_tenant(&planned) {
        assert_eq!(back, planned, "a plan's JSON reads back as another plan");
    }
    assert!(
        diff(&planned, &again).is_empty(),
        "a plan differs from itself"
    );
    let reconciled = plan_with_previous(snapshot, &options, Some(&planned));
    if snapshot.sources.octavia_failed() {
        assert_eq!(
            reconciled,
            plan_with_previous(snapshot, &options, Some(&planned)),
            "reconciling is not deterministic"
        );
    } else {
        assert_eq!(reconciled, planned, "the previous plan was read");
    }
}

/// A project whose id is `*` is keyed as a tenant whose JSON is the global
/// scope's `*`: it reads back as global (reported, not asserted).
fn has_star_tenant(plan: &Plan) -> bool {
    plan.trie
        .iter()
        .any(|row| matches!(&row.tenant, Scope::Tenant(t) if t == "*"))
}

/// A `clouds.yaml` (before the first NUL byte) and, when there is a NUL,
/// its `secure.yaml` (the rest), invalid UTF-8 replaced, through
/// [`clouds_entry_from_str`]: first the cloud `x`, then each of the first
/// two clouds the file defines.
///
/// Asserts: deterministic; an error has a message; an unknown cloud's
/// error names the cloud asked for, and the clouds it lists are found; a
/// bad key of the entry is named under `clouds.<cloud>`; a built entry has
/// an http(s) `auth_url` with a host, a known interface and a positive
/// timeout.
pub fn clouds_yaml(data: &[u8]) {
    let (clouds, secure) = match data.iter().position(|&b| b == 0) {
        Some(nul) => (&data[..nul], Some(&data[nul + 1..])),
        None => (data, None),
    };
    let clouds = String::from_utf8_lossy(clouds);
    let secure = secure.map(String::from_utf8_lossy);
    let select = |cloud: &str| {
        let got = clouds_entry_from_str(&clouds, secure.as_deref(), cloud);
        check_cloud(&got, cloud);
        let again = clouds_entry_from_str(&clouds, secure.as_deref(), cloud);
        assert_eq!(outcome(&got), outcome(&again), "not deterministic");
        got
    };
    if let Err(ConfigError::UnknownCloud { known, .. }) = select("x") {
        for name in known.iter().take(2) {
            if let Err(e @ ConfigError::UnknownCloud { .. }) = select(name) {
                panic!("a cloud the file lists is not found: {e}");
            }
        }
    }
}

fn outcome(got: &Result<CloudConfig, ConfigError>) -> Result<&CloudConfig, String> {
    got.as_ref().map_err(ToString::to_string)
}

fn check_cloud(got: &Result<CloudConfig, ConfigError>, cloud: &str) {
    let e = match got {
        Ok(cfg) => {
            let url = Url::parse(&cfg.auth_url).expect("auth_url was checked");
            assert!(matches!(url.scheme(), "http" | "https") && url.host().is_some());
            assert!(
                matches!(cfg.interface.as_str(), "public" | "internal" | "admin"),
                "interface {:?}",
                cfg.interface
            );
            assert!(!cfg.timeout.is_zero(), "a zero timeout");
            return;
        }
        Err(e) => e,
    };
    let message = e.to_string();
    assert!(!message.is_empty(), "an error without a message: {e:?}");
    match e {
        ConfigError::UnknownCloud { cloud: asked, .. } => {
            assert_eq!(asked, cloud);
            assert!(
                message.contains(&format!("{cloud:?}")),
                "{message} does not name {cloud:?}"
            );
        }
        ConfigError::BadKey { key, .. } => {
            assert!(
                key == "clouds" || key.starts_with(&format!("clouds.{cloud}")),
                "key {key} is not cloud {cloud:?}'s"
            );
            assert!(
                message.contains(key.as_str()),
                "{message} does not name {key}"
            );
        }
        ConfigError::Yaml { message: yaml, .. } => {
            assert!(!yaml.is_empty(), "a YAML error without a message");
        }
        ConfigError::EmptyFile { .. } => {}
        ConfigError::NoCloudsFile { .. }
        | ConfigError::Read { .. }
        | ConfigError::NothingConfigured => panic!("a file or environment error: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written seeds (`seed-*`) of `fuzz/corpus/<name>/`, whose
    /// names say what they are; what `make fuzz` merged beside them is
    /// replayed by `tests/unit/replay.rs`.
    fn corpus(name: &str) -> Vec<(String, Vec<u8>)> {
        let dir = format!("{}/../../fuzz/corpus/{name}", env!("CARGO_MANIFEST_DIR"));
        let mut seeds: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|entry| entry.expect("a directory entry").path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
            })
            .map(|path| {
                let bytes = std::fs::read(&path).expect("a seed");
                (path.display().to_string(), bytes)
            })
            .collect();
        seeds.sort();
        seeds
    }

    fn hostile() -> Vec<Vec<u8>> {
        let mut inputs = vec![
            Vec::new(),
            vec![0xff, 0xfe, 0x80],
            b"\0".to_vec(),
            b"9".to_vec(),
        ];
        for open in [b'[', b'{'] {
            inputs.push(vec![open; 10_000]);
            for selector in b'0'..=b':' {
                let mut nested = vec![selector];
                nested.extend(std::iter::repeat_n(open, 10_000));
                inputs.push(nested);
            }
        }
        let deep = format!(
            "{{\"ports\": {}{}}}",
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        inputs.push([b"2".as_slice(), deep.as_bytes()].concat());
        inputs.push(deep.into_bytes());
        inputs.push(format!("a:{}", " [".repeat(10_000)).into_bytes());
        inputs.push(format!("clouds:\n  x:\n    auth: {}", "{a: ".repeat(10_000)).into_bytes());
        inputs.push("- ".repeat(10_000).into_bytes());
        inputs
    }

    #[test]
    fn openstack_lists_seeds_and_hostile_inputs() {
        let seeds = corpus("openstack_lists");
        assert!(seeds.len() >= 9, "a seed per list");
        for (name, bytes) in &seeds {
            assert!(bytes.len() < 4096, "{name}: {} bytes", bytes.len());
            openstack_lists(bytes);
        }
        for input in hostile() {
            openstack_lists(&input);
        }
    }

    #[test]
    fn every_list_seed_plans_something() {
        let (name, bytes) = corpus("openstack_lists")
            .into_iter()
            .find(|(name, _)| name.ends_with("seed-9-every-list.json"))
            .expect("the every-list seed");
        let body: Value = serde_json::from_slice(&bytes[1..]).expect(&name);
        let bodies = every_list(&body, &OptionalBody::NotDeployed);
        let (snapshot, report) = parse_snapshot(&bodies).expect(&name);
        assert!(report.skipped.is_empty(), "{report:?}");
        let planned = plan(&snapshot, &PlanOptions::default());
        assert!(!planned.trie.is_empty() && !planned.bindings.is_empty());
    }

    #[test]
    fn each_list_seed_parses_without_skips() {
        for (name, bytes) in corpus("openstack_lists") {
            let kind = bytes[0].wrapping_sub(b'0');
            let Some(&resource) = Resource::ALL.get(usize::from(kind)) else {
                continue;
            };
            let body: Value = serde_json::from_slice(&bytes[1..]).expect(&name);
            let (page, _) = read_page(body.clone(), resource.collection()).expect(&name);
            assert!(!page.is_empty(), "{name}");
            let bodies = one_list(resource, &body, &OptionalBody::NotDeployed);
            let (_, report) = parse_snapshot(&bodies).expect(&name);
            assert!(report.skipped.is_empty(), "{name}: {report:?}");
        }
    }

    #[test]
    fn clouds_yaml_seeds_and_hostile_inputs() {
        let seeds = corpus("clouds_yaml");
        assert!(seeds.len() >= 2);
        for (name, bytes) in &seeds {
            assert!(bytes.len() < 4096, "{name}: {} bytes", bytes.len());
            clouds_yaml(bytes);
            let text = String::from_utf8(bytes.clone()).expect(name);
            let (clouds, secure) = match text.split_once('\0') {
                Some((c, s)) => (c, Some(s)),
                None => (text.as_str(), None),
            };
            let Err(ConfigError::UnknownCloud { known, .. }) =
                clouds_entry_from_str(clouds, secure, "x")
            else {
                panic!("{name}: defines x");
            };
            for cloud in known {
                clouds_entry_from_str(clouds, secure, &cloud)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
        for input in hostile() {
            clouds_yaml(&input);
        }
    }

    #[test]
    fn a_huge_api_timeout_is_an_error() {
        let text = "clouds:\n  x:\n    api_timeout: 1e300\n    auth:\n      auth_url: https://k.example:5000/v3\n      application_credential_id: a\n      application_credential_secret: s\n";
        clouds_yaml(text.as_bytes());
        let e = clouds_entry_from_str(text, None, "x").unwrap_err();
        assert!(e.to_string().contains("api_timeout"), "{e}");
    }
}
