//! PodDisruptionBudgets: the status the disruption controller computes for a budget
//! (k8s.io/kubernetes pkg/controller/disruption/disruption.go) and the decision the
//! eviction subresource makes for a pod (pkg/registry/core/pod/storage/eviction.go), as
//! pure functions over the objects' JSON. The store applies them (`store::eviction`).
//!
//! The sim runs no workload controllers: a pod's controller (a ReplicaSet,
//! ReplicationController or StatefulSet named by its controller ownerReference) is taken
//! to want exactly the pods of it that the budget selects (its scale), where the real
//! controller reads the controller's `spec.replicas`. Any other controller kind (a
//! DaemonSet, a Job, a Node for mirror pods) has no scale, as upstream finds none.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::rules::go_quote;
use crate::selector::{LabelSelector, Op, Requirement};

/// How long an evicted pod stays in `status.disruptedPods` (counted as unhealthy) before
/// the controller assumes its deletion will not come (upstream `DeletionTimeout`).
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(2 * 60);

/// The most entries of `status.disruptedPods` before evictions are refused (upstream
/// `MaxDisruptedPodSize`).
pub const MAX_DISRUPTED_POD_SIZE: usize = 2000;

/// The condition type the controller maintains.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";

/// Controller kinds the disruption controller finds a scale for (without a scale
/// subresource of a custom resource, which the sim does not serve).
const SCALED_CONTROLLERS: &[&str] = &["ReplicaSet", "ReplicationController", "StatefulSet"];

/// `metav1.LabelSelectorAsSelector` of a budget's `spec.selector`: `None` selects nothing
/// (a null selector), an empty one everything.
pub fn budget_selector(pdb: &Value) -> Result<Option<LabelSelector>, String> {
    let Some(sel) = pdb.pointer("/spec/selector").filter(|s| !s.is_null()) else {
        return Ok(None);
    };
    let mut requirements = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            requirements.push(Requirement {
                key: k.clone(),
                op: Op::Equals,
                values: vec![v.as_str().unwrap_or("").to_string()],
            });
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let op_name = e.get("operator").and_then(Value::as_str).unwrap_or("");
        let op = match op_name {
            "In" => Op::In,
            "NotIn" => Op::NotIn,
            "Exists" => Op::Exists,
            "DoesNotExist" => Op::DoesNotExist,
            other => {
                return Err(format!(
                    "{} is not a valid label selector operator",
                    go_quote(other)
                ));
            }
        };
        let mut values: Vec<String> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        values.sort();
        values.dedup();
        requirements.push(Requirement {
            key: key.to_string(),
            op,
            values,
        });
    }
    requirements.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(Some(LabelSelector { requirements }))
}

/// Whether the budget selects `pod` (same namespace is the caller's concern). A selector
/// that does not parse selects nothing, as the eviction subresource skips it.
pub fn selects(pdb: &Value, pod: &Value) -> bool {
    match budget_selector(pdb) {
        Ok(Some(sel)) => sel.matches(pod.pointer("/metadata/labels").and_then(Value::as_object)),
        _ => false,
    }
}

/// `podutil.IsPodReady`: the `Ready` condition is `True`.
pub fn pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn terminating(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

fn name(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn int_field(obj: &Value, ptr: &str) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

/// `intstr.GetScaledValueFromIntOrPercent`: an int as is, `"N%"` of `total`.
pub fn scaled_value(v: &Value, total: i64, round_up: bool) -> Result<i64, String> {
    match v {
        Value::Number(n) => Ok(n.as_i64().unwrap_or(0)),
        Value::String(s) => {
            let Some(p) = s.strip_suffix('%') else {
                return Err(
                    "invalid value for IntOrString: invalid type: string is not a percentage"
                        .into(),
                );
            };
            let p: i64 = p.parse().map_err(|_| {
                format!(
                    "invalid value for IntOrString: invalid value {}: strconv.Atoi: parsing {}: invalid syntax",
                    go_quote(s),
                    go_quote(p)
                )
            })?;
            let scaled = p as f64 * total as f64 / 100.0;
            Ok(if round_up {
                scaled.ceil() as i64
            } else {
                scaled.floor() as i64
            })
        }
        _ => Err("invalid value for IntOrString: invalid type: neither int nor percentage".into()),
    }
}

/// `getExpectedScale`: the scale of the selected pods' controllers (in the sim, each
/// controller's pods among them) and the pods without a controller.
fn expected_scale(pods: &[&Value]) -> Result<(i64, Vec<String>), String> {
    let mut scale: BTreeMap<String, i64> = BTreeMap::new();
    let mut unmanaged = Vec::new();
    for pod in pods {
        let controller = pod
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|r| r["controller"] == true);
        let Some(c) = controller else {
            unmanaged.push(name(pod).to_string());
            continue;
        };
        let kind = c["kind"].as_str().unwrap_or("");
        if !SCALED_CONTROLLERS.contains(&kind) {
            return Err(format!(
                "found no controllers for pod {}",
                go_quote(name(pod))
            ));
        }
        *scale
            .entry(c["uid"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    Ok((scale.values().sum(), unmanaged))
}

/// `getExpectedPodCount`: (expectedPods, desiredHealthy).
pub fn expected_pod_count(pdb: &Value, pods: &[&Value]) -> Result<(i64, i64), String> {
    let spec = &pdb["spec"];
    if let Some(max) = spec.get("maxUnavailable").filter(|v| !v.is_null()) {
        let (expected, _) = expected_scale(pods)?;
        let max = scaled_value(max, expected, true)?;
        return Ok((expected, (expected - max).max(0)));
    }
    match spec.get("minAvailable") {
        Some(Value::Number(n)) => Ok((pods.len() as i64, n.as_i64().unwrap_or(0))),
        Some(v @ Value::String(_)) => {
            let (expected, _) = expected_scale(pods)?;
            Ok((expected, scaled_value(v, expected, true)?))
        }
        _ => Ok((0, 0)),
    }
}

/// `apimeta.SetStatusCondition` of the `DisruptionAllowed` condition on a budget's
/// status (its `conditions`, at its `observedGeneration`): the transition time moves only
/// when the condition's status does.
fn set_condition(
    budget_status: &mut Map<String, Value>,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
) {
    let generation = budget_status
        .get("observedGeneration")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let mut conditions: Vec<Value> = budget_status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut c = Map::new();
    c.insert("type".into(), json!(DISRUPTION_ALLOWED));
    c.insert("status".into(), json!(status));
    if generation != 0 {
        c.insert("observedGeneration".into(), json!(generation));
    }
    let existing = conditions
        .iter()
        .position(|x| x["type"] == DISRUPTION_ALLOWED);
    let since = match existing.map(|i| &conditions[i]) {
        Some(old) if old["status"] == status => old["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    c.insert("lastTransitionTime".into(), since);
    c.insert("reason".into(), json!(reason));
    c.insert("message".into(), json!(message));
    match existing {
        Some(i) => conditions[i] = Value::Object(c),
        None => conditions.push(Value::Object(c)),
    }
    budget_status.insert("conditions".into(), Value::Array(conditions));
}

/// `pdbhelper.UpdateDisruptionAllowedCondition` on a status object.
fn update_allowed_condition(status: &mut Map<String, Value>, now: &str) {
    let allowed = status
        .get("disruptionsAllowed")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let (st, reason) = if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    set_condition(status, st, reason, "", now);
}

/// A `policy/v1` status object in the Go struct's field order.
fn status_object(
    observed_generation: i64,
    disrupted: &Map<String, Value>,
    allowed: i64,
    current: i64,
    desired: i64,
    expected: i64,
    conditions: Option<&Value>,
) -> Map<String, Value> {
    let mut s = Map::new();
    if observed_generation != 0 {
        s.insert("observedGeneration".into(), json!(observed_generation));
    }
    if !disrupted.is_empty() {
        s.insert("disruptedPods".into(), Value::Object(disrupted.clone()));
    }
    s.insert("disruptionsAllowed".into(), json!(allowed));
    s.insert("currentHealthy".into(), json!(current));
    s.insert("desiredHealthy".into(), json!(desired));
    s.insert("expectedPods".into(), json!(expected));
    if let Some(c) = conditions.filter(|c| c.as_array().is_some_and(|a| !a.is_empty())) {
        s.insert("conditions".into(), c.clone());
    }
    s
}

/// The status the disruption controller gives `pdb` (its `trySync`, or `failSafe` when
/// the expected count cannot be computed), from the pods of its namespace `pods` (all of
/// them; the budget's selector picks), at `now` (Unix seconds; RFC 3339 `now_str`).
pub fn budget_status(pdb: &Value, pods: &[Value], now: i64, now_str: &str) -> Value {
    let old = &pdb["status"];
    let selected: Vec<&Value> = match budget_selector(pdb) {
        Ok(Some(sel)) => pods
            .iter()
            .filter(|p| sel.matches(p.pointer("/metadata/labels").and_then(Value::as_object)))
            .collect(),
        Ok(None) => Vec::new(),
        Err(e) => return fail_safe(old, &e, now_str),
    };
    let (expected, desired) = match expected_pod_count(pdb, &selected) {
        Ok(v) => v,
        Err(e) => return fail_safe(old, &e, now_str),
    };
    // buildDisruptedPodMap: entries of selected pods not yet terminating and not older
    // than the deletion timeout.
    let old_disrupted = old.get("disruptedPods").and_then(Value::as_object);
    let mut disrupted = Map::new();
    for pod in &selected {
        if terminating(pod) {
            continue;
        }
        let Some(at) = old_disrupted.and_then(|d| d.get(name(pod))) else {
            continue;
        };
        let when = at
            .as_str()
            .and_then(crate::time::parse_timestamp)
            .unwrap_or(0);
        if when + (DELETION_TIMEOUT.as_secs() as i64) >= now {
            disrupted.insert(name(pod).to_string(), at.clone());
        }
    }
    // countHealthyPods.
    let current = selected
        .iter()
        .filter(|p| !terminating(p) && !disrupted.contains_key(name(p)) && pod_ready(p))
        .count() as i64;
    let mut allowed = current - desired;
    if expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let generation = int_field(pdb, "/metadata/generation");
    let mut status = status_object(
        generation,
        &disrupted,
        allowed,
        current,
        desired,
        expected,
        old.get("conditions"),
    );
    update_allowed_condition(&mut status, now_str);
    Value::Object(status)
}

/// `failSafe`: the old status with no disruption allowed and a `SyncFailed` condition.
fn fail_safe(old: &Value, err: &str, now_str: &str) -> Value {
    let mut status = old.as_object().cloned().unwrap_or_default();
    status.insert("disruptionsAllowed".into(), json!(0));
    for f in ["currentHealthy", "desiredHealthy", "expectedPods"] {
        status.entry(f).or_insert(json!(0));
    }
    set_condition(&mut status, "False", "SyncFailed", err, now_str);
    Value::Object(status)
}

/// What the eviction subresource does with a pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Eviction {
    /// Delete the pod without looking at budgets: it is terminal, pending, or already
    /// terminating (`canIgnorePDB`). `enforce_rv`: with the pod's resourceVersion as a
    /// precondition unless the client gave one (not for terminal or terminating pods).
    IgnoreBudgets {
        /// Whether the delete is conditional on the pod's resourceVersion.
        enforce_rv: bool,
    },
    /// No budget selects the pod: delete it.
    NoBudget,
    /// More than one budget selects it: upstream answers a Failure Status with code 500
    /// (in a 201 response) and deletes nothing.
    MultipleBudgets,
    /// The pod is not ready and its budget can spare it (or says `AlwaysAllow`): delete
    /// it conditionally on its resourceVersion, without touching the budget.
    Unhealthy {
        /// The budget's name.
        budget: String,
    },
    /// The budget refuses: the error to answer with (429, or 403).
    Refused(ApiError),
    /// The budget allows it: store `status` as the budget's new status (unless a dry
    /// run), then delete the pod.
    Allowed {
        /// The budget's name.
        budget: String,
        /// The budget's status after the decrement (with the pod in `disruptedPods`).
        status: Value,
    },
}

/// `createTooManyRequestsError`: the budget's status is older than its spec.
fn still_processing(budget: &str) -> ApiError {
    too_many_requests(
        &format!("The disruption budget {budget} is still being processed by the server."),
        10,
    )
}

fn too_many_requests(cause: &str, retry_after: u64) -> ApiError {
    let mut details = Map::new();
    details.insert(
        "causes".into(),
        json!([{"reason": "DisruptionBudget", "message": cause}]),
    );
    if retry_after > 0 {
        details.insert("retryAfterSeconds".into(), json!(retry_after));
    }
    ApiError {
        code: 429,
        reason: "TooManyRequests",
        message: "Cannot evict pod as it would violate the pod's disruption budget.".into(),
        details: Some(Value::Object(details)),
        retry_after_seconds: (retry_after > 0).then_some(retry_after),
    }
}

fn forbidden(budget: &str, why: &str) -> ApiError {
    ApiError {
        code: 403,
        reason: "Forbidden",
        message: format!("poddisruptionbudget.policy \"{budget}\" is forbidden: {why}"),
        details: Some(json!({"name": budget, "group": "policy", "kind": "poddisruptionbudget"})),
        retry_after_seconds: None,
    }
}

/// The eviction subresource's decision for `pod`, given the budgets of its namespace
/// `budgets`, at `now_str` (RFC 3339, for `disruptedPods`).
pub fn decide_eviction(pod: &Value, budgets: &[Value], now_str: &str) -> Eviction {
    let ph = phase(pod);
    let terminal = matches!(ph, "Succeeded" | "Failed");
    if terminal || ph == "Pending" || terminating(pod) {
        return Eviction::IgnoreBudgets {
            enforce_rv: !(terminal || terminating(pod)),
        };
    }
    let matching: Vec<&Value> = budgets.iter().filter(|b| selects(b, pod)).collect();
    let pdb = match matching.as_slice() {
        [] => return Eviction::NoBudget,
        [one] => *one,
        _ => return Eviction::MultipleBudgets,
    };
    let budget = name(pdb).to_string();
    let status = &pdb["status"];
    let current = int_field(status, "/currentHealthy");
    let desired = int_field(status, "/desiredHealthy");
    if !pod_ready(pod) {
        let always = pdb.pointer("/spec/unhealthyPodEvictionPolicy") == Some(&json!("AlwaysAllow"));
        if always || (current >= desired && desired > 0) {
            return Eviction::Unhealthy { budget };
        }
    }
    check_and_decrement(pdb, &budget, name(pod), now_str)
}

/// `checkAndDecrement`.
fn check_and_decrement(pdb: &Value, budget: &str, pod: &str, now_str: &str) -> Eviction {
    let status = &pdb["status"];
    if int_field(status, "/observedGeneration") < int_field(pdb, "/metadata/generation") {
        return Eviction::Refused(still_processing(budget));
    }
    let allowed = int_field(status, "/disruptionsAllowed");
    if allowed < 0 {
        return Eviction::Refused(forbidden(budget, "pdb disruptions allowed is negative"));
    }
    let disrupted = status
        .get("disruptedPods")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if disrupted.len() > MAX_DISRUPTED_POD_SIZE {
        return Eviction::Refused(forbidden(
            budget,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        let (current, desired) = (
            int_field(status, "/currentHealthy"),
            int_field(status, "/desiredHealthy"),
        );
        let condition = status
            .get("conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == DISRUPTION_ALLOWED));
        let message = condition.and_then(|c| c["message"].as_str()).unwrap_or("");
        let failed = condition.is_some_and(|c| c["status"] == "False") && !message.is_empty();
        let reason = condition.and_then(|c| c["reason"].as_str()).unwrap_or("");
        let why = if failed && reason == "SyncFailed" {
            format!(
                "The disruption budget {budget} does not allow evicting pods currently because it failed sync: {message}"
            )
        } else if current <= desired {
            format!(
                "The disruption budget {budget} needs {desired} healthy pods and has {current} currently"
            )
        } else if failed {
            format!(
                "The disruption budget {budget} does not allow evicting pods currently ({reason}): {message}"
            )
        } else {
            format!("The disruption budget {budget} does not allow evicting pods currently")
        };
        return Eviction::Refused(too_many_requests(&why, 0));
    }
    let mut new = status.as_object().cloned().unwrap_or_default();
    new.insert("disruptionsAllowed".into(), json!(allowed - 1));
    if allowed - 1 == 0 {
        update_allowed_condition(&mut new, now_str);
    }
    let mut disrupted = disrupted;
    disrupted.insert(pod.to_string(), json!(now_str));
    // Keep the Go struct's field order: disruptedPods after observedGeneration.
    let conditions = new.get("conditions").cloned();
    let status = status_object(
        int_field(status, "/observedGeneration"),
        &disrupted,
        allowed - 1,
        int_field(status, "/currentHealthy"),
        int_field(status, "/desiredHealthy"),
        int_field(status, "/expectedPods"),
        conditions.as_ref(),
    );
    Eviction::Allowed {
        budget: budget.to_string(),
        status: Value::Object(status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-01-01T00:00:00Z";
    const NOW_SECS: i64 = 1_767_225_600;

    fn pod(name: &str, labels: Value, ready: bool) -> Value {
        let ready = if ready { "True" } else { "False" };
        json!({"metadata": {"name": name, "namespace": "default", "labels": labels,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
                                     "uid": "rs-1", "controller": true}]},
               "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]}})
    }

    fn web(n: usize, ready: usize) -> Vec<Value> {
        (0..n)
            .map(|i| pod(&format!("web-{i}"), json!({"app": "web"}), i < ready))
            .collect()
    }

    fn pdb(spec: Value) -> Value {
        let mut spec = spec;
        spec["selector"] = json!({"matchLabels": {"app": "web"}});
        json!({"metadata": {"name": "web", "namespace": "default", "generation": 1}, "spec": spec})
    }

    fn numbers(s: &Value) -> (i64, i64, i64, i64) {
        (
            s["currentHealthy"].as_i64().unwrap(),
            s["desiredHealthy"].as_i64().unwrap(),
            s["expectedPods"].as_i64().unwrap(),
            s["disruptionsAllowed"].as_i64().unwrap(),
        )
    }

    /// (currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed) for a budget
    /// over `pods`.
    fn status_of(spec: Value, pods: &[Value]) -> (i64, i64, i64, i64) {
        numbers(&budget_status(&pdb(spec), pods, NOW_SECS, NOW))
    }

    #[test]
    fn min_available_and_max_unavailable() {
        let pods = web(5, 4);
        assert_eq!(status_of(json!({"minAvailable": 2}), &pods), (4, 2, 5, 2));
        assert_eq!(status_of(json!({"minAvailable": 4}), &pods), (4, 4, 5, 0));
        assert_eq!(status_of(json!({"minAvailable": 6}), &pods), (4, 6, 5, 0));
        // Percentages round up: 50% of 5 is 3.
        assert_eq!(
            status_of(json!({"minAvailable": "50%"}), &pods),
            (4, 3, 5, 1)
        );
        assert_eq!(status_of(json!({"maxUnavailable": 1}), &pods), (4, 4, 5, 0));
        assert_eq!(status_of(json!({"maxUnavailable": 2}), &pods), (4, 3, 5, 1));
        // 30% of 5 rounds up to 2 unavailable: 3 desired.
        assert_eq!(
            status_of(json!({"maxUnavailable": "30%"}), &pods),
            (4, 3, 5, 1)
        );
        assert_eq!(
            status_of(json!({"maxUnavailable": "100%"}), &pods),
            (4, 0, 5, 4)
        );
        // minAvailable 0: everything may go.
        assert_eq!(status_of(json!({"minAvailable": 0}), &pods), (4, 0, 5, 4));
        // No pods: nothing allowed even with nothing desired.
        assert_eq!(status_of(json!({"maxUnavailable": 1}), &[]), (0, 0, 0, 0));
        // Other labels are not selected.
        let other = vec![pod("db", json!({"app": "db"}), true)];
        assert_eq!(status_of(json!({"minAvailable": 0}), &other), (0, 0, 0, 0));
    }

    #[test]
    fn terminating_and_disrupted_pods_are_not_healthy() {
        let mut pods = web(3, 3);
        pods[0]["metadata"]["deletionTimestamp"] = json!(NOW);
        let mut b = pdb(json!({"minAvailable": 1}));
        b["status"] = json!({"disruptedPods": {"web-1": NOW, "web-0": NOW, "gone": NOW}});
        let s = budget_status(&b, &pods, NOW_SECS, NOW);
        assert_eq!(numbers(&s), (1, 1, 3, 0));
        // Only the selected pod that is not terminating stays recorded.
        assert_eq!(s["disruptedPods"], json!({"web-1": NOW}));
        // After the deletion timeout the entry goes and the pod counts again.
        let later = NOW_SECS + DELETION_TIMEOUT.as_secs() as i64 + 1;
        let s = budget_status(&b, &pods, later, NOW);
        assert_eq!(numbers(&s), (2, 1, 3, 1));
        assert!(s.get("disruptedPods").is_none());
    }

    #[test]
    fn conditions_and_generation() {
        let pods = web(2, 2);
        let mut b = pdb(json!({"minAvailable": 1}));
        let s = budget_status(&b, &pods, NOW_SECS, NOW);
        assert_eq!(s["observedGeneration"], 1);
        assert_eq!(
            s["conditions"],
            json!([{"type": "DisruptionAllowed", "status": "True", "observedGeneration": 1,
                    "lastTransitionTime": NOW, "reason": "SufficientPods", "message": ""}])
        );
        // Same status later: the transition time stays.
        b["status"] = s.clone();
        assert_eq!(
            budget_status(&b, &pods, NOW_SECS + 5, "2026-01-01T00:00:05Z"),
            s
        );
        b["spec"]["minAvailable"] = json!(2);
        let s = budget_status(&b, &pods, NOW_SECS + 5, "2026-01-01T00:00:05Z");
        assert_eq!(s["conditions"][0]["status"], "False");
        assert_eq!(s["conditions"][0]["reason"], "InsufficientPods");
        assert_eq!(
            s["conditions"][0]["lastTransitionTime"],
            "2026-01-01T00:00:05Z"
        );
    }

    #[test]
    fn selectors() {
        let p = pod("a", json!({"app": "web", "tier": "front"}), true);
        let mut b = pdb(json!({}));
        assert!(selects(&b, &p));
        b["spec"]["selector"] = json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "x"]}]});
        assert!(selects(&b, &p));
        b["spec"]["selector"] =
            json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]});
        assert!(!selects(&b, &p));
        // policy/v1: an empty selector selects every pod of the namespace, none selects none.
        b["spec"]["selector"] = json!({});
        assert!(selects(&b, &p));
        b["spec"].as_object_mut().unwrap().remove("selector");
        assert!(!selects(&b, &p));
        b["spec"]["selector"] = json!({"matchExpressions": [{"key": "tier", "operator": "Near"}]});
        assert!(!selects(&b, &p));
    }

    #[test]
    fn unmanaged_and_unscaled_pods() {
        let mut pods = web(2, 2);
        // A pod without a controller: minAvailable as a number still works ...
        pods[1]["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("ownerReferences");
        assert_eq!(status_of(json!({"minAvailable": 1}), &pods), (2, 1, 2, 1));
        // ... a percentage counts only the managed pods' scale.
        assert_eq!(
            status_of(json!({"minAvailable": "100%"}), &pods),
            (2, 1, 1, 1)
        );
        // A DaemonSet has no scale: the sync fails and nothing is allowed.
        pods[1]["metadata"]["ownerReferences"] =
            json!([{"kind": "DaemonSet", "name": "ds", "uid": "ds-1", "controller": true}]);
        let mut b = pdb(json!({"maxUnavailable": 1}));
        b["status"] = json!({"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1,
                             "expectedPods": 2, "observedGeneration": 1});
        let s = budget_status(&b, &pods, NOW_SECS, NOW);
        assert_eq!(numbers(&s), (2, 1, 2, 0));
        assert_eq!(s["conditions"][0]["reason"], "SyncFailed");
        assert_eq!(
            s["conditions"][0]["message"],
            "found no controllers for pod \"web-1\""
        );
    }

    #[test]
    fn scaled_values() {
        assert_eq!(scaled_value(&json!(3), 10, true), Ok(3));
        assert_eq!(scaled_value(&json!("25%"), 10, true), Ok(3));
        assert_eq!(scaled_value(&json!("25%"), 10, false), Ok(2));
        assert!(scaled_value(&json!("3"), 10, true).is_err());
    }

    fn synced(spec: Value, pods: &[Value]) -> Value {
        let mut b = pdb(spec);
        b["status"] = budget_status(&b, pods, NOW_SECS, NOW);
        b
    }

    #[test]
    fn eviction_decisions() {
        let pods = web(3, 3);
        // No budget, or one with room: allowed, recorded in disruptedPods.
        assert_eq!(decide_eviction(&pods[0], &[], NOW), Eviction::NoBudget);
        let b = synced(json!({"minAvailable": 2}), &pods);
        let Eviction::Allowed { budget, status } = decide_eviction(&pods[0], &[b], NOW) else {
            panic!("allowed")
        };
        assert_eq!(budget, "web");
        assert_eq!(status["disruptionsAllowed"], 0);
        assert_eq!(status["disruptedPods"], json!({"web-0": NOW}));
        assert_eq!(status["conditions"][0]["reason"], "InsufficientPods");
        // A budget without room: 429 naming it.
        let b = synced(json!({"minAvailable": 3}), &pods);
        let Eviction::Refused(e) = decide_eviction(&pods[0], std::slice::from_ref(&b), NOW) else {
            panic!("refused")
        };
        assert_eq!((e.code, e.reason), (429, "TooManyRequests"));
        assert_eq!(
            e.message,
            "Cannot evict pod as it would violate the pod's disruption budget."
        );
        assert_eq!(
            e.details,
            Some(json!({"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget web needs 3 healthy pods and has 3 currently"}]}))
        );
        assert_eq!(e.retry_after_seconds, None);
        // Two budgets: the 500 Status.
        let b2 = synced(json!({"minAvailable": 0}), &pods);
        assert_eq!(
            decide_eviction(&pods[0], &[b.clone(), b2], NOW),
            Eviction::MultipleBudgets
        );
        // Terminal, pending and terminating pods skip the budgets.
        let mut done = pods[0].clone();
        done["status"]["phase"] = json!("Succeeded");
        assert_eq!(
            decide_eviction(&done, std::slice::from_ref(&b), NOW),
            Eviction::IgnoreBudgets { enforce_rv: false }
        );
        done["status"]["phase"] = json!("Pending");
        assert_eq!(
            decide_eviction(&done, std::slice::from_ref(&b), NOW),
            Eviction::IgnoreBudgets { enforce_rv: true }
        );
        let mut going = pods[0].clone();
        going["metadata"]["deletionTimestamp"] = json!(NOW);
        assert_eq!(
            decide_eviction(&going, std::slice::from_ref(&b), NOW),
            Eviction::IgnoreBudgets { enforce_rv: false }
        );
        // A status older than the spec: 429 "still being processed", Retry-After 10.
        let mut stale = b.clone();
        stale["metadata"]["generation"] = json!(2);
        let Eviction::Refused(e) = decide_eviction(&pods[0], &[stale], NOW) else {
            panic!("refused")
        };
        assert_eq!(e.retry_after_seconds, Some(10));
        assert_eq!(
            e.details.unwrap()["causes"][0]["message"],
            "The disruption budget web is still being processed by the server."
        );
    }

    #[test]
    fn unready_pods() {
        let pods = web(3, 2);
        // Not ready, and the budget is satisfied: goes without a decrement.
        let b = synced(json!({"minAvailable": 2}), &pods);
        assert_eq!(
            decide_eviction(&pods[2], std::slice::from_ref(&b), NOW),
            Eviction::Unhealthy {
                budget: "web".into()
            }
        );
        // Not satisfied: the budget decides (none allowed: 429).
        let b = synced(json!({"minAvailable": 3}), &pods);
        assert!(matches!(
            decide_eviction(&pods[2], std::slice::from_ref(&b), NOW),
            Eviction::Refused(_)
        ));
        // AlwaysAllow lets an unready pod go whatever the budget says.
        let mut b = b;
        b["spec"]["unhealthyPodEvictionPolicy"] = json!("AlwaysAllow");
        assert!(matches!(
            decide_eviction(&pods[2], &[b], NOW),
            Eviction::Unhealthy { .. }
        ));
    }
}
