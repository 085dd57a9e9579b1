//! Userspace handle of the Lachesis classifier (DESIGN §4).
#![allow(clippy::all)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/lachesis.skel.rs"));
}
