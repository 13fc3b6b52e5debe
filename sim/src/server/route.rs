//! Which resource a path under `/api` or `/apis` names, and which verb a request is.
//! Unknown paths are upstream's 404; a verb the resource or subresource does not serve
//! is a 405 naming it.

use std::net::SocketAddr;

use axum::http::Method;
use serde_json::{Value, json};

use crate::discovery;
use crate::error::ApiError;
use crate::resources::{self, ResourceType};

/// What a path under `/api` or `/apis` names.
pub(super) enum Route {
    Discovery(Value),
    Resource(Target),
}

/// A resource path: collection (no name), object, or object subresource.
pub(super) struct Target {
    pub(super) rt: &'static ResourceType,
    pub(super) ns: Option<String>,
    pub(super) name: Option<String>,
    pub(super) sub: Option<String>,
}

pub(super) fn route(path: &str, addr: SocketAddr) -> Result<Route, ApiError> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["api"] => Ok(Route::Discovery(discovery::api_versions(&addr.to_string()))),
        ["api", version] => discovery::resource_list("", version)
            .map(Route::Discovery)
            .ok_or_else(path_not_found),
        ["api", version, rest @ ..] => resource_route("", version, rest),
        ["apis"] => Ok(Route::Discovery(discovery::group_list())),
        ["apis", group] => discovery::group(group)
            .map(Route::Discovery)
            .ok_or_else(path_not_found),
        ["apis", group, version] => discovery::resource_list(group, version)
            .map(Route::Discovery)
            .ok_or_else(path_not_found),
        ["apis", group, version, rest @ ..] => resource_route(group, version, rest),
        _ => Err(path_not_found()),
    }
}

fn resource_route(group: &str, version: &str, rest: &[&str]) -> Result<Route, ApiError> {
    let find = |plural: &str| resources::find(group, version, plural);
    let (rt, ns, rest) = match rest {
        ["namespaces", ns, plural, tail @ ..] if find(plural).is_some_and(|rt| rt.namespaced) => (
            find(plural).ok_or_else(path_not_found)?,
            Some(ns.to_string()),
            tail,
        ),
        [plural, tail @ ..] => (find(plural).ok_or_else(path_not_found)?, None, tail),
        [] => return Err(path_not_found()),
    };
    let (name, sub) = match rest {
        [] => (None, None),
        [name] => (Some(name.to_string()), None),
        [name, sub] if rt.subresources.contains(sub) => {
            (Some(name.to_string()), Some(sub.to_string()))
        }
        _ => return Err(path_not_found()),
    };
    // A namespaced object is only reachable under its namespace.
    if rt.namespaced && ns.is_none() && name.is_some() {
        return Err(path_not_found());
    }
    Ok(Route::Resource(Target { rt, ns, name, sub }))
}

pub(super) fn path_not_found() -> ApiError {
    ApiError {
        code: 404,
        reason: "NotFound",
        message: "the server could not find the requested resource".into(),
        details: Some(json!({})),
        retry_after_seconds: None,
    }
}

/// 405 for a method the path does not serve at all (no verb to name).
pub(super) fn method_not_allowed_here() -> ApiError {
    ApiError {
        code: 405,
        reason: "MethodNotAllowed",
        message: "the server does not allow this method on the requested resource".into(),
        details: Some(json!({})),
        retry_after_seconds: None,
    }
}

/// The audit verb of a request, or 405.
pub(super) fn verb_of(method: &Method, t: &Target, watch: bool) -> Result<&'static str, ApiError> {
    let named = t.name.is_some();
    let verb = match (method.as_str(), named) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", false) => "create",
        ("POST", true) if t.sub.as_deref() == Some("eviction") => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => return Err(method_not_allowed_here()),
    };
    let allowed = match &t.sub {
        Some(sub) if sub == "eviction" => verb == "create",
        Some(_) => matches!(verb, "get" | "update" | "patch"),
        // Writes to a namespaced resource need a namespace in the path.
        None if t.rt.namespaced && t.ns.is_none() => {
            matches!(verb, "list" | "watch") && t.rt.supports(verb)
        }
        None => t.rt.supports(verb),
    };
    if allowed {
        Ok(verb)
    } else {
        Err(ApiError::method_not_allowed(t.rt, verb))
    }
}
