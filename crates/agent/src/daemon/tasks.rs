//! Every long-running task of the daemon, in one table (DESIGN §12 step 5).
//!
//! [`Task`] names each task and the boot phase it starts at; with when it
//! runs, what it writes and what a stop does to it, it is the table
//! docs/architecture.md shows ("The daemon's tasks", held by a test).
//! [`TaskSet`] is the one place a task is spawned: it refuses a task whose
//! phase boot has not reached ([`StartedEarly`], which fails boot), hands
//! every task the supervisor's one cancellation token, and at a stop
//! cancels it and awaits every task — before the final drain and flush.

use std::future::Future;
use std::sync::Arc;

use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::boot::{BootFailed, BootGate, BootState, Phase};

/// Every task of the daemon, in the order boot starts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Task {
    /// `/metrics`, `/healthz`, `/readyz`.
    MetricsListener,
    /// Relay mode: the state stream, assembled for the reconciler's source.
    StateStream,
    /// The `/debug/*` pages.
    DebugListener,
    /// Reconcile passes on ticks and kicks.
    Reconciler,
    /// Kicks the reconciler until a degraded boot's first sync commits.
    DegradedWatch,
    /// Notifications from RabbitMQ, as kicks.
    RabbitMqConsumer,
    /// Notifications from Kafka, as kicks.
    KafkaConsumer,
    /// Drains `flows` into the ledger, with pressure relief.
    Scraper,
    /// Flushes the state file.
    Flusher,
    /// Evicts ghosts past their grace; ends retained port series.
    Sweeper,
    /// Attaches to matching taps as they come, re-checks presence.
    LinkWatcher,
    /// Feeds the link watcher each committed plan's taps and ports.
    TapPorts,
    /// Counts the metadata maps' entries.
    MapFill,
}

impl Task {
    /// Every task, in the order boot starts them (checked in debug builds).
    pub(super) const ALL: [Task; 13] = [
        Task::MetricsListener,
        Task::StateStream,
        Task::DebugListener,
        Task::Reconciler,
        Task::DegradedWatch,
        Task::RabbitMqConsumer,
        Task::KafkaConsumer,
        Task::Scraper,
        Task::Flusher,
        Task::Sweeper,
        Task::LinkWatcher,
        Task::TapPorts,
        Task::MapFill,
    ];

    /// The task's name in log lines (`task scraper ended`).
    pub(super) fn name(self) -> &'static str {
        match self {
            Task::MetricsListener => "metrics listener",
            Task::StateStream => "state stream",
            Task::DebugListener => "debug listener",
            Task::Reconciler => "reconciler",
            Task::DegradedWatch => "degraded watch",
            Task::RabbitMqConsumer => "rabbitmq consumer",
            Task::KafkaConsumer => "kafka consumer",
            Task::Scraper => "scraper",
            Task::Flusher => "flusher",
            Task::Sweeper => "sweeper",
            Task::LinkWatcher => "link watcher",
            Task::TapPorts => "tap ports",
            Task::MapFill => "map fill",
        }
    }

    /// The boot phase it is started at, and not before ([`TaskSet::start`]
    /// refuses it earlier). Every task that writes kernel or ledger state
    /// waits for `state_restored` (DESIGN §12 step 5); the metrics listener
    /// answers from `bpf_loaded` on, so boot can be watched, and the state
    /// stream reads from then on, so cold start can plan from it (it
    /// writes nothing; its kicks wait for the reconciler's phase).
    pub(super) fn starts_at(self) -> Phase {
        match self {
            Task::MetricsListener | Task::StateStream => Phase::BpfLoaded,
            _ => Phase::StateRestored,
        }
    }
}

/// The table's other columns, for docs/architecture.md ("The daemon's
/// tasks", held to [`Task::markdown`] by a test below).
#[cfg(test)]
impl Task {
    /// When it runs at all.
    fn runs(self) -> &'static str {
        match self {
            Task::DegradedWatch => "booted degraded",
            Task::StateStream => "`metadata.source: relay`",
            Task::RabbitMqConsumer => "`notifications.rabbitmq` set",
            Task::KafkaConsumer => "`notifications.kafka` set",
            _ => "always",
        }
    }

    /// What it changes of the kernel's and the ledger's state.
    fn writes(self) -> &'static str {
        match self {
            Task::Reconciler | Task::Scraper | Task::Flusher | Task::Sweeper => "kernel, ledger",
            Task::LinkWatcher => "kernel",
            Task::MetricsListener
            | Task::StateStream
            | Task::DebugListener
            | Task::DegradedWatch
            | Task::RabbitMqConsumer
            | Task::KafkaConsumer
            | Task::TapPorts
            | Task::MapFill => "nothing",
        }
    }

    /// What the supervisor's token does to it: every task is cancelled at
    /// step 1 of a stop and awaited before the final drain (step 2) and
    /// the final flush (step 3).
    fn at_stop(self) -> &'static str {
        match self {
            Task::MetricsListener | Task::DebugListener => {
                "stops accepting; requests in flight finish (bounded grace)"
            }
            Task::Reconciler => "a sync in flight is dropped; an apply in flight completes",
            Task::Scraper | Task::Flusher | Task::Sweeper => {
                "a step in flight completes; the next wait ends"
            }
            Task::RabbitMqConsumer | Task::KafkaConsumer => "stops consuming at once",
            Task::StateStream => "stops reading at once; the assembled state is dropped",
            Task::LinkWatcher => "stops watching; programs stay attached",
            Task::DegradedWatch | Task::TapPorts | Task::MapFill => "ends at once",
        }
    }

    /// The table as docs/architecture.md shows it.
    fn markdown() -> String {
        use std::fmt::Write as _;
        let mut out = String::from(
            "| task | runs | starts at | writes | stopped at step 1 of a stop |\n|---|---|---|---|---|\n",
        );
        for t in Task::ALL {
            let (name, runs, phase) = (t.name(), t.runs(), t.starts_at().label());
            let (writes, stop) = (t.writes(), t.at_stop());
            writeln!(out, "| {name} | {runs} | `{phase}` | {writes} | {stop} |")
                .expect("writing to a String cannot fail");
        }
        out
    }
}

/// A task started before the boot phase the table gives it: a write
/// before `state_restored` would diff against baselines not yet restored,
/// or apply a delta to a plan cold start has not committed.
#[derive(Debug, thiserror::Error)]
#[error("task {} started with boot at {at:?}, before {}", .task.name(), .task.starts_at())]
pub(super) struct StartedEarly {
    task: Task,
    at: BootState,
}

/// How a task ended, as the supervisor reads it.
pub(super) type Ended = Result<(Task, Result<(), String>), JoinError>;

/// The running tasks, their one cancellation token and the gate they are
/// started against.
pub(super) struct TaskSet {
    set: JoinSet<(Task, Result<(), String>)>,
    cancel: CancellationToken,
    gate: Arc<BootGate>,
    /// The last task started, by its place in [`Task::ALL`].
    last: Option<usize>,
}

impl TaskSet {
    pub(super) fn new(gate: Arc<BootGate>) -> Self {
        TaskSet {
            set: JoinSet::new(),
            cancel: CancellationToken::new(),
            gate,
            last: None,
        }
    }

    /// Spawns `task`, built by `body` from the supervisor's token.
    ///
    /// # Errors
    /// Boot has not reached the phase the task starts at.
    pub(super) fn start<F>(
        &mut self,
        task: Task,
        body: impl FnOnce(CancellationToken) -> F,
    ) -> Result<(), StartedEarly>
    where
        F: Future + Send + 'static,
        F::Output: IntoTaskResult,
    {
        let at = self.gate.state();
        if !matches!(at, BootState::At(p) if p >= task.starts_at()) {
            return Err(StartedEarly { task, at });
        }
        // The table's order is the order boot starts them in.
        let place = Task::ALL.iter().position(|t| *t == task);
        debug_assert!(
            self.last < place,
            "{} started out of the table's order",
            task.name()
        );
        self.last = place;
        let run = body(self.cancel.clone());
        self.set
            .spawn(async move { (task, run.await.into_task_result()) });
        Ok(())
    }

    /// The next task to end on its own (the running loop stops the daemon
    /// then); pending forever when none runs.
    pub(super) async fn ended(&mut self) -> Option<Ended> {
        self.set.join_next().await
    }

    /// Step 1 of a stop: the token cancelled, every task awaited, so no
    /// task writes while the final drain and flush run.
    pub(super) async fn stop(&mut self) {
        self.cancel.cancel();
        while self.set.join_next().await.is_some() {}
    }
}

/// Why a task ended, as one line.
pub(super) fn describe(ended: Ended) -> String {
    match ended {
        Ok((task, Ok(()))) => format!("task {} ended", task.name()),
        Ok((task, Err(e))) => format!("task {} failed: {e}", task.name()),
        Err(e) => format!("a task panicked: {e}"),
    }
}

/// A task's ending as the supervisor reads it.
pub(super) trait IntoTaskResult {
    fn into_task_result(self) -> Result<(), String>;
}

impl IntoTaskResult for () {
    fn into_task_result(self) -> Result<(), String> {
        Ok(())
    }
}

impl IntoTaskResult for Result<(), String> {
    fn into_task_result(self) -> Result<(), String> {
        self
    }
}

impl IntoTaskResult for Result<(), BootFailed> {
    fn into_task_result(self) -> Result<(), String> {
        self.map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DESIGN §12 step 5: every task that writes kernel or ledger state
    /// starts at `state_restored`, and names are unique (the log says which
    /// task ended).
    #[test]
    fn writers_start_at_state_restored_and_names_are_unique() {
        for t in Task::ALL {
            if t.writes() != "nothing" {
                assert_eq!(t.starts_at(), Phase::StateRestored, "{}", t.name());
            }
        }
        let names: std::collections::BTreeSet<_> = Task::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(names.len(), Task::ALL.len());
    }

    #[test]
    fn architecture_md_shows_the_task_table() {
        let doc = include_str!("../../../../docs/architecture.md");
        let table = Task::markdown();
        assert!(
            doc.contains(&table),
            "docs/architecture.md lacks the task table as the code has it:\n{table}"
        );
    }

    #[tokio::test]
    async fn a_task_is_refused_before_its_phase_and_stopped_by_the_token() {
        let gate = Arc::new(BootGate::new());
        let mut tasks = TaskSet::new(gate.clone());
        let early = tasks.start(
            Task::MetricsListener,
            |c| async move { c.cancelled().await },
        );
        assert!(matches!(
            early,
            Err(StartedEarly {
                task: Task::MetricsListener,
                at: BootState::Starting
            })
        ));
        gate.advance(Phase::BpfLoaded).unwrap();
        tasks
            .start(
                Task::MetricsListener,
                |c| async move { c.cancelled().await },
            )
            .unwrap();
        let e = tasks
            .start(Task::Scraper, |c| async move { c.cancelled().await })
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "task scraper started with boot at At(BpfLoaded), before state_restored"
        );
        tasks.stop().await;
        assert!(tasks.ended().await.is_none(), "every task was awaited");
    }
}
