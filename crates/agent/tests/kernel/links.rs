//! Root: the link watcher against the real kernel — a real netlink
//! subscription, a real `Datapath` attaching to veths named like taps.
//!
//! Each test runs on a thread of its own network namespace (sysfs left
//! showing the original one, as for an agent started inside a namespace): the
//! watcher removes our programs from every non-matching interface it sees,
//! and must never see the taps of other tests running on this machine. The
//! namespace dies with the thread; the lab and the bpffs directory are
//! removed explicitly.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lachesis_abi::Mac;
use lachesis_agent::links::{
    run, tap_name, EventKind, Failure, LinkMetrics, Matcher, TapPorts, Watcher,
};
use lachesis_datapath::{ifindex, AttachMode, AttachOutcome, Datapath, DatapathConfig};
use lachesis_lab::netns::Lab;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

static SEQ: AtomicU32 = AtomicU32::new(0);

/// How long any condition may take to become true.
const DEADLINE: Duration = Duration::from_secs(10);

fn check(rc: libc::c_int, what: &str) {
    assert_eq!(rc, 0, "{what}: {}", std::io::Error::last_os_error());
}

/// Moves the calling thread into a new network namespace; threads and
/// processes started from this thread inherit it. `/sys/class/net` still
/// shows the test's original namespace: the watcher and the datapath must
/// list interfaces through the kernel, not sysfs (issue 8).
fn enter_private_netns() {
    // SAFETY: a plain system call on this thread's own namespaces.
    check(unsafe { libc::unshare(libc::CLONE_NEWNET) }, "unshare");
}

/// Runs `body` on a fresh thread in its own network namespace, on a tokio
/// runtime created there (its worker threads inherit the namespaces).
fn isolated<F>(multi_thread: bool, body: impl FnOnce() -> F + Send + 'static)
where
    F: std::future::Future<Output = ()>,
{
    lachesis_lab::require_root();
    let t = std::thread::spawn(move || {
        enter_private_netns();
        let mut rt = if multi_thread {
            tokio::runtime::Builder::new_multi_thread()
        } else {
            tokio::runtime::Builder::new_current_thread()
        };
        rt.enable_all().build().unwrap().block_on(body());
    });
    if let Err(panic) = t.join() {
        std::panic::resume_unwind(panic);
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// A veth pair that is not a lab VM (for names outside the tap rule).
fn veth(name: &str) {
    ip(&[
        "link",
        "add",
        name,
        "type",
        "veth",
        "peer",
        "name",
        &format!("{name}p"),
    ]);
}

/// A bpffs directory unique to this test, removed on drop.
struct PinDir(PathBuf);

impl PinDir {
    fn new() -> PinDir {
        PinDir(PathBuf::from(format!(
            "/sys/fs/bpf/lachesis-test-links-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        )))
    }

    fn load(&self) -> Arc<Datapath> {
        let config = DatapathConfig {
            bpffs_dir: self.0.clone(),
            flows_max_entries: Some(4096),
            attach_mode: AttachMode::Auto,
            ..DatapathConfig::default()
        };
        Arc::new(Datapath::load(&config).expect("load the classifier").0)
    }
}

impl Drop for PinDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How many of our hooks (0, 1 or 2) sit on `name`.
fn hooks(dp: &Datapath, name: &str) -> usize {
    dp.attachments()
        .unwrap()
        .iter()
        .filter(|a| a.ifname.as_deref() == Some(name))
        .count()
}

/// Polls `cond` until it holds, giving the watcher task the time between
/// polls; fails after [`DEADLINE`].
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = tokio::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A watcher running on the current runtime.
struct Running {
    metrics: LinkMetrics,
    ports: watch::Sender<TapPorts>,
    cancel: CancellationToken,
    task: JoinHandle<Watcher<Arc<Datapath>>>,
}

impl Running {
    fn start(dp: &Arc<Datapath>, matcher: Matcher, presence_interval: Duration) -> Running {
        Running::with_ports(dp, matcher, presence_interval, TapPorts::default())
    }

    /// [`Running::start`], the watcher knowing `ports` from the start.
    fn with_ports(
        dp: &Arc<Datapath>,
        matcher: Matcher,
        presence_interval: Duration,
        ports: TapPorts,
    ) -> Running {
        let metrics = LinkMetrics::new(&mut Registry::default());
        let watcher =
            Watcher::new(Arc::clone(dp), matcher, metrics.clone()).with_ports(ports.clone());
        let (ports, ports_rx) = watch::channel(ports);
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run(watcher, presence_interval, ports_rx, cancel.clone()));
        Running {
            metrics,
            ports,
            cancel,
            task,
        }
    }

    async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(DEADLINE, self.task)
            .await
            .expect("the watcher stops when cancelled")
            .expect("the watcher task did not panic");
    }

    fn assert_no_failures(&self) {
        for f in Failure::ALL {
            assert_eq!(self.metrics.failures(f), 0, "attach failures {f:?}");
        }
        assert_eq!(self.metrics.events(EventKind::Malformed), 0);
        assert_eq!(self.metrics.events(EventKind::SocketError), 0);
    }
}

#[test]
fn replay_and_events_attach_taps_forget_vanished_ones_and_detach_renamed_ones() {
    // The agent's runtime kind: the watcher runs beside this body, its
    // attacher calls through block_in_place.
    isolated(true, || async {
        let pins = PinDir::new();
        let dp = pins.load();
        let mut lab = Lab::new();
        let id = lab.id().to_owned();
        let early = lab.add_vm("02:00:00:00:0a:01".parse().unwrap(), [10, 9, 0, 1].into());
        let other = format!("vx{id}");
        veth(&other);
        // Presence checks far apart: everything below is done by the
        // replay and the events alone.
        let w = Running::start(
            &dp,
            Matcher::new(["tap"], [format!("ex{id}")]),
            Duration::from_hours(1),
        );

        // Existing before the start: attached by the replay.
        until("the early tap is attached", || hooks(&dp, &early.tap) == 2).await;
        assert!(
            w.metrics.events(EventKind::DumpLink) >= 3,
            "lo, bridge, taps"
        );

        // Appearing later: attached from its RTM_NEWLINK.
        let late = lab.add_vm("02:00:00:00:0a:02".parse().unwrap(), [10, 9, 0, 2].into());
        until("the late tap is attached", || hooks(&dp, &late.tap) == 2).await;

        // A non-matching name never is; an exact name is. The exact one is
        // created last, so once it is attached the events of the other
        // were applied.
        let stranger = format!("vy{id}");
        veth(&stranger);
        let exact = format!("ex{id}");
        veth(&exact);
        until("the exact name is attached", || hooks(&dp, &exact) == 2).await;
        for name in [
            &other,
            &stranger,
            &format!("{other}p"),
            &format!("{exact}p"),
        ] {
            assert_eq!(hooks(&dp, name), 0, "{name} is not ours");
        }
        until("the gauge counts three", || w.metrics.attached() == 3).await;

        // Deleted (a VM migrating away): forgotten, no error.
        let deleted_before = w.metrics.events(EventKind::DelLink);
        ip(&["link", "del", &late.tap]);
        until("the deletion is seen", || {
            w.metrics.events(EventKind::DelLink) > deleted_before
        })
        .await;
        until("the gauge drops", || w.metrics.attached() == 2).await;

        // Renamed out of the rule: our programs leave with the old name.
        let renamed = format!("rn{id}");
        ip(&["link", "set", &early.tap, "down"]);
        ip(&["link", "set", &early.tap, "name", &renamed]);
        until("the renamed tap is detached", || hooks(&dp, &renamed) == 0).await;
        until("the gauge drops again", || w.metrics.attached() == 1).await;
        assert_eq!(hooks(&dp, &exact), 2, "the others keep theirs");

        assert_eq!(w.metrics.heals(), 0, "events did everything");
        w.assert_no_failures();
        w.stop().await;
    });
}

#[test]
fn the_presence_check_heals_a_tap_detached_behind_its_back_and_removes_strays() {
    // One thread: the watcher runs only while this body waits, so the
    // detach below is one gap, healed once (on other threads a presence
    // check could land between its two hooks and see two gaps).
    isolated(false, || async {
        let pins = PinDir::new();
        let dp = pins.load();
        let mut lab = Lab::new();
        let id = lab.id().to_owned();
        let vm = lab.add_vm("02:00:00:00:0b:01".parse().unwrap(), [10, 9, 1, 1].into());
        let w = Running::start(
            &dp,
            Matcher::new(["tap"], Vec::<String>::new()),
            Duration::from_millis(200),
        );
        until("the tap is attached", || hooks(&dp, &vm.tap) == 2).await;

        // Someone removes our programs; no netlink event says so.
        assert!(dp.detach(&vm.tap).unwrap(), "ours were there");
        assert_eq!(hooks(&dp, &vm.tap), 0);
        until("a presence check heals it", || hooks(&dp, &vm.tap) == 2).await;
        until("the heal is counted", || w.metrics.heals() == 1).await;

        // Ours on an interface outside the rule is removed by the check.
        let stray = format!("vs{id}");
        veth(&stray);
        assert_eq!(dp.attach(&stray).unwrap(), [AttachOutcome::Attached; 2]);
        assert_eq!(hooks(&dp, &stray), 2);
        until("the stray attachment is removed", || {
            hooks(&dp, &stray) == 0
        })
        .await;

        // Quiet afterwards: more checks, no more heals.
        let checks = w.metrics.presence_checks();
        until("two more presence checks ran", || {
            w.metrics.presence_checks() >= checks + 2
        })
        .await;
        assert_eq!(w.metrics.heals(), 1);
        assert_eq!(hooks(&dp, &vm.tap), 2);
        assert_eq!(w.metrics.attached(), 1);
        w.assert_no_failures();
        w.stop().await;
    });
}

#[test]
fn each_tap_carries_its_ports_mac_before_it_is_attached_and_as_the_plan_changes() {
    isolated(true, || async {
        let pins = PinDir::new();
        let dp = pins.load();
        let mut lab = Lab::new();
        // Taps named as Nova names them after their port ids.
        let (port_a, port_b) = (
            "3f1e0e2c-8a57-4c4f-9d4e-0b1d2c3e4f50",
            "7b2d9c41-0e6f-4a1b-8c3d-5e6f7a8b9c0d",
        );
        let mac_a: Mac = "fa:16:3e:0c:00:01".parse().unwrap();
        let mac_b: Mac = "fa:16:3e:0c:00:02".parse().unwrap();
        let a = lab.add_vm_with_tap(&tap_name(port_a), mac_a, [10, 9, 2, 1].into());
        let b = lab.add_vm_with_tap(&tap_name(port_b), mac_b, [10, 9, 2, 2].into());
        let port_of =
            |vm: &lachesis_lab::netns::Vm| dp.tap_port(ifindex(&vm.tap).unwrap()).unwrap();

        // The plan knows a's port, not yet b's.
        let w = Running::with_ports(
            &dp,
            Matcher::new(["tap"], Vec::<String>::new()),
            Duration::from_hours(1),
            TapPorts::from_ports([(port_a, mac_a)]),
        );
        until("both taps are attached", || {
            hooks(&dp, &a.tap) == 2 && hooks(&dp, &b.tap) == 2
        })
        .await;
        assert_eq!(port_of(&a), Some(mac_a), "written before the attach");
        assert_eq!(port_of(&b), None, "no binding names b's tap yet");
        until("one tap without a port", || w.metrics.without_port() == 1).await;

        // A commit learns b's port: written, no re-attach needed.
        w.ports
            .send(TapPorts::from_ports([(port_a, mac_a), (port_b, mac_b)]))
            .unwrap();
        until("b's port is written", || port_of(&b) == Some(mac_b)).await;
        until("every tap has its port", || w.metrics.without_port() == 0).await;

        // a's port leaves the plan: its MAC is forgotten, the tap stays ours.
        w.ports
            .send(TapPorts::from_ports([(port_b, mac_b)]))
            .unwrap();
        until("a's port is forgotten", || port_of(&a).is_none()).await;
        assert_eq!(hooks(&dp, &a.tap), 2);

        // b's tap is deleted (the VM migrates away): its entry goes too.
        let b_index = ifindex(&b.tap).unwrap();
        ip(&["link", "del", &b.tap]);
        until("b's entry is forgotten", || {
            dp.tap_port(b_index).unwrap().is_none()
        })
        .await;
        w.assert_no_failures();
        w.stop().await;
    });
}
