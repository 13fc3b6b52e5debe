//! Pods: upstream's pod strategy (the registry's defaults, `generation`, a created pod
//! `Pending`), what a kubelet does with a pod bound to its Node (it runs it: phase
//! `Running`, `Ready`), and graceful deletion (`deletionTimestamp`, then gone once the
//! grace period has passed, as a kubelet whose containers took all of it would leave it).
//!
//! Every write of a Pod or a PodDisruptionBudget then has the disruption controller's
//! part done in the same write lock (`sync_budgets`): the budgets of the namespace get
//! the status upstream's controller computes ([`crate::disruption::budget_status`]).

use std::time::Duration;

use serde_json::{Value, json};

use super::managed::{ManagedUpdate, render_managed, track_update};
use super::meta::{meta, meta_str, now_rfc3339, set_meta, with_type_meta};
use super::{Key, SharedObject, State, Store, WriteOptions};
use crate::disruption;
use crate::resources::{ResourceType, kinds};

/// The field manager of the disruption controller's status writes.
const CONTROLLER_MANAGER: &str = "kube-controller-manager";

/// The field manager of a kubelet's pod status writes.
const KUBELET_MANAGER: &str = "kubelet";

pub(super) fn is_pod(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.kind == "Pod"
}

pub(super) fn is_budget(rt: &ResourceType) -> bool {
    rt.group == "policy" && rt.kind == "PodDisruptionBudget"
}

/// Kinds whose strategy sets `generation` to 1 on create and moves it when the spec
/// changes (pods, DaemonSets, PodDisruptionBudgets).
pub(super) fn has_generation(rt: &ResourceType) -> bool {
    is_pod(rt) || is_budget(rt) || (rt.group == "apps" && rt.kind == "DaemonSet")
}

/// The registry's pod defaults (`SetDefaults_PodSpec`, `SetDefaults_Container`), applied
/// as the body is decoded, so the creator owns them. Admission plugins' additions (the
/// service account's token volume, default tolerations, priority) are not made.
pub(super) fn default_pod(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for (k, v) in [
        ("restartPolicy", json!("Always")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("dnsPolicy", json!("ClusterFirst")),
        ("securityContext", json!({})),
        ("schedulerName", json!("default-scheduler")),
        ("enableServiceLinks", json!(true)),
    ] {
        spec.entry(k).or_insert(v);
    }
    for list in ["containers", "initContainers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            let image = c.get("image").and_then(Value::as_str).unwrap_or("");
            let pull = if image_tag(image).is_none_or(|t| t == "latest") {
                "Always"
            } else {
                "IfNotPresent"
            };
            c.entry("imagePullPolicy").or_insert(json!(pull));
            c.entry("resources").or_insert(json!({}));
            c.entry("terminationMessagePath")
                .or_insert(json!("/dev/termination-log"));
            c.entry("terminationMessagePolicy").or_insert(json!("File"));
        }
    }
}

/// The tag of an image reference (none for a digest or no tag).
fn image_tag(image: &str) -> Option<&str> {
    if image.contains('@') {
        return Some("");
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    last.split_once(':').map(|(_, t)| t)
}

/// The pod's QoS class (`qos.GetPodQOS`, simplified: requests and limits of cpu and
/// memory, compared as written).
fn qos_class(obj: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|l| obj.pointer(&format!("/spec/{l}")).and_then(Value::as_array))
        .flatten()
        .collect();
    let res = |c: &Value, kind: &str, r: &str| {
        c.pointer(&format!("/resources/{kind}/{r}"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| {
                c.pointer(&format!("/resources/{kind}/{r}"))
                    .filter(|v| v.is_number())
                    .map(Value::to_string)
            })
    };
    let any = containers.iter().any(|c| {
        ["requests", "limits"].iter().any(|k| {
            c.pointer(&format!("/resources/{k}"))
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty())
        })
    });
    if !any {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        ["cpu", "memory"].iter().all(|r| {
            let limit = res(c, "limits", r);
            let request = res(c, "requests", r);
            limit.is_some() && (request.is_none() || request == limit)
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// `PrepareForCreate` (after managedFields: nobody owns what it sets): generation 1,
/// the status a new pod has.
pub(super) fn pod_for_create(obj: &mut Value) {
    let qos = qos_class(obj);
    if let Value::Object(m) = obj {
        m.insert(
            "status".into(),
            json!({"phase": "Pending", "qosClass": qos}),
        );
    }
}

/// `PrepareForCreate` of a budget: its status starts empty (the controller fills it).
pub(super) fn budget_for_create(obj: &mut Value) {
    if let Value::Object(m) = obj {
        m.insert(
            "status".into(),
            json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}),
        );
    }
}

/// The status a kubelet reports once the pod runs on `node`: phase `Running`, every
/// container started and ready, addresses (the pod's derived from its uid).
fn running_status(pod: &Value, node: &Value, now: &str) -> Value {
    let host_ip = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|a| a["type"] == "InternalIP")
        .and_then(|a| a["address"].as_str())
        .unwrap_or("10.0.0.1")
        .to_string();
    let uid = meta_str(pod, "uid");
    let h = uid
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    let pod_ip = format!("10.244.{}.{}", (h >> 8) % 256, h % 254 + 1);
    let condition = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
    let statuses: Vec<Value> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            json!({
                "name": c["name"],
                "state": {"running": {"startedAt": now}},
                "lastState": {},
                "ready": true,
                "restartCount": 0,
                "image": c["image"],
                "imageID": "",
                "containerID": format!("containerd://{:08x}{:056x}", h, i),
                "started": true,
            })
        })
        .collect();
    let qos = pod
        .pointer("/status/qosClass")
        .cloned()
        .unwrap_or(json!("BestEffort"));
    json!({
        "phase": "Running",
        "conditions": [
            condition("PodReadyToStartContainers"),
            condition("Initialized"),
            condition("Ready"),
            condition("ContainersReady"),
            condition("PodScheduled"),
        ],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": now,
        "containerStatuses": statuses,
        "qosClass": qos,
    })
}

/// The grace period of a pod's deletion (`podStrategy.CheckGracefulDelete`): the
/// request's, else the pod's `terminationGracePeriodSeconds`; 0 for a pod on no node or
/// one that has ended; a negative one is 1.
pub(super) fn grace_period(pod: &Value, requested: Option<i64>) -> i64 {
    let mut period = requested.unwrap_or_else(|| {
        pod.pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    });
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    if node.is_empty() || matches!(phase, "Failed" | "Succeeded") {
        period = 0;
    }
    if period < 0 {
        period = 1;
    }
    period
}

/// What a delete of a pod does, given its grace period (`BeforeDelete`).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum PodDeletion {
    /// Gone now.
    Immediate,
    /// Already terminating with a grace period no longer than asked: nothing changes.
    Pending,
    /// Terminating: `deletionTimestamp` at `deadline` (Unix seconds), the grace period
    /// `grace`.
    Graceful { deadline: i64, grace: i64 },
}

/// `BeforeDelete` for a pod at `now` (Unix seconds).
pub(super) fn pod_deletion(pod: &Value, grace: i64, now: i64) -> PodDeletion {
    let dt = pod
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(crate::time::parse_timestamp);
    let current = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    match (dt, current) {
        (Some(_), None | Some(0)) => PodDeletion::Immediate,
        (Some(_), Some(cur)) if grace >= cur => PodDeletion::Pending,
        _ if grace == 0 => PodDeletion::Immediate,
        (Some(dt), Some(cur)) => PodDeletion::Graceful {
            deadline: dt - cur + grace,
            grace,
        },
        _ => PodDeletion::Graceful {
            deadline: now + grace,
            grace,
        },
    }
}

impl Store {
    /// After a pod's create: a pod bound to an existing Node is run by its kubelet, which
    /// reports it `Running` (a second write, as the kubelet's status update).
    pub(super) fn kubelet_runs(&self, st: &mut State, key: &Key) {
        let Some(existing) = st.stored(kinds::pods(), key) else {
            return;
        };
        let pod = existing.object();
        let node_name = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if node_name.is_empty() {
            return;
        }
        let Some(node) = st.stored(kinds::nodes(), &(String::new(), node_name.to_string())) else {
            return;
        };
        let mut new = pod.clone();
        new["status"] = running_status(&pod, &node.object(), &now_rfc3339());
        let _ = self.finish_update(
            st,
            kinds::pods(),
            key.clone(),
            existing,
            &pod,
            new,
            &WriteOptions::default(),
            ManagedUpdate::Track(KUBELET_MANAGER, "status"),
        );
    }

    /// Delete a pod under the lock, gracefully or at once. Returns the pod as the real
    /// server answers (pods return the deleted object: with `deletionTimestamp` while
    /// it terminates).
    pub(super) fn delete_pod_locked(
        &self,
        st: &mut State,
        key: Key,
        existing: SharedObject,
        requested_grace: Option<i64>,
    ) -> Value {
        let rt = kinds::pods();
        let pod = existing.object();
        let grace = grace_period(&pod, requested_grace);
        let now = crate::time::now_secs();
        match pod_deletion(&pod, grace, now) {
            PodDeletion::Immediate => {
                self.commit(st, rt, key, "DELETED", pod.clone(), Some(existing));
                pod
            }
            PodDeletion::Pending => pod,
            PodDeletion::Graceful { deadline, grace } => {
                let mut new = pod.clone();
                set_meta(
                    &mut new,
                    "deletionTimestamp",
                    json!(crate::time::rfc3339_secs(deadline)),
                );
                set_meta(&mut new, "deletionGracePeriodSeconds", json!(grace));
                if meta_str(&pod, "deletionTimestamp").is_empty()
                    && let Some(g) = meta(&pod)
                        .and_then(|m| m.get("generation"))
                        .and_then(Value::as_i64)
                {
                    set_meta(&mut new, "generation", json!(g + 1));
                }
                let uid = meta_str(&pod, "uid").to_string();
                let out = self.commit(st, rt, key.clone(), "MODIFIED", new, Some(existing));
                let wait = Duration::from_secs(u64::try_from(deadline - now).unwrap_or(0));
                self.schedule_pod_removal(key, uid, wait);
                out
            }
        }
    }

    /// Remove a terminating pod once its grace period is over (a kubelet's final delete),
    /// if there is a runtime to wait on; without one (unit tests) it stays terminating
    /// until [`Store::remove_terminated_pod`].
    fn schedule_pod_removal(&self, key: Key, uid: String, after: Duration) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = self.clone();
        handle.spawn(async move {
            tokio::time::sleep(after).await;
            store.remove_terminated_pod(&key.0, &key.1, &uid);
        });
    }

    /// Remove the terminating pod `ns`/`name` with `uid`, as its kubelet does once the
    /// containers have stopped. Returns whether it was there.
    pub fn remove_terminated_pod(&self, ns: &str, name: &str, uid: &str) -> bool {
        let rt = kinds::pods();
        let mut st = self.write();
        let key = (ns.to_string(), name.to_string());
        let Some(existing) = st.stored(rt, &key) else {
            return false;
        };
        let pod = existing.object();
        if meta_str(&pod, "uid") != uid || meta_str(&pod, "deletionTimestamp").is_empty() {
            return false;
        }
        self.commit(&mut st, rt, key, "DELETED", pod, Some(existing));
        true
    }

    /// The disruption controller: give every budget of namespace `ns` the status its
    /// pods make it (a write only where it changes).
    pub(super) fn sync_budgets(&self, st: &mut State, ns: &str) {
        let in_ns = |st: &State, rt: &ResourceType| -> Vec<(Key, SharedObject)> {
            st.tables
                .get(&rt.key())
                .map(|t| {
                    t.objects
                        .range((ns.to_string(), String::new())..)
                        .take_while(|(k, _)| k.0 == ns)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default()
        };
        let budgets = in_ns(st, kinds::pdbs());
        if budgets.is_empty() {
            return;
        }
        let pods: Vec<Value> = in_ns(st, kinds::pods())
            .into_iter()
            .map(|(_, p)| p.object())
            .collect();
        let now_str = now_rfc3339();
        let now = crate::time::now_secs();
        for (key, shared) in budgets {
            let pdb = shared.object();
            if !meta_str(&pdb, "deletionTimestamp").is_empty() {
                continue;
            }
            let status = disruption::budget_status(&pdb, &pods, now, &now_str);
            self.status_write(
                st,
                kinds::pdbs(),
                key,
                shared,
                &pdb,
                status,
                CONTROLLER_MANAGER,
            );
        }
    }

    /// A controller's write of `status` to the object `existing` (decoded: `old`), with
    /// its managedFields and without running the controllers again. Nothing when the
    /// status is unchanged.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn status_write(
        &self,
        st: &mut State,
        rt: &ResourceType,
        key: Key,
        existing: SharedObject,
        old: &Value,
        status: Value,
        manager: &str,
    ) {
        if old.get("status") == Some(&status) {
            return;
        }
        let mut new = old.clone();
        new["status"] = status;
        let entries = track_update(rt, Some(old), &new, manager, "status");
        if let Value::Object(m) = &mut new
            && let Some(Value::Object(md)) = m.get_mut("metadata")
        {
            if entries.is_empty() {
                md.shift_remove("managedFields");
            } else {
                md.insert("managedFields".into(), render_managed(&entries));
            }
        }
        let new = with_type_meta(rt, new);
        self.commit_inner(st, rt, key, "MODIFIED", new, Some(existing));
    }
}

/// A pod's spec with the fields an update may change masked (`ValidatePodUpdate`'s
/// `updatablePodSpecFields`): two specs are an allowed update of each other when their
/// masks are equal.
pub(crate) fn immutable_pod_spec(spec: &Value) -> Value {
    let mut s = spec.as_object().cloned().unwrap_or_default();
    for f in [
        "activeDeadlineSeconds",
        "tolerations",
        "terminationGracePeriodSeconds",
    ] {
        s.shift_remove(f);
    }
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(cs)) = s.get_mut(list) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                c.shift_remove("image");
            }
        }
    }
    Value::Object(s)
}

/// A pod's status as a map (tests).
#[cfg(test)]
pub(super) fn status_map(pod: &Value) -> serde_json::Map<String, Value> {
    pod.get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::fixtures::*;

    fn pod(name: &str, node: Option<&str>) -> Value {
        let mut p = json!({"metadata": {"name": name, "labels": {"app": "web"}},
                           "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}],
                                    "terminationGracePeriodSeconds": 5}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        p
    }

    #[test]
    fn created_pods_are_defaulted_and_run_on_their_node() {
        let s = Store::new();
        s.create(kinds::nodes(), None, node("n1"), &wo("m"))
            .unwrap();
        let p = s
            .create(
                kinds::pods(),
                Some("default"),
                pod("a", Some("n1")),
                &wo("me"),
            )
            .unwrap();
        // The create's answer is the pod as created: Pending.
        assert_eq!(p["status"]["phase"], "Pending");
        assert_eq!(p["metadata"]["generation"], 1);
        assert_eq!(p["spec"]["restartPolicy"], "Always");
        assert_eq!(
            p["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        let stored = s.get(kinds::pods(), Some("default"), "a").unwrap();
        let status = status_map(&stored);
        assert_eq!(status["phase"], "Running");
        assert!(crate::disruption::pod_ready(&stored));
        assert_eq!(status["qosClass"], "BestEffort");
        assert_eq!(status["containerStatuses"][0]["ready"], true);
        let mut managers: Vec<&str> = stored["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["manager"].as_str())
            .collect();
        managers.sort_unstable();
        assert_eq!(managers, ["kubelet", "me"]);
        // Not bound, or bound to no Node: stays Pending.
        s.create(kinds::pods(), Some("default"), pod("b", None), &wo("me"))
            .unwrap();
        s.create(
            kinds::pods(),
            Some("default"),
            pod("c", Some("nope")),
            &wo("me"),
        )
        .unwrap();
        for n in ["b", "c"] {
            let p = s.get(kinds::pods(), Some("default"), n).unwrap();
            assert_eq!(p["status"]["phase"], "Pending", "{n}");
        }
    }

    #[test]
    fn pod_validation() {
        let s = Store::new();
        let e = s
            .create(
                kinds::pods(),
                Some("default"),
                json!({"metadata": {"name": "x"}, "spec": {}}),
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(
            e.message,
            "Pod \"x\" is invalid: spec.containers: Required value"
        );
        let e = s
            .create(
                kinds::pods(),
                Some("default"),
                json!({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}, {"name": "c", "image": "i"}]}}),
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(
            e.message,
            "Pod \"x\" is invalid: [spec.containers[0].image: Required value, spec.containers[1].name: Duplicate value: \"c\"]"
        );
        s.create(kinds::nodes(), None, node("n1"), &wo("m"))
            .unwrap();
        s.create(
            kinds::pods(),
            Some("default"),
            pod("a", Some("n1")),
            &wo("m"),
        )
        .unwrap();
        // The image may change (and moves the generation); the node may not.
        let p = s
            .patch(
                kinds::pods(),
                Some("default"),
                "a",
                None,
                crate::store::PatchType::StrategicMerge,
                br#"{"spec":{"containers":[{"name":"c","image":"nginx:1.28"}]}}"#,
                &wo("m"),
            )
            .unwrap();
        assert_eq!(p["metadata"]["generation"], 2);
        assert_eq!(p["status"]["phase"], "Running", "the status stays");
        let e = s
            .patch(
                kinds::pods(),
                Some("default"),
                "a",
                None,
                crate::store::PatchType::Merge,
                br#"{"spec":{"nodeName":"n2"}}"#,
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.starts_with("Pod \"a\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"),
            "{}",
            e.message
        );
    }

    #[test]
    fn graceful_deletion() {
        let s = Store::new();
        s.create(kinds::nodes(), None, node("n1"), &wo("m"))
            .unwrap();
        s.create(
            kinds::pods(),
            Some("default"),
            pod("a", Some("n1")),
            &wo("m"),
        )
        .unwrap();
        let p = s.delete(kinds::pods(), Some("default"), "a", None).unwrap();
        assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 5);
        assert!(p["metadata"]["deletionTimestamp"].is_string());
        assert_eq!(p["metadata"]["generation"], 2);
        let uid = p["metadata"]["uid"].as_str().unwrap().to_string();
        // Still there, terminating; a second delete with a longer grace changes nothing.
        let again = s
            .delete_with(kinds::pods(), Some("default"), "a", None, Some(30))
            .unwrap();
        assert_eq!(again, s.get(kinds::pods(), Some("default"), "a").unwrap());
        assert!(!s.remove_terminated_pod("default", "a", "other-uid"));
        assert!(s.remove_terminated_pod("default", "a", &uid));
        assert_eq!(
            s.get(kinds::pods(), Some("default"), "a").unwrap_err().code,
            404
        );
        // Grace 0 (a force delete) and unbound pods go at once.
        s.create(
            kinds::pods(),
            Some("default"),
            pod("b", Some("n1")),
            &wo("m"),
        )
        .unwrap();
        s.delete_with(kinds::pods(), Some("default"), "b", None, Some(0))
            .unwrap();
        assert_eq!(
            s.get(kinds::pods(), Some("default"), "b").unwrap_err().code,
            404
        );
        s.create(kinds::pods(), Some("default"), pod("c", None), &wo("m"))
            .unwrap();
        s.delete(kinds::pods(), Some("default"), "c", None).unwrap();
        assert_eq!(
            s.get(kinds::pods(), Some("default"), "c").unwrap_err().code,
            404
        );
    }

    #[test]
    fn deletion_rules() {
        let p = json!({"spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 30}, "status": {"phase": "Running"}});
        assert_eq!(grace_period(&p, None), 30);
        assert_eq!(grace_period(&p, Some(3)), 3);
        assert_eq!(grace_period(&p, Some(-5)), 1);
        let mut done = p.clone();
        done["status"]["phase"] = json!("Succeeded");
        assert_eq!(grace_period(&done, Some(3)), 0);
        assert_eq!(
            pod_deletion(&p, 30, 100),
            PodDeletion::Graceful {
                deadline: 130,
                grace: 30
            }
        );
        assert_eq!(pod_deletion(&p, 0, 100), PodDeletion::Immediate);
        let mut going = p.clone();
        going["metadata"] = json!({"deletionTimestamp": crate::time::rfc3339_secs(130), "deletionGracePeriodSeconds": 30});
        assert_eq!(pod_deletion(&going, 30, 110), PodDeletion::Pending);
        // Shortened from its start: started at 100, now 10 s.
        assert_eq!(
            pod_deletion(&going, 10, 110),
            PodDeletion::Graceful {
                deadline: 110,
                grace: 10
            }
        );
        assert_eq!(pod_deletion(&going, 0, 110), PodDeletion::Immediate);
    }

    #[test]
    fn image_tags_and_qos() {
        assert_eq!(image_tag("nginx"), None);
        assert_eq!(image_tag("reg:5000/nginx:1.2"), Some("1.2"));
        assert_eq!(image_tag("reg:5000/nginx"), None);
        let mut p = json!({"spec": {"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        assert_eq!(qos_class(&p), "Guaranteed");
        p["spec"]["containers"][0]["resources"]["requests"] = json!({"cpu": "500m"});
        assert_eq!(qos_class(&p), "Burstable");
    }
}
