//! `lachesis plan` (DESIGN §14): print the desired kernel state.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{ArgGroup, Args, ValueEnum};
use lachesis_openstack::config::Selection;
use lachesis_openstack::{load_bodies, save_bodies, ServiceStatus, SyncResult};
use lachesis_planner::{parse_snapshot, plan, ApiBodies, Plan, PlanOptions};

/// Arguments of `lachesis plan`. Exactly one snapshot source is required;
/// a new source (e.g. `--cloud NAME`) joins the `source` group and adds one
/// arm to [`Source`].
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("source").required(true)))]
pub struct PlanArgs {
    /// Folder of saved API response bodies: networks.json, subnets.json,
    /// ports.json, routers.json, floatingips.json, projects.json, and
    /// optionally servers.json, loadbalancers.json, amphorae.json (a missing
    /// one is a service not deployed; an empty or malformed one is an error).
    #[arg(long, value_name = "DIR", group = "source")]
    pub from_dir: Option<PathBuf>,
    /// Fetch the snapshot from a live cloud: an entry of clouds.yaml
    /// (./clouds.yaml, ~/.config/openstack/clouds.yaml,
    /// /etc/openstack/clouds.yaml; secure.yaml merged).
    #[arg(long, value_name = "NAME", group = "source")]
    pub cloud: Option<String>,
    /// Read this clouds.yaml instead of searching the usual places.
    #[arg(long, value_name = "FILE", requires = "cloud")]
    pub clouds_file: Option<PathBuf>,
    /// With --cloud: also save the raw response bodies here, in the
    /// --from-dir layout, so the plan can be reproduced offline.
    #[arg(long, value_name = "DIR", requires = "cloud")]
    pub save_dir: Option<PathBuf>,
    /// Output format: the documented JSON contract (docs/plan-schema.md) or
    /// a table for people.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// Router hops a static route may take before it falls back to external.
    #[arg(long, default_value_t = PlanOptions::default().hop_limit)]
    pub hop_limit: u32,
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
    Cloud(&'a str),
}

impl PlanArgs {
    fn source(&self) -> anyhow::Result<Source<'_>> {
        match (&self.from_dir, &self.cloud) {
            (Some(dir), _) => Ok(Source::Dir(dir)),
            (None, Some(cloud)) => Ok(Source::Cloud(cloud)),
            (None, None) => bail!("no snapshot source: pass --from-dir DIR or --cloud NAME"),
        }
    }
}

pub fn run(args: &PlanArgs) -> anyhow::Result<ExitCode> {
    let bodies = match args.source()? {
        Source::Dir(dir) => load_bodies(dir)?,
        Source::Cloud(cloud) => fetch_cloud(cloud, args)?,
    };
    let (snapshot, report) = parse_snapshot(&bodies)?;
    let mut err = std::io::stderr().lock();
    for skipped in &report.skipped {
        writeln!(err, "lachesis plan: {skipped}")?;
    }
    let planned = plan(
        &snapshot,
        &PlanOptions {
            hop_limit: args.hop_limit,
        },
    );
    let text = match args.format {
        Format::Json => planned.to_json(),
        Format::Table => table(&planned),
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// One sync against a live cloud (DESIGN §5): Neutron and Keystone
/// all-or-nothing, Nova and Octavia best-effort and reported when failed.
fn fetch_cloud(cloud: &str, args: &PlanArgs) -> anyhow::Result<ApiBodies> {
    let selection = Selection {
        cloud: Some(cloud.to_owned()),
        clouds_file: args.clouds_file.clone(),
    };
    let config = lachesis_openstack::config::resolve_for_process(&selection)
        .with_context(|| format!("cloud {cloud:?}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let SyncResult {
        bodies,
        nova,
        octavia,
    } = runtime
        .block_on(lachesis_openstack::fetch(&config))
        .with_context(|| format!("syncing cloud {cloud:?}"))?;
    let mut err = std::io::stderr().lock();
    for (service, status) in [("nova", &nova), ("octavia", &octavia)] {
        if let ServiceStatus::Failed { error } = status {
            writeln!(
                err,
                "lachesis plan: {service} failed ({error}); its lists are marked failed in the plan's sources"
            )?;
        }
    }
    if let Some(dir) = &args.save_dir {
        save_bodies(&bodies, dir)?;
        writeln!(
            err,
            "lachesis plan: response bodies saved to {}",
            dir.display()
        )?;
    }
    Ok(bodies)
}

fn table(p: &Plan) -> String {
    let mut out = String::new();
    section(
        &mut out,
        "trie rows",
        &["TENANT", "PREFIX", "ZONE"],
        p.trie.iter().map(|r| {
            vec![
                r.tenant.to_string(),
                r.prefix.to_string(),
                r.zone.to_string(),
            ]
        }),
    );
    let label = |l: &Option<String>| l.clone().unwrap_or_else(|| "none".to_owned());
    section(
        &mut out,
        "bindings",
        &[
            "MAC",
            "TENANT",
            "SERVER",
            "PORT",
            "EXTERNAL_NETWORK",
            "AMPHORA",
        ],
        p.bindings.iter().map(|b| {
            vec![
                b.mac.to_string(),
                b.tenant.clone(),
                b.server.clone(),
                b.port.clone(),
                label(&b.external_network),
                b.amphora.to_string(),
            ]
        }),
    );
    section(
        &mut out,
        "router MACs",
        &["MAC", "ROUTER", "EXTERNAL_NETWORK"],
        p.router_macs.iter().map(|r| {
            vec![
                r.mac.to_string(),
                r.router.clone(),
                label(&r.external_network),
            ]
        }),
    );
    section(
        &mut out,
        "amphora addresses",
        &["TENANT", "ADDRESS"],
        p.amphora_ips
            .iter()
            .map(|a| vec![a.tenant.clone(), a.address.to_string()]),
    );
    section(
        &mut out,
        "anomalies",
        &["CLASS", "DETAIL"],
        p.anomalies
            .iter()
            .map(|a| vec![a.class.to_string(), a.detail.clone()]),
    );
    section(
        &mut out,
        "route fallbacks",
        &["REASON", "COUNT"],
        p.route_fallbacks
            .iter()
            .map(|(r, n)| vec![r.label().to_owned(), n.to_string()]),
    );
    let s = &p.sources;
    section(
        &mut out,
        "sources",
        &["LIST", "STATUS"],
        [
            ("servers", s.servers),
            ("loadbalancers", s.loadbalancers),
            ("amphorae", s.amphorae),
        ]
        .into_iter()
        .map(|(list, status)| vec![list.to_owned(), status.label().to_owned()]),
    );
    out
}

fn section(
    out: &mut String,
    title: &str,
    header: &[&str],
    rows: impl Iterator<Item = Vec<String>>,
) {
    let rows: Vec<Vec<String>> = rows.collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let _ = writeln!(out, "{title} ({})", rows.len());
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ");
            }
        }
        let _ = writeln!(out, "  {}", line.trim_end());
    }
    out.push('\n');
}
