//! Targets for what the agent reads from its host: its configuration (the
//! YAML file, `LACHESIS_*` variables, `--set` flags), the ledger's state
//! file, the kernel's rtnetlink link messages, and the debug listener's
//! query strings.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::os::unix::ffi::OsStringExt as _;

use lachesis_abi::Mac;
use lachesis_agent::config::{load_text, reload, Config, ConfigError, Flags, Issue, REDACTED};
use lachesis_agent::http::lookup::{explain, Query, PARAMS as LOOKUP_PARAMS};
use lachesis_agent::http::{BadParams, Params, FLOWS_MAX_LIMIT, MAX_PARAMS};
use lachesis_agent::links::{
    parse_datagram, AttachError, Attacher, Frame, LinkEvent, LinkMetrics, Matcher, Message,
    Outcome, TapPorts, Watcher,
};
use lachesis_ledger::state::{decode, encode, SCHEMA};
use lachesis_ledger::Book;

/// The agent's configuration: the bytes up to the first NUL are the YAML
/// file's text; after it, one layer per line: `--set KEY=VALUE`,
/// `--log-level LEVEL`, or an environment variable `NAME=VALUE` (raw
/// bytes: a value need not be UTF-8). Read by
/// [`lachesis_agent::config::load_text`], the agent's `load` without the
/// file read.
///
/// Asserts: the reading is deterministic; every error has at least one
/// issue and each names its key and says something; a valid
/// configuration's effective YAML (`to_yaml`, what `--check-config`
/// prints) is itself a valid configuration that prints the same, and
/// without secrets or layers reads back to an equal configuration;
/// reloading the same file text changes nothing; every warning names its
/// key.
pub fn agent_config(data: &[u8]) {
    let (yaml, layers) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    // The agent reads the file with `read_to_string`: not UTF-8 is an I/O
    // error before any parsing, so the bytes are made text here instead.
    let text = String::from_utf8_lossy(yaml);
    let mut env = Vec::new();
    let mut flags = Flags::default();
    for line in layers.split(|&b| b == b'\n') {
        if let Some(item) = line.strip_prefix(b"--set ") {
            flags.set.push(String::from_utf8_lossy(item).into_owned());
        } else if let Some(level) = line.strip_prefix(b"--log-level ") {
            flags.log_level = Some(String::from_utf8_lossy(level).into_owned());
        } else if let Some(eq) = line.iter().position(|&b| b == b'=') {
            env.push((
                OsString::from_vec(line[..eq].to_vec()),
                OsString::from_vec(line[eq + 1..].to_vec()),
            ));
        }
    }
    let layered = !env.is_empty() || flags != Flags::default();

    let read = load_text(Some(&text), env.clone(), &flags);
    assert_eq!(
        read,
        load_text(Some(&text), env, &flags),
        "not deterministic"
    );
    if !layered {
        assert_eq!(
            read,
            Config::from_yaml(&text),
            "from_yaml is load without layers"
        );
    }
    let config = match read {
        Ok(config) => config,
        Err(e) => {
            issues_named(&e);
            return;
        }
    };
    for w in config.warnings() {
        issue_named(&w);
    }

    let shown = config.to_yaml();
    let again = Config::from_yaml(&shown)
        .unwrap_or_else(|e| panic!("the effective configuration is refused: {e}\n{shown}"));
    assert_eq!(
        again.to_yaml(),
        shown,
        "the effective configuration prints otherwise"
    );
    if !layered && !shown.contains(REDACTED) {
        assert_eq!(again, config, "the effective configuration reads otherwise");
    }

    let outcome = reload(&config, &text)
        .unwrap_or_else(|e| panic!("reloading the text it was read from fails: {e}"));
    assert!(
        outcome.applied.is_empty() && outcome.restart_required.is_empty(),
        "reloading the same text changes {:?} {:?}",
        outcome.applied,
        outcome.restart_required
    );
    assert_eq!(outcome.config, config, "a reload of the same text");
}

fn issues_named(e: &ConfigError) {
    assert!(!e.issues.is_empty(), "an error without an issue");
    for issue in &e.issues {
        issue_named(issue);
    }
}

fn issue_named(issue: &Issue) {
    assert!(
        !issue.key.trim().is_empty(),
        "an issue without its key: {issue:?}"
    );
    assert!(
        !issue.message.trim().is_empty(),
        "an issue that says nothing: {issue:?}"
    );
}

/// The ledger's state file, every schema the agent restores (1 to
/// [`SCHEMA`]), through [`lachesis_ledger::state::decode`] (what
/// `state::load` reads from a file's bytes).
///
/// Asserts: decoding is deterministic; a refusal says why; a restored
/// file's schema is one this build reads; what the writer
/// ([`lachesis_ledger::state::encode`], schema [`SCHEMA`]) makes of a
/// restored state restores to the same state (rows, waiting rows,
/// tombstones, absorbers, tenant ids, plan), and is a fixed point: written
/// again, byte-identical.
pub fn state_file(data: &[u8]) {
    let first = decode(data);
    match (&first, &decode(data)) {
        (Ok((b1, p1, s1)), Ok((b2, p2, s2))) => {
            assert!(b1 == b2 && p1 == p2 && s1 == s2, "not deterministic");
        }
        (Err(a), Err(b)) => assert_eq!(a, b, "not deterministic"),
        (a, b) => panic!("not deterministic: {a:?} then {b:?}"),
    }
    let (book, plan, schema) = match first {
        Ok(restored) => restored,
        Err(why) => {
            assert!(!why.trim().is_empty(), "a refusal that says nothing");
            return;
        }
    };
    assert!((1..=SCHEMA).contains(&schema), "restored schema {schema}");

    let written = encode(&book, &plan).expect("a restored state encodes");
    let (again, again_plan, again_schema) = decode(&written).unwrap_or_else(|e| {
        panic!(
            "the writer's file does not restore: {e}\n{}",
            String::from_utf8_lossy(&written)
        )
    });
    assert_eq!(again_schema, SCHEMA);
    assert_eq!(again_plan, plan, "the plan changed through the writer");
    same_state(&book, &again);

    let rewritten = encode(&again, &again_plan).expect("a restored state encodes");
    assert!(
        rewritten == written,
        "the writer's file is not a fixed point"
    );
    let (third, _, _) = decode(&rewritten).expect("restored once already");
    assert_eq!(third, again, "the writer's file restores otherwise");
}

/// Every part of the book the file holds. The interner is compared by
/// its pairs and next id: a file's `next` below the smallest id the
/// interner would hand out is read as that id.
fn same_state(before: &Book, after: &Book) {
    assert_eq!(before.rows, after.rows, "rows");
    assert_eq!(before.unresolved, after.unresolved, "waiting rows");
    assert_eq!(before.tombstones, after.tombstones, "tombstones");
    assert_eq!(before.absorbers, after.absorbers, "absorbers");
    assert!(
        before.interner.iter().eq(after.interner.iter()),
        "tenant ids"
    );
    assert_eq!(
        before.interner.next_id(),
        after.interner.next_id(),
        "next tenant id"
    );
}

/// rtnetlink datagrams as the link watcher's socket hands them over, read
/// by [`lachesis_agent::links::parse_datagram`], whose link events are
/// applied to a [`Watcher`] over a recording [`Attacher`].
///
/// Asserts: parsing is deterministic; at most one message per 16 bytes
/// (a netlink header), plus one malformed tail; an unusable header length
/// ends the walk; a link event has a positive index and a present link a
/// non-empty name without NUL; the messages after the first are what the
/// datagram after the first message reads as; applying the events is
/// deterministic and attaches only names of the matching rule.
pub fn netlink_link(data: &[u8]) {
    let frames = parse_datagram(data);
    assert_eq!(frames, parse_datagram(data), "not deterministic");
    assert!(
        frames.len() <= data.len() / 16 + 1,
        "{} messages",
        frames.len()
    );
    for (i, frame) in frames.iter().enumerate() {
        match &frame.message {
            Message::Malformed("netlink header length") => {
                assert_eq!(i + 1, frames.len(), "the walk goes on past a bad header");
            }
            Message::Malformed(why) => assert!(!why.is_empty()),
            Message::Link(LinkEvent::Present { index, name }) => {
                assert!(i32::try_from(*index).is_ok_and(|i| i > 0), "index {index}");
                assert!(!name.is_empty() && !name.contains('\0'), "name {name:?}");
            }
            Message::Link(LinkEvent::Gone { index }) => {
                assert!(i32::try_from(*index).is_ok_and(|i| i > 0), "index {index}");
            }
            Message::Done | Message::Error(_) | Message::Overrun | Message::Ignored => {}
        }
    }
    // The first message's own length, when usable, says where the next
    // one starts.
    let len = data.get(..4).map_or(0, |b| {
        u32::from_ne_bytes(b.try_into().expect("4 bytes")) as usize
    });
    if (16..=data.len()).contains(&len) {
        let next = ((len + 3) & !3).min(data.len());
        assert_eq!(
            parse_datagram(&data[next..]),
            frames[1..],
            "the second message reads otherwise alone"
        );
    } else {
        assert!(frames.len() <= 1, "a walk past an unusable first header");
    }

    let calls = apply(&frames);
    assert_eq!(calls, apply(&frames), "the watcher is not deterministic");
    let rule = matcher();
    for call in &calls {
        if let Some(name) = call.strip_prefix("attach ") {
            assert!(rule.matches(name), "attached {name:?}");
        }
    }
}

fn matcher() -> Matcher {
    Matcher::new(["tap"], ["eth7"])
}

/// The attacher calls applying `frames`' link events makes.
fn apply(frames: &[Frame]) -> Vec<String> {
    let ports = TapPorts::from_ports([("0123456789a-bcde", Mac([2, 0, 0, 0, 0, 1]))]);
    let mut watcher =
        Watcher::new(Recorder::default(), matcher(), LinkMetrics::default()).with_ports(ports);
    for frame in frames {
        if let Message::Link(event) = &frame.message {
            watcher.apply(event);
        }
    }
    watcher.attacher().calls.take()
}

/// An [`Attacher`] that succeeds and records each call.
#[derive(Debug, Default)]
struct Recorder {
    calls: RefCell<Vec<String>>,
}

impl Recorder {
    fn record(&self, call: String) {
        self.calls.borrow_mut().push(call);
    }
}

impl Attacher for Recorder {
    fn attach(&self, name: &str) -> Result<Outcome, AttachError> {
        self.record(format!("attach {name}"));
        Ok(Outcome::Attached)
    }
    fn detach(&self, name: &str) -> Result<bool, AttachError> {
        self.record(format!("detach {name}"));
        Ok(true)
    }
    fn interfaces(&self) -> Result<Vec<(u32, String)>, AttachError> {
        Ok(Vec::new())
    }
    fn attached(&self) -> Result<BTreeSet<String>, AttachError> {
        Ok(BTreeSet::new())
    }
    fn remove_unmatched(&self, _matcher: &Matcher) -> Result<Vec<String>, AttachError> {
        Ok(Vec::new())
    }
    fn set_port(&self, index: u32, mac: Option<Mac>) -> Result<(), AttachError> {
        self.record(format!("port {index} {mac:?}"));
        Ok(())
    }
}

/// The debug listener's query strings: the bytes up to the first newline
/// are a query read as `/debug/flows` (`limit`) and the plan page's filter
/// (`tenant`, `mac`, `address`) read it; the rest is a `/debug/lookup`
/// query (`mac`, `ip`, `peer`, `local`, `direction`: the addresses and
/// MACs typed by the user), explained against an empty plan.
///
/// Asserts, for each reading: it is deterministic; a query of more than
/// [`MAX_PARAMS`] pairs is refused whole, with one problem named `query`
/// and no value read; otherwise every problem names a parameter the query
/// gave or the page reads, and says what was wrong and what was expected;
/// the answer's size is bounded by the query's (no cost proportional to
/// anything else). A lookup read is the one its own values spelt out
/// again read as, each value is what the query gave, and a MAC is read
/// only from six hex octets.
pub fn debug_query(data: &[u8]) {
    let (query, lookup) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let query = String::from_utf8_lossy(query);
    let lookup = String::from_utf8_lossy(lookup);

    let flows = |q: &str| {
        let mut p = Params::parse(Some(q), &["limit"]);
        let limit = p.optional("limit", "an integer from 0 to 10000", |t| {
            t.parse::<usize>().ok().filter(|n| *n <= FLOWS_MAX_LIMIT)
        });
        p.finish(Some(limit))
    };
    let plan = |q: &str| {
        let mut p = Params::parse(Some(q), &["tenant", "mac", "address"]);
        let tenant = p.get("tenant").map(str::to_owned);
        let mac = p.optional("mac", "a MAC address", |t| t.parse::<Mac>().ok());
        let address = p.optional("address", "an address", |t| t.parse::<IpAddr>().ok());
        p.finish(Some((tenant, mac, address)))
    };
    let read = flows(&query);
    assert_eq!(read, flows(&query), "not deterministic");
    checked(&query, &["limit"], read.err());
    let read = plan(&query);
    assert_eq!(read, plan(&query), "not deterministic");
    checked(&query, &["tenant", "mac", "address"], read.err());

    let read = Query::parse(Some(&lookup));
    assert_eq!(read, Query::parse(Some(&lookup)), "not deterministic");
    let q = match read {
        Ok(q) => q,
        Err(bad) => {
            checked(&lookup, LOOKUP_PARAMS, Some(bad));
            return;
        }
    };
    let mut again = format!("mac={}&ip={}&direction={}", q.vm_mac, q.remote, q.direction);
    if let Some(peer) = q.peer_mac {
        let _ = write!(again, "&peer={peer}");
    }
    if let Some(local) = q.local {
        let _ = write!(again, "&local={local}");
    }
    assert_eq!(
        Query::parse(Some(&again)),
        Ok(q),
        "spelt out again: {again}"
    );
    let p = Params::parse(Some(&lookup), LOOKUP_PARAMS);
    assert_eq!(p.get("mac").map(str::parse), Some(Ok(q.vm_mac)));
    assert_eq!(p.get("ip").map(str::parse), Some(Ok(q.remote)));
    assert_eq!(
        p.get("peer").map(str::parse::<Mac>).transpose(),
        Ok(q.peer_mac)
    );
    assert_eq!(
        p.get("local").map(str::parse::<IpAddr>).transpose(),
        Ok(q.local)
    );
    // A MAC is read only as it is spelt: six hex octets, either separator.
    for (name, mac) in [("mac", Some(q.vm_mac)), ("peer", q.peer_mac)] {
        if let (Some(text), Some(mac)) = (p.get(name), mac) {
            let canonical = text.to_ascii_lowercase().replace('-', ":");
            assert_eq!(canonical, mac.to_string(), "{name}={text:?}");
        }
    }
    let e = explain(&q, &[], &[], &[]);
    assert_eq!(e, explain(&q, &[], &[], &[]), "not deterministic");
    assert_eq!(e.query, q);
}

/// The problems of one reading of `query` by a page accepting `accepted`.
fn checked(query: &str, accepted: &[&str], problems: Option<BadParams>) {
    let pairs = query.split('&').filter(|s| !s.is_empty()).count();
    let refused = pairs > MAX_PARAMS;
    if refused {
        let p = Params::parse(Some(query), accepted);
        for name in accepted {
            assert_eq!(p.get(name), None, "read {name} of a refused query");
        }
    }
    let Some(problems) = problems else {
        assert!(!refused, "a query of {pairs} pairs was read");
        return;
    };
    let bad = problems.each();
    assert!(!bad.is_empty(), "an error without a problem");
    if refused {
        assert_eq!(bad.len(), 1, "a refused query: {bad:?}");
        assert_eq!(bad[0].name, "query");
    } else {
        let given: BTreeSet<String> = query
            .split('&')
            .filter(|s| !s.is_empty())
            .map(|pair| form_decoded(pair.split('=').next().unwrap_or_default()))
            .collect();
        for b in bad {
            assert!(
                given.contains(&b.name) || accepted.contains(&b.name.as_str()),
                "a problem naming no parameter of the query or the page: {b:?}"
            );
        }
        assert!(
            bad.len() <= pairs + accepted.len(),
            "{} problems",
            bad.len()
        );
    }
    for b in bad {
        assert!(!b.problem.is_empty() && !b.expected.is_empty(), "{b:?}");
    }
    // A value is quoted once (escaped: at most 5 bytes per byte), each
    // problem adds a sentence of its own.
    let shown = problems.to_string().len();
    assert!(
        shown <= 6 * query.len() + 512 * (MAX_PARAMS + 4),
        "{shown} bytes of problems for a {}-byte query",
        query.len()
    );
}

/// `application/x-www-form-urlencoded` decoding of one name: `+` is a
/// space, `%XX` a byte; what is not UTF-8 after that is replaced.
fn form_decoded(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| {
                        u8::from_str_radix(h, 16)
                            .ok()
                            .filter(|_| !h.starts_with('+'))
                    });
                if let Some(b) = hex {
                    out.push(b);
                    i += 2;
                } else {
                    out.push(b'%');
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    use super::*;

    /// Each seed of `fuzz/corpus/<name>/`.
    fn seeds(name: &str) -> Vec<(String, Vec<u8>)> {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus")).join(name);
        let mut out: Vec<(String, Vec<u8>)> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| {
                let path = entry.unwrap().path();
                let bytes = fs::read(&path).unwrap();
                (path.display().to_string(), bytes)
            })
            .filter(|(path, _)| path.rsplit('/').next().unwrap().starts_with("seed-"))
            .collect();
        out.sort();
        assert!(!out.is_empty(), "no seed in {}", dir.display());
        for (path, bytes) in &out {
            assert!(bytes.len() < 4096, "{path}: {} bytes", bytes.len());
        }
        out
    }

    /// Inputs no parser should trip over.
    fn hostile() -> Vec<Vec<u8>> {
        let mut out = vec![
            Vec::new(),
            vec![0xff, 0xfe, 0x00, 0xc3, 0x28],
            b"\0".to_vec(),
            b"\n".to_vec(),
            "[".repeat(10_000).into_bytes(),
            "{".repeat(10_000).into_bytes(),
            "- ".repeat(10_000).into_bytes(),
            "a: ".repeat(5_000).into_bytes(),
            "[[{".repeat(4_000).into_bytes(),
        ];
        let mut query = "mac=02:00:00:00:00:01&".repeat(1_000_000 / 22).into_bytes();
        out.push(query.clone());
        query.push(b'\n');
        query.extend("ip=10.0.0.1&".repeat(1_000_000 / 12).into_bytes());
        out.push(query);
        out.push(format!("mac={}", "%41".repeat(333_333)).into_bytes());
        out
    }

    fn run(name: &str, target: fn(&[u8])) {
        for (path, bytes) in seeds(name) {
            let start = std::time::Instant::now();
            target(&bytes);
            eprintln!("{path}: {:?}", start.elapsed());
        }
        for bytes in hostile() {
            let start = std::time::Instant::now();
            target(&bytes);
            eprintln!(
                "{name} hostile {:?}…({} bytes): {:?}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(12)]),
                bytes.len(),
                start.elapsed()
            );
        }
    }

    #[test]
    fn agent_config_seeds_and_hostile_inputs() {
        run("agent_config", agent_config);
    }

    #[test]
    fn state_file_seeds_and_hostile_inputs() {
        run("state_file", state_file);
    }

    #[test]
    fn netlink_link_seeds_and_hostile_inputs() {
        run("netlink_link", netlink_link);
    }

    #[test]
    fn debug_query_seeds_and_hostile_inputs() {
        run("debug_query", debug_query);
    }

    #[test]
    fn the_seeds_reach_past_the_parsers() {
        // Each seed of these is accepted whole, so the properties past the
        // parse (round trips, the watcher) are exercised.
        for (path, bytes) in seeds("state_file") {
            assert!(decode(&bytes).is_ok(), "{path}: {:?}", decode(&bytes).err());
        }
        let mut schemas: Vec<u32> = seeds("state_file")
            .iter()
            .map(|(_, b)| decode(b).unwrap().2)
            .collect();
        schemas.dedup();
        assert_eq!(schemas, (1..=SCHEMA).collect::<Vec<_>>());
        for (path, bytes) in seeds("netlink_link") {
            let frames = parse_datagram(&bytes);
            assert!(
                frames
                    .iter()
                    .any(|f| matches!(f.message, Message::Link(LinkEvent::Present { .. }))),
                "{path}: {frames:?}"
            );
        }
        for (path, bytes) in seeds("agent_config") {
            let yaml = bytes.split(|&b| b == 0).next().unwrap();
            let text = std::str::from_utf8(yaml).unwrap();
            assert!(Config::from_yaml(text).is_ok(), "{path}");
        }
    }

    #[test]
    fn the_properties_catch_what_they_claim() {
        // More than MAX_PARAMS pairs: refused with the one problem.
        let many = vec!["limit=1"; MAX_PARAMS + 1].join("&");
        let bad = Params::parse(Some(&many), &["limit"])
            .finish(Some(()))
            .unwrap_err();
        assert_eq!(bad.each()[0].name, "query");
        checked(&many, &["limit"], Some(bad));
        assert_eq!(form_decoded("a+b%41%zz%4"), "a bA%zz%4");
        // Was read as 01:02:03:04:05:06 (`from_str_radix` takes a sign).
        debug_query(b"\nmac=%2B1:%2B2:03:04:05:06&ip=10.0.0.1");
        assert!(Query::parse(Some("mac=%2B1:%2B2:03:04:05:06&ip=10.0.0.1")).is_err());
    }
}
