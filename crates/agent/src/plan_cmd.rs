//! `lachesis plan` (DESIGN §14): print the desired kernel state.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use lachesis_openstack::config::Selection;
use lachesis_openstack::{load_bodies, save_bodies, SyncResult};
use lachesis_planner::{
    parse_snapshot, plan, ApiBodies, ParseReport, Plan, PlanOptions, SourceStatus, Sources,
};
use serde::Serialize;

use crate::{usage_error, EXIT_PARTIAL};

/// Arguments of `lachesis plan`. Exactly one snapshot source: `--from-dir`,
/// or a cloud (`--cloud`, else the agent configuration's `openstack.cloud`
/// with `--config`, else the environment: `OS_CLOUD` or an openrc's
/// `OS_AUTH_URL`); `--from-dir` wins over a cloud merely configured or set
/// in the environment.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The agent's configuration file (with its `LACHESIS_*` environment,
    /// as `lachesis agent --config FILE` reads it): its `openstack.cloud`,
    /// `openstack.clouds_file` and `tunables.route_hop_limit` are used
    /// unless `--cloud`, `--clouds-file` or `--hop-limit` is given, so the
    /// plan is the one that agent would program.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Folder of saved API response bodies: networks.json, subnets.json,
    /// ports.json, routers.json, floatingips.json, projects.json, and
    /// optionally servers.json, loadbalancers.json, amphorae.json and
    /// sources.json (docs/openstack.md, "Saved bodies").
    #[arg(long, value_name = "DIR", conflicts_with = "cloud")]
    pub from_dir: Option<PathBuf>,
    /// Fetch the snapshot from a live cloud: an entry of clouds.yaml
    /// (./clouds.yaml, ~/.config/openstack/clouds.yaml,
    /// /etc/openstack/clouds.yaml; secure.yaml merged). Without --cloud and
    /// --from-dir, the cloud named by `OS_CLOUD` is used (or, without it,
    /// the `OS_AUTH_URL`, `OS_USERNAME`, … variables of an openrc).
    #[arg(long, value_name = "NAME")]
    pub cloud: Option<String>,
    /// Read this clouds.yaml instead of searching the usual places.
    #[arg(long, value_name = "FILE", conflicts_with = "from_dir")]
    pub clouds_file: Option<PathBuf>,
    /// With a cloud: also save the raw response bodies here, in the
    /// --from-dir layout, so the plan can be reproduced offline.
    #[arg(long, value_name = "DIR", conflicts_with = "from_dir")]
    pub save_dir: Option<PathBuf>,
    /// Output format: the documented JSON contract (docs/plan-schema.md) or
    /// a table for people.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// Router hops a static route may take before it falls back to external
    /// [default: the configuration's `tunables.route_hop_limit` with
    /// `--config`, else 16]; 1 to 255, as the configuration key.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=HOP_LIMIT_MAX))]
    pub hop_limit: Option<u32>,
}

/// `--hop-limit`'s ceiling: the configuration key's, so a plan checked
/// here is one the agent would accept.
const HOP_LIMIT_MAX: i64 = 255;
const _: () = assert!(HOP_LIMIT_MAX.unsigned_abs() == lachesis_agent::config::ROUTE_HOP_LIMIT_MAX);

/// What `--config` contributes: the agent's cloud and hop limit.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct FromConfig {
    cloud: Option<String>,
    clouds_file: Option<PathBuf>,
    hop_limit: Option<u32>,
}

impl FromConfig {
    /// Reads `file` as the agent would (its `LACHESIS_*` environment
    /// included; no `--set`).
    fn load(file: &Path) -> anyhow::Result<FromConfig> {
        let args = lachesis_agent::config::AgentArgs {
            config: Some(file.to_owned()),
            check_config: false,
            check_openstack: false,
            log_level: None,
            set: Vec::new(),
        };
        let loaded = args
            .load()
            .with_context(|| format!("reading the agent configuration {}", file.display()))?;
        let c = loaded.config;
        Ok(FromConfig {
            cloud: c.openstack.cloud,
            clouds_file: c.openstack.clouds_file,
            hop_limit: Some(c.tunables.route_hop_limit),
        })
    }
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Stable JSON (docs/plan-schema.md).
    Json,
    /// Aligned text tables.
    Table,
}

/// Where the snapshot comes from.
enum Source<'a> {
    Dir(&'a Path),
    /// `--cloud NAME`, or `None`: the environment (`OS_CLOUD`, else `OS_*`).
    Cloud(Option<&'a str>),
}

impl PlanArgs {
    fn source<'a>(
        &'a self,
        configured: &'a FromConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Source<'a>> {
        let set = |k: &str| env(k).is_some_and(|v| !v.is_empty());
        let cloud = self.cloud.as_deref().or(configured.cloud.as_deref());
        match (&self.from_dir, cloud) {
            (Some(dir), _) => Ok(Source::Dir(dir)),
            (None, Some(cloud)) => Ok(Source::Cloud(Some(cloud))),
            (None, None) if set("OS_CLOUD") || set("OS_AUTH_URL") => Ok(Source::Cloud(None)),
            (None, None) if self.config.is_some() => Err(usage_error(
                "plan",
                "no snapshot source: the configuration sets no openstack.cloud; pass \
                 --from-dir DIR or --cloud NAME, or set OS_CLOUD",
            )),
            (None, None) => Err(usage_error(
                "plan",
                "no snapshot source: pass --from-dir DIR, --cloud NAME or --config FILE, \
                 or set OS_CLOUD",
            )),
        }
    }

    /// `--clouds-file`, else the configuration's `openstack.clouds_file`.
    fn clouds_file(&self, configured: &FromConfig) -> Option<PathBuf> {
        self.clouds_file
            .clone()
            .or_else(|| configured.clouds_file.clone())
    }

    /// `--hop-limit`, else the configuration's, else the planner's default.
    fn hop_limit(&self, configured: &FromConfig) -> u32 {
        self.hop_limit
            .or(configured.hop_limit)
            .unwrap_or(PlanOptions::default().hop_limit)
    }
}

/// The printed JSON: the plan (docs/plan-schema.md) and what of the input
/// was skipped, as the last key.
#[derive(Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    plan: &'a Plan,
    report: &'a ParseReport,
}

/// The best-effort lists that failed, in the JSON's key order.
fn failed_lists(s: Sources) -> Vec<&'static str> {
    s.by_list()
        .into_iter()
        .filter(|(_, status)| *status == SourceStatus::Failed)
        .map(|(list, _)| list)
        .collect()
}

pub fn run(args: &PlanArgs) -> anyhow::Result<ExitCode> {
    let configured = match &args.config {
        Some(file) => FromConfig::load(file)?,
        None => FromConfig::default(),
    };
    let bodies = match args.source(&configured, &|k| std::env::var(k).ok())? {
        Source::Dir(dir) => load_bodies(dir)?,
        Source::Cloud(cloud) => fetch_cloud(cloud, args.clouds_file(&configured), args)?,
    };
    let (snapshot, report) = parse_snapshot(&bodies)?;
    for skipped in &report.skipped {
        tracing::warn!("{skipped}");
    }
    let planned = plan(
        &snapshot,
        &PlanOptions {
            hop_limit: args.hop_limit(&configured),
        },
    );
    let text = match args.format {
        Format::Json => {
            let output = Output {
                plan: &planned,
                report: &report,
            };
            let mut text = serde_json::to_string_pretty(&output).context("rendering the plan")?;
            text.push('\n');
            text
        }
        Format::Table => crate::plan_table::render(&planned, &snapshot, &report),
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    let failed = failed_lists(planned.sources);
    if failed.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    tracing::warn!(
        "partial plan: could not fetch {}; marked failed in the plan's sources \
         (unknown, not empty); exit status {EXIT_PARTIAL}",
        failed.join(", ")
    );
    Ok(ExitCode::from(EXIT_PARTIAL))
}

/// One sync against a live cloud (DESIGN §5): Neutron and Keystone
/// all-or-nothing, Nova and Octavia best-effort and reported when failed.
fn fetch_cloud(
    cloud: Option<&str>,
    clouds_file: Option<PathBuf>,
    args: &PlanArgs,
) -> anyhow::Result<ApiBodies> {
    let selection = Selection {
        cloud: cloud.map(str::to_owned),
        clouds_file,
    };
    // Which cloud, for error messages.
    let label = match (cloud, std::env::var("OS_CLOUD")) {
        (Some(name), _) => format!("cloud {name:?}"),
        (None, Ok(name)) if !name.is_empty() => format!("cloud {name:?} (OS_CLOUD)"),
        (None, _) => "the cloud of the OS_* variables".to_owned(),
    };
    let config = lachesis_openstack::config::resolve_for_process(&selection)
        .with_context(|| label.clone())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    // A failed Nova/Octavia is logged by the client (with its error) and
    // marked failed in the bodies; `run` reports the partial plan.
    let SyncResult { bodies, .. } = runtime
        .block_on(lachesis_openstack::fetch(&config))
        .with_context(|| format!("syncing {label}"))?;
    if let Some(dir) = &args.save_dir {
        save_bodies(&bodies, dir)?;
        tracing::info!("response bodies saved to {}", dir.display());
    }
    Ok(bodies)
}
