//! Root: real brokers of `scripts/real-cloud` on their fixed loopback
//! ports, each test holding the machine-wide services lock while it runs.

mod kafka;
mod rabbitmq;
mod stream;
