//! Root: the brokers of `scripts/real-cloud` on their fixed loopback
//! ports, each test holding the machine-wide services lock while it runs.

mod sim_notify;
mod sim_notify_kafka;
