//! `lachesis sim`: serve a simulated `OpenStack` API from a topology file.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use lachesis_sim::notify::{KafkaTarget, RabbitTarget};
use lachesis_sim::{self as sim, SimOptions, Store, Topology};
use tokio::signal::unix::{signal, SignalKind};

/// Arguments of `lachesis sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Topology file (YAML; format in docs/openstack.md).
    #[arg(long)]
    topology: PathBuf,
    /// Address to listen on, `HOST:PORT`: an IP address (`127.0.0.1:8780`,
    /// `[::1]:8780`) or a name (`localhost:8780`), whose addresses are tried
    /// in turn until one binds. Port 0 lets the system pick. Loopback unless
    /// you mean otherwise: the control API has no authentication.
    #[arg(long, default_value = "127.0.0.1:8780", value_name = "HOST:PORT", value_parser = parse_listen)]
    listen: Listen,
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

/// `--listen` as given and the addresses it stands for, resolved once
/// while the flags are parsed so a bad name is a usage error (exit 2).
#[derive(Debug, Clone)]
struct Listen {
    text: String,
    addrs: Vec<SocketAddr>,
}

const LISTEN_FORM: &str = "expected HOST:PORT, e.g. 127.0.0.1:8780, [::1]:8780 or localhost:8780";

/// Splits `HOST:PORT` (the port after the last colon; an IPv6 host in
/// brackets) and checks both parts are there.
fn split_host_port(text: &str) -> Result<(&str, u16), String> {
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(format!("no port in {text:?}: {LISTEN_FORM}"));
    };
    if host.is_empty() || host == "[]" {
        return Err(format!("no host in {text:?}: {LISTEN_FORM}"));
    }
    let port = port
        .parse::<u16>()
        .map_err(|_| format!("port {port:?} is not a number from 0 to 65535: {LISTEN_FORM}"))?;
    Ok((host, port))
}

fn parse_listen(text: &str) -> Result<Listen, String> {
    let (host, _) = split_host_port(text)?;
    let addrs: Vec<SocketAddr> = text
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve host {host:?} ({e}): {LISTEN_FORM}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!(
            "host {host:?} resolves to no address: {LISTEN_FORM}"
        ));
    }
    Ok(Listen {
        text: text.to_owned(),
        addrs,
    })
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
            channel: None,
        };
        let listening = || {
            let tried: Vec<String> = args.listen.addrs.iter().map(ToString::to_string).collect();
            format!("listening on {} ({})", args.listen.text, tried.join(", "))
        };
        // Tokio tries each address in turn and keeps the first that binds.
        let listener = tokio::net::TcpListener::bind(args.listen.addrs.as_slice())
            .await
            .with_context(listening)?;
        let handle = sim::start_on(store, listener, opts).with_context(listening)?;
        // Listen for Ctrl-C before saying we are up, so a SIGINT sent right
        // after the first line stops us cleanly instead of killing us.
        let mut interrupt = signal(SignalKind::interrupt()).context("listening for Ctrl-C")?;
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
        interrupt.recv().await;
        println!("lachesis sim: stopping");
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_name_resolves_to_its_addresses_with_the_port() {
        let l = parse_listen("localhost:8780").unwrap();
        assert!(!l.addrs.is_empty());
        assert!(
            l.addrs
                .iter()
                .all(|a| a.ip().is_loopback() && a.port() == 8780),
            "{:?}",
            l.addrs
        );
        let l = parse_listen("[::1]:0").unwrap();
        assert_eq!(l.addrs, ["[::1]:0".parse::<SocketAddr>().unwrap()]);
    }

    #[test]
    fn a_missing_or_bad_part_names_the_expected_form() {
        for (text, says) in [
            ("localhost", "no port"),
            (":8780", "no host"),
            ("localhost:http", "port \"http\""),
            ("localhost:65536", "port \"65536\""),
        ] {
            let e = split_host_port(text).unwrap_err();
            assert!(e.contains(says) && e.contains("HOST:PORT"), "{text}: {e}");
        }
    }
}
