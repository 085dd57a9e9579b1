//! The scenario steps the user can trigger (or `--script` runs): each one
//! changes the simulated cloud (and the namespaces, as Nova and Neutron
//! would) while the flows it affects are held, so the taps' counters split
//! exactly into before and after, and says what the view should show.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde_json::json;

use crate::session::Demo;
use crate::world::{demo_rogue, World};

/// One step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nova deletes `b-worker`: its tap goes, then its port and server.
    DeleteVm,
    /// `globex-router`'s gateway moves from `public` to `public-2`.
    Regateway,
    /// `a-batch`'s port (and server) move from `acme` to `globex`.
    MoveProject,
    /// The agent is killed with SIGKILL and started again.
    RestartAgent,
}

/// The order `--script` and `--check` run them in.
pub const SCRIPT: [Step; 4] = [
    Step::DeleteVm,
    Step::Regateway,
    Step::MoveProject,
    Step::RestartAgent,
];

impl Step {
    /// The key that triggers it in the live view.
    #[must_use]
    pub fn key(self) -> char {
        match self {
            Step::DeleteVm => 'd',
            Step::Regateway => 'g',
            Step::MoveProject => 'm',
            Step::RestartAgent => 'k',
        }
    }

    /// What the key says.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Step::DeleteVm => "delete VM b-worker",
            Step::Regateway => "re-gateway globex-router",
            Step::MoveProject => "move a-batch to globex",
            Step::RestartAgent => "kill -9 the agent, restart it",
        }
    }

    /// The step for a key.
    #[must_use]
    pub fn from_key(c: char) -> Option<Step> {
        SCRIPT.into_iter().find(|s| s.key() == c)
    }
}

const WORKER: &str = "b-worker";
const BATCH: &str = "a-batch";
const ROUTER: &str = "globex-router";
const GLOBEX: &str = "0b0000000000000000000000000000bb";

/// Runs `step`, saying what it does and what to watch.
pub(crate) fn run(demo: &Demo, step: Step) -> anyhow::Result<()> {
    match step {
        Step::DeleteVm => delete_vm(demo),
        Step::Regateway => regateway(demo),
        Step::MoveProject => move_project(demo),
        Step::RestartAgent => restart_agent(demo),
    }
}

/// The host named `name`, as built now.
fn host(demo: &Demo, name: &str) -> anyhow::Result<crate::world::Host> {
    demo.scene()
        .world
        .host(name)
        .cloned()
        .with_context(|| format!("no host {name}"))
}

/// Waits until the held flows finished their exchanges and `host`'s
/// taps are quiet; returns their counters, by tap.
fn quiesce(
    demo: &Demo,
    host: &str,
) -> anyhow::Result<std::collections::BTreeMap<String, lachesis_lab::netns::IfCounters>> {
    if !demo.traffic.wait_idle(Duration::from_secs(10)) {
        bail!("held flows did not finish their exchanges within 10 s");
    }
    let taps: Vec<String> = self::host(demo, host)?
        .ifaces
        .iter()
        .filter(|i| i.tap)
        .map(|i| i.outer.clone())
        .collect();
    let counters = crate::net::wait_quiet(&taps, 3, Duration::from_secs(15))?;
    Ok(taps.into_iter().zip(counters).collect())
}

fn delete_vm(demo: &Demo) -> anyhow::Result<()> {
    demo.say(format!(
        "» deleting VM {WORKER} (globex): its tap goes, then its port; the agent keeps the \
         binding as a ghost for the grace ({}), then sweeps it — globex's totals stop \
         growing from it and never drop",
        humanize(demo.fixed.pace.grace)
    ));
    demo.traffic.pause_host(WORKER);
    let counters = quiesce(demo, WORKER)?;
    let host = host(demo, WORKER)?;
    for i in host.ifaces.iter().filter(|i| i.tap) {
        demo.scene().truth.delete(&i.outer, counters[&i.outer]);
    }
    demo.scene().gone.insert(WORKER.to_owned());
    crate::net::remove_host(&demo.fixed.names, &host)?;
    demo.sim_mutate(|s| {
        for i in &host.ifaces {
            if let Some(port) = &i.port_id {
                s.delete("ports", port)?;
            }
        }
        s.delete("servers", "srv-b-worker")
    })?;
    demo.wait_metric("a ghost binding", |s| {
        s.gauge("lachesis_ghost_bindings").is_some_and(|v| v >= 1.0)
    })?;
    demo.say("  b-worker's binding is a ghost (counted bytes kept, still attributed)");
    demo.wait_metric("the ghost swept", |s| {
        s.gauge("lachesis_ghost_bindings") == Some(0.0)
    })?;
    demo.say("  swept: its bytes stay in globex's totals (server- and tenant-settled)");
    Ok(())
}

fn regateway(demo: &Demo) -> anyhow::Result<()> {
    const FLOW: &str = "app→internet";
    demo.say(format!(
        "» re-gatewaying {ROUTER} from `public` to `public-2`: globex's bytes already \
         counted stay under external_network=public, new ones go to public-2"
    ));
    demo.traffic.pause_flow(FLOW);
    if !demo.traffic.wait_idle(Duration::from_secs(10)) {
        bail!("{FLOW} did not finish its exchange within 10 s");
    }
    // Its last packets are on their way when the exchange returns.
    std::thread::sleep(Duration::from_millis(200));
    let runs = demo.runs_ok();
    let old = demo.scene().world.clone();
    demo.sim_mutate(|s| {
        s.set_gateway(
            "router-globex",
            Some(lachesis_sim::topology::Gateway {
                network_id: "net-public2".into(),
                enable_snat: true,
                external_fixed_ips: vec![lachesis_sim::topology::FixedIp {
                    subnet_id: "sub-public2".into(),
                    ip_address: "192.0.2.11".into(),
                }],
            }),
        )?;
        s.update(
            "ports",
            "rg-gw",
            json!({"network_id": "net-public2",
                   "fixed_ips": [{"subnet_id": "sub-public2", "ip_address": "192.0.2.11"}]}),
        )
        .map(drop)
    })?;
    let topology = demo.sim_topology();
    let new = World::from_topology(&topology, &demo_rogue()).map_err(anyhow::Error::msg)?;
    crate::net::regateway(&demo.fixed.names, &old, &new, ROUTER)?;
    demo.scene().world = new;
    demo.wait_metric("a reconcile pass after the change", |s| {
        runs_ok(s) >= runs + 2.0
    })?;
    // The settle is flushed with the pass; one more flush to be sure
    // the view shows it.
    demo.wait_flushes(2);
    let before = demo.external_bytes(GLOBEX, "public");
    demo.traffic.resume_flow(FLOW);
    demo.say(
        "  new SNAT through public-2: globex's new external bytes go to `external (public-2)`",
    );
    let until = Instant::now() + Duration::from_secs(20);
    while demo.external_bytes(GLOBEX, "public-2") == 0 {
        if Instant::now() > until {
            bail!("no globex byte reached external_network=public-2 within 20 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let after = demo.external_bytes(GLOBEX, "public");
    if after != before {
        bail!("globex's external (public) bytes moved after the re-gateway: {before} then {after}");
    }
    demo.say(format!(
        "  external (public) stays at {before} bytes; public-2 is counting"
    ));
    Ok(())
}

fn move_project(demo: &Demo) -> anyhow::Result<()> {
    demo.say(format!(
        "» moving {BATCH}'s port from acme to globex: acme keeps every byte counted so far, \
         globex starts from zero (no inheritance); its traffic to a-db is now other_tenant"
    ));
    demo.traffic.pause_host(BATCH);
    let counters = quiesce(demo, BATCH)?;
    let host = host(demo, BATCH)?;
    for i in host.ifaces.iter().filter(|i| i.tap) {
        demo.scene()
            .truth
            .change_owner(&i.outer, GLOBEX, counters[&i.outer]);
    }
    let runs = demo.runs_ok();
    demo.sim_mutate(|s| {
        for i in &host.ifaces {
            if let Some(port) = &i.port_id {
                s.update("ports", port, json!({"project_id": GLOBEX}))?;
            }
        }
        s.update("servers", "srv-a-batch", json!({"tenant_id": GLOBEX}))
            .map(drop)
    })?;
    demo.wait_metric("a reconcile pass after the change", |s| {
        runs_ok(s) >= runs + 2.0
    })?;
    demo.traffic.resume_host(BATCH);
    demo.say("  moved: a-batch now bills to globex");
    Ok(())
}

fn restart_agent(demo: &Demo) -> anyhow::Result<()> {
    demo.say(
        "» SIGKILL to the agent (no final drain, no flush): its programs stay attached and \
         keep counting into the pinned flows map while it is down",
    );
    if let Some(agent) = demo.agent().as_mut() {
        agent.kill();
    }
    std::thread::sleep(Duration::from_secs(3));
    demo.say("  starting it again: the state file and the pinned map carry every total on");
    demo.start_agent()?;
    demo.say("  back: every total went on from where it was");
    Ok(())
}

/// Successful reconcile passes in `s`.
#[must_use]
pub fn runs_ok(s: &crate::metrics::Snapshot) -> f64 {
    s.family("lachesis_reconcile_runs_total")
        .find(|x| crate::metrics::label(x, "result") == "ok")
        .map_or(0.0, |x| x.value)
}

fn humanize(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}
