//! events.k8s.io/v1 Events share storage with core/v1 Events, as upstream: one table
//! holding the core/v1 form, fields renamed on the way in and out, and errors and field
//! selectors in the words of the group the client asked.

use serde_json::{Map, Value, json};

use super::meta::with_type_meta;
use super::read::parse_field_selector;
use crate::error::ApiError;
use crate::resources::{ResourceType, kinds};
use crate::selector::FieldSelector;

/// Field renames between core/v1 Event (first) and events.k8s.io/v1 Event (second).
const EVENT_RENAMES: [(&str, &str); 7] = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// The resource whose table holds `rt`'s objects, and whether objects convert between
/// the two (events.k8s.io/v1 Events live in the core/v1 Events table).
pub(super) fn storage(rt: &ResourceType) -> (&ResourceType, bool) {
    if rt.group == "events.k8s.io" && rt.plural == "events" {
        (kinds::core_events(), true)
    } else {
        (rt, false)
    }
}

fn rename_fields(obj: Value, from_core: bool) -> Value {
    let Value::Object(m) = obj else { return obj };
    let mut out = Map::with_capacity(m.len());
    for (k, v) in m {
        let renamed = EVENT_RENAMES.iter().find_map(|(core, v1)| {
            if from_core && k == *core {
                Some(*v1)
            } else if !from_core && k == *v1 {
                Some(*core)
            } else {
                None
            }
        });
        out.insert(renamed.map_or(k, str::to_string), v);
    }
    Value::Object(out)
}

/// A stored core/v1 Event as events.k8s.io/v1 shows it.
pub(super) fn event_view(core: &Value) -> Value {
    let mut v = rename_fields(core.clone(), true);
    if let Value::Object(m) = &mut v {
        if m.contains_key("apiVersion") {
            m.insert("apiVersion".into(), json!(kinds::events().api_version()));
        }
        // `omitempty` in events.k8s.io/v1, not in core/v1.
        for f in ["reportingController", "reportingInstance"] {
            if m.get(f).and_then(Value::as_str) == Some("") {
                m.shift_remove(f);
            }
        }
    }
    v
}

/// The core/v1 form of a body sent as events.k8s.io/v1 (unchanged when `conv` is false).
pub(super) fn stored_form(conv: bool, obj: Value) -> Value {
    if !conv {
        return obj;
    }
    let mut v = rename_fields(obj, false);
    if let Value::Object(m) = &mut v
        && m.get("apiVersion").and_then(Value::as_str) == Some("events.k8s.io/v1")
    {
        m.insert("apiVersion".into(), json!("v1"));
    }
    v
}

/// A stored object as `rt` shows it.
pub(super) fn view(rt: &ResourceType, conv: bool, obj: Value) -> Value {
    if conv {
        with_type_meta(rt, event_view(&obj))
    } else {
        obj
    }
}

/// Errors name the resource the client asked for.
pub(super) fn user_error(rt: &ResourceType, conv: bool, mut e: ApiError) -> ApiError {
    if !conv {
        return e;
    }
    let q = rt.qualified_resource();
    for (from, to) in [
        ("events \"".to_string(), format!("{q} \"")),
        (
            "Event \"".to_string(),
            format!("{} \"", rt.qualified_kind()),
        ),
    ] {
        if let Some(rest) = e.message.strip_prefix(&from) {
            e.message = format!("{to}{rest}");
        }
        e.message = e
            .message
            .replace(&format!("on {from}"), &format!("on {to}"));
    }
    if let Some(Value::Object(d)) = &mut e.details
        && (d.contains_key("kind") || d.contains_key("name"))
    {
        d.insert("group".into(), json!(rt.group));
    }
    e
}

pub(super) fn parse_field_selector_for(
    rt: &ResourceType,
    conv: bool,
    s: Option<&str>,
) -> Result<FieldSelector, ApiError> {
    let Some(s) = s else {
        return Ok(FieldSelector::default());
    };
    if !conv {
        return parse_field_selector(rt, Some(s));
    }
    // events.k8s.io/v1 field labels name the v1 fields; the table is core/v1.
    let mut fs = FieldSelector::parse(s).map_err(ApiError::bad_request)?;
    for r in fs.requirements.iter_mut() {
        if let Some(rest) = r.field.strip_prefix("regarding.") {
            r.field = format!("involvedObject.{rest}");
        } else if r.field == "reportingController" {
            r.field = "reportingComponent".into();
        } else if r.field == "deprecatedSource" {
            r.field = "source".into();
        }
        if !crate::selector::supported_fields(rt).contains(&r.field.as_str()) {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {}",
                r.field
            )));
        }
    }
    Ok(fs)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::store::fixtures::*;
    use crate::store::{ListOptions, PatchType, Store, WatchOptions};

    #[test]
    fn events_share_storage_across_groups() {
        use crate::resources::kinds::{core_events, events};
        let s = Store::new();
        let mut w = s
            .watch(
                events(),
                Some("default"),
                &WatchOptions {
                    field_selector: Some("regarding.name=n1".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Node", "name": "n1"}, "reason": "Started", "message": "hello", "count": 1});
        s.create(core_events(), Some("default"), core, &wo("kubelet"))
            .unwrap();
        let v1 = s.get(events(), Some("default"), "e1").unwrap();
        assert_eq!(v1["apiVersion"], "events.k8s.io/v1");
        assert_eq!(v1["note"], "hello");
        assert_eq!(v1["regarding"]["name"], "n1");
        assert_eq!(v1["deprecatedCount"], 1);
        let body = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e2"},
            "regarding": {"kind": "Node", "name": "n2"}, "reason": "ConfigApplied", "note": "applied",
            "reportingController": "kubelet-gitops", "reportingInstance": "agent-n2", "action": "Apply", "type": "Normal"});
        let created = s
            .create(events(), Some("default"), body, &wo("agent"))
            .unwrap();
        assert_eq!(created["note"], "applied");
        let listed = s
            .list(
                core_events(),
                Some("default"),
                &ListOptions {
                    field_selector: Some("involvedObject.name=n2".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(listed.items.len(), 1);
        assert_eq!(listed.items[0]["message"], "applied");
        assert_eq!(listed.items[0]["reportingComponent"], "kubelet-gitops");
        assert_eq!(listed.items[0]["apiVersion"], "v1");
        let p = s
            .patch(
                events(),
                Some("default"),
                "e2",
                None,
                PatchType::Merge,
                br#"{"note":"again","deprecatedCount":2}"#,
                &wo("agent"),
            )
            .unwrap();
        assert_eq!(p["note"], "again");
        assert_eq!(
            s.get(core_events(), Some("default"), "e2").unwrap()["count"],
            2
        );
        let ev = w.try_recv().unwrap();
        assert_eq!(
            (ev.kind, ev.object()["note"].as_str()),
            ("ADDED", Some("hello"))
        );
        assert!(
            w.try_recv().is_err(),
            "n2's events do not match regarding.name=n1"
        );
        let e = s.get(events(), Some("default"), "nope").unwrap_err();
        assert_eq!(e.message, "events.events.k8s.io \"nope\" not found");
        let e = s.get(core_events(), Some("default"), "nope").unwrap_err();
        assert_eq!(e.message, "events \"nope\" not found");
    }
}
