//! No root, no services.

mod diff;
mod external;
mod fixture;
mod live;
mod octavia;
mod parse;
mod properties;
mod route_meet;
mod trie_rows;
