//! Field-level differences: effective configs (defaults applied on both sides), pool
//! specs and repository settings, as `field: old -> new`.

use std::collections::BTreeMap;
use std::fmt;

use kubelet_gitops_core::decode::join_key;
use kubelet_gitops_core::defaults;
use kubelet_gitops_core::types::KubeletConfiguration;
use serde_json::Value;

use crate::model::{PoolSpec, Rollout};
use crate::render::RepoSettings;

/// One field that differs: `maxPods: 110 -> 64`. Values are compact JSON (strings
/// quoted); `None` is a field that is not set on that side.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FieldChange {
    pub field: String,
    pub old: Option<String>,
    pub new: Option<String>,
}

impl fmt::Display for FieldChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = |v: &Option<String>| v.clone().unwrap_or_else(|| "(unset)".to_string());
        write!(
            f,
            "{}: {} -> {}",
            self.field,
            side(&self.old),
            side(&self.new)
        )
    }
}

/// The fields whose effective value differs between two configs, each defaulted as the
/// kubelet defaults its config file, sorted by field. Maps are compared key by key
/// (`systemReserved.memory`), lists as a whole (a list is replaced, never merged).
pub fn effective_diff(old: &KubeletConfiguration, new: &KubeletConfiguration) -> Vec<FieldChange> {
    let old = leaves(&defaults::defaulted(old));
    let new = leaves(&defaults::defaulted(new));
    let mut fields: Vec<&String> = old.keys().chain(new.keys()).collect();
    fields.sort();
    fields.dedup();
    fields
        .into_iter()
        .filter_map(|field| {
            let (o, n) = (old.get(field), new.get(field));
            // An empty map on one side and keys under it on the other is reported through
            // those keys (`authentication.x509.clientCAFile: (unset) -> "..."`), not as a
            // second line `authentication.x509: {} -> (unset)`.
            let prefix = format!("{field}.");
            let empty_map =
                |v: Option<&Value>| v.is_some_and(|v| v == &Value::Object(Default::default()));
            let has_children = |m: &BTreeMap<String, Value>| {
                m.range(prefix.clone()..)
                    .next()
                    .is_some_and(|(k, _)| k.starts_with(&prefix))
            };
            if (empty_map(o) && n.is_none() && has_children(&new))
                || (empty_map(n) && o.is_none() && has_children(&old))
            {
                return None;
            }
            (o != n).then(|| FieldChange {
                field: field.clone(),
                old: o.map(compact),
                new: n.map(compact),
            })
        })
        .collect()
}

/// Every leaf of the config's JSON form by dotted path; `apiVersion` and `kind` left out.
fn leaves(config: &KubeletConfiguration) -> BTreeMap<String, Value> {
    fn walk(prefix: &str, v: &Value, out: &mut BTreeMap<String, Value>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, v) in m {
                    walk(&join_key(prefix, k), v, out);
                }
            }
            other => {
                out.insert(prefix.to_string(), other.clone());
            }
        }
    }
    let mut out = BTreeMap::new();
    // A config serializes to JSON: every field is a JSON type (strings, numbers, maps
    // with string keys); `Null` (never produced) would simply compare equal.
    let value = serde_json::to_value(config).unwrap_or(Value::Null);
    if let Value::Object(m) = value {
        for (k, v) in m {
            if k != "apiVersion" && k != "kind" {
                walk(&k, &v, &mut out);
            }
        }
    }
    out
}

/// A value as compact JSON.
pub(super) fn compact(v: &Value) -> String {
    v.to_string()
}

/// Changes to a pool's selector, priority and rollout.
pub(super) fn spec_diff(old: &PoolSpec, new: &PoolSpec) -> Vec<FieldChange> {
    let mut out = Vec::new();
    let mut push = |field: &str, o: String, n: String| {
        if o != n {
            out.push(FieldChange {
                field: field.to_string(),
                old: Some(o),
                new: Some(n),
            });
        }
    };
    let selector = |s: &PoolSpec| {
        let q = s.selector.to_query();
        if q.is_empty() {
            "{} (every node)".to_string()
        } else {
            q
        }
    };
    push("nodeSelector", selector(old), selector(new));
    push(
        "priority",
        old.priority.to_string(),
        new.priority.to_string(),
    );
    rollout_diff("rollout", &old.rollout, &new.rollout, &mut push);
    out
}

fn rollout_diff(
    prefix: &str,
    old: &Rollout,
    new: &Rollout,
    push: &mut impl FnMut(&str, String, String),
) {
    let d = |d: std::time::Duration| humantime::format_duration(d).to_string();
    push(
        &join_key(prefix, "maxUnavailable"),
        old.max_unavailable.to_string(),
        new.max_unavailable.to_string(),
    );
    push(
        &join_key(prefix, "canary"),
        old.canary.to_string(),
        new.canary.to_string(),
    );
    push(
        &join_key(prefix, "paused"),
        old.paused.to_string(),
        new.paused.to_string(),
    );
    push(
        &join_key(prefix, "healthTimeout"),
        d(old.health_timeout),
        d(new.health_timeout),
    );
    push(
        &join_key(prefix, "lkgGrace"),
        d(old.lkg_grace),
        d(new.lkg_grace),
    );
    push(
        &join_key(prefix, "maintenance"),
        describe_maintenance(old.maintenance.as_ref()),
        describe_maintenance(new.maintenance.as_ref()),
    );
    let waves = |w: Option<&crate::model::Waves>| w.map_or("(none)".to_string(), |w| w.to_string());
    push(
        &join_key(prefix, "waves"),
        waves(old.waves.as_ref()),
        waves(new.waves.as_ref()),
    );
    push(
        &join_key(prefix, "drain"),
        old.drain.mode.to_string(),
        new.drain.mode.to_string(),
    );
    push(
        &join_key(prefix, "drainTimeout"),
        d(old.drain.timeout),
        d(new.drain.timeout),
    );
    push(
        &join_key(prefix, "drainForce"),
        old.drain.force.to_string(),
        new.drain.force.to_string(),
    );
}

/// `drain only: Sat,Sun 22:00 Europe/Berlin for 6h`, or `(none)`.
pub fn describe_maintenance(m: Option<&crate::model::Maintenance>) -> String {
    let Some(m) = m else {
        return "(none)".to_string();
    };
    let windows: Vec<String> = m.windows.iter().map(ToString::to_string).collect();
    let scope = match m.applies_to {
        crate::rollout::window::AppliesTo::Drain => "drain-class changes",
        crate::rollout::window::AppliesTo::All => "every change",
    };
    format!("{scope} in {}", windows.join("; "))
}

/// Changes to the repository settings that matter to a rollout.
pub(super) fn settings_diff(old: &RepoSettings, new: &RepoSettings) -> Vec<FieldChange> {
    let mut out = Vec::new();
    let mut push = |field: &str, o: String, n: String| {
        if o != n {
            out.push(FieldChange {
                field: field.to_string(),
                old: Some(o),
                new: Some(n),
            });
        }
    };
    push("namespace", old.namespace.clone(), new.namespace.clone());
    push(
        "keepConfigMaps",
        old.keep_configmaps.to_string(),
        new.keep_configmaps.to_string(),
    );
    rollout_diff(
        "rollout",
        &old.rollout_defaults,
        &new.rollout_defaults,
        &mut push,
    );
    let list = |l: &[String]| format!("[{}]", l.join(", "));
    push("include", list(&old.include), list(&new.include));
    push("exclude", list(&old.exclude), list(&new.exclude));
    push(
        "policy.forbiddenPoolFields",
        list(&old.policy.forbidden_pool_fields),
        list(&new.policy.forbidden_pool_fields),
    );
    let classes = |o: &kubelet_gitops_core::disruption::Overrides| {
        let entries: Vec<String> = o.iter().map(|(f, c, _)| format!("{f}: {c}")).collect();
        format!("{{{}}}", entries.join(", "))
    };
    push(
        "disruption.classes",
        classes(&old.disruption),
        classes(&new.disruption),
    );
    out
}
