//! Root: real brokers and Debian's Keystone + Neutron of
//! `scripts/real-cloud` on their fixed loopback ports, each test holding
//! the machine-wide services lock while they run.

mod fleet;
mod notify_e2e;
mod operator_kit;
mod real_cloud;
mod relay;
mod relay_e2e;
