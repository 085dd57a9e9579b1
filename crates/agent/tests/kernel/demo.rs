//! `lachesis demo` end to end (root): `--check` (the scripted scenario,
//! every tenant and port series against the taps' own counters), the live
//! view in a real terminal (tmux), plain output through a pipe, and what
//! each way of stopping leaves behind — nothing, or, after a crash,
//! leftovers the next run removes.
//!
//! The tests run one at a time: each demo is a whole cloud on two cores,
//! and a demo starting removes crashed runs' leftovers, which one test
//! makes on purpose.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::Receiver;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn demo(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lachesis"));
    lachesis_lab::agent::scrub_env(&mut cmd);
    cmd.arg("demo").args(args);
    cmd
}

/// `lachesis demo ARGS` with no input, its output piped.
fn spawn(args: &[&str], stderr: Stdio) -> Child {
    demo(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// What a run with pid `pid` may have left: its namespaces, run folder,
/// pin folder, any process started with its agent configuration, and the
/// root of run folders left empty (another demo running keeps it, with
/// its own folder in it).
fn leftovers(pid: u32) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(&format!("ldemo-{pid}-")))
                .collect()
        })
        .unwrap_or_default();
    for path in [
        format!("/run/lachesis-demo/{pid}"),
        format!("/sys/fs/bpf/lachesis-demo-{pid}"),
    ] {
        if Path::new(&path).exists() {
            out.push(path);
        }
    }
    if std::fs::read_dir("/run/lachesis-demo").is_ok_and(|mut d| d.next().is_none()) {
        out.push("/run/lachesis-demo, empty".to_owned());
    }
    let config = format!("/run/lachesis-demo/{pid}/lachesis.yaml");
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&config) {
            out.push(format!("process {}", entry.file_name().display()));
        }
    }
    out
}

/// Waits for `child` to exit within `limit`; kills it and fails otherwise.
fn wait(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let until = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("the demo did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The child's standard output, line by line, on a channel.
fn lines(child: &mut Child) -> Receiver<String> {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Reads lines until one satisfies `ok` (returned); fails after `limit`
/// with what was read.
fn until_line(rx: &Receiver<String>, limit: Duration, ok: impl Fn(&str) -> bool) -> String {
    let until = Instant::now() + limit;
    let mut seen = Vec::new();
    while Instant::now() < until {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            if ok(&line) {
                return line;
            }
            seen.push(line);
        }
    }
    panic!("no such line within {limit:?}; read:\n{}", seen.join("\n"));
}

fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A table line of tenant `tenant` and zone `zone` (as the view shows
/// them) whose TX or RX bytes are not zero.
fn row_with_bytes(screen: &str, tenant: &str, zone: &str) -> bool {
    screen.lines().any(|l| {
        let l = l.trim_matches(|c: char| c == '│' || c.is_whitespace());
        let Some(rest) = l.strip_prefix(tenant) else {
            return false;
        };
        let Some(rest) = rest.trim_start().strip_prefix(zone) else {
            return false;
        };
        // TX n unit, TX RATE n unit/s, RX n unit, …
        let f: Vec<&str> = rest.split_whitespace().collect();
        f.len() >= 6 && (f[0] != "0" || f[4] != "0")
    })
}

/// Rows every view must show with bytes once the flows run.
const ROWS: &[(&str, &str)] = &[
    ("acme", "same_tenant"),
    ("acme", "external (public)"),
    ("acme", "other_tenant"),
    ("acme", "shared"),
    ("acme", "infra"),
    ("acme", "multicast"),
    ("globex", "same_tenant"),
    ("globex", "external (public)"),
    ("globex", "other_tenant"),
    ("globex", "shared"),
    ("globex", "infra"),
    ("platform", "other_tenant"),
    ("unknown", "miss"),
];

fn missing_rows(screen: &str) -> Vec<String> {
    ROWS.iter()
        .filter(|(t, z)| !row_with_bytes(screen, t, z))
        .map(|(t, z)| format!("{t}/{z}"))
        .collect()
}

#[test]
fn demo_check_after_a_crashed_demo_removes_its_leftovers_and_every_series_equals_the_taps() {
    let _serial = serial();
    lachesis_lab::require_root();
    // A demo that crashes once it shows counted bytes: SIGKILL leaves its
    // namespaces, pins and run folder behind.
    let mut crashed = spawn(&["--plain"], Stdio::null());
    let rx = lines(&mut crashed);
    until_line(&rx, Duration::from_mins(2), |l| {
        l.contains("acme") && l.contains("same_tenant")
    });
    let crashed_pid = crashed.id();
    crashed.kill().unwrap();
    crashed.wait().unwrap();
    assert!(
        !leftovers(crashed_pid).is_empty(),
        "a SIGKILLed demo should have left its namespaces"
    );

    let started = Instant::now();
    let mut check = spawn(&["--check"], Stdio::piped());
    let check_pid = check.id();
    let status = wait(&mut check, Duration::from_mins(3));
    let out = check.wait_with_output().unwrap();
    let said = text(&out);
    assert!(status.success(), "{said}");
    assert!(said.contains("lachesis demo --check: OK"), "{said}");
    // A report for a log: nothing for a person at the keys, no rates.
    let report = String::from_utf8_lossy(&out.stdout);
    for hint in ["keys", "q quit", "http://", "watch", "RATE", "B/s"] {
        assert!(!report.contains(hint), "{hint:?} in the report:\n{report}");
    }
    assert!(
        said.contains(&format!("did not clean up (pid {crashed_pid})")),
        "the crashed run's leftovers were not reported removed:\n{said}"
    );
    assert!(started.elapsed() < Duration::from_mins(3));
    assert_eq!(leftovers(crashed_pid), Vec::<String>::new());
    assert_eq!(leftovers(check_pid), Vec::<String>::new());
}

#[test]
fn plain_output_through_a_pipe_serves_metrics_on_loopback_and_sigterm_cleans_up() {
    let _serial = serial();
    lachesis_lab::require_root();
    let mut child = spawn(&[], Stdio::null());
    let rx = lines(&mut child);
    let banner = until_line(&rx, Duration::from_mins(2), |l| {
        l.trim_start().starts_with("metrics")
    });
    let url = banner.split_whitespace().nth(1).unwrap().to_owned();
    let mut block = String::new();
    let until = Instant::now() + Duration::from_mins(1);
    while !missing_rows(&block).is_empty() || !block.contains(" running · taps ") {
        assert!(
            Instant::now() < until,
            "rows never showed bytes: {:?}\n{block}",
            missing_rows(&block)
        );
        let line = until_line(&rx, Duration::from_secs(10), |_| true);
        if line.starts_with('[') {
            block.clear();
        }
        block.push_str(&line);
        block.push('\n');
    }
    // The agent's /metrics, from the machine's own loopback.
    let addr: std::net::SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .parse()
        .unwrap();
    let (status, body) = lachesis_lab::http::get(addr, "/metrics").expect("the demo's /metrics");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("lachesis_tenant_bytes_total{"), "{body}");

    let pid = child.id();
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(i32::try_from(pid).unwrap(), libc::SIGTERM) };
    let status = wait(&mut child, Duration::from_mins(1));
    assert!(status.success(), "{status}");
    assert_eq!(leftovers(pid), Vec::<String>::new());
}

/// `tmux -L SOCKET ARGS`.
fn tmux(socket: &str, args: &[&str]) -> Output {
    Command::new("tmux")
        .args(["-L", socket])
        .args(args)
        .output()
        .expect("tmux (installed by scripts/setup)")
}

#[test]
fn the_live_view_in_a_terminal_shows_every_tenant_with_bytes_in_its_zones_and_ctrl_c_cleans_up() {
    let _serial = serial();
    lachesis_lab::require_root();
    let socket = format!("lachesis-demo-test-{}", std::process::id());
    let bin = env!("CARGO_BIN_EXE_lachesis");
    let out = tmux(
        &socket,
        &[
            "new-session",
            "-d",
            "-x",
            "140",
            "-y",
            "45",
            "-s",
            "demo",
            "--",
            bin,
            "demo",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let pane = tmux(&socket, &["list-panes", "-t", "demo", "-F", "#{pane_pid}"]);
    let pid: u32 = String::from_utf8_lossy(&pane.stdout)
        .trim()
        .parse()
        .unwrap();
    let until = Instant::now() + Duration::from_mins(2);
    let mut screen = String::new();
    while Instant::now() < until {
        let shot = tmux(&socket, &["capture-pane", "-p", "-t", "demo"]);
        screen = String::from_utf8_lossy(&shot.stdout).into_owned();
        if missing_rows(&screen).is_empty() && screen.contains(" running · taps ") {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let missing = missing_rows(&screen);
    if !missing.is_empty() {
        let _ = tmux(&socket, &["kill-server"]);
        panic!("rows without bytes: {missing:?}\nscreen:\n{screen}");
    }
    assert!(screen.contains("metrics http://127.0.0.1:"), "{screen}");
    // Ctrl-C reaches the view as a key (raw mode): it stops and cleans up.
    let out = tmux(&socket, &["send-keys", "-t", "demo", "C-c"]);
    assert!(out.status.success(), "{}", text(&out));
    let until = Instant::now() + Duration::from_mins(1);
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < until, "the demo did not stop on Ctrl-C");
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = tmux(&socket, &["kill-server"]);
    assert_eq!(leftovers(pid), Vec::<String>::new());
}
