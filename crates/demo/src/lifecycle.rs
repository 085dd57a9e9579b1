//! A demo's life: root and leftovers checked, everything built and started
//! (namespaces, simulator, agent, traffic, scraper), then — whatever ends
//! it, a key, a signal, an error or a hung thread — everything of the run
//! removed.

use std::io::IsTerminal as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use lachesis_lab::{http, netns};
use lachesis_sim::{SimOptions, Store, Topology};

use crate::cleanup::{self, Run};
use crate::net::{self, Names};
use crate::session::{Demo, Fixed, Scene, Urls};
use crate::truth::{self, Truth};
use crate::world::{demo_rogue, World};
use crate::{agent, check, live, traffic, view, DemoArgs, TOPOLOGY};

/// How long the demo may take to stop after a signal before the signal
/// task cleans up itself and exits.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// Runs the demo; `exe` is the `lachesis` binary (the agent is started
/// from it).
pub(crate) fn run(args: &DemoArgs, exe: &Path) -> anyhow::Result<ExitCode> {
    require_root()?;
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let run = Run {
        pid: std::process::id(),
    };
    rt.spawn(signals(stop.clone(), run.clone()));
    for crashed in cleanup::crashed_runs() {
        let said = cleanup::remove_run(&crashed);
        eprintln!(
            "lachesis demo: removed the leftovers of a demo that did not clean up (pid {}): {}",
            crashed.pid,
            cleanup::summary(&said)
        );
    }
    let mut guard = Guard {
        run: run.clone(),
        demo: None,
    };
    cleanup::create_run_dir(&run).with_context(|| format!("creating {}", run.dir().display()))?;
    let launch = Launch {
        args,
        exe,
        rt: &rt,
        stop: &stop,
        started,
        tui: !args.check && !args.plain && std::io::stdout().is_terminal(),
    };
    let demo = start(&launch, &mut guard)?;
    if args.check {
        println!("{}", view::check_banner(check::STEP_EVERY));
    } else if !launch.tui {
        println!("{}", view::banner(&demo));
    }
    let (hosts, taps) = {
        let scene = demo.scene();
        (scene.world.hosts.len(), scene.world.taps().count())
    };
    let reader = if args.check { "the check" } else { "the table" };
    demo.say(view::ready_line(
        started.elapsed(),
        hosts,
        taps,
        reader,
        demo.fixed.pace.view,
    ));
    let code = if args.check {
        check::run(&demo)
    } else {
        live::run(&demo, args, launch.tui)?
    };
    if let Some(t) = demo.observed().first_row {
        eprintln!(
            "lachesis demo: the first counted bytes showed on /metrics {:.1} s after start",
            t.as_secs_f64()
        );
    }
    drop(guard);
    Ok(code)
}

/// What starting a demo needs.
struct Launch<'a> {
    args: &'a DemoArgs,
    exe: &'a Path,
    rt: &'a tokio::runtime::Runtime,
    stop: &'a Arc<AtomicBool>,
    started: Instant,
    /// The terminal view (else plain lines, or the check's report).
    tui: bool,
}

/// Removes everything of the run when dropped: traffic, the agent
/// (SIGTERM: final drain and flush), namespaces, pins, files.
struct Guard {
    run: Run,
    demo: Option<Arc<Demo>>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(d) = &self.demo {
            d.traffic.stop();
            if let Some(agent) = d.agent().as_mut() {
                agent.stop(Duration::from_secs(10));
            }
        }
        let said = cleanup::remove_run(&self.run);
        eprintln!(
            "lachesis demo: cleaned up after itself (pid {}): {}",
            self.run.pid,
            cleanup::summary(&said)
        );
    }
}

fn require_root() -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "lachesis demo needs root (network namespaces, BPF programs on the taps); \
             run it as root (`sudo make demo`)"
        );
    }
    Ok(())
}

/// Sets `stop` on SIGINT, SIGTERM or SIGHUP; if the demo has not stopped
/// [`STOP_GRACE`] later (something hangs), removes the run's leftovers and
/// exits.
async fn signals(stop: Arc<AtomicBool>, run: Run) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return;
    };
    tokio::select! {
        _ = int.recv() => {},
        _ = term.recv() => {},
        _ = hup.recv() => {},
    }
    stop.store(true, Ordering::SeqCst);
    tokio::time::sleep(STOP_GRACE).await;
    eprintln!(
        "lachesis demo: did not stop within {STOP_GRACE:?} of the signal; removing what it made and exiting"
    );
    for line in cleanup::remove_run(&run) {
        eprintln!("lachesis demo: cleanup: {line}");
    }
    std::process::exit(1);
}

fn interrupted(stop: &AtomicBool) -> anyhow::Result<()> {
    if stop.load(Ordering::SeqCst) {
        bail!("interrupted before the demo was up");
    }
    Ok(())
}

/// Binds `127.0.0.1:preferred` in the calling thread's namespace, or any
/// free port when that one is taken.
fn bind_loopback(preferred: u16) -> std::io::Result<std::net::TcpListener> {
    std::net::TcpListener::bind(("127.0.0.1", preferred))
        .or_else(|_| std::net::TcpListener::bind(("127.0.0.1", 0)))
}

/// Builds everything and starts the agent, the traffic and the scraper.
fn start(launch: &Launch<'_>, guard: &mut Guard) -> anyhow::Result<Arc<Demo>> {
    let run = guard.run.clone();
    // The user's side of the agent's listeners, bound in the machine's
    // namespace before this thread moves to the hypervisor's.
    let metrics_front = bind_loopback(9847).context("binding a loopback port")?;
    let debug_front = bind_loopback(9848).context("binding a loopback port")?;
    let urls = Urls {
        metrics: metrics_front.local_addr()?,
        debug: debug_front.local_addr()?,
    };
    let names = Names {
        prefix: run.netns_prefix(),
    };
    net::create_hv(&names)?;
    netns::enter(&names.hv()).map_err(anyhow::Error::msg)?;

    let topology = Topology::from_yaml(TOPOLOGY).context("the bundled topology")?;
    let store = Store::from_topology(&topology).context("the bundled topology")?;
    let world =
        World::from_topology(&store.to_topology(), &demo_rogue()).map_err(anyhow::Error::msg)?;
    net::build(&names, &world)?;
    interrupted(launch.stop)?;

    let sim = launch.rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        lachesis_sim::start_on(store, listener, SimOptions::default())
    })?;
    let pace = if launch.args.check {
        agent::CHECK
    } else {
        agent::WATCH
    };
    let config = agent::write_config(&run, sim.addr(), pace)?;

    // The truth starts when the taps are quiet (enabling IPv6 sends a
    // few reports) and before the agent counts anything.
    let taps: Vec<String> = world.taps().map(|(_, i)| i.outer.clone()).collect();
    let baseline = net::wait_quiet(&taps, 15, Duration::from_secs(20))?;
    let mut truth = Truth::default();
    for ((_, iface), c) in world.taps().zip(&baseline) {
        truth.track(
            &iface.outer,
            iface.port_id.as_deref(),
            iface.bills_to.as_deref().unwrap_or(truth::UNKNOWN),
            *c,
        );
    }
    let demo = Arc::new(Demo::new(
        Fixed {
            names: names.clone(),
            run,
            exe: launch.exe.to_owned(),
            config,
            pace,
            urls,
            started: launch.started,
            echo: !launch.tui,
        },
        Scene {
            world,
            sim,
            truth,
            gone: std::collections::BTreeSet::new(),
        },
        launch.stop.clone(),
    ));
    guard.demo = Some(demo.clone());
    demo.start_agent()?;
    interrupted(launch.stop)?;
    let now = net::tap_counters(&demo.scene().world)?;
    if now.into_iter().map(|(_, c)| c).ne(baseline) {
        bail!("a tap carried traffic before the demo's flows started: the truth would be off");
    }
    std::thread::spawn(move || http::forward(&metrics_front, agent::METRICS));
    std::thread::spawn(move || http::forward(&debug_front, agent::DEBUG));
    traffic::start(&demo.traffic, &|h: &str| names.host(h))?;
    let scraper = demo.clone();
    std::thread::spawn(move || loop {
        scraper.scrape();
        std::thread::sleep(scraper.fixed.pace.view);
    });
    Ok(demo)
}
