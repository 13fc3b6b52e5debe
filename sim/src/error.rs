//! API errors as the real server reports them: a `metav1.Status` with upstream's reason,
//! code and message text (k8s.io/apimachinery/pkg/api/errors/errors.go).

use serde_json::{Map, Value, json};

use crate::resources::ResourceType;

/// One `metav1.StatusCause`: a field error of an Invalid status, or an apply conflict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// Field path (`metadata.name`, `data`, `.data.k` for apply conflicts).
    pub field: String,
    /// Cause type (`FieldValueInvalid`, `FieldValueRequired`, `FieldValueTooLong`,
    /// `FieldValueForbidden`, `FieldValueDuplicate`, `FieldValueNotSupported`,
    /// `FieldManagerConflict` ...).
    pub reason: &'static str,
    /// The error body, e.g. `Invalid value: "A": a lowercase RFC 1123 subdomain ...`.
    pub message: String,
}

impl std::fmt::Display for Cause {
    /// `field: message`, as `field.Error.Error()` prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// An error the API server returns; `to_status` renders the `metav1.Status` body.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `metav1.StatusReason` (`NotFound`, `Conflict` ...).
    pub reason: &'static str,
    /// Human-readable message, upstream's text.
    pub message: String,
    /// `metav1.StatusDetails`, if any.
    pub details: Option<Value>,
    /// Seconds for the `Retry-After` header (429, and 504 for a too large resourceVersion).
    pub retry_after_seconds: Option<u64>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.reason, self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

fn details(group: &str, kind: &str, name: &str) -> Map<String, Value> {
    let mut d = Map::new();
    if !name.is_empty() {
        d.insert("name".into(), Value::String(name.to_string()));
    }
    if !group.is_empty() {
        d.insert("group".into(), Value::String(group.to_string()));
    }
    if !kind.is_empty() {
        d.insert("kind".into(), Value::String(kind.to_string()));
    }
    d
}

fn causes_json(causes: &[Cause]) -> Value {
    Value::Array(
        causes
            .iter()
            .map(|c| {
                let mut m = Map::new();
                m.insert("reason".into(), Value::String(c.reason.to_string()));
                m.insert("message".into(), Value::String(c.message.clone()));
                if !c.field.is_empty() {
                    m.insert("field".into(), Value::String(c.field.clone()));
                }
                Value::Object(m)
            })
            .collect(),
    )
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: String, details: Option<Value>) -> Self {
        ApiError {
            code,
            reason,
            message,
            details,
            retry_after_seconds: None,
        }
    }

    /// 404 NotFound: `configmaps "x" not found`.
    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", rt.qualified_resource(), name),
            Some(Value::Object(details(rt.group, rt.plural, name))),
        )
    }

    /// 404 NotFound for the namespace an object would live in: `namespaces "x" not found`.
    pub fn namespace_not_found(ns: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("namespaces \"{ns}\" not found"),
            Some(Value::Object(details("", "namespaces", ns))),
        )
    }

    /// 409 AlreadyExists: `configmaps "x" already exists`.
    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", rt.qualified_resource(), name),
            Some(Value::Object(details(rt.group, rt.plural, name))),
        )
    }

    /// 409 Conflict: `Operation cannot be fulfilled on configmaps "x": <msg>`.
    pub fn conflict(rt: &ResourceType, name: &str, msg: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                rt.qualified_resource(),
                name,
                msg
            ),
            Some(Value::Object(details(rt.group, rt.plural, name))),
        )
    }

    /// 409 Conflict of a failed delete precondition: upstream's registry names the kind,
    /// not the resource (`Operation cannot be fulfilled on ConfigMap "x": the UID in the
    /// precondition ...`).
    pub fn precondition_failed(rt: &ResourceType, name: &str, msg: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                rt.qualified_kind(),
                name,
                msg
            ),
            Some(Value::Object(details(rt.group, rt.kind, name))),
        )
    }

    /// The optimistic-concurrency message upstream's storage layer returns.
    pub const MODIFIED: &'static str = "the object has been modified; please apply your changes to the latest version and try again";

    /// 409 Conflict for a stale `resourceVersion` on update.
    pub fn stale(rt: &ResourceType, name: &str) -> Self {
        Self::conflict(rt, name, Self::MODIFIED)
    }

    /// 409 Conflict of server-side apply (`errors.NewApplyConflict`).
    pub fn apply_conflict(causes: Vec<Cause>, message: String) -> Self {
        let mut d = Map::new();
        d.insert("causes".into(), causes_json(&causes));
        Self::new(409, "Conflict", message, Some(Value::Object(d)))
    }

    /// 422 Invalid: `ConfigMap "x" is invalid: <field errors>`.
    pub fn invalid(rt: &ResourceType, name: &str, causes: Vec<Cause>) -> Self {
        let agg: Vec<String> = {
            let mut seen: Vec<String> = Vec::new();
            for c in &causes {
                let s = c.to_string();
                if !seen.contains(&s) {
                    seen.push(s);
                }
            }
            seen
        };
        let message = match agg.len() {
            0 => format!("{} \"{}\" is invalid", rt.qualified_kind(), name),
            1 => format!(
                "{} \"{}\" is invalid: {}",
                rt.qualified_kind(),
                name,
                agg[0]
            ),
            _ => format!(
                "{} \"{}\" is invalid: [{}]",
                rt.qualified_kind(),
                name,
                agg.join(", ")
            ),
        };
        let mut d = details(rt.group, rt.kind, name);
        d.insert("causes".into(), causes_json(&causes));
        Self::new(422, "Invalid", message, Some(Value::Object(d)))
    }

    /// An error the real server answers without a reason (a plain Go error turned into
    /// a Status by `ErrorToAPIStatus`: code 500, the error's text, no reason, no details).
    pub fn reasonless(code: u16, msg: impl Into<String>) -> Self {
        Self::new(code, "", msg.into(), None)
    }

    /// A `resourceVersion` query parameter that is not a number: the storage layer's
    /// `resourceVersion: Invalid value: "x": strconv.ParseUint: ...` (a 500 on get and
    /// watch, a 400 on list: see [`crate::store`]'s readers).
    pub fn invalid_resource_version_param(rv: &str) -> String {
        format!(
            "resourceVersion: Invalid value: {}: {}",
            crate::rules::go_quote(rv),
            parse_uint_error(rv)
        )
    }

    /// 400 BadRequest with `msg`.
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", msg.into(), None)
    }

    /// 410 with reason `Expired` (`errors.NewResourceExpired`), which is what the real
    /// server sends for a too old resourceVersion or continue token.
    pub fn gone(msg: impl Into<String>) -> Self {
        Self::new(410, "Expired", msg.into(), None)
    }

    /// 429 TooManyRequests with `Retry-After`, as the max-in-flight filter sends it.
    pub fn too_many_requests(retry_after: u64) -> Self {
        let mut d = Map::new();
        d.insert("retryAfterSeconds".into(), json!(retry_after));
        let mut e = Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.".into(),
            Some(Value::Object(d)),
        );
        e.retry_after_seconds = Some(retry_after);
        e
    }

    /// 500 InternalError: `Internal error occurred: <msg>`.
    pub fn internal(msg: impl Into<String>) -> Self {
        let msg = msg.into();
        let mut d = Map::new();
        d.insert("causes".into(), json!([{ "message": msg.clone() }]));
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {msg}"),
            Some(Value::Object(d)),
        )
    }

    /// 405 MethodNotAllowed: `<action> is not supported on resources of kind "pods"`.
    pub fn method_not_allowed(rt: &ResourceType, action: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!(
                "{} is not supported on resources of kind \"{}\"",
                action,
                rt.qualified_resource()
            ),
            Some(Value::Object(details(rt.group, rt.plural, ""))),
        )
    }

    /// 415 UnsupportedMediaType for a patch content type the server does not know: a
    /// v1.36 server answers with the generic text and empty details, whatever the type.
    pub fn unsupported_media_type() -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            "415: Unsupported Media Type".into(),
            Some(json!({})),
        )
    }

    /// 504 Timeout for a resourceVersion newer than the store's
    /// (`storage.NewTooLargeResourceVersionError`).
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut d = Map::new();
        d.insert(
            "causes".into(),
            json!([{ "reason": "ResourceVersionTooLarge", "message": "Too large resource version" }]),
        );
        d.insert("retryAfterSeconds".into(), json!(1));
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Too large resource version: {requested}, current: {current}"),
            Some(Value::Object(d)),
        );
        e.retry_after_seconds = Some(1);
        e
    }

    /// The `metav1.Status` body.
    pub fn to_status(&self) -> Value {
        let mut m = Map::new();
        m.insert("kind".into(), json!("Status"));
        m.insert("apiVersion".into(), json!("v1"));
        m.insert("metadata".into(), json!({}));
        m.insert("status".into(), json!("Failure"));
        m.insert("message".into(), Value::String(self.message.clone()));
        if !self.reason.is_empty() {
            m.insert("reason".into(), Value::String(self.reason.to_string()));
        }
        if let Some(d) = &self.details {
            m.insert("details".into(), d.clone());
        }
        m.insert("code".into(), json!(self.code));
        Value::Object(m)
    }
}

/// Go's `strconv.ParseUint(s, 10, 64)` error text for `s`, which is not a `u64`.
pub fn parse_uint_error(s: &str) -> String {
    let why = if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        "value out of range"
    } else {
        "invalid syntax"
    };
    format!(
        "strconv.ParseUint: parsing {}: {why}",
        crate::rules::go_quote(s)
    )
}

/// The `metav1.Status` of a successful delete (`{"status":"Success"}`), used where
/// upstream answers a delete with a Status instead of the object.
pub fn success_status(rt: &ResourceType, name: &str, uid: Option<&str>) -> Value {
    let mut d = details(rt.group, rt.plural, name);
    if let Some(uid) = uid {
        d.insert("uid".into(), Value::String(uid.to_string()));
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": Value::Object(d),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::kinds;

    #[test]
    fn not_found_and_conflict_texts() {
        let e = ApiError::not_found(kinds::configmaps(), "x");
        assert_eq!(e.code, 404);
        assert_eq!(e.message, "configmaps \"x\" not found");
        let s = e.to_status();
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["details"]["kind"], "configmaps");
        assert_eq!(s["code"], 404);
        let e = ApiError::stale(kinds::configmaps(), "x");
        assert_eq!(
            e.message,
            "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again"
        );
        let e = ApiError::already_exists(kinds::leases(), "l");
        assert_eq!(e.message, "leases.coordination.k8s.io \"l\" already exists");
        assert_eq!(e.to_status()["details"]["group"], "coordination.k8s.io");
    }

    #[test]
    fn invalid_aggregates_causes() {
        let c = |f: &str, m: &str| Cause {
            field: f.into(),
            reason: "FieldValueInvalid",
            message: m.into(),
        };
        let e = ApiError::invalid(kinds::configmaps(), "x", vec![c("a", "bad")]);
        assert_eq!(e.message, "ConfigMap \"x\" is invalid: a: bad");
        let e = ApiError::invalid(
            kinds::configmaps(),
            "x",
            vec![c("a", "bad"), c("b", "worse")],
        );
        assert_eq!(e.message, "ConfigMap \"x\" is invalid: [a: bad, b: worse]");
        assert_eq!(e.code, 422);
        assert_eq!(e.to_status()["details"]["causes"][1]["field"], "b");
    }

    #[test]
    fn retry_after() {
        let e = ApiError::too_many_requests(3);
        assert_eq!(e.retry_after_seconds, Some(3));
        assert_eq!(e.to_status()["details"]["retryAfterSeconds"], 3);
        assert_eq!(ApiError::gone("x").code, 410);
        assert_eq!(
            ApiError::method_not_allowed(kinds::pods(), "create").message,
            "create is not supported on resources of kind \"pods\""
        );
    }
}
