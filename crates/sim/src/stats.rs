//! What the simulator served, and to whom (`GET /sim/stats`): requests and
//! response-body bytes per endpoint and per client, so a test can hold a
//! client's (or a fleet's) load on `OpenStack` to a number.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event_faults::NotificationCounts;

/// The client a request is counted under when it names none the simulator
/// knows: no token, an unknown or expired one, a token request for an
/// unknown user or credential.
pub const ANONYMOUS: &str = "anonymous";

/// The client a password token is issued to.
#[must_use]
pub fn user(id: &str) -> String {
    format!("user/{id}")
}

/// The client an application-credential token is issued to.
#[must_use]
pub fn application_credential(id: &str) -> String {
    format!("application_credential/{id}")
}

/// Requests and response bytes by endpoint key: `auth` for token
/// requests, `<region>/<interface>/<endpoint>` for the rest (`endpoint` a
/// list's collection, or `<collection>/{id}` for a GET by id).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traffic {
    /// Requests received, counted on arrival (those a fault drops or a bad
    /// token fails too).
    pub requests: BTreeMap<String, u64>,
    /// Response-body bytes sent, exactly as on the wire (the simulator
    /// never compresses); a dropped connection sent none. Headers are not
    /// counted.
    pub response_bytes: BTreeMap<String, u64>,
}

/// Whether `key` (`auth` or `<region>/<interface>/<endpoint>`) is for
/// `endpoint` in any region and interface.
fn is_for(key: &str, endpoint: &str) -> bool {
    key == endpoint || key.splitn(3, '/').nth(2) == Some(endpoint)
}

fn sum_for(map: &BTreeMap<String, u64>, endpoint: &str) -> u64 {
    map.iter()
        .filter(|(k, _)| is_for(k, endpoint))
        .map(|(_, v)| v)
        .sum()
}

impl Traffic {
    /// Requests for `endpoint` (`ports`, `ports/{id}`, `auth`) over every
    /// region and interface.
    #[must_use]
    pub fn requests_for(&self, endpoint: &str) -> u64 {
        sum_for(&self.requests, endpoint)
    }

    /// Response bytes for `endpoint` over every region and interface.
    #[must_use]
    pub fn bytes_for(&self, endpoint: &str) -> u64 {
        sum_for(&self.response_bytes, endpoint)
    }

    fn count(&mut self, key: &str) {
        *self.requests.entry(key.to_owned()).or_default() += 1;
    }

    fn sent(&mut self, key: &str, bytes: u64) {
        *self.response_bytes.entry(key.to_owned()).or_default() += bytes;
    }
}

/// Counters since the start or the last reset (`DELETE /sim/stats`).
/// Every request to a served endpoint is counted; a path the simulator
/// does not serve, and the control API, are not. Each client's counts add
/// up to the totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Tokens issued (successful `POST /identity/v3/auth/tokens`).
    pub tokens_issued: u64,
    /// Every client's requests and bytes (`requests`, `response_bytes` at
    /// the top level of the JSON).
    #[serde(flatten)]
    pub all: Traffic,
    /// By client: `user/<id>` (a password token's user),
    /// `application_credential/<id>`, or [`ANONYMOUS`].
    pub clients: BTreeMap<String, Traffic>,
    /// What the notification faults did to the events sent.
    pub notifications: NotificationCounts,
}

impl Stats {
    /// Requests for `endpoint` over every region, interface and client.
    #[must_use]
    pub fn requests_for(&self, endpoint: &str) -> u64 {
        self.all.requests_for(endpoint)
    }

    /// Response bytes for `endpoint` over every region, interface and client.
    #[must_use]
    pub fn bytes_for(&self, endpoint: &str) -> u64 {
        self.all.bytes_for(endpoint)
    }

    /// One request for `key` arrived from `client`.
    pub(crate) fn count(&mut self, key: &str, client: &str) {
        self.all.count(key);
        self.clients
            .entry(client.to_owned())
            .or_default()
            .count(key);
    }

    /// `bytes` of response body went to `client` for `key`.
    pub(crate) fn sent(&mut self, key: &str, client: &str, bytes: u64) {
        self.all.sent(key, bytes);
        self.clients
            .entry(client.to_owned())
            .or_default()
            .sent(key, bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_sums_over_regions_and_interfaces_but_not_other_endpoints() {
        let mut s = Stats::default();
        s.count("RegionOne/internal/ports", "user/u");
        s.count("RegionTwo/public/ports", "anonymous");
        s.count("RegionOne/internal/ports/{id}", "user/u");
        s.count("auth", "user/u");
        s.sent("RegionOne/internal/ports", "user/u", 100);
        s.sent("RegionTwo/public/ports", "anonymous", 7);
        assert_eq!(
            (s.requests_for("ports"), s.requests_for("ports/{id}")),
            (2, 1)
        );
        assert_eq!((s.bytes_for("ports"), s.requests_for("auth")), (107, 1));
        assert_eq!(s.clients["user/u"].requests_for("ports"), 1);
        assert_eq!(s.clients["user/u"].bytes_for("ports"), 100);
    }
}
