//! Root: a second `lachesis agent` on a host that already runs one (issue
//! 19 item 3). Agent A meters two taps under traffic; a second agent
//!
//! - with its *own* bpffs dir, state file and listeners and a prefix that
//!   matches nothing runs for a few seconds beside it: A's taps keep A's
//!   programs the whole time (the kernel's own list of programs and links
//!   on each hook, polled), A's series equal the taps' interface counters
//!   exactly and A healed nothing;
//! - on A's bpffs dir, or on A's state file, refuses to start, naming A's
//!   pid and the path, exit status 1, having touched nothing of A's in
//!   the kernel (programs, links, pins).
//!
//! Each test moves its thread into a network namespace of its own first:
//! the lab, the simulator and both agents live there.

use crate::common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use common::agent::{topology, totals_by, Setup, Totals, MAC_A, MAC_B, TENANT_A, TENANT_B};
use common::{start_agent, Sim};
use lachesis_agent::links::tap_name;
use lachesis_lab::agent::{metric, Agent};
use lachesis_lab::http::{free_port, get};
use lachesis_lab::netns::{isolate, Lab, Vm};
use lachesis_lab::traffic::{counters, wait_quiet};

const HEALS: &str = "lachesis_attach_heals_total";

/// `BPF_PROG_QUERY`'s attribute (`union bpf_attr`, the `query` member of
/// linux/bpf.h, kernel ≥ 6.6 for the link ids): the test asks the kernel
/// itself which programs sit on a hook, through no code of ours.
#[repr(C)]
#[derive(Default)]
struct QueryAttr {
    target_ifindex: u32,
    attach_type: u32,
    query_flags: u32,
    attach_flags: u32,
    prog_ids: u64,
    count: u32,
    _pad: u32,
    prog_attach_flags: u64,
    link_ids: u64,
    link_attach_flags: u64,
    revision: u64,
}
const _: () = assert!(size_of::<QueryAttr>() == 64);
const BPF_PROG_QUERY: libc::c_long = 16;
const BPF_TCX_INGRESS: u32 = 46;
const BPF_TCX_EGRESS: u32 = 47;

/// Every TCX program on both hooks of `tap`: (hook, program id, link id).
fn hooks(tap: &str) -> Vec<(&'static str, u32, u32)> {
    let index = lachesis_datapath::ifindex(tap).unwrap();
    let mut out = Vec::new();
    for (hook, attach_type) in [("ingress", BPF_TCX_INGRESS), ("egress", BPF_TCX_EGRESS)] {
        let mut progs = [0u32; 16];
        let mut links = [0u32; 16];
        let mut attr = QueryAttr {
            target_ifindex: index,
            attach_type,
            prog_ids: progs.as_mut_ptr() as u64,
            count: 16,
            link_ids: links.as_mut_ptr() as u64,
            ..QueryAttr::default()
        };
        // SAFETY: `attr` is a live, writable BPF_PROG_QUERY attribute of
        // the size passed; its two arrays hold `count` entries and outlive
        // the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_QUERY,
                &raw mut attr,
                size_of::<QueryAttr>(),
            )
        };
        assert_eq!(
            rc,
            0,
            "query {hook} of {tap}: {}",
            std::io::Error::last_os_error()
        );
        let n = (attr.count as usize).min(16);
        out.extend((0..n).map(|i| (hook, progs[i], links[i])));
    }
    out
}

/// Both taps' hooks, in order.
fn taps_hooks(vms: &[&Vm]) -> Vec<Vec<(&'static str, u32, u32)>> {
    vms.iter().map(|vm| hooks(&vm.tap)).collect()
}

/// Names under a bpffs dir (pins and the `links` folder's pins).
fn pins(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() {
            for inner in std::fs::read_dir(entry.path()).unwrap() {
                out.push(format!(
                    "{name}/{}",
                    inner.unwrap().file_name().to_string_lossy()
                ));
            }
        } else {
            out.push(name);
        }
    }
    out.sort();
    out
}

/// A bpffs directory for the second agent; removed on drop.
struct SecondPins(PathBuf);

impl SecondPins {
    fn new(tag: &str) -> SecondPins {
        SecondPins(PathBuf::from(format!(
            "/sys/fs/bpf/lachesis-second-{tag}-{}-{}",
            std::process::id(),
            free_port()
        )))
    }
}

impl Drop for SecondPins {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A's world: two VMs behind taps named after their ports, the simulator,
/// A's configuration.
struct Rig {
    a: Vm,
    b: Vm,
    _sim: Sim,
    setup: Setup,
    _scratch: tempfile::TempDir,
    _lab: Lab,
}

impl Rig {
    fn new() -> Rig {
        lachesis_lab::require_root();
        isolate();
        let mut lab = Lab::new();
        let a = lab.add_vm_with_tap(
            &tap_name("p-a"),
            MAC_A.parse().unwrap(),
            Ipv4Addr::new(10, 77, 0, 1),
        );
        let b = lab.add_vm_with_tap(
            &tap_name("p-b"),
            MAC_B.parse().unwrap(),
            Ipv4Addr::new(10, 77, 0, 2),
        );
        lab.static_neighbours();
        let scratch = tempfile::tempdir().unwrap();
        let topo = scratch.path().join("topology.yaml");
        std::fs::write(&topo, topology()).unwrap();
        let sim = Sim::start_topology(&topo, &[]);
        let setup = Setup::new(&lab, &sim);
        Rig {
            a,
            b,
            _sim: sim,
            setup,
            _scratch: scratch,
            _lab: lab,
        }
    }

    /// A's configuration with the keys of `edits` (`section.key`) given
    /// the new values, written to `dir/name`.
    fn second_config(&self, dir: &Path, edits: &[(&str, String)]) -> PathBuf {
        let text = std::fs::read_to_string(&self.setup.config).unwrap();
        let mut section = String::new();
        let mut out = String::new();
        let mut applied = 0;
        for line in text.lines() {
            if line.starts_with(' ') {
                let (key, _) = line.trim().split_once(':').unwrap();
                let path = format!("{section}.{key}");
                match edits.iter().find(|(k, _)| *k == path) {
                    Some((_, value)) => {
                        write!(out, "  {key}: {value}").unwrap();
                        applied += 1;
                    }
                    None => out.push_str(line),
                }
            } else {
                line.trim_end_matches(':').clone_into(&mut section);
                out.push_str(line);
            }
            out.push('\n');
        }
        assert_eq!(applied, edits.len(), "{edits:?} not all in\n{text}");
        let path = dir.join(format!("second-{}.yaml", free_port()));
        std::fs::write(&path, out).unwrap();
        path
    }

    /// The tenants' series as the taps' counters say they must be.
    fn want(&self) -> BTreeMap<String, Totals> {
        BTreeMap::from([
            (TENANT_A.to_owned(), Totals::from_tap(counters(&self.a))),
            (TENANT_B.to_owned(), Totals::from_tap(counters(&self.b))),
        ])
    }
}

fn listen() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()))
}

/// Waits up to `limit` for the child to exit; `None` if it still runs.
fn exit_within(agent: &mut Agent, limit: Duration) -> Option<ExitStatus> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Some(status) = agent.child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn a_second_agent_on_its_own_bpffs_dir_never_detaches_the_running_agents_programs() {
    let rig = Rig::new();
    let m = rig.setup.metrics;
    let mut first = rig.setup.start(0);
    first.wait_ready(m);
    let before = taps_hooks(&[&rig.a, &rig.b]);
    for hooks in &before {
        assert_eq!(hooks.len(), 2, "A's two programs per tap: {hooks:?}");
    }

    // Traffic the whole time: 2 500 echo requests and their replies, 2 ms
    // apart (about 5 s), through both taps.
    let (a, b_ip) = (rig.a.clone(), rig.b.ip.to_string());
    let traffic = std::thread::spawn(move || {
        a.exec(&[
            "ping", "-q", "-c", "2500", "-i", "0.002", "-s", "200", &b_ip,
        ])
    });
    std::thread::sleep(Duration::from_millis(300));

    // The second agent: its own bpffs dir, state file and listeners, and a
    // prefix that matches nothing on this host.
    let second_pins = SecondPins::new("own");
    let second_dir = tempfile::tempdir().unwrap();
    let second_metrics = listen();
    let config = rig.second_config(
        second_dir.path(),
        &[
            ("listen.metrics", second_metrics.to_string()),
            ("listen.debug", listen().to_string()),
            ("datapath.interface_prefixes", "[nczz]".to_owned()),
            ("datapath.interfaces", "[]".to_owned()),
            ("datapath.bpffs_dir", second_pins.0.display().to_string()),
            (
                "state.path",
                second_dir.path().join("state.json").display().to_string(),
            ),
        ],
    );
    let started = Instant::now();
    let mut second = start_agent(&config, second_dir.path().join("second.log"));
    // Poll A's hooks while the second agent boots, runs and stops.
    let (mut polls, mut bare) = (0, 0);
    let mut changed = Vec::new();
    let mut poll = |polls: &mut usize| {
        *polls += 1;
        let now = taps_hooks(&[&rig.a, &rig.b]);
        if now != before {
            bare += 1;
            if changed.len() < 3 {
                changed.push(format!("after {:?}: {now:?}", started.elapsed()));
            }
        }
    };
    let mut ready = false;
    while started.elapsed() < Duration::from_secs(4) {
        poll(&mut polls);
        ready = ready || get(second_metrics, "/readyz").is_some_and(|(code, _)| code == 200);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(ready, "the second agent never ran:\n{}", second.log_text());
    assert_eq!(
        metric(second_metrics, "lachesis_attached_interfaces"),
        Some(0.0),
        "the second agent's prefix matches nothing"
    );
    second.signal(libc::SIGTERM);
    while exit_within(&mut second, Duration::from_millis(20)).is_none() {
        poll(&mut polls);
        assert!(started.elapsed() < Duration::from_secs(30));
    }
    let second = stop_status(second);
    while !traffic.is_finished() {
        poll(&mut polls);
        std::thread::sleep(Duration::from_millis(20));
    }
    traffic.join().unwrap().unwrap();
    wait_quiet(&[&rig.a, &rig.b]);
    poll(&mut polls);

    // Every frame counted by A: the series equal the taps' counters.
    let until = Instant::now() + Duration::from_secs(10);
    let got = loop {
        let got = get(m, "/metrics").map(|(_, body)| totals_by(&body, &["tenant_id"]));
        if got.as_ref() == Some(&rig.want()) || Instant::now() > until {
            break got.unwrap_or_default();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let want = rig.want();
    let missed: u64 = want
        .iter()
        .map(|(tenant, w)| {
            let g = got.get(tenant).copied().unwrap_or_default();
            (w.tx_packets + w.rx_packets).saturating_sub(g.tx_packets + g.rx_packets)
        })
        .sum();
    let frames: u64 = want.values().map(|w| w.tx_packets + w.rx_packets).sum();
    let heals = metric(m, HEALS);
    assert!(
        bare == 0 && got == want && heals == Some(0.0),
        "A's programs changed in {bare} of {polls} polls (first: {changed:#?}; before: {before:?});\n\
         {missed} of {frames} frames never counted by A;\n got {got:?}\nwant {want:?}\n\
         {HEALS} {heals:?}\nsecond agent's log:\n{second}\nA's log:\n{}",
        first.log_text()
    );
    first.stop();
}

/// SIGTERM was sent: exit 0 within 20 s; returns the log.
fn stop_status(mut agent: Agent) -> String {
    let status = exit_within(&mut agent, Duration::from_secs(20));
    let log = agent.log_text();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "log:\n{log}");
    log
}

#[test]
fn a_second_agent_on_the_same_bpffs_dir_or_state_file_refuses_to_start_naming_the_holder() {
    let rig = Rig::new();
    let m = rig.setup.metrics;
    let mut first = rig.setup.start(0);
    first.wait_ready(m);
    let pid = first.child.id();
    let hooks_before = taps_hooks(&[&rig.a, &rig.b]);
    let pins_before = pins(&rig.setup.bpffs);
    let state = rig.setup.dir.path().join("state.json");
    let scratch = tempfile::tempdir().unwrap();
    let other_pins = SecondPins::new("same-state");

    let cases = [
        (
            "the same bpffs dir",
            rig.setup.bpffs.clone(),
            vec![
                ("listen.metrics", listen().to_string()),
                ("listen.debug", listen().to_string()),
                (
                    "state.path",
                    scratch.path().join("state.json").display().to_string(),
                ),
            ],
        ),
        (
            "the same state file",
            state.clone(),
            vec![
                ("listen.metrics", listen().to_string()),
                ("listen.debug", listen().to_string()),
                ("datapath.bpffs_dir", other_pins.0.display().to_string()),
            ],
        ),
    ];
    for (what, path, edits) in cases {
        let config = rig.second_config(scratch.path(), &edits);
        let log = scratch.path().join(format!("{}.log", free_port()));
        let mut second = start_agent(&config, log);
        let status = exit_within(&mut second, Duration::from_secs(10));
        let text = second.log_text();
        let Some(status) = status else {
            let now = taps_hooks(&[&rig.a, &rig.b]);
            panic!(
                "a second agent on {what} did not refuse: still running after 10 s \
                 (A's hooks before {hooks_before:?}, now {now:?}); its log:\n{text}"
            );
        };
        assert_eq!(status.code(), Some(1), "{what}: {text}");
        let line = text
            .lines()
            .find(|l| l.starts_with("lachesis: error:"))
            .unwrap_or_else(|| panic!("{what}: no error line:\n{text}"));
        eprintln!("{what}: {line}");
        assert!(
            line.contains(&format!("pid {pid}")) && line.contains(&path.display().to_string()),
            "{what}: the error must name A's pid {pid} and {}: {line}",
            path.display()
        );
        // Nothing of A's moved in the kernel or its bpffs dir.
        assert_eq!(taps_hooks(&[&rig.a, &rig.b]), hooks_before, "{what}");
        assert_eq!(pins(&rig.setup.bpffs), pins_before, "{what}");
    }
    // The state file was refused before any bpffs dir was touched.
    assert!(
        !other_pins.0.exists(),
        "{} was created",
        other_pins.0.display()
    );
    // A counts on, untouched.
    traffic_counted(&rig, &first);
    assert_eq!(metric(m, HEALS), Some(0.0));
    first.stop();
}

/// Pings both ways, then A's series equal the taps' counters.
fn traffic_counted(rig: &Rig, agent: &Agent) {
    common::agent::traffic(&rig.a, &rig.b, 0);
    common::agent::assert_tenants(
        agent,
        rig.setup.metrics,
        Duration::from_secs(20),
        |_, _| false,
        &["tenant_id"],
        || rig.want(),
    );
}
