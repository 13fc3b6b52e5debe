//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`)
//! into JSON, for the kinds kubectl 1.32 writes through its typed clients:
//! `kubectl create namespace`, `kubectl create configmap` and `kubectl create secret`
//! send protobuf and do not fall back to JSON on 415; so do `kubectl drain`'s evictions. Responses are always JSON.
//!
//! The envelope is the magic `k8s\0` followed by a `runtime.Unknown` message
//! (k8s.io/apimachinery/pkg/runtime/generated.proto) whose `raw` field holds the object;
//! field numbers below are those of k8s.io/api/core/v1 and meta/v1 `generated.proto`.

use base64::Engine;
use serde_json::{Map, Value};

use crate::time::rfc3339_secs;

/// How one field is decoded.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Bool,
    Int,
    Time,
    Msg(&'static [Field]),
    MapStr,
    MapBytes,
    RepeatedStr,
    RepeatedMsg(&'static [Field]),
}

struct Field {
    num: u64,
    name: &'static str,
    kind: Kind,
}

const fn f(num: u64, name: &'static str, kind: Kind) -> Field {
    Field { num, name, kind }
}

const OWNER_REFERENCE: &[Field] = &[
    f(1, "kind", Kind::Str),
    f(3, "name", Kind::Str),
    f(4, "uid", Kind::Str),
    f(5, "apiVersion", Kind::Str),
    f(6, "controller", Kind::Bool),
    f(7, "blockOwnerDeletion", Kind::Bool),
];

const OBJECT_META: &[Field] = &[
    f(1, "name", Kind::Str),
    f(2, "generateName", Kind::Str),
    f(3, "namespace", Kind::Str),
    f(4, "selfLink", Kind::Str),
    f(5, "uid", Kind::Str),
    f(6, "resourceVersion", Kind::Str),
    f(7, "generation", Kind::Int),
    f(8, "creationTimestamp", Kind::Time),
    f(9, "deletionTimestamp", Kind::Time),
    f(10, "deletionGracePeriodSeconds", Kind::Int),
    f(11, "labels", Kind::MapStr),
    f(12, "annotations", Kind::MapStr),
    f(13, "ownerReferences", Kind::RepeatedMsg(OWNER_REFERENCE)),
    f(14, "finalizers", Kind::RepeatedStr),
];

const CONFIG_MAP: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(2, "data", Kind::MapStr),
    f(3, "binaryData", Kind::MapBytes),
    f(4, "immutable", Kind::Bool),
];

const SECRET: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(2, "data", Kind::MapBytes),
    f(3, "type", Kind::Str),
    f(4, "stringData", Kind::MapStr),
    f(5, "immutable", Kind::Bool),
];

const NAMESPACE_SPEC: &[Field] = &[f(1, "finalizers", Kind::RepeatedStr)];
const NAMESPACE_STATUS: &[Field] = &[f(1, "phase", Kind::Str)];
const NAMESPACE: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(2, "spec", Kind::Msg(NAMESPACE_SPEC)),
    f(3, "status", Kind::Msg(NAMESPACE_STATUS)),
];

const PRECONDITIONS: &[Field] = &[f(1, "uid", Kind::Str), f(2, "resourceVersion", Kind::Str)];
const DELETE_OPTIONS: &[Field] = &[
    f(1, "gracePeriodSeconds", Kind::Int),
    f(2, "preconditions", Kind::Msg(PRECONDITIONS)),
    f(3, "orphanDependents", Kind::Bool),
    f(4, "propagationPolicy", Kind::Str),
    f(5, "dryRun", Kind::RepeatedStr),
    f(
        6,
        "ignoreStoreReadErrorWithClusterBreakingPotential",
        Kind::Bool,
    ),
];
/// policy/v1 Eviction (k8s.io/api/policy/v1 generated.proto).
const EVICTION: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(2, "deleteOptions", Kind::Msg(DELETE_OPTIONS)),
];

const TYPE_META: &[Field] = &[f(1, "apiVersion", Kind::Str), f(2, "kind", Kind::Str)];

/// `metav1.Time{}` (Go's zero time) as protobuf seconds: means "not set".
const GO_ZERO_TIME_SECONDS: i64 = -62_135_596_800;

/// A protobuf wire-format reader.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.buf.split_first().ok_or("truncated varint")?;
            self.buf = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.buf.len() {
            return Err("truncated field".into());
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// The next field: (number, wire type, varint value or bytes).
    fn field(&mut self) -> Result<(u64, Wire<'a>), String> {
        let key = self.varint()?;
        let num = key >> 3;
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Wire::Fixed
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| "length overflow")?;
                Wire::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed
            }
            t => return Err(format!("unsupported wire type {t}")),
        };
        Ok((num, wire))
    }
}

enum Wire<'a> {
    Varint(u64),
    /// A 32- or 64-bit field (none of the decoded kinds has one; skipped).
    Fixed,
    Bytes(&'a [u8]),
}

fn bytes<'a>(w: &Wire<'a>, name: &str) -> Result<&'a [u8], String> {
    match w {
        Wire::Bytes(b) => Ok(b),
        _ => Err(format!("field {name}: expected length-delimited")),
    }
}

fn string(w: &Wire<'_>, name: &str) -> Result<String, String> {
    String::from_utf8(bytes(w, name)?.to_vec()).map_err(|_| format!("field {name}: invalid UTF-8"))
}

fn map_entry(buf: &[u8], name: &str, binary: bool) -> Result<(String, Value), String> {
    let mut r = Reader { buf };
    let (mut key, mut value) = (String::new(), Value::String(String::new()));
    while !r.buf.is_empty() {
        match r.field()? {
            (1, w) => key = string(&w, name)?,
            (2, w) if binary => {
                value = Value::String(
                    base64::engine::general_purpose::STANDARD.encode(bytes(&w, name)?),
                );
            }
            (2, w) => value = Value::String(string(&w, name)?),
            _ => {}
        }
    }
    Ok((key, value))
}

fn time(buf: &[u8]) -> Result<Option<String>, String> {
    let mut r = Reader { buf };
    let mut seconds: i64 = 0;
    while !r.buf.is_empty() {
        if let (1, Wire::Varint(v)) = r.field()? {
            seconds = v as i64;
        }
    }
    if seconds == GO_ZERO_TIME_SECONDS {
        return Ok(None);
    }
    Ok(Some(rfc3339_secs(seconds)))
}

fn message(buf: &[u8], schema: &[Field]) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    let mut r = Reader { buf };
    while !r.buf.is_empty() {
        let (num, w) = r.field()?;
        let Some(field) = schema.iter().find(|f| f.num == num) else {
            continue;
        };
        let name = field.name;
        match field.kind {
            Kind::Str => {
                let s = string(&w, name)?;
                // Go writes every string; JSON omits the empty ones.
                if !s.is_empty() {
                    out.insert(name.into(), Value::String(s));
                }
            }
            Kind::Bool => match w {
                Wire::Varint(v) => {
                    out.insert(name.into(), Value::Bool(v != 0));
                }
                _ => return Err(format!("field {name}: expected varint")),
            },
            Kind::Int => match w {
                Wire::Varint(v) if v != 0 || name != "generation" => {
                    out.insert(name.into(), Value::from(v as i64));
                }
                Wire::Varint(_) => {}
                _ => return Err(format!("field {name}: expected varint")),
            },
            Kind::Time => {
                if let Some(t) = time(bytes(&w, name)?)? {
                    out.insert(name.into(), Value::String(t));
                }
            }
            Kind::Msg(schema) => {
                out.insert(
                    name.into(),
                    Value::Object(message(bytes(&w, name)?, schema)?),
                );
            }
            Kind::MapStr | Kind::MapBytes => {
                let (k, v) =
                    map_entry(bytes(&w, name)?, name, matches!(field.kind, Kind::MapBytes))?;
                if let Value::Object(m) =
                    out.entry(name).or_insert_with(|| Value::Object(Map::new()))
                {
                    m.insert(k, v);
                }
            }
            Kind::RepeatedStr => {
                let s = Value::String(string(&w, name)?);
                if let Value::Array(a) = out.entry(name).or_insert_with(|| Value::Array(Vec::new()))
                {
                    a.push(s);
                }
            }
            Kind::RepeatedMsg(schema) => {
                let m = Value::Object(message(bytes(&w, name)?, schema)?);
                if let Value::Array(a) = out.entry(name).or_insert_with(|| Value::Array(Vec::new()))
                {
                    a.push(m);
                }
            }
        }
    }
    Ok(out)
}

/// Decodes a protobuf request body to the JSON object it encodes.
pub(crate) fn decode(body: &[u8]) -> Result<Value, String> {
    let envelope = body
        .strip_prefix(b"k8s\0")
        .ok_or("missing the k8s protobuf magic prefix")?;
    let mut r = Reader { buf: envelope };
    let (mut type_meta, mut raw): (Map<String, Value>, &[u8]) = (Map::new(), &[]);
    while !r.buf.is_empty() {
        match r.field()? {
            (1, w) => type_meta = message(bytes(&w, "typeMeta")?, TYPE_META)?,
            (2, w) => raw = bytes(&w, "raw")?,
            _ => {}
        }
    }
    let api_version = type_meta
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = type_meta.get("kind").and_then(Value::as_str).unwrap_or("");
    let schema = match (api_version, kind) {
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("v1", "Namespace") => NAMESPACE,
        ("policy/v1" | "policy/v1beta1", "Eviction") => EVICTION,
        _ => {
            return Err(format!(
                "protobuf is decoded for v1 ConfigMap, Secret, Namespace and policy Eviction only (got {api_version:?} {kind:?}); send JSON"
            ));
        }
    };
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), Value::String(api_version.to_string()));
    obj.insert("kind".into(), Value::String(kind.to_string()));
    obj.extend(message(raw, schema)?);
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn ld(num: u64, payload: &[u8], out: &mut Vec<u8>) {
        varint(num << 3 | 2, out);
        varint(payload.len() as u64, out);
        out.extend_from_slice(payload);
    }

    fn entry(k: &str, v: &[u8]) -> Vec<u8> {
        let mut e = Vec::new();
        ld(1, k.as_bytes(), &mut e);
        ld(2, v, &mut e);
        e
    }

    #[test]
    fn decodes_an_eviction_as_kubectl_drain_sends_it() {
        let mut meta = Vec::new();
        ld(1, b"web-0", &mut meta);
        ld(3, b"default", &mut meta);
        let mut pre = Vec::new();
        ld(1, b"u-1", &mut pre);
        let mut opts = Vec::new();
        varint(1 << 3, &mut opts);
        varint(0, &mut opts);
        ld(2, &pre, &mut opts);
        ld(5, b"All", &mut opts);
        let mut ev = Vec::new();
        ld(1, &meta, &mut ev);
        ld(2, &opts, &mut ev);
        let mut tm = Vec::new();
        ld(1, b"policy/v1", &mut tm);
        ld(2, b"Eviction", &mut tm);
        let mut unknown = Vec::new();
        ld(1, &tm, &mut unknown);
        ld(2, &ev, &mut unknown);
        let mut body = b"k8s\0".to_vec();
        body.extend_from_slice(&unknown);
        assert_eq!(
            decode(&body).expect("decodes"),
            serde_json::json!({"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "web-0", "namespace": "default"},
                "deleteOptions": {"gracePeriodSeconds": 0, "preconditions": {"uid": "u-1"}, "dryRun": ["All"]}})
        );
    }

    #[test]
    fn decodes_a_configmap_as_kubectl_sends_it() {
        let mut time = Vec::new();
        varint(1 << 3, &mut time);
        varint(GO_ZERO_TIME_SECONDS as u64, &mut time);
        let mut meta = Vec::new();
        ld(1, b"c1", &mut meta);
        ld(2, b"", &mut meta);
        ld(3, b"x", &mut meta);
        ld(8, &time, &mut meta);
        ld(11, &entry("pool", b"gpu"), &mut meta);
        ld(14, b"f1", &mut meta);
        let mut cm = Vec::new();
        ld(1, &meta, &mut cm);
        ld(2, &entry("a", b"1"), &mut cm);
        ld(2, &entry("b", b""), &mut cm);
        ld(3, &entry("bin", &[0, 1, 2]), &mut cm);
        varint(4 << 3, &mut cm);
        varint(1, &mut cm);
        let mut tm = Vec::new();
        ld(1, b"v1", &mut tm);
        ld(2, b"ConfigMap", &mut tm);
        let mut unknown = Vec::new();
        ld(1, &tm, &mut unknown);
        ld(2, &cm, &mut unknown);
        ld(4, b"application/vnd.kubernetes.protobuf", &mut unknown);
        let mut body = b"k8s\0".to_vec();
        body.extend_from_slice(&unknown);
        let v = decode(&body).expect("decodes");
        assert_eq!(
            v,
            serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c1", "namespace": "x", "labels": {"pool": "gpu"}, "finalizers": ["f1"]},
                "data": {"a": "1", "b": ""},
                "binaryData": {"bin": "AAEC"},
                "immutable": true,
            })
        );
        assert!(decode(b"not protobuf").is_err());
        assert!(decode(&body[..body.len() - 3]).is_err(), "truncated");
    }

    #[test]
    fn other_kinds_are_refused_and_times_format() {
        let mut tm = Vec::new();
        ld(1, b"apps/v1", &mut tm);
        ld(2, b"Deployment", &mut tm);
        let mut body = b"k8s\0".to_vec();
        ld(1, &tm, &mut body);
        assert!(decode(&body).is_err_and(|e| e.contains("Deployment")));
        assert_eq!(rfc3339_secs(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_secs(951_872_400), "2000-03-01T01:00:00Z");
    }
}
