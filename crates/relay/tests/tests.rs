//! The relay's integration tests: one binary, its tests grouped by tier
//! (the first module of a test's path). All `unit`: the simulator serves
//! on loopback, in-process, and the stream is in memory.

mod unit;
