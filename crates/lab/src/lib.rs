//! Network-namespace lab for integration tests and the demo.
