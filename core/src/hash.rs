//! Content-addressed ConfigMap names, computed exactly as `kubectl --append-hash` does.
//!
//! `kubectl create configmap NAME --from-file=kubelet=FILE --append-hash` names the
//! ConfigMap `NAME-<suffix>`, where the suffix is derived from the ConfigMap's name, kind
//! and contents (kubectl `pkg/util/hash/hash.go`, `ConfigMapHash`):
//!
//! 1. A map `{"binaryData"?, "data", "kind": "ConfigMap", "name"}` is encoded by Go's
//!    `encoding/json` (`json.Marshal`): object keys sorted bytewise, no whitespace,
//!    strings escaped the Go way (HTML-safe: `<`, `>`, `&` become `\u003c`, `\u003e`,
//!    `\u0026`; U+2028 and U+2029 become `\u2028`, `\u2029`), and `[]byte` values as
//!    padded standard base64. `binaryData` appears only when it is non-empty; `data`
//!    always appears (`kubectl create configmap` starts from an empty, non-nil map, so an
//!    empty `data` encodes as `{}`, never `null`). `immutable` is not set by
//!    `kubectl create configmap`, so it is never part of the hashed map here.
//! 2. The encoding is hashed with SHA-256 and the first 10 lowercase hex digits are
//!    kept.
//! 3. To avoid forming words, `0`, `1`, `3`, `a` and `e` become `g`, `h`, `k`, `m` and
//!    `t`.
//!
//! A file whose bytes are valid UTF-8 goes to `data`, any other file to `binaryData`
//! (kubectl `create_configmap.go`, `addKeyFromFileToConfigMap`, `utf8.Valid`; Rust's
//! [`std::str::from_utf8`] accepts exactly the same byte strings).
//!
//! The escaping matches Go 1.22 and later (kubectl 1.32 is built with Go 1.23), which
//! writes backspace and form feed as `\b` and `\f`; older Go wrote `\u0008` and `\u000c`.
//! Go replaces invalid UTF-8 in strings with `\ufffd`; every string here is a Rust
//! `&str`, valid UTF-8 by construction, so that case cannot arise.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// The ConfigMap key under which the rendered kubelet configuration is stored.
pub const CONFIGMAP_KEY: &str = "kubelet";

/// Length of the suffix that `kubectl --append-hash` appends (after a `-`).
pub const SUFFIX_LEN: usize = 10;

/// The 10-character suffix that `kubectl create configmap NAME --append-hash` appends to
/// `NAME` for a ConfigMap holding `data` and `binary_data`.
///
/// `data` is always part of the hashed encoding (as `{}` when empty), matching what
/// `kubectl create configmap` builds; `binary_data` is included only when non-empty.
pub fn configmap_hash_suffix(
    name: &str,
    data: &BTreeMap<String, String>,
    binary_data: &BTreeMap<String, Vec<u8>>,
) -> String {
    let encoded = encode_configmap(name, data, binary_data);
    let digest = Sha256::digest(encoded.as_bytes());
    suffix_from_digest(digest.as_slice())
}

/// The full name `kubectl create configmap {basename} --from-file=kubelet=FILE
/// --append-hash` gives a ConfigMap whose file `FILE` holds `file_bytes`:
/// `"{basename}-{suffix}"`.
///
/// Valid UTF-8 content is stored under `data.kubelet`, anything else under
/// `binaryData.kubelet`, as kubectl decides.
pub fn kubelet_configmap_name(basename: &str, file_bytes: &[u8]) -> String {
    let mut data = BTreeMap::new();
    let mut binary_data = BTreeMap::new();
    match std::str::from_utf8(file_bytes) {
        Ok(text) => {
            data.insert(CONFIGMAP_KEY.to_owned(), text.to_owned());
        }
        Err(_) => {
            binary_data.insert(CONFIGMAP_KEY.to_owned(), file_bytes.to_vec());
        }
    }
    let suffix = configmap_hash_suffix(basename, &data, &binary_data);
    format!("{basename}-{suffix}")
}

/// A ConfigMap whose content is not the content its name was derived from: the
/// suffix after the name's last `-` is not [`configmap_hash_suffix`] of the base name
/// and the ConfigMap's `data` and `binaryData`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "ConfigMap {name} does not hold the content its name was derived from (that content \
     would be named {expected}): it was changed or replaced after it was published"
)]
pub struct ContentNameMismatch {
    /// The ConfigMap's name.
    pub name: String,
    /// The name its content would have: the base name and the content's suffix.
    pub expected: String,
}

/// Checks that a ConfigMap named `name` holds what its name says: `name` must be
/// `<base>-<suffix>` with `<suffix>` = [`configmap_hash_suffix`] of `<base>`, `data` and
/// `binary_data` (every key, not only the kubelet's: anything added changes the hash).
/// A name without a `-` cannot carry a suffix and never matches.
pub fn check_content_name(
    name: &str,
    data: &BTreeMap<String, String>,
    binary_data: &BTreeMap<String, Vec<u8>>,
) -> Result<(), ContentNameMismatch> {
    let base = name.rsplit_once('-').map_or(name, |(base, _)| base);
    let expected = format!("{base}-{}", configmap_hash_suffix(base, data, binary_data));
    if expected == name {
        Ok(())
    } else {
        Err(ContentNameMismatch {
            name: name.to_string(),
            expected,
        })
    }
}

/// The exact bytes kubectl hashes: Go's `json.Marshal` of
/// `{"binaryData"?: ..., "data": ..., "kind": "ConfigMap", "name": ...}`.
fn encode_configmap(
    name: &str,
    data: &BTreeMap<String, String>,
    binary_data: &BTreeMap<String, Vec<u8>>,
) -> String {
    let payload: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
        + binary_data
            .iter()
            .map(|(k, v)| k.len() + v.len().div_ceil(3) * 4)
            .sum::<usize>();
    let mut out = String::with_capacity(payload + name.len() + 64);
    // Top-level keys in Go's (bytewise) order: binaryData < data < kind < name.
    out.push('{');
    if !binary_data.is_empty() {
        out.push_str("\"binaryData\":{");
        for (i, (key, value)) in binary_data.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_go_json_string(&mut out, key);
            out.push_str(":\"");
            push_base64_std(&mut out, value);
            out.push('"');
        }
        out.push_str("},");
    }
    out.push_str("\"data\":{");
    for (i, (key, value)) in data.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_go_json_string(&mut out, key);
        out.push(':');
        push_go_json_string(&mut out, value);
    }
    out.push_str("},\"kind\":\"ConfigMap\",\"name\":");
    push_go_json_string(&mut out, name);
    out.push('}');
    out
}

/// kubectl's `encodeHash`: the first 10 hex digits of the digest, with `0 1 3 a e`
/// mapped to `g h k m t`.
fn suffix_from_digest(digest: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    digest
        .iter()
        .flat_map(|byte| [HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0x0f)]])
        .take(SUFFIX_LEN)
        .map(|digit| match digit {
            b'0' => 'g',
            b'1' => 'h',
            b'3' => 'k',
            b'a' => 'm',
            b'e' => 't',
            other => char::from(other),
        })
        .collect()
}

/// Appends `s` as a JSON string literal, escaped exactly as Go's `encoding/json` does
/// with HTML escaping on (the `json.Marshal` default).
fn push_go_json_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // Other C0 controls and the HTML-sensitive characters: \u00XX, lowercase hex.
            '\u{0}'..='\u{1f}' | '<' | '>' | '&' => {
                let b = u32::from(c);
                out.push_str("\\u00");
                out.push(char::from(HEX[(b >> 4) as usize & 0x0f]));
                out.push(char::from(HEX[b as usize & 0x0f]));
            }
            // JavaScript line terminators, escaped so the JSON is valid JavaScript.
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            other => out.push(other),
        }
    }
    out.push('"');
}

/// Appends the standard, padded base64 encoding of `bytes` (Go's
/// `base64.StdEncoding`, which `encoding/json` uses for `[]byte`).
fn push_base64_std(out: &mut String, bytes: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let sextet = |v: u32, shift: u32| char::from(ALPHABET[((v >> shift) & 0x3f) as usize]);
    let mut chunks = bytes.chunks_exact(3);
    for chunk in &mut chunks {
        let v = u32::from(chunk[0]) << 16 | u32::from(chunk[1]) << 8 | u32::from(chunk[2]);
        out.extend([sextet(v, 18), sextet(v, 12), sextet(v, 6), sextet(v, 0)]);
    }
    match *chunks.remainder() {
        [a] => {
            let v = u32::from(a) << 16;
            out.extend([sextet(v, 18), sextet(v, 12), '=', '=']);
        }
        [a, b] => {
            let v = u32::from(a) << 16 | u32::from(b) << 8;
            out.extend([sextet(v, 18), sextet(v, 12), sextet(v, 6), '=']);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn binary(pairs: &[(&str, &[u8])]) -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.to_vec()))
            .collect()
    }

    fn json(s: &str) -> String {
        let mut out = String::new();
        push_go_json_string(&mut out, s);
        out
    }

    fn b64(bytes: &[u8]) -> String {
        let mut out = String::new();
        push_base64_std(&mut out, bytes);
        out
    }

    // Vectors from kubectl's own pkg/util/hash/hash_test.go (the cases whose Data is a
    // non-nil map, which is what `kubectl create configmap` always builds).
    #[test]
    fn a_configmap_holds_what_its_name_says_or_is_refused() {
        let yaml =
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 64\n";
        let name = kubelet_configmap_name("kubelet-gpu", yaml.as_bytes());
        let good = data(&[(CONFIGMAP_KEY, yaml)]);
        let none = BTreeMap::new();
        assert_eq!(check_content_name(&name, &good, &none), Ok(()));

        // The content changed under the name (one byte), or a key was added.
        let changed = data(&[(CONFIGMAP_KEY, &yaml.replace("64", "65"))]);
        let err = check_content_name(&name, &changed, &none).expect_err("changed");
        assert_eq!(err.name, name);
        assert_eq!(
            err.expected,
            kubelet_configmap_name("kubelet-gpu", yaml.replace("64", "65").as_bytes())
        );
        assert_ne!(err.expected, name);
        assert!(err.to_string().contains(&err.expected), "{err}");
        let added = data(&[(CONFIGMAP_KEY, yaml), ("extra", "x")]);
        assert!(check_content_name(&name, &added, &none).is_err());
        // The same bytes under binaryData are other content.
        let binary = BTreeMap::from([(CONFIGMAP_KEY.to_string(), yaml.as_bytes().to_vec())]);
        assert!(check_content_name(&name, &BTreeMap::new(), &binary).is_err());

        // Another pool's name for the same content, a hand-made name, no suffix at all.
        let other = kubelet_configmap_name("kubelet-cpu", yaml.as_bytes());
        assert_ne!(other, name);
        assert!(check_content_name(&other, &good, &none).is_ok());
        assert!(check_content_name("kubelet-gpu-abcdefghij", &good, &none).is_err());
        let err = check_content_name("kubelet", &good, &none).expect_err("no suffix");
        assert!(err.expected.starts_with("kubelet-"), "{err}");
    }

    #[test]
    fn upstream_hash_vectors() {
        let none = BTreeMap::new();
        assert_eq!(configmap_hash_suffix("", &data(&[]), &none), "42745tchd9");
        assert_eq!(
            configmap_hash_suffix("", &data(&[("one", "")]), &none),
            "9g67k2htb6"
        );
        assert_eq!(
            configmap_hash_suffix(
                "",
                &data(&[("two", "2"), ("one", ""), ("three", "3")]),
                &none
            ),
            "f5h7t85m9b"
        );
        assert_eq!(
            configmap_hash_suffix("", &data(&[("one", "")]), &binary(&[("two", b"")])),
            "698h7c7t9m"
        );
    }

    #[test]
    fn upstream_encoding_vectors() {
        let none = BTreeMap::new();
        assert_eq!(
            encode_configmap("", &data(&[]), &none),
            r#"{"data":{},"kind":"ConfigMap","name":""}"#
        );
        assert_eq!(
            encode_configmap(
                "",
                &data(&[("two", "2"), ("one", ""), ("three", "3")]),
                &none
            ),
            r#"{"data":{"one":"","three":"3","two":"2"},"kind":"ConfigMap","name":""}"#
        );
        assert_eq!(
            encode_configmap(
                "",
                &data(&[]),
                &binary(&[("two", b"2"), ("one", b""), ("three", b"3")])
            ),
            r#"{"binaryData":{"one":"","three":"Mw==","two":"Mg=="},"data":{},"kind":"ConfigMap","name":""}"#
        );
    }

    #[test]
    fn sha256_of_empty_string_is_the_known_digest() {
        // kubectl's TestHash: e3b0c442 98fc1c14 ... -> first ten digits "e3b0c44298".
        let digest = Sha256::digest(b"");
        assert_eq!(suffix_from_digest(digest.as_slice()), "tkbgc44298");
    }

    #[test]
    fn suffix_substitutes_vowel_like_digits_only() {
        let digest = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];
        assert_eq!(suffix_from_digest(&digest), "gh2k456789");
        let digest = [0xab, 0xcd, 0xef, 0xfe, 0xa0, 0x00];
        assert_eq!(suffix_from_digest(&digest), "mbcdtfftmg");
        let suffix = configmap_hash_suffix("x", &data(&[("k", "v")]), &BTreeMap::new());
        assert_eq!(suffix.len(), SUFFIX_LEN);
        assert!(
            suffix.chars().all(|c| "2456789bcdfghkmt".contains(c)),
            "{suffix}"
        );
    }

    #[test]
    fn html_characters_are_escaped_like_go() {
        assert_eq!(json("a<b>c&d"), r#""a\u003cb\u003ec\u0026d""#);
    }

    #[test]
    fn js_line_terminators_are_escaped_like_go() {
        assert_eq!(json("x\u{2028}y\u{2029}z"), r#""x\u2028y\u2029z""#);
        // Neighbours are not escaped.
        assert_eq!(json("\u{2027}\u{202a}"), "\"\u{2027}\u{202a}\"");
    }

    #[test]
    fn control_characters_are_escaped_like_go() {
        assert_eq!(json("\"\\"), r#""\"\\""#);
        assert_eq!(json("\n\r\t\u{8}\u{c}"), r#""\n\r\t\b\f""#);
        assert_eq!(
            json("\u{0}\u{1}\u{b}\u{1f}"),
            r#""\u0000\u0001\u000b\u001f""#
        );
        // DEL, '/', '\'' and non-ASCII are written as they are.
        assert_eq!(json("\u{7f}/'é☃🦀"), "\"\u{7f}/'é☃🦀\"");
    }

    #[test]
    fn base64_matches_go_std_encoding() {
        assert_eq!(b64(b""), "");
        assert_eq!(b64(b"f"), "Zg==");
        assert_eq!(b64(b"fo"), "Zm8=");
        assert_eq!(b64(b"foo"), "Zm9v");
        assert_eq!(b64(b"foob"), "Zm9vYg==");
        assert_eq!(b64(b"fooba"), "Zm9vYmE=");
        assert_eq!(b64(b"foobar"), "Zm9vYmFy");
        // The '+' and '/' alphabet, not the URL-safe one.
        assert_eq!(b64(&[0xfb, 0xff, 0xfe]), "+//+");
    }

    #[test]
    fn utf8_file_goes_to_data_and_other_bytes_to_binary_data() {
        let text = "kind: KubeletConfiguration\n";
        let expected_text = format!(
            "kubelet-a-{}",
            configmap_hash_suffix("kubelet-a", &data(&[("kubelet", text)]), &BTreeMap::new())
        );
        assert_eq!(
            kubelet_configmap_name("kubelet-a", text.as_bytes()),
            expected_text
        );

        // A lone continuation byte, and a UTF-16 surrogate encoded in UTF-8: both are
        // rejected by Go's utf8.Valid and by Rust, so both go to binaryData.
        for bytes in [&b"a\x80b"[..], &b"\xed\xa0\x80"[..], &b"\xff\xfe"[..]] {
            let expected = format!(
                "kubelet-a-{}",
                configmap_hash_suffix("kubelet-a", &data(&[]), &binary(&[("kubelet", bytes)]))
            );
            assert_eq!(kubelet_configmap_name("kubelet-a", bytes), expected);
            let encoded = encode_configmap("kubelet-a", &data(&[]), &binary(&[("kubelet", bytes)]));
            assert!(
                encoded.starts_with(r#"{"binaryData":{"kubelet":""#),
                "{encoded}"
            );
            assert!(encoded.contains(r#""data":{}"#), "{encoded}");
        }
    }

    #[test]
    fn same_text_as_data_or_binary_data_hashes_differently() {
        let text = b"a: 1\n";
        let as_data = configmap_hash_suffix("n", &data(&[("kubelet", "a: 1\n")]), &BTreeMap::new());
        let as_binary = configmap_hash_suffix("n", &data(&[]), &binary(&[("kubelet", text)]));
        assert_ne!(as_data, as_binary);
        assert_eq!(kubelet_configmap_name("n", text), format!("n-{as_data}"));
    }

    #[test]
    fn name_and_content_both_change_the_suffix() {
        let a = kubelet_configmap_name("kubelet-a", b"x: 1\n");
        let b = kubelet_configmap_name("kubelet-b", b"x: 1\n");
        let c = kubelet_configmap_name("kubelet-a", b"x: 2\n");
        assert_ne!(a[a.len() - SUFFIX_LEN..], b[b.len() - SUFFIX_LEN..]);
        assert_ne!(a, c);
        assert_eq!(a, kubelet_configmap_name("kubelet-a", b"x: 1\n"));
    }

    #[test]
    fn escaped_characters_reach_the_hashed_encoding() {
        let encoded = encode_configmap(
            "n",
            &data(&[("kubelet", "a: \"<&>\"\u{2028}\r\n")]),
            &BTreeMap::new(),
        );
        assert_eq!(
            encoded,
            r#"{"data":{"kubelet":"a: \"\u003c\u0026\u003e\"\u2028\r\n"},"kind":"ConfigMap","name":"n"}"#
        );
    }
}
