//! Content negotiation: which representation the client's `Accept` asks for, and which
//! body format or patch type its `Content-Type` names.

use crate::error::ApiError;
use crate::store::PatchType;

/// The representation of a response body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// The objects as stored, JSON.
    Json,
    /// The objects as stored, YAML (not for watch).
    Yaml,
    /// `meta.k8s.io` `PartialObjectMetadata`(`List`) of this version.
    Meta(&'static str),
    /// `meta.k8s.io` `Table` of this version (get, list and watch only).
    Table(&'static str),
}

/// One media range of an Accept header: `type/subtype` and its parameters.
struct MediaRange<'a> {
    mime: &'a str,
    params: Vec<(&'a str, &'a str)>,
}

impl<'a> MediaRange<'a> {
    fn parse(s: &'a str) -> MediaRange<'a> {
        let mut parts = s.split(';').map(str::trim);
        let mime = parts.next().unwrap_or("");
        let params = parts
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim().trim_matches('"')))
            .collect();
        MediaRange { mime, params }
    }

    fn param(&self, key: &str) -> Option<&'a str> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| *v)
    }
}

fn meta_version(v: Option<&str>) -> Option<&'static str> {
    match v {
        Some("v1") => Some("v1"),
        Some("v1beta1") => Some("v1beta1"),
        _ => None,
    }
}

/// The output for a request with this `Accept` header and audit `verb`; 406 when the
/// client accepts nothing the sim can produce.
pub(crate) fn negotiate(accept: Option<&str>, verb: &str) -> Result<Output, ApiError> {
    let accept = accept.map(str::trim).unwrap_or("");
    if accept.is_empty() {
        return Ok(Output::Json);
    }
    let reads = matches!(verb, "get" | "list" | "watch");
    for range in accept.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        let m = MediaRange::parse(range);
        let json_like = matches!(m.mime, "application/json" | "application/*" | "*/*");
        let as_ = m.param("as");
        let group_ok = m.param("g").is_none_or(|g| g == "meta.k8s.io");
        match (json_like, as_) {
            (true, None) => return Ok(Output::Json),
            (true, Some("Table")) if reads && group_ok => {
                if let Some(v) = meta_version(m.param("v")) {
                    return Ok(Output::Table(v));
                }
            }
            (true, Some("PartialObjectMetadata" | "PartialObjectMetadataList")) if group_ok => {
                if let Some(v) = meta_version(m.param("v")) {
                    return Ok(Output::Meta(v));
                }
            }
            (false, None) if m.mime == "application/yaml" && verb != "watch" => {
                return Ok(Output::Yaml);
            }
            _ => {}
        }
    }
    Err(ApiError {
        code: 406,
        reason: "NotAcceptable",
        message: "only the following media types are accepted: application/json, application/yaml"
            .to_string(),
        details: None,
        retry_after_seconds: None,
    })
}

/// The media type of a Content-Type header, lower-cased, without parameters.
pub(crate) fn media_type(content_type: Option<&str>) -> String {
    content_type
        .and_then(|c| c.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// The patch type a PATCH request's Content-Type names; 415 otherwise.
pub(crate) fn patch_type(content_type: Option<&str>) -> Result<PatchType, ApiError> {
    match media_type(content_type).as_str() {
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/strategic-merge-patch+json" => Ok(PatchType::StrategicMerge),
        "application/apply-patch+yaml" => Ok(PatchType::Apply),
        _ => Err(ApiError::unsupported_media_type()),
    }
}

/// Format of a create or update body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyFormat {
    Json,
    Yaml,
    /// `application/vnd.kubernetes.protobuf` (see `protobuf.rs` for the kinds decoded).
    Protobuf,
}

/// The body format a create or update's Content-Type names (JSON when absent); 415 otherwise.
pub(crate) fn body_format(content_type: Option<&str>) -> Result<BodyFormat, ApiError> {
    match media_type(content_type).as_str() {
        "" | "application/json" => Ok(BodyFormat::Json),
        "application/yaml" => Ok(BodyFormat::Yaml),
        "application/vnd.kubernetes.protobuf" => Ok(BodyFormat::Protobuf),
        _ => Err(ApiError {
            code: 415,
            reason: "UnsupportedMediaType",
            message: "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf".into(),
            details: None,
            retry_after_seconds: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL_GET: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    const KUBE_META: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    const DISCOVERY: &str =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

    #[test]
    fn accept_forms() {
        assert_eq!(
            negotiate(Some(KUBECTL_GET), "list").ok(),
            Some(Output::Table("v1"))
        );
        assert_eq!(
            negotiate(Some(KUBECTL_GET), "watch").ok(),
            Some(Output::Table("v1"))
        );
        // Table only for reads: a write falls through to plain JSON.
        assert_eq!(
            negotiate(Some(KUBECTL_GET), "patch").ok(),
            Some(Output::Json)
        );
        assert_eq!(
            negotiate(Some(KUBE_META), "list").ok(),
            Some(Output::Meta("v1"))
        );
        assert_eq!(negotiate(Some(DISCOVERY), "get").ok(), Some(Output::Json));
        assert_eq!(negotiate(None, "get").ok(), Some(Output::Json));
        assert_eq!(negotiate(Some("*/*"), "get").ok(), Some(Output::Json));
        assert_eq!(
            negotiate(Some("application/yaml"), "get").ok(),
            Some(Output::Yaml)
        );
        assert_eq!(
            negotiate(
                Some("application/vnd.kubernetes.protobuf, application/json"),
                "get"
            )
            .ok(),
            Some(Output::Json)
        );
        let e = negotiate(Some("application/vnd.kubernetes.protobuf"), "get").expect_err("406");
        assert_eq!(e.code, 406);
        assert_eq!(
            negotiate(Some("application/yaml"), "watch").map_err(|e| e.code),
            Err(406)
        );
        assert_eq!(
            negotiate(Some("application/json;as=Table;v=v2;g=meta.k8s.io"), "get")
                .map_err(|e| e.code),
            Err(406)
        );
    }

    #[test]
    fn content_types() {
        assert_eq!(
            patch_type(Some("application/merge-patch+json")).ok(),
            Some(PatchType::Merge)
        );
        assert_eq!(
            patch_type(Some(
                "application/strategic-merge-patch+json; charset=utf-8"
            ))
            .ok(),
            Some(PatchType::StrategicMerge)
        );
        assert_eq!(
            patch_type(Some("application/apply-patch+yaml")).ok(),
            Some(PatchType::Apply)
        );
        assert_eq!(
            patch_type(Some("application/json")).map_err(|e| e.code),
            Err(415)
        );
        assert_eq!(patch_type(None).map_err(|e| e.code), Err(415));
        assert_eq!(body_format(None).ok(), Some(BodyFormat::Json));
        assert_eq!(
            body_format(Some("application/yaml")).ok(),
            Some(BodyFormat::Yaml)
        );
        assert_eq!(
            body_format(Some("application/vnd.kubernetes.protobuf")).ok(),
            Some(BodyFormat::Protobuf)
        );
        assert_eq!(
            body_format(Some("text/plain")).map_err(|e| e.code),
            Err(415)
        );
    }
}
