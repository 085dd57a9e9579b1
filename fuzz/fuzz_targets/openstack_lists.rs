#![no_main]
// The body is lachesis_fuzzing's (crates/fuzzing), replayed on stable by make test.
libfuzzer_sys::fuzz_target!(|data: &[u8]| (lachesis_fuzzing::target("openstack_lists"))(data));
