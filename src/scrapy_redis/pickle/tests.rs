//! The reader against pickles written by Python itself
//! (`tests/fixtures/scrapy_redis/queue.json`, made by `gen_queue.py`):
//! plain values in every protocol read back equal, and everything else
//! refused; plus hand-made pickles that attack the bounds.

use super::*;
use serde_json::Value as Json;

pub(crate) fn fixture() -> Json {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/scrapy_redis/queue.json"
    );
    let text = std::fs::read_to_string(path).expect("the queue fixture");
    serde_json::from_str(&text).expect("the queue fixture is JSON")
}

pub(crate) fn b64(s: &Json) -> Vec<u8> {
    use base64_decode as d;
    d(s.as_str().expect("base64 text"))
}

/// A tiny base64 decoder for the fixture (standard alphabet, padded).
fn base64_decode(s: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let mut out = Vec::new();
    for chunk in s.as_bytes().chunks(4) {
        let digits: Vec<u8> = chunk.iter().copied().filter(|c| *c != b'=').collect();
        let n = digits.iter().fold(0u32, |n, c| (n << 6) | value(*c)) << (6 * (4 - digits.len()));
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..digits.len().saturating_sub(1)]);
    }
    out
}

/// The fixture's tagged JSON as the value it stands for.
fn tagged(v: &Json) -> Value {
    let (tag, inner) = v.as_object().and_then(|o| o.iter().next()).expect("a tag");
    let all = |a: &Json| a.as_array().unwrap().iter().map(tagged).collect();
    match tag.as_str() {
        "none" => Value::None,
        "bool" => Value::Bool(inner.as_bool().unwrap()),
        "int" => Value::Int(inner.as_i64().unwrap()),
        "float" => Value::Float(inner.as_f64().unwrap()),
        "bytes" => Value::Bytes(b64(inner)),
        "str" => Value::Str(inner.as_str().unwrap().to_string()),
        "list" => Value::List(all(inner)),
        "tuple" => Value::Tuple(all(inner)),
        "set" => Value::Set(all(inner)),
        "dict" => Value::Dict(
            inner
                .as_array()
                .unwrap()
                .iter()
                .map(|kv| (tagged(&kv[0]), tagged(&kv[1])))
                .collect(),
        ),
        other => panic!("unknown tag {other}"),
    }
}

#[test]
fn plain_values_python_pickled_read_back_equal_in_every_protocol() {
    let f = fixture();
    let mut read = 0;
    for case in f["plain"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let got = decode(&b64(&case["pickle"]), REQUEST_LIMITS);
        match case["refused"].as_str() {
            None => {
                assert_eq!(got, Ok(tagged(&case["value"])), "{name}");
                read += 1;
            }
            // Python 3 writes bytes and sets in protocols 0-2 as calls.
            Some(opcode) => match got {
                Err(Refused::NotData { opcode: o, .. }) => assert_eq!(o, opcode, "{name}"),
                other => panic!("{name}: {other:?}"),
            },
        }
    }
    assert!(read >= 30, "only {read} plain cases read");
}

#[test]
fn every_hostile_pickle_is_refused_with_its_reason() {
    let f = fixture();
    for case in f["hostile"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let got = decode(&b64(&case["pickle"]), REQUEST_LIMITS);
        match (case["refused"].as_str().unwrap(), got) {
            ("deep", Err(Refused::TooDeep { max: 64 })) => {}
            (want, Err(e @ Refused::NotData { opcode, .. })) => {
                assert_eq!(opcode, want, "{name}: {e}");
                if name.starts_with("os.system") {
                    let msg = e.to_string();
                    assert!(msg.contains("system"), "{name}: {msg}");
                }
            }
            (_, other) => panic!("{name}: {other:?}"),
        }
    }
}

/// What Python's `pickle.dumps(bytes(n), protocol=5)` writes for bytes
/// over a frame's size: PROTO 5, BINBYTES with a 4-byte length, MEMOIZE,
/// STOP.
pub(crate) fn big_bytes_pickle(n: usize) -> Vec<u8> {
    let mut p = vec![0x80, 5, b'B'];
    p.extend_from_slice(&(n as u32).to_le_bytes());
    p.resize(p.len() + n, 0);
    p.extend_from_slice(&[0x94, b'.']);
    p
}

#[test]
fn a_50_mb_bytes_object_is_refused_before_it_is_read() {
    let f = fixture();
    let big = big_bytes_pickle(50_000_000);
    let sha1 = hex::encode(<sha1::Sha1 as sha1::Digest>::digest(&big));
    assert_eq!(
        sha1,
        f["big_bytes"]["sha1"].as_str().unwrap(),
        "not Python's pickle"
    );
    assert_eq!(
        decode(&big, REQUEST_LIMITS),
        Err(Refused::TooLarge {
            bytes: 50_000_009,
            max: REQUEST_LIMITS.max_bytes
        })
    );
}

#[test]
fn a_length_the_input_does_not_hold_is_refused_without_allocating_it() {
    // BINBYTES8 claiming 2^60 bytes, with three there.
    let mut p = vec![0x80, 5, 0x8e];
    p.extend_from_slice(&(1u64 << 60).to_le_bytes());
    p.extend_from_slice(b"abc.");
    assert!(matches!(
        decode(&p, REQUEST_LIMITS),
        Err(Refused::Malformed { .. })
    ));
}

#[test]
fn a_memo_that_multiplies_a_value_is_refused() {
    // l0 = [0]; l(n+1) = [ln, ln] forty times: 2^40 values if copied.
    let mut p = vec![0x80, 5, b']', 0x94, b'K', 0, b'a'];
    for i in 0..40u8 {
        // EMPTY_LIST, BINGET i, APPEND, BINGET i, APPEND, MEMOIZE (as i + 1).
        p.extend_from_slice(&[b']', b'h', i, b'a', b'h', i, b'a', 0x94]);
    }
    p.push(b'.');
    let got = decode(&p, REQUEST_LIMITS);
    assert!(matches!(got, Err(Refused::TooMany { .. })), "{got:?}");
}

#[test]
fn a_list_that_contains_itself_is_refused() {
    // EMPTY_LIST MEMOIZE BINGET 0 APPEND STOP: l = []; l.append(l).
    let p = [0x80, 5, b']', 0x94, b'h', 0, b'a', b'.'];
    assert_eq!(
        decode(&p, REQUEST_LIMITS),
        Err(Refused::TooDeep { max: 64 })
    );
}

#[test]
fn deep_nesting_through_the_memo_is_refused_when_read() {
    // One MARK at a time, never more than two values on the stack:
    // x = []; then 100 times: put x, pop, y = [], y.append(get x), x = y.
    let mut p = vec![0x80, 5, b']'];
    for i in 0..100u8 {
        p.extend_from_slice(&[b'q', i, b'0', b']', b'h', i, b'a']);
    }
    p.push(b'.');
    assert_eq!(
        decode(&p, REQUEST_LIMITS),
        Err(Refused::TooDeep { max: 64 })
    );
}

#[test]
fn broken_pickles_are_malformed_not_panics() {
    for p in [
        &b""[..],
        b"\x80\x05",
        b"\x80\x05N",
        b"\x80\x05N.junk",
        b"\x80\x09N.",
        b"a.",
        b"\x80\x05h\x07.",
        b"\x80\x05\x8c\x05ab.",
        b"\x80\x05(N\x86.",
        b"\xff.",
        b"S'unquoted\n.",
        b"Vbad \\u12\n.",
        b"\x80\x05\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.",
    ] {
        let got = decode(p, REQUEST_LIMITS);
        assert!(
            matches!(got, Err(Refused::Malformed { .. })),
            "{p:?}: {got:?}"
        );
    }
}

#[test]
fn protocol_0_text_forms_read_as_python_reads_them() {
    // What Python 2 wrote for {'a': 'x\n\xe9', 'n': 5L, 'f': 1.5, 't': True}.
    let p = b"(dp0\nS'a'\np1\nS'x\\n\\xc3\\xa9'\np2\nsS'n'\np3\nL5L\nsS'f'\np4\nF1.5\nsS't'\np5\nI01\ns.";
    let got = decode(p, REQUEST_LIMITS).unwrap();
    assert_eq!(got.get("a"), Some(&Value::Str("x\né".into())));
    assert_eq!(got.get("n"), Some(&Value::Int(5)));
    assert_eq!(got.get("f"), Some(&Value::Float(1.5)));
    assert_eq!(got.get("t"), Some(&Value::Bool(true)));
}
