//! Response bodies: JSON, YAML, and every error as a `metav1.Status` with the HTTP code
//! of its `code` (and `Retry-After` when it has one).

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::Value;

use super::negotiate::Output;
use super::table;
use crate::error::ApiError;

pub(super) fn json_bytes(status: StatusCode, body: Vec<u8>) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

pub(super) fn json_response(status: StatusCode, value: &Value) -> Response {
    json_bytes(status, serde_json::to_vec(value).unwrap_or_default())
}

pub(super) fn error_response(e: &ApiError) -> Response {
    let status = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = json_response(status, &e.to_status());
    if let Some(secs) = e.retry_after_seconds {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

/// One object in the negotiated representation (Table output is built by the caller).
pub(super) fn object_response(status: StatusCode, obj: &Value, output: Output) -> Response {
    match output {
        Output::Json | Output::Table(_) => json_response(status, obj),
        Output::Meta(v) => json_response(status, &table::partial_metadata(obj, v)),
        Output::Yaml => yaml_response(status, obj),
    }
}

pub(super) fn yaml_response(status: StatusCode, value: &Value) -> Response {
    match serde_saphyr::to_string(value) {
        Ok(text) => {
            let mut resp = Response::new(Body::from(text));
            *resp.status_mut() = status;
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/yaml"),
            );
            resp
        }
        Err(e) => error_response(&ApiError::internal(format!("encoding YAML: {e}"))),
    }
}
