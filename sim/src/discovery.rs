//! Discovery documents, as kube-apiserver serves them: `/version`, `/api`, `/api/v1`,
//! `/apis`, `/apis/{group}`, `/apis/{group}/{version}`, all built from
//! [`crate::resources::RESOURCES`].
//!
//! Only the plain (legacy) forms are served: kubectl and kube-rs ask for aggregated
//! discovery (`as=APIGroupDiscoveryList`) first, also accept `application/json`, and
//! fall back to these documents when the response's Content-Type is plain
//! `application/json`.

use serde_json::{Map, Value, json};

use crate::resources::{RESOURCES, ResourceType};

/// The `gitVersion` the sim reports.
pub const GIT_VERSION: &str = "v1.36.0-kubelet-gitops-sim";

/// Verbs of the `status` subresource.
const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

/// The `/version` document (`version.Info`).
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "36",
        "emulationMajor": "1",
        "emulationMinor": "36",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "35",
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": format!("{}/{}", go_os(), go_arch()),
    })
}

fn go_os() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    }
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The `/api` document (`APIVersions`); `server_address` is `host:port`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            { "clientCIDR": "0.0.0.0/0", "serverAddress": server_address }
        ],
    })
}

/// Every (group, version) pair served outside the core group, in table order.
fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for rt in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        if !out.contains(&(rt.group, rt.version)) {
            out.push((rt.group, rt.version));
        }
    }
    out
}

fn api_group(name: &str) -> Option<Value> {
    let versions: Vec<Value> = group_versions()
        .into_iter()
        .filter(|(g, _)| *g == name)
        .map(|(g, v)| json!({ "groupVersion": format!("{g}/{v}"), "version": v }))
        .collect();
    let preferred = versions.first()?.clone();
    Some(json!({
        "name": name,
        "versions": versions,
        "preferredVersion": preferred,
    }))
}

/// The `/apis` document (`APIGroupList`).
pub fn group_list() -> Value {
    let mut names: Vec<&str> = Vec::new();
    for (g, _) in group_versions() {
        if !names.contains(&g) {
            names.push(g);
        }
    }
    let groups: Vec<Value> = names.into_iter().filter_map(api_group).collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

/// The `/apis/{group}` document (`APIGroup`), if the group is served.
pub fn group(name: &str) -> Option<Value> {
    let mut g = api_group(name)?;
    if let Value::Object(m) = &mut g {
        let mut out = Map::new();
        out.insert("kind".into(), json!("APIGroup"));
        out.insert("apiVersion".into(), json!("v1"));
        out.extend(std::mem::take(m));
        return Some(Value::Object(out));
    }
    None
}

fn api_resource(rt: &ResourceType) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(rt.plural));
    m.insert("singularName".into(), json!(rt.singular));
    m.insert("namespaced".into(), json!(rt.namespaced));
    m.insert("kind".into(), json!(rt.kind));
    m.insert("verbs".into(), json!(rt.verbs));
    if !rt.short_names.is_empty() {
        m.insert("shortNames".into(), json!(rt.short_names));
    }
    if rt.plural == "pods" {
        m.insert("categories".into(), json!(["all"]));
    }
    Value::Object(m)
}

fn subresource(rt: &ResourceType, sub: &str) -> Value {
    if sub == "eviction" {
        // kubectl drain looks for this entry (group and version set) to use evictions.
        return json!({
            "name": format!("{}/{}", rt.plural, sub),
            "singularName": "",
            "namespaced": rt.namespaced,
            "group": "policy",
            "version": "v1",
            "kind": "Eviction",
            "verbs": ["create"],
        });
    }
    json!({
        "name": format!("{}/{}", rt.plural, sub),
        "singularName": "",
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": STATUS_VERBS,
    })
}

/// The `APIResourceList` of `/api/v1` (group `""`) or `/apis/{group}/{version}`, if
/// that group version is served.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for rt in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        resources.push(api_resource(rt));
        for sub in rt.subresources {
            resources.push(subresource(rt, sub));
        }
    }
    if resources.is_empty() {
        return None;
    }
    if group.is_empty() {
        // The real /api/v1 document carries no apiVersion.
        Some(json!({ "kind": "APIResourceList", "groupVersion": version, "resources": resources }))
    } else {
        Some(json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{group}/{version}"),
            "resources": resources,
        }))
    }
}

/// The key of a group version in the OpenAPI v3 root: `api/v1`, `apis/{group}/{version}`.
fn openapi_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The `/openapi/v3` root: one entry per served group version.
///
/// The sim serves a minimal OpenAPI v3: enough for kubectl to learn that the server
/// validates fields itself (the `fieldValidation` query parameter on every PATCH), so
/// `kubectl create -f` and `kubectl apply -f` validate server-side instead of failing
/// with "failed to download openapi". No schemas: `kubectl explain` does not work.
pub fn openapi_v3_root() -> Value {
    let mut paths = Map::new();
    let mut gvs = vec![("", "v1")];
    gvs.extend(group_versions());
    for (g, v) in gvs {
        let key = openapi_key(g, v);
        paths.insert(
            key.clone(),
            json!({ "serverRelativeURL": format!("/openapi/v3/{key}?hash={}", OPENAPI_HASH) }),
        );
    }
    json!({ "paths": paths })
}

/// A constant hash: the documents never change while a sim runs (nor between runs).
const OPENAPI_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000001";

/// The OpenAPI v3 document of one group version (`api/v1`, `apis/{group}/{version}`),
/// if served: a PATCH operation per resource path, tagged with its group-version-kind
/// and the `fieldValidation` (and `dryRun`, `fieldManager`, `force`) query parameters.
pub fn openapi_v3_group_version(key: &str) -> Option<Value> {
    let (group, version) = match key.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return None,
    };
    let mut paths = Map::new();
    for rt in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let path = if rt.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", rt.plural)
        } else {
            format!("{prefix}/{}/{{name}}", rt.plural)
        };
        let params: Vec<Value> = ["dryRun", "fieldManager", "fieldValidation", "force"]
            .iter()
            .map(|p| json!({ "name": p, "in": "query", "schema": { "type": if *p == "force" { "boolean" } else { "string" } } }))
            .collect();
        let gvk = json!({ "group": rt.group, "version": rt.version, "kind": rt.kind });
        let mut ops = Map::new();
        for (method, verb) in [
            ("get", "get"),
            ("put", "update"),
            ("patch", "patch"),
            ("delete", "delete"),
        ] {
            if !rt.supports(verb) {
                continue;
            }
            ops.insert(
                method.into(),
                json!({
                    "operationId": format!("{verb}{}", rt.kind),
                    "parameters": if method == "patch" { params.clone() } else { Vec::new() },
                    "responses": { "200": { "description": "OK" } },
                    "x-kubernetes-action": verb,
                    "x-kubernetes-group-version-kind": gvk,
                }),
            );
        }
        paths.insert(path, Value::Object(ops));
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": GIT_VERSION },
        "paths": paths,
        "components": { "schemas": {} },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_resource_list_has_nodes_and_status() {
        let list = resource_list("", "v1").expect("core v1");
        assert_eq!(list["groupVersion"], "v1");
        assert!(list.get("apiVersion").is_none());
        let resources = list["resources"].as_array().expect("array");
        let nodes = resources
            .iter()
            .find(|r| r["name"] == "nodes")
            .expect("nodes");
        assert_eq!(nodes["namespaced"], false);
        assert_eq!(nodes["shortNames"], json!(["no"]));
        assert_eq!(nodes["kind"], "Node");
        let status = resources
            .iter()
            .find(|r| r["name"] == "nodes/status")
            .expect("nodes/status");
        assert_eq!(status["verbs"], json!(["get", "patch", "update"]));
        // What kubectl drain's CheckEvictionSupport looks for.
        let eviction = resources
            .iter()
            .find(|r| r["name"] == "pods/eviction")
            .expect("pods/eviction");
        assert_eq!(
            (&eviction["group"], &eviction["version"], &eviction["kind"]),
            (&json!("policy"), &json!("v1"), &json!("Eviction"))
        );
        assert_eq!(eviction["verbs"], json!(["create"]));
        let cm = resources
            .iter()
            .find(|r| r["name"] == "configmaps")
            .expect("configmaps");
        assert_eq!(cm["namespaced"], true);
        assert!(resource_list("", "v2").is_none());
    }

    #[test]
    fn groups() {
        let list = group_list();
        let names: Vec<&str> = list["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .filter_map(|g| g["name"].as_str())
            .collect();
        assert!(names.contains(&"events.k8s.io"));
        assert!(names.contains(&"coordination.k8s.io"));
        let g = group("coordination.k8s.io").expect("group");
        assert_eq!(g["kind"], "APIGroup");
        assert_eq!(
            g["preferredVersion"]["groupVersion"],
            "coordination.k8s.io/v1"
        );
        assert!(group("batch").is_none());
        assert!(group("policy").is_some());
        let l = resource_list("coordination.k8s.io", "v1").expect("leases");
        assert_eq!(l["resources"][0]["name"], "leases");
        assert_eq!(l["apiVersion"], "v1");
        assert_eq!(version()["gitVersion"], GIT_VERSION);
    }

    #[test]
    fn openapi_v3_names_field_validation_on_patch() {
        let root = openapi_v3_root();
        let url = root["paths"]["api/v1"]["serverRelativeURL"]
            .as_str()
            .expect("core url");
        assert!(url.starts_with("/openapi/v3/api/v1?hash="));
        assert!(root["paths"]["apis/coordination.k8s.io/v1"].is_object());
        let doc = openapi_v3_group_version("api/v1").expect("core doc");
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "ConfigMap"
        );
        let params = patch["parameters"].as_array().expect("params");
        assert!(
            params
                .iter()
                .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
        );
        assert!(doc["paths"]["/api/v1/nodes/{name}"]["patch"].is_object());
        assert!(doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"].is_object());
        assert!(openapi_v3_group_version("apis/policy/v1").is_some());
        assert!(openapi_v3_group_version("apis/batch/v1").is_none());
        assert!(openapi_v3_group_version("nonsense").is_none());
    }
}
