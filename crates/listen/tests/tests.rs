//! Integration tests of the accept loop, in the unit tier (loopback
//! sockets, no privilege).

mod unit;
