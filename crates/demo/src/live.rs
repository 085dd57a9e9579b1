//! The live demo: the terminal table or plain lines, with the scenario
//! steps on keys or run unattended (`--script`), until stopped.

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::scenario::{self, Step};
use crate::session::Demo;
use crate::{tui, view, DemoArgs};

/// Shows the demo until it is stopped.
pub(crate) fn run(demo: &Arc<Demo>, args: &DemoArgs, tui: bool) -> anyhow::Result<ExitCode> {
    let (tx, rx) = std::sync::mpsc::channel::<Step>();
    let scenario = {
        let demo = demo.clone();
        let script = args.script;
        let every = Duration::from_secs(args.step_every);
        std::thread::spawn(move || steps(&demo, script, every, &rx))
    };
    let shown = if tui {
        tui::run(demo, &tx)
    } else {
        view::plain(demo, &tx);
        Ok(())
    };
    demo.stop.store(true, Ordering::SeqCst);
    drop(tx);
    let _ = scenario.join();
    shown.map(|()| ExitCode::SUCCESS)
}

/// Runs steps as they come (keys), or the whole script, until stopped.
/// Long-lived on purpose: an agent it restarts lives while it does.
fn steps(demo: &Demo, script: bool, every: Duration, keys: &Receiver<Step>) {
    let sleep = |d: Duration| {
        let until = Instant::now() + d;
        while Instant::now() < until && !demo.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    if script {
        for step in scenario::SCRIPT {
            sleep(every);
            if demo.stop.load(Ordering::SeqCst) {
                return;
            }
            demo.run_step(step);
        }
        sleep(every);
        demo.say("script done");
        demo.stop.store(true, Ordering::SeqCst);
    }
    while !demo.stop.load(Ordering::SeqCst) {
        match keys.recv_timeout(Duration::from_millis(200)) {
            Ok(step) => demo.run_step(step),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}
