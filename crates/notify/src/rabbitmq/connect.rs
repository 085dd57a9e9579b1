//! Reaching one broker of a [`RabbitUrl`]: TLS from the CA file, the
//! connection, and a round over the URL's hosts with a timeout on each.
//! The notification consumer and the state stream both connect through
//! here, so a URL, a CA file and a failover behave the same for both.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use lapin::tcp::OwnedTLSConfig;
use lapin::{Connection, ConnectionProperties, DefaultConnectionBuilder};

use super::url::{BrokerHost, RabbitUrl};
use crate::tls::{ca_pem_text, SetupError};

/// How long one host has to accept the connection and what is done on it
/// (a subscription, a declaration). Without it a host that drops packets
/// would hold the failover for the kernel's TCP connect timeout (minutes):
/// lapin's own timeout applies only to its blocking connect.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// The TLS material lapin takes: the CA bundle's text, read and checked
/// once at start (`None`: the system roots). Used only for `amqps` hosts.
pub(crate) fn tls_config(ca_file: Option<&Path>) -> Result<OwnedTLSConfig, SetupError> {
    Ok(OwnedTLSConfig {
        identity: None,
        cert_chain: ca_file.map(ca_pem_text).transpose()?,
    })
}

/// Connects and logs in to `broker`, one of `url`'s hosts.
pub(crate) async fn connect(
    url: &RabbitUrl,
    broker: &BrokerHost,
    tls: &OwnedTLSConfig,
) -> Result<Connection, lapin::Error> {
    DefaultConnectionBuilder::new()?
        .with_uri(url.amqp_uri(broker))
        .with_properties(ConnectionProperties::default())
        .with_tls_config(tls.clone())
        .connect()
        .await
}

/// The first host of a round that succeeded: its index, what `attempt`
/// made there, and the hosts tried before it with their errors.
pub(crate) struct Won<T, E> {
    pub host: usize,
    pub made: T,
    pub skipped: Vec<(usize, E)>,
}

/// Runs `attempt` on each of `n` hosts once, from `first` (taken modulo
/// `n`), each within [`ATTEMPT_TIMEOUT`] (`timed_out` words the error of
/// one that did not finish), until one succeeds; `failed` sees each error
/// as it happens. `Err`: every host's error, in the order tried.
pub(crate) async fn each_host<T, E, F, Fut>(
    n: usize,
    first: usize,
    mut attempt: F,
    timed_out: impl Fn(usize) -> E,
    mut failed: impl FnMut(usize, &E),
) -> Result<Won<T, E>, Vec<(usize, E)>>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut skipped = Vec::new();
    for i in (0..n).map(|k| (first + k) % n) {
        let made = tokio::time::timeout(ATTEMPT_TIMEOUT, attempt(i))
            .await
            .unwrap_or_else(|_| Err(timed_out(i)));
        match made {
            Ok(made) => {
                return Ok(Won {
                    host: i,
                    made,
                    skipped,
                })
            }
            Err(e) => {
                failed(i, &e);
                skipped.push((i, e));
            }
        }
    }
    Err(skipped)
}
