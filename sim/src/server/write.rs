//! create, update, patch and delete: the body decoded from JSON, YAML or protobuf (as
//! its Content-Type says), the options from the query, and the status code upstream
//! answers with (201 for a create, and for an apply that created the object).

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde_json::Value;

use super::negotiate::{self, BodyFormat, Output};
use super::params::{Params, write_options};
use super::response::{json_response, object_response};
use super::{AppState, Target, header_str, protobuf};
use crate::error::{ApiError, success_status};
use crate::resources::ResourceType;
use crate::store::{EvictionRequest, PatchType};

/// The request body in the format its Content-Type names, and that format.
fn parse_body(
    headers: &HeaderMap,
    bytes: &[u8],
) -> Result<(BodyFormat, Result<Value, String>), ApiError> {
    let format = negotiate::body_format(header_str(headers, header::CONTENT_TYPE))?;
    let parsed = match format {
        BodyFormat::Json => serde_json::from_slice(bytes).map_err(|e| e.to_string()),
        BodyFormat::Yaml => std::str::from_utf8(bytes)
            .map_err(|e| e.to_string())
            .and_then(|s| serde_saphyr::from_str::<Value>(s).map_err(|e| e.to_string())),
        BodyFormat::Protobuf => protobuf::decode(bytes),
    };
    Ok((format, parsed))
}

fn decode_body(rt: &ResourceType, headers: &HeaderMap, bytes: &[u8]) -> Result<Value, ApiError> {
    let (format, parsed) = parse_body(headers, bytes)?;
    match parsed {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): the body is not a JSON object",
            rt.kind
        ))),
        Err(e) if format == BodyFormat::Protobuf => Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): {e}",
            rt.kind
        ))),
        Err(e) => Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: {e}",
            rt.kind
        ))),
    }
}

fn user_agent(headers: &HeaderMap) -> Option<&str> {
    header_str(headers, header::USER_AGENT)
}

pub(super) fn do_create(
    st: &AppState,
    t: &Target,
    params: &Params,
    headers: &HeaderMap,
    bytes: &[u8],
    output: Output,
) -> Result<Response, ApiError> {
    let opts = write_options(params, "CreateOptions", None, user_agent(headers))?;
    let obj = decode_body(t.rt, headers, bytes)?;
    let created = st.store.create(t.rt, t.ns.as_deref(), obj, &opts)?;
    Ok(object_response(StatusCode::CREATED, &created, output))
}

pub(super) fn do_update(
    st: &AppState,
    t: &Target,
    params: &Params,
    headers: &HeaderMap,
    bytes: &[u8],
    output: Output,
) -> Result<Response, ApiError> {
    let opts = write_options(params, "UpdateOptions", None, user_agent(headers))?;
    let obj = decode_body(t.rt, headers, bytes)?;
    let name = t.name.as_deref().unwrap_or("");
    let updated = st
        .store
        .update(t.rt, t.ns.as_deref(), name, t.sub.as_deref(), obj, &opts)?;
    Ok(object_response(StatusCode::OK, &updated, output))
}

pub(super) fn do_patch(
    st: &AppState,
    t: &Target,
    params: &Params,
    headers: &HeaderMap,
    bytes: &[u8],
    output: Output,
) -> Result<Response, ApiError> {
    let patch_type = negotiate::patch_type(header_str(headers, header::CONTENT_TYPE))?;
    let opts = write_options(
        params,
        "PatchOptions",
        Some(patch_type),
        user_agent(headers),
    )?;
    let name = t.name.as_deref().unwrap_or("");
    // An apply body may be YAML: hand the store JSON either way.
    let json_body;
    let body: &[u8] = if patch_type == PatchType::Apply {
        json_body = apply_body_to_json(bytes)?;
        &json_body
    } else {
        bytes
    };
    let existed = patch_type != PatchType::Apply
        || t.sub.is_some()
        || st.store.get(t.rt, t.ns.as_deref(), name).is_ok();
    let patched = st.store.patch(
        t.rt,
        t.ns.as_deref(),
        name,
        t.sub.as_deref(),
        patch_type,
        body,
        &opts,
    )?;
    let status = if existed || opts.dry_run {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok(object_response(status, &patched, output))
}

fn apply_body_to_json(bytes: &[u8]) -> Result<Vec<u8>, ApiError> {
    if serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok() {
        return Ok(bytes.to_vec());
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    let value: Value = serde_saphyr::from_str(text)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    serde_json::to_vec(&value).map_err(|e| ApiError::internal(e.to_string()))
}

pub(super) fn do_delete(
    st: &AppState,
    t: &Target,
    params: &Params,
    bytes: &[u8],
    output: Output,
) -> Result<Response, ApiError> {
    let options: Value = if bytes.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(bytes).map_err(|e| {
            ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type DeleteOptions): {e}"
            ))
        })?
    };
    let body_dry_run = options
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|v| v == "All"));
    let opts = write_options(params, "DeleteOptions", None, None)?;
    let name = t.name.as_deref().unwrap_or("");
    if opts.dry_run || body_dry_run {
        let obj = st.store.get(t.rt, t.ns.as_deref(), name)?;
        return Ok(object_response(StatusCode::OK, &obj, output));
    }
    let preconditions = options
        .get("preconditions")
        .filter(|p| !p.is_null())
        .cloned();
    // The body's grace period wins over the query's, as upstream decodes them.
    let grace = options
        .get("gracePeriodSeconds")
        .and_then(Value::as_i64)
        .or_else(|| {
            params
                .get("gracePeriodSeconds")
                .and_then(|g| g.parse().ok())
        });
    let deleted = st
        .store
        .delete_with(t.rt, t.ns.as_deref(), name, preconditions, grace)?;
    // Still there (finalizers, graceful deletion), or a pod (whose registry returns the
    // deleted object): the object; gone: a Success Status, as the real server answers
    // an immediate delete.
    if t.rt.group.is_empty() && t.rt.kind == "Pod"
        || deleted
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
    {
        return Ok(object_response(StatusCode::OK, &deleted, output));
    }
    let uid = deleted.pointer("/metadata/uid").and_then(Value::as_str);
    Ok(json_response(
        StatusCode::OK,
        &success_status(t.rt, name, uid),
    ))
}

/// POST `pods/{name}/eviction`: a policy/v1 (or v1beta1) Eviction. Upstream answers 201
/// with a Status, whether it says `Success` or (more than one budget) `Failure`.
pub(super) fn do_evict(
    st: &AppState,
    t: &Target,
    params: &Params,
    headers: &HeaderMap,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    let opts = write_options(params, "CreateOptions", None, user_agent(headers))?;
    let body = decode_eviction(headers, bytes)?;
    let name = t.name.as_deref().unwrap_or("");
    let ns = t.ns.as_deref().unwrap_or("");
    if let Some(body_ns) = body.pointer("/metadata/namespace").and_then(Value::as_str)
        && !body_ns.is_empty()
        && body_ns != ns
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let req = EvictionRequest::from_body(name, &body, opts.dry_run)?;
    let status = st.store.evict(ns, name, &req)?;
    Ok(json_response(StatusCode::CREATED, &status))
}

fn decode_eviction(headers: &HeaderMap, bytes: &[u8]) -> Result<Value, ApiError> {
    let (_, parsed) = parse_body(headers, bytes)?;
    let body = parsed.map_err(|e| {
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type Eviction): {e}"
        ))
    })?;
    // Upstream decodes the body with the subresource's kind as the default: a body
    // without apiVersion and kind (kube-rs sends one) is an Eviction.
    let kind = body
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("Eviction");
    let api_version = body
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("policy/v1");
    if !body.is_object()
        || kind != "Eviction"
        || !matches!(api_version, "policy/v1" | "policy/v1beta1")
    {
        return Err(ApiError::bad_request(format!(
            "not a Eviction object: {api_version} {kind}"
        )));
    }
    Ok(body)
}
