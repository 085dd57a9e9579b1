//! Targets for what arrives over the network: an oslo notification as
//! either consumer hands it to the decoder (the `RabbitMQ` delivery's body,
//! the Kafka record's value: neither frames nor unwraps anything first), a
//! state-stream record as an agent reads it, and the exporter toolkit's
//! web-configuration file (an operator's file, re-read on SIGHUP).

use std::fmt::Debug;

use lachesis_fleet::Record;
use lachesis_notify::{classify, decide, decode_with_payload, DecodeError};

/// An oslo notification, both shapes (the oslo 2.0 envelope and the bare
/// object), through [`lachesis_notify::decode::decode`], [`decide`],
/// [`decode_with_payload`] and [`classify`].
///
/// Asserts: each is deterministic; `decide` is `decode` then `classify`;
/// the relay's reading (`decode_with_payload`) accepts nothing the agent's
/// refuses and reads the same notification; an error says something; and
/// the same bytes sent inside an oslo 2.0 envelope read as the same
/// notification — or as a refused envelope when they are one already.
pub fn notification(data: &[u8]) {
    let read = lachesis_notify::decode::decode(data);
    same(&read, &lachesis_notify::decode::decode(data));
    let decision = decide(data);
    same(&decision, &decide(data));
    let relayed = decode_with_payload(data);
    same(&relayed, &decode_with_payload(data));

    match (&read, &decision) {
        (Ok(n), Ok(d)) => {
            assert_eq!(&classify(n), d, "decide is decode then classify");
            assert_eq!(d.event_type(), n.event_type);
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        _ => panic!("decode {read:?} but decide {decision:?}"),
    }
    match (&read, &relayed) {
        (Ok(n), Ok((m, _))) => assert_eq!(n, m, "the relay reads another notification"),
        (Err(_), Ok(_)) => panic!("the relay reads what the agent refuses: {read:?}"),
        // A payload the agent skips unread may not parse as a `Value`
        // (nested deeper than serde_json's limit, a number out of range).
        (_, Err(e)) => said(e),
    }
    if let Err(e) = &read {
        said(e);
    }

    // The envelope around these bytes, as oslo.messaging's AMQP drivers
    // send it.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let envelope = serde_json::json!({"oslo.version": "2.0", "oslo.message": text}).to_string();
    let enveloped = lachesis_notify::decode::decode(envelope.as_bytes());
    match (&read, &enveloped) {
        (Ok(bare), Ok(inner)) => assert_eq!(bare, inner, "the envelope changes the reading"),
        // Refused both ways; or bytes that are an envelope already (no
        // envelope in an envelope); or refused bare for an oslo.version
        // alone (an envelope without its message), which inside an
        // envelope is not read: the outer version is.
        (Err(_), Err(_))
        | (Ok(_), Err(DecodeError::Envelope(_)))
        | (Err(DecodeError::Envelope(_)), Ok(_)) => {}
        (Ok(_), Err(e)) => panic!("read bare, refused in an envelope: {e}"),
        (Err(e), Ok(n)) => panic!("refused bare ({e}), read in an envelope: {n:?}"),
    }
}

/// A state-stream record as an agent reads a delivery's body
/// ([`lachesis_fleet::decode`]).
///
/// Asserts: decoding is deterministic; a decoded record encodes
/// ([`lachesis_fleet::encode`]) under the key format v1 gives it, and
/// decodes back to an equal record whose encoding is the same bytes; an
/// error says something.
pub fn state_stream(data: &[u8]) {
    let decoded = lachesis_fleet::decode(data);
    same(&decoded, &lachesis_fleet::decode(data));
    let record = match decoded {
        Ok(record) => record,
        Err(e) => return said(&e),
    };
    let (key, bytes) = lachesis_fleet::encode(&record);
    let want_key = match &record {
        Record::Entry(e) => format!("{}/{}", e.key.kind.collection(), e.key.id),
        Record::Marker(m) => format!("snapshot/{}", m.relay),
        Record::Heartbeat(h) => format!("heartbeat/{}", h.relay),
    };
    assert_eq!(key, want_key);
    let back = lachesis_fleet::decode(&bytes).unwrap_or_else(|e| {
        panic!(
            "{record:?} encodes to {} which does not decode: {e}",
            String::from_utf8_lossy(&bytes)
        )
    });
    assert_eq!(back, record, "the round trip changes the record");
    assert_eq!(
        lachesis_fleet::encode(&back),
        (key, bytes),
        "the encoding is not stable"
    );
}

/// The exporter toolkit's web-configuration file, through what a listener
/// does with it short of reading the files it names
/// ([`lachesis_listen::web::fuzz_parse`]).
///
/// Asserts: the result is deterministic and a refusal says why. Bytes that
/// are not UTF-8 are no file's text (the loader refuses them reading).
pub fn web_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let first = lachesis_listen::web::fuzz_parse(text);
    assert_eq!(first, lachesis_listen::web::fuzz_parse(text));
    if let Err(e) = first {
        assert!(!e.trim().is_empty(), "an empty refusal");
    }
}

/// Two readings of the same bytes agree (`Debug` of each: the error types
/// have no `PartialEq`).
fn same<T: Debug, E: Debug>(a: &Result<T, E>, b: &Result<T, E>) {
    assert_eq!(format!("{a:?}"), format!("{b:?}"), "not deterministic");
}

/// An error's message says something.
fn said(e: &impl std::fmt::Display) {
    let message = e.to_string();
    assert!(!message.trim().is_empty(), "an empty error message");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written seeds (`seed-*`) of `fuzz/corpus/<name>/`, whose
    /// names say what they are; what `make fuzz` merged beside them is
    /// replayed by `tests/unit/replay.rs`.
    fn corpus(name: &str) -> Vec<(String, Vec<u8>)> {
        let dir = format!("{}/../../fuzz/corpus/{name}", env!("CARGO_MANIFEST_DIR"));
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|f| f.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
            })
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{dir}: no seeds");
        files
            .into_iter()
            .map(|f| (f.display().to_string(), std::fs::read(&f).unwrap()))
            .collect()
    }

    /// Inputs meant to break a parser: empty, not UTF-8, nested deep.
    fn hostile() -> Vec<Vec<u8>> {
        let deep = |open: &str, close: &str, n: usize| {
            let mut s = open.repeat(n);
            s.push_str(&close.repeat(n));
            s.into_bytes()
        };
        let mut inputs = vec![
            Vec::new(),
            b"\xff\xfe\x00garbage".to_vec(),
            b"{\"event_type\": \"port.create.end\", \"publisher_id\": \"network.c\xff\"}".to_vec(),
            "[".repeat(10_000).into_bytes(),
            "{\"a\":".repeat(10_000).into_bytes(),
            deep("[", "]", 10_000),
            deep("{\"a\":", "}", 10_000),
            deep("- ", "", 10_000),
            deep("a:\n", "", 10_000),
            // A payload deeper than serde_json's limit.
            format!(
                "{{\"event_type\":\"port.create.end\",\"publisher_id\":\"network.c\",\"payload\":{}}}",
                String::from_utf8(deep("[", "]", 10_000)).unwrap()
            )
            .into_bytes(),
            // The same in an envelope, and a resource body.
            format!(
                "{{\"oslo.version\":\"2.0\",\"oslo.message\":{}}}",
                serde_json::Value::String(format!(
                    "{{\"event_type\":\"x\",\"payload\":{}}}",
                    "[".repeat(10_000)
                ))
            )
            .into_bytes(),
            format!(
                "{{\"v\":1,\"kind\":\"ports\",\"id\":\"p\",\"rev\":1,\"resource\":{}}}",
                "[".repeat(10_000)
            )
            .into_bytes(),
            // YAML flow collections, anchors and aliases.
            deep("rate_limit: ", "", 1).into_iter().chain(deep("[", "]", 10_000)).collect(),
            format!("rate_limit:\n  interval: {}", "[".repeat(10_000)).into_bytes(),
            b"a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n".to_vec(),
            b"basic_auth_users:\n  alice: $2y$10$\n".to_vec(),
            b"basic_auth_users:\n  \"a:b\": x\n".to_vec(),
            b"http_server_config:\n  headers:\n    X-Frame-Options: \"deny\\u0000\"\n".to_vec(),
            b"rate_limit:\n  interval: 99999999999999999999999h\n  burst: 1\n".to_vec(),
            b"tls_server_config:\n  cert: \"-----BEGIN CERTIFICATE-----\\nAAAA\\n-----END CERTIFICATE-----\\n\"\n  key: \"x\"\n".to_vec(),
        ];
        // Every hostile input also as a notification's event type.
        let more: Vec<Vec<u8>> = inputs
            .iter()
            .map(|i| {
                serde_json::json!({"event_type": String::from_utf8_lossy(i)})
                    .to_string()
                    .into_bytes()
            })
            .collect();
        inputs.extend(more);
        inputs
    }

    fn run(name: &str, target: fn(&[u8])) {
        for (file, bytes) in corpus(name) {
            eprintln!("{name}: {file}");
            target(&bytes);
        }
        for bytes in hostile() {
            let start = std::time::Instant::now();
            target(&bytes);
            eprintln!(
                "{name}: hostile input of {} bytes in {:?}",
                bytes.len(),
                start.elapsed()
            );
        }
    }

    #[test]
    fn notification_seeds_and_hostile_inputs() {
        run("notification", notification);
    }

    #[test]
    fn state_stream_seeds_and_hostile_inputs() {
        run("state_stream", state_stream);
    }

    #[test]
    fn web_config_seeds_and_hostile_inputs() {
        run("web_config", web_config);
    }

    /// The seeds read as the cases they stand for.
    #[test]
    fn seeds_are_what_their_names_say() {
        for (file, bytes) in corpus("notification") {
            let decision = decide(&bytes);
            if file.contains("truncated") {
                assert!(decision.is_err(), "{file}");
            } else {
                assert!(decision.unwrap().is_kick(), "{file}");
            }
        }
        for (file, bytes) in corpus("state_stream") {
            lachesis_fleet::decode(&bytes).unwrap_or_else(|e| panic!("{file}: {e}"));
        }
        for (file, bytes) in corpus("web_config") {
            let text = String::from_utf8(bytes).unwrap();
            lachesis_listen::web::fuzz_parse(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        }
    }
}
