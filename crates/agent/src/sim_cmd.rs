//! `lachesis sim`: serve a simulated `OpenStack` API from a topology file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use lachesis_sim::notify::{KafkaTarget, RabbitTarget};
use lachesis_sim::{self as sim, SimOptions, Store, Topology};

/// Arguments of `lachesis sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Topology file (YAML; format in docs/openstack.md).
    #[arg(long)]
    topology: PathBuf,
    /// Address to listen on (loopback unless you mean otherwise).
    #[arg(long, default_value = "127.0.0.1:8780")]
    listen: SocketAddr,
    /// Base URL written into the catalog and links, when clients reach the
    /// listener under another name (e.g. it listens on 0.0.0.0).
    #[arg(long)]
    advertise: Option<String>,
    /// Override the topology's page size (0 = no limit).
    #[arg(long)]
    page_size: Option<usize>,
    /// Publish an oslo notification per control-API mutation to this
    /// `RabbitMQ` broker (`amqp://user:pass@host:5672/%2f`), on the services' exchanges.
    #[arg(long)]
    rabbitmq_url: Option<String>,
    /// Declare the exchanges durable (must match the deployment's setting).
    #[arg(long)]
    rabbitmq_durable: bool,
    /// Publish the same notifications to these Kafka brokers (`host:port`, repeatable).
    #[arg(long)]
    kafka_broker: Vec<String>,
    /// Kafka topic for notifications.
    #[arg(long, default_value = "notifications.info")]
    kafka_topic: String,
    /// Host part of the publisher ids (`network.<host>`, …).
    #[arg(long, default_value = "sim")]
    notify_host: String,
}

pub fn run(args: &SimArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.topology)
        .with_context(|| format!("reading topology {}", args.topology.display()))?;
    let mut topology = Topology::from_yaml(&text)
        .with_context(|| format!("topology {}", args.topology.display()))?;
    if let Some(ps) = args.page_size {
        topology.settings.page_size = (ps > 0).then_some(ps);
    }
    let store = Store::from_topology(&topology)
        .with_context(|| format!("topology {}", args.topology.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async {
        let opts = SimOptions {
            advertise: args.advertise.clone(),
            rabbitmq: args.rabbitmq_url.clone().map(|url| RabbitTarget {
                url,
                durable: args.rabbitmq_durable,
                host: args.notify_host.clone(),
            }),
            kafka: (!args.kafka_broker.is_empty()).then(|| KafkaTarget {
                brokers: args.kafka_broker.clone(),
                topic: args.kafka_topic.clone(),
                host: args.notify_host.clone(),
            }),
        };
        let handle = sim::start_with(store, args.listen, opts)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        println!(
            "lachesis sim: serving {} on {}",
            args.topology.display(),
            handle.base_url()
        );
        println!("  auth_url: {}", handle.auth_url());
        println!(
            "  control:  {}/sim/ (stats, topology, settings, faults, mutations)",
            handle.base_url()
        );
        tokio::signal::ctrl_c()
            .await
            .context("waiting for Ctrl-C")?;
        println!("lachesis sim: stopping");
        Ok(ExitCode::SUCCESS)
    })
}
