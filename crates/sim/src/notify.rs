//! Oslo notifications for simulator mutations (DESIGN §8), published to
//! `RabbitMQ` the way the real services do: a `topic` exchange per service
//! (`neutron`, `keystone`, `nova`, `octavia`), routing key
//! `notifications.info`, the oslo.messaging 2.0 envelope; and/or the same
//! envelopes to a Kafka topic.

use lachesis_planner::Resource;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::store::SharePolicy;

/// One notification, before it is wrapped in the envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Exchange (`neutron`, `keystone`, `nova`, `octavia`).
    pub exchange: &'static str,
    /// What happened, as the service names it: `port.create.end`,
    /// `identity.project.deleted`, `compute.instance.update.end`, or
    /// `router.interface.create` (which Neutron sends with no `.end`).
    pub event_type: String,
    /// `None` for Octavia, which really sends a null publisher.
    pub publisher_id: Option<String>,
    /// The service's payload: for Neutron `{"<resource>": <as listed>}`,
    /// plus `"<resource>_id"` on a delete.
    pub payload: Value,
    /// The owner, sent as `_context_project_id` and `_context_tenant_id`;
    /// `None` leaves both out (Keystone's project events).
    pub project_id: Option<String>,
}

/// A `RabbitMQ` broker to publish to, on the services' own exchanges.
#[derive(Debug, Clone)]
pub struct RabbitTarget {
    /// `amqp://user:pass@host:port/vhost`.
    pub url: String,
    /// Must match how the deployment declares its exchanges (a mismatch makes
    /// the broker refuse the declaration): the default of `OpenStack` deployments is non-durable.
    pub durable: bool,
    /// Host part of `publisher_id` (`network.<host>`, …).
    pub host: String,
}

/// The `{"oslo.version", "oslo.message"}` envelope; `seq` makes ids unique.
#[must_use]
pub fn envelope(e: &Event, seq: u64) -> Value {
    let now = std::time::SystemTime::now();
    // oslo writes "YYYY-MM-DD HH:MM:SS.ffffff" with no time zone.
    let stamp = humantime::format_rfc3339_micros(now)
        .to_string()
        .replace('T', " ")
        .trim_end_matches('Z')
        .to_owned();
    let mut inner = json!({
        "message_id": format!("5e1f0000-0000-4000-8000-{seq:012x}"),
        "publisher_id": e.publisher_id,
        "event_type": e.event_type,
        "priority": "INFO",
        "payload": e.payload,
        "timestamp": stamp,
        "_unique_id": format!("{seq:032x}"),
        "_context_request_id": format!("req-sim-{seq}"),
        "_context_is_admin": true,
    });
    if let Some(p) = &e.project_id {
        inner["_context_project_id"] = json!(p);
        inner["_context_tenant_id"] = json!(p);
    }
    json!({"oslo.version": "2.0", "oslo.message": inner.to_string()})
}

fn neutron(host: &str, event_type: String, payload: Value, project: Option<String>) -> Event {
    Event {
        exchange: "neutron",
        event_type,
        publisher_id: Some(format!("network.{host}")),
        payload,
        project_id: project,
    }
}

fn owner(v: &Value) -> Option<String> {
    ["project_id", "tenant_id"]
        .iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str))
        .map(str::to_owned)
}

/// The notification a real cloud emits for a control-API mutation.
/// `kind` is the list, `action` one of create/update/delete, `wire` the
/// resource as the API lists it (before deletion for deletes).
#[must_use]
pub fn for_mutation(
    host: &str,
    kind: Resource,
    action: &str,
    id: &str,
    wire: &Value,
) -> Option<Event> {
    let singular = match kind {
        Resource::Networks => "network",
        Resource::Subnets => "subnet",
        Resource::Ports => "port",
        Resource::Routers => "router",
        Resource::FloatingIps => "floatingip",
        Resource::Projects => return Some(keystone_project(host, action, id)),
        Resource::Servers => {
            let tenant = wire.get("tenant_id").cloned().unwrap_or(Value::Null);
            return Some(Event {
                exchange: "nova",
                event_type: format!("compute.instance.{action}.end"),
                publisher_id: Some(format!("compute.{host}")),
                payload: json!({"instance_id": id, "tenant_id": tenant,
                    "display_name": wire.get("name").cloned().unwrap_or(Value::Null),
                    "state": if action == "delete" { "deleted" } else { "active" }}),
                project_id: tenant.as_str().map(str::to_owned),
            });
        }
        Resource::LoadBalancers => {
            return Some(Event {
                exchange: "octavia",
                event_type: format!("octavia.loadbalancer.{action}.end"),
                publisher_id: None,
                payload: wire.clone(),
                project_id: owner(wire),
            })
        }
        // Octavia announces load balancers, not their amphorae.
        Resource::Amphorae => return None,
    };
    let payload = if action == "delete" {
        json!({format!("{singular}_id"): id, singular: wire})
    } else {
        json!({singular: wire})
    };
    Some(neutron(
        host,
        format!("{singular}.{action}.end"),
        payload,
        owner(wire),
    ))
}

/// Keystone's project event in its default (CADF) format: the project's id
/// as the target and `resource_info`, nothing else about it (the shape
/// Keystone 22 sends, checked on the real-cloud tier). The initiator is
/// the simulator's operator.
fn keystone_project(host: &str, action: &str, id: &str) -> Event {
    let done = match action {
        "create" => "created",
        "update" => "updated",
        _ => "deleted",
    };
    // Keystone writes microseconds and a numeric zone.
    let time = humantime::format_rfc3339_micros(std::time::SystemTime::now())
        .to_string()
        .replace('Z', "+0000");
    Event {
        exchange: "keystone",
        event_type: format!("identity.project.{done}"),
        publisher_id: Some(format!("identity.{host}")),
        payload: json!({
            "typeURI": "http://schemas.dmtf.org/cloud/audit/1.0/event",
            "eventType": "activity",
            "id": format!("cadf-{done}-{id}"),
            "eventTime": time,
            "action": format!("{done}.project"),
            "outcome": "success",
            "observer": {"id": "sim-keystone", "typeURI": "service/security"},
            "initiator": {"id": "sim-operator", "typeURI": "service/security/account/user",
                "host": {"address": "127.0.0.1", "agent": "lachesis-sim"},
                "user_id": "sim-operator", "project_id": "sim-operator", "request_id": "req-sim",
                "username": "sim-operator"},
            "target": {"id": id, "typeURI": "data/security/project"},
            "resource_info": id,
        }),
        project_id: None,
    }
}

/// Whether a port is one Neutron makes and changes itself — DHCP, router
/// interfaces and gateways, floating-IP ports: `device_owner` `network:…`.
/// Neutron sends no `port.*` event for those (their changes arrive as
/// `router.interface.*` / `floatingip.*`, DESIGN §8), so neither does the
/// simulator.
#[must_use]
pub fn neutron_owned(port: &Value) -> bool {
    port["device_owner"]
        .as_str()
        .is_some_and(|o| o.starts_with("network:"))
}

/// `rbac_policy.create.end` / `.delete.end` for a network shared with
/// every project: ids only (and the delete's `rbac_policy_id`), as Neutron
/// 21 sends them.
#[must_use]
pub fn rbac_policy(host: &str, action: &str, policy: &SharePolicy) -> Event {
    let p = json!({"id": policy.id, "project_id": policy.project_id, "tenant_id": policy.project_id,
        "action": "access_as_shared", "object_type": "network", "object_id": policy.network_id,
        "target_tenant": "*"});
    let payload = if action == "delete" {
        json!({"rbac_policy_id": policy.id, "rbac_policy": p})
    } else {
        json!({"rbac_policy": p})
    };
    neutron(
        host,
        format!("rbac_policy.{action}.end"),
        payload,
        Some(policy.project_id.clone()),
    )
}

/// `router.interface.create` / `.delete`: Neutron sends these with no
/// `.start`/`.end` suffix, and ids only (no `project_id` beside
/// `tenant_id`, checked on Neutron 21).
#[must_use]
pub fn router_interface(host: &str, created: bool, router: &str, port: &Value) -> Event {
    let subnet = port["fixed_ips"][0]["subnet_id"].clone();
    let info = json!({"id": router, "tenant_id": owner(port),
        "port_id": port["id"], "network_id": port["network_id"],
        "subnet_id": subnet, "subnet_ids": [subnet]});
    let kind = if created { "create" } else { "delete" };
    neutron(
        host,
        format!("router.interface.{kind}"),
        json!({"router_interface": info}),
        owner(port),
    )
}

/// A Kafka topic to publish the same envelopes to.
#[derive(Debug, Clone)]
pub struct KafkaTarget {
    /// Bootstrap brokers (`host:port`).
    pub brokers: Vec<String>,
    /// The default notification topic of `OpenStack` is `notifications.info`.
    pub topic: String,
    /// Host part of `publisher_id`.
    pub host: String,
}

/// A handle the server uses to queue events; each publisher task owns its
/// broker connection so a slow broker never blocks an API answer.
#[derive(Debug, Clone)]
pub struct Notifier {
    txs: Vec<mpsc::UnboundedSender<Event>>,
    /// Host part of the publisher ids, shared by every transport.
    pub host: String,
}

impl Notifier {
    /// Combines publishers (`RabbitMQ` and Kafka may both be configured).
    #[must_use]
    pub fn join(mut self, other: Notifier) -> Notifier {
        self.txs.extend(other.txs);
        self
    }

    /// Queues `e` for every publisher without waiting; each publishes in
    /// the order queued.
    pub fn send(&self, e: &Event) {
        for tx in &self.txs {
            let _ = tx.send(e.clone());
        }
    }

    /// Queues `e` after `delay` (at once when zero) without waiting; events
    /// queued meanwhile go ahead of it.
    pub fn send_after(&self, e: Event, delay: std::time::Duration) {
        if delay.is_zero() {
            self.send(&e);
            return;
        }
        let later = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            later.send(&e);
        });
    }
}

/// An in-process consumer (a test, the demo): each envelope, as a broker
/// would carry it, on a channel.
#[derive(Debug, Clone)]
pub struct ChannelTarget {
    /// Receives `{"oslo.version": "2.0", "oslo.message": "…"}` per event.
    pub tx: mpsc::UnboundedSender<Value>,
    /// Host part of `publisher_id`.
    pub host: String,
}

/// Starts the channel publisher: envelopes in order, numbered like the
/// brokers' (a closed receiver drops them).
#[must_use]
pub fn spawn_channel(target: ChannelTarget) -> Notifier {
    let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
    let host = target.host.clone();
    tokio::spawn(async move {
        let mut seq = 0u64;
        while let Some(event) = rx.recv().await {
            seq += 1;
            let _ = target.tx.send(envelope(&event, seq));
        }
    });
    Notifier {
        txs: vec![tx],
        host,
    }
}

/// Starts a Kafka publisher: every event goes to partition 0 of the topic,
/// in order (consumers read every partition, so one is enough here).
#[must_use]
pub fn spawn_kafka(target: KafkaTarget) -> Notifier {
    let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
    let host = target.host.clone();
    tokio::spawn(async move {
        let mut seq = 0u64;
        let mut client: Option<rskafka::client::partition::PartitionClient> = None;
        while let Some(event) = rx.recv().await {
            seq += 1;
            let body = envelope(&event, seq).to_string();
            for attempt in 0..2 {
                if client.is_none() {
                    match kafka_connect(&target).await {
                        Ok(c) => client = Some(c),
                        Err(e) => {
                            tracing::warn!(error = %e, attempt, "sim: Kafka connect failed");
                            continue;
                        }
                    }
                }
                let Some(c) = client.as_ref() else {
                    continue;
                };
                let record = rskafka::record::Record {
                    key: None,
                    value: Some(body.clone().into_bytes()),
                    headers: std::collections::BTreeMap::new(),
                    timestamp: kafka_now(),
                };
                match c
                    .produce(
                        vec![record],
                        rskafka::client::partition::Compression::NoCompression,
                    )
                    .await
                {
                    Ok(_) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, attempt, "sim: Kafka produce failed");
                        client = None;
                    }
                }
            }
        }
    });
    Notifier {
        txs: vec![tx],
        host,
    }
}

/// Now, for the record timestamp (chrono's clock feature is not built).
fn kafka_now() -> rskafka::chrono::DateTime<rskafka::chrono::Utc> {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    rskafka::chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

async fn kafka_connect(
    target: &KafkaTarget,
) -> Result<rskafka::client::partition::PartitionClient, rskafka::client::error::Error> {
    let client = rskafka::client::ClientBuilder::new(target.brokers.clone())
        .build()
        .await?;
    client
        .partition_client(
            target.topic.clone(),
            0,
            rskafka::client::partition::UnknownTopicHandling::Retry,
        )
        .await
}

/// Starts the `RabbitMQ` publisher; events are published in order, reconnecting on
/// failure (an event that cannot be published after a reconnect is logged
/// and dropped: notifications are hints, the reconcile heals losses).
#[must_use]
pub fn spawn_rabbit(target: RabbitTarget) -> Notifier {
    let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
    let host = target.host.clone();
    tokio::spawn(async move {
        let mut seq = 0u64;
        // The connection is kept beside its channel: dropping it closes both.
        let mut chan: Option<(lapin::Connection, lapin::Channel)> = None;
        while let Some(event) = rx.recv().await {
            seq += 1;
            let body = envelope(&event, seq).to_string();
            for attempt in 0..2 {
                if chan.is_none() {
                    match connect(&target).await {
                        Ok(c) => chan = Some(c),
                        Err(e) => {
                            tracing::warn!(error = %e, attempt, "sim: RabbitMQ connect failed");
                            continue;
                        }
                    }
                }
                let Some((_, c)) = chan.as_ref() else {
                    continue;
                };
                match publish(c, &target, event.exchange, &body).await {
                    Ok(()) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, attempt, "sim: RabbitMQ publish failed");
                        chan = None;
                    }
                }
            }
        }
    });
    Notifier {
        txs: vec![tx],
        host,
    }
}

async fn connect(
    target: &RabbitTarget,
) -> Result<(lapin::Connection, lapin::Channel), lapin::Error> {
    let conn =
        lapin::Connection::connect(&target.url, lapin::ConnectionProperties::default()).await?;
    let chan = conn.create_channel().await?;
    Ok((conn, chan))
}

async fn publish(
    chan: &lapin::Channel,
    target: &RabbitTarget,
    exchange: &str,
    body: &str,
) -> Result<(), lapin::Error> {
    chan.exchange_declare(
        exchange.into(),
        lapin::ExchangeKind::Topic,
        lapin::options::ExchangeDeclareOptions {
            durable: target.durable,
            ..Default::default()
        },
        lapin::types::FieldTable::default(),
    )
    .await?;
    chan.basic_publish(
        exchange.into(),
        "notifications.info".into(),
        lapin::options::BasicPublishOptions::default(),
        body.as_bytes(),
        lapin::BasicProperties::default().with_content_type("application/json".into()),
    )
    .await?
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_is_oslo_2_with_a_json_string_inside() {
        let e = for_mutation(
            "h1",
            Resource::Ports,
            "create",
            "p1",
            &json!({"id": "p1", "project_id": "t1"}),
        )
        .unwrap();
        let env = envelope(&e, 7);
        assert_eq!(env["oslo.version"], "2.0");
        let inner: Value = serde_json::from_str(env["oslo.message"].as_str().unwrap()).unwrap();
        assert_eq!(inner["event_type"], "port.create.end");
        assert_eq!(inner["publisher_id"], "network.h1");
        assert_eq!(inner["priority"], "INFO");
        assert_eq!(inner["payload"]["port"]["id"], "p1");
        assert_eq!(inner["_context_project_id"], "t1");
        let ts = inner["timestamp"].as_str().unwrap();
        assert!(!ts.contains('T') && !ts.ends_with('Z'), "{ts}");
    }

    #[test]
    fn service_specific_shapes() {
        let lb = for_mutation(
            "h",
            Resource::LoadBalancers,
            "delete",
            "lb1",
            &json!({"id": "lb1", "project_id": "t"}),
        )
        .unwrap();
        assert_eq!(
            (lb.exchange, lb.publisher_id.clone(), lb.event_type.as_str()),
            ("octavia", None, "octavia.loadbalancer.delete.end")
        );
        let p = for_mutation("h", Resource::Projects, "delete", "t9", &Value::Null).unwrap();
        assert_eq!(
            (
                p.exchange,
                p.event_type.as_str(),
                &p.payload["resource_info"]
            ),
            ("keystone", "identity.project.deleted", &json!("t9"))
        );
        assert_eq!(p.payload["target"]["id"], "t9");
        let s = for_mutation(
            "h",
            Resource::Servers,
            "delete",
            "vm",
            &json!({"tenant_id": "t"}),
        )
        .unwrap();
        assert_eq!(
            (s.event_type.as_str(), s.publisher_id.as_deref()),
            ("compute.instance.delete.end", Some("compute.h"))
        );
        let d = for_mutation("h", Resource::Ports, "delete", "p1", &json!({"id": "p1"})).unwrap();
        assert_eq!(d.payload["port_id"], "p1");
        let ri = router_interface(
            "h",
            true,
            "r1",
            &json!({"id": "p", "network_id": "n", "project_id": "t", "fixed_ips": [{"subnet_id": "s"}]}),
        );
        assert_eq!(ri.event_type, "router.interface.create");
        assert_eq!(ri.payload["router_interface"]["subnet_id"], "s");
        assert!(for_mutation("h", Resource::Amphorae, "create", "a", &Value::Null).is_none());
    }
}
