//! The pods' `eviction` subresource, as upstream's `EvictionREST.Create`: the pod is
//! deleted (with the Eviction's `deleteOptions`) unless its PodDisruptionBudget says no.
//! The decision is [`crate::disruption::decide_eviction`]; here it is carried out under
//! the store's write lock, so that no other write comes between the check and the
//! delete (upstream retries on conflicts instead).

use serde_json::{Value, json};

use super::meta::{meta_str, now_rfc3339};
use super::{Key, State, Store};
use crate::disruption::{self, Eviction};
use crate::error::ApiError;
use crate::resources::kinds;

/// The field manager of the eviction subresource's writes (the API server's loopback
/// client).
const APISERVER_MANAGER: &str = "kube-apiserver";

/// An eviction's request: the body's `deleteOptions` that matter and whether it is a
/// dry run (`dryRun=All` in the query or the options).
#[derive(Debug, Clone, Default)]
pub struct EvictionRequest {
    /// `deleteOptions.gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `deleteOptions.preconditions` (`uid`, `resourceVersion`).
    pub preconditions: Option<Value>,
    /// Validate and decide, change nothing.
    pub dry_run: bool,
}

impl EvictionRequest {
    /// The request an Eviction body makes, with the query's `dryRun`: upstream's
    /// `propagateDryRun`, and the body's name against the URL's.
    pub fn from_body(name: &str, body: &Value, query_dry_run: bool) -> Result<Self, ApiError> {
        if body.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        let opts = body.get("deleteOptions").filter(|o| o.is_object());
        let body_dry_run: Vec<&str> = opts
            .and_then(|o| o.get("dryRun"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if query_dry_run && !body_dry_run.is_empty() && body_dry_run != ["All"] {
            return Err(ApiError::reasonless(
                500,
                format!(
                    "Non-matching dry-run options in request and content: [All] and [{}]",
                    body_dry_run.join(" ")
                ),
            ));
        }
        Ok(EvictionRequest {
            grace_period_seconds: opts
                .and_then(|o| o.get("gracePeriodSeconds"))
                .and_then(Value::as_i64),
            preconditions: opts
                .and_then(|o| o.get("preconditions"))
                .filter(|p| p.is_object())
                .cloned(),
            dry_run: query_dry_run || body_dry_run.contains(&"All"),
        })
    }
}

/// The answer to an eviction that was carried out: `Success` (upstream answers it with
/// code 201), or the Failure Status upstream returns as an object (a 201 response whose
/// Status says code 500) when more than one budget selects the pod.
pub fn eviction_status(failure: Option<&str>) -> Value {
    match failure {
        None => {
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
        }
        Some(message) => json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Failure", "message": message, "code": 500}),
    }
}

const MULTIPLE_BUDGETS: &str = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";

impl Store {
    /// Evict pod `ns`/`name`: the Status to answer with (see [`eviction_status`]), or the
    /// error (404 for a missing pod, 429 when its budget allows no disruption, 409 for a
    /// failed precondition).
    pub fn evict(&self, ns: &str, name: &str, req: &EvictionRequest) -> Result<Value, ApiError> {
        let rt = kinds::pods();
        let mut st = self.write();
        let key: Key = (ns.to_string(), name.to_string());
        let pod = st
            .stored(rt, &key)
            .ok_or_else(|| ApiError::not_found(rt, name))?
            .object();
        let budgets: Vec<(Key, Value)> = st
            .tables
            .get(&kinds::pdbs().key())
            .map(|t| {
                t.objects
                    .range((ns.to_string(), String::new())..)
                    .take_while(|(k, _)| k.0 == ns)
                    .map(|(k, v)| (k.clone(), v.object()))
                    .collect()
            })
            .unwrap_or_default();
        let objects: Vec<Value> = budgets.iter().map(|(_, b)| b.clone()).collect();
        match disruption::decide_eviction(&pod, &objects, &now_rfc3339()) {
            Eviction::MultipleBudgets => Ok(eviction_status(Some(MULTIPLE_BUDGETS))),
            Eviction::Refused(e) => Err(e),
            Eviction::IgnoreBudgets { .. } | Eviction::NoBudget | Eviction::Unhealthy { .. } => {
                // The resourceVersion precondition upstream adds cannot fail under the lock.
                self.evict_pod(&mut st, key, req)?;
                Ok(eviction_status(None))
            }
            Eviction::Allowed { budget, status } => {
                check_preconditions(&pod, req)?;
                if !req.dry_run {
                    let pdb_key: Key = (ns.to_string(), budget);
                    if let Some(existing) = st.stored(kinds::pdbs(), &pdb_key) {
                        let old = existing.object();
                        self.status_write(
                            &mut st,
                            kinds::pdbs(),
                            pdb_key,
                            existing,
                            &old,
                            status,
                            APISERVER_MANAGER,
                        );
                    }
                }
                self.evict_pod(&mut st, key, req)?;
                Ok(eviction_status(None))
            }
        }
    }

    /// `addConditionAndDeletePod`: the pod gets the `DisruptionTarget` condition, then is
    /// deleted with the request's grace period.
    fn evict_pod(&self, st: &mut State, key: Key, req: &EvictionRequest) -> Result<(), ApiError> {
        let rt = kinds::pods();
        let Some(existing) = st.stored(rt, &key) else {
            return Err(ApiError::not_found(rt, &key.1));
        };
        let pod = existing.object();
        check_preconditions(&pod, req)?;
        if req.dry_run {
            return Ok(());
        }
        let mut conditions: Vec<Value> = pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        conditions.retain(|c| c["type"] != "DisruptionTarget");
        conditions.push(json!({"type": "DisruptionTarget", "status": "True", "lastProbeTime": null,
                               "lastTransitionTime": now_rfc3339(), "reason": "EvictionByEvictionAPI",
                               "message": "Eviction API: evicting"}));
        let mut status = pod.get("status").cloned().unwrap_or_else(|| json!({}));
        status["conditions"] = Value::Array(conditions);
        self.status_write(
            st,
            rt,
            key.clone(),
            existing,
            &pod,
            status,
            APISERVER_MANAGER,
        );
        let Some(existing) = st.stored(rt, &key) else {
            return Err(ApiError::not_found(rt, &key.1));
        };
        self.delete_pod_locked(st, key, existing, req.grace_period_seconds);
        Ok(())
    }
}

/// The options' preconditions against the pod: upstream's 409 on resource `Pod`.
fn check_preconditions(pod: &Value, req: &EvictionRequest) -> Result<(), ApiError> {
    let Some(p) = req.preconditions.as_ref() else {
        return Ok(());
    };
    let name = meta_str(pod, "name");
    let conflict = |msg: String| ApiError {
        code: 409,
        reason: "Conflict",
        message: format!("Operation cannot be fulfilled on Pod \"{name}\": {msg}"),
        details: Some(json!({"name": name, "kind": "Pod"})),
        retry_after_seconds: None,
    };
    if let Some(uid) = p
        .get("uid")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
    {
        let have = meta_str(pod, "uid");
        if uid != have {
            return Err(conflict(format!(
                "the UID in the precondition ({uid}) does not match the UID in record ({have}). The object might have been deleted and then recreated"
            )));
        }
    }
    if let Some(rv) = p
        .get("resourceVersion")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
    {
        let have = meta_str(pod, "resourceVersion");
        if rv != have {
            return Err(conflict(format!(
                "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({have}). The object might have been modified"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::store::fixtures::*;

    fn setup(min_available: Value) -> Store {
        let s = Store::new();
        s.create(kinds::nodes(), None, node("n1"), &wo("m"))
            .unwrap();
        for i in 0..3 {
            s.create(
                kinds::pods(),
                Some("default"),
                json!({"metadata": {"name": format!("web-{i}"), "labels": {"app": "web"},
                                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                        "name": "web", "uid": "rs-1", "controller": true}]},
                       "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 0,
                                "containers": [{"name": "c", "image": "nginx:1.27"}]}}),
                &wo("m"),
            )
            .unwrap();
        }
        s.create(
            kinds::pdbs(),
            Some("default"),
            json!({"metadata": {"name": "web"},
                   "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}}),
            &wo("m"),
        )
        .unwrap();
        s
    }

    fn budget(s: &Store) -> Value {
        s.get(kinds::pdbs(), Some("default"), "web").unwrap()
    }

    fn req() -> EvictionRequest {
        EvictionRequest::default()
    }

    #[test]
    fn budget_status_follows_pods() {
        let s = setup(json!(2));
        let b = budget(&s);
        assert_eq!(b["metadata"]["generation"], 1);
        assert_eq!(b["status"]["observedGeneration"], 1);
        assert_eq!(b["status"]["currentHealthy"], 3);
        assert_eq!(b["status"]["expectedPods"], 3);
        assert_eq!(b["status"]["disruptionsAllowed"], 1);
        // A spec change moves the generation and the status follows it.
        s.patch(
            kinds::pdbs(),
            Some("default"),
            "web",
            None,
            crate::store::PatchType::Merge,
            br#"{"spec":{"minAvailable":3}}"#,
            &wo("m"),
        )
        .unwrap();
        let b = budget(&s);
        assert_eq!(b["metadata"]["generation"], 2);
        assert_eq!(b["status"]["observedGeneration"], 2);
        assert_eq!(b["status"]["disruptionsAllowed"], 0);
        // A pod gone: fewer healthy.
        s.delete(kinds::pods(), Some("default"), "web-2", None)
            .unwrap();
        assert_eq!(budget(&s)["status"]["currentHealthy"], 2);
        assert_eq!(budget(&s)["status"]["expectedPods"], 2);
    }

    #[test]
    fn evictions_respect_the_budget() {
        let s = setup(json!(2));
        let e = s.evict("default", "nope", &req()).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (404, "pods \"nope\" not found")
        );
        // Dry run: allowed, nothing changes.
        let before = s.current_resource_version();
        let dry = EvictionRequest {
            dry_run: true,
            ..req()
        };
        assert_eq!(
            s.evict("default", "web-0", &dry).unwrap()["status"],
            "Success"
        );
        assert_eq!(s.current_resource_version(), before);
        // One disruption allowed: the first goes.
        assert_eq!(
            s.evict("default", "web-0", &req()).unwrap(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
        );
        assert_eq!(
            s.get(kinds::pods(), Some("default"), "web-0")
                .unwrap_err()
                .code,
            404
        );
        let b = budget(&s);
        assert_eq!(b["status"]["disruptionsAllowed"], 0);
        assert_eq!(b["status"]["currentHealthy"], 2);
        assert!(
            b["status"].get("disruptedPods").is_none(),
            "the pod is gone"
        );
        // The second would break it.
        let e = s.evict("default", "web-1", &req()).unwrap_err();
        assert_eq!((e.code, e.reason), (429, "TooManyRequests"));
        assert_eq!(
            e.details.unwrap()["causes"][0]["message"],
            "The disruption budget web needs 2 healthy pods and has 2 currently"
        );
        assert!(s.get(kinds::pods(), Some("default"), "web-1").is_ok());
        // Two budgets: the Failure Status, nothing deleted.
        s.create(
            kinds::pdbs(),
            Some("default"),
            json!({"metadata": {"name": "all"}, "spec": {"maxUnavailable": "100%", "selector": {}}}),
            &wo("m"),
        )
        .unwrap();
        let st = s.evict("default", "web-1", &req()).unwrap();
        assert_eq!(
            (&st["status"], &st["code"]),
            (&json!("Failure"), &json!(500))
        );
        assert_eq!(st["message"], MULTIPLE_BUDGETS);
        assert!(s.get(kinds::pods(), Some("default"), "web-1").is_ok());
    }

    #[test]
    fn graceful_eviction_and_preconditions() {
        let s = setup(json!(0));
        let wrong = EvictionRequest {
            preconditions: Some(json!({"uid": "x"})),
            ..req()
        };
        let e = s.evict("default", "web-0", &wrong).unwrap_err();
        assert_eq!(e.code, 409);
        assert!(e.message.starts_with(
            "Operation cannot be fulfilled on Pod \"web-0\": the UID in the precondition (x)"
        ));
        let graceful = EvictionRequest {
            grace_period_seconds: Some(30),
            ..req()
        };
        s.evict("default", "web-0", &graceful).unwrap();
        let p = s.get(kinds::pods(), Some("default"), "web-0").unwrap();
        assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 30);
        let target = p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "DisruptionTarget")
            .unwrap();
        assert_eq!(target["reason"], "EvictionByEvictionAPI");
        let b = budget(&s);
        assert_eq!(
            b["status"]["currentHealthy"], 2,
            "a terminating pod is not healthy"
        );
        // A terminating pod is evicted without asking the budget again.
        s.patch(
            kinds::pdbs(),
            Some("default"),
            "web",
            None,
            crate::store::PatchType::Merge,
            br#"{"spec":{"minAvailable":3}}"#,
            &wo("m"),
        )
        .unwrap();
        assert!(s.evict("default", "web-0", &req()).is_ok());
        assert!(s.evict("default", "web-1", &req()).is_err());
    }

    #[test]
    fn eviction_bodies() {
        let body = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a"},
                          "deleteOptions": {"gracePeriodSeconds": 0, "dryRun": ["All"]}});
        let r = EvictionRequest::from_body("a", &body, false).unwrap();
        assert_eq!((r.grace_period_seconds, r.dry_run), (Some(0), true));
        let e = EvictionRequest::from_body("b", &body, false).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "name in URL does not match name in Eviction object")
        );
    }
}
