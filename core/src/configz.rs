//! Whether a running kubelet shows a config: its `/configz` (`{"kubeletconfig": {...}}`)
//! compared with the config expected, semantically.
//!
//! Both sides go through the typed model, so `60s` and `1m0s` are equal, and zero values
//! (`false`, `0`, `""`, `"0s"`, `[]`, `{}`) count as absent, as Go's `omitempty` renders
//! them, except in `featureGates` where `false` is a choice. Fields the model does not know
//! (a newer kubelet's) are not compared ([`unknown_fields`] names them). The kubelet
//! registers configz with the effective config before it changes anything at run time,
//! with one exception: `cgroupDriver`, which a v1.36 kubelet takes from a container
//! runtime that reports it (`getCgroupDriverFromCRI`, run just before `initConfigz` in
//! `cmd/kubelet/app/server.go`), whatever the config says. [`configz_diff_on`] therefore
//! takes the runtime's driver when configz shows it ([`crate::node_setup`] explains the
//! rule).
//!
//! And one change made after `initConfigz` that configz still shows: with
//! `reservedSystemCPUs`, the kubelet deletes `kubeReserved.cpu` and sets
//! `systemReserved.cpu` to the number of reserved CPUs, in the very maps configz holds
//! (the conversion to v1beta1 shares them). [`shown_by_configz`] applies it; found by the
//! demo on real v1.36 kubelets, where every `reservedSystemCPUs` pool failed verification
//! with `systemReserved.cpu: expected "500m", kubelet has "1"`.

use std::fmt;

use serde_json::{Map, Value};

use crate::types::KubeletConfiguration;

/// One field where configz differs from the expected config.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigzDiff {
    /// Dotted JSON path (`evictionHard.memory.available`).
    pub field: String,
    /// The expected value (`None`: unset).
    pub expected: Option<Value>,
    /// What the kubelet shows (`None`: unset).
    pub actual: Option<Value>,
}

impl fmt::Display for ConfigzDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<Value>| match v {
            Some(v) => v.to_string(),
            None => "unset".to_string(),
        };
        write!(
            f,
            "{}: expected {}, kubelet has {}",
            self.field,
            show(&self.expected),
            show(&self.actual)
        )
    }
}

/// The config as a v1.36 kubelet's `/configz` shows it once it runs with `config`:
/// when `reservedSystemCPUs` names CPUs, `kubeReserved` without `cpu` and `systemReserved`
/// with `cpu` set to their number (`cmd/kubelet/app/server.go`, `run`: "Option
/// --reserved-cpus is specified, it will overwrite the cpu setting in KubeReserved and
/// SystemReserved"). The kubelet changes the maps configz shares, so only a map the
/// config has shows the change: without `systemReserved` the kubelet makes a new map,
/// which configz does not see.
pub fn shown_by_configz(
    config: &KubeletConfiguration,
) -> std::borrow::Cow<'_, KubeletConfiguration> {
    let cpus = config
        .reserved_system_cpus
        .as_deref()
        .filter(|s| !s.is_empty())
        .and_then(|s| crate::cpuset::count(s).ok())
        .filter(|n| *n > 0);
    let Some(cpus) = cpus else {
        return std::borrow::Cow::Borrowed(config);
    };
    let mut shown = config.clone();
    if let Some(kube) = shown.kube_reserved.as_mut() {
        kube.remove("cpu");
    }
    if let Some(system) = shown.system_reserved.as_mut() {
        system.insert("cpu".into(), cpus.to_string());
    }
    std::borrow::Cow::Owned(shown)
}

/// [`configz_diff`] on a node whose container runtime's cgroup driver is
/// `runtime_cgroup_driver`: a configz that shows the runtime's driver where the config
/// has another is what a kubelet whose runtime reports its driver runs, not a difference.
pub fn configz_diff_on(
    expect: &KubeletConfiguration,
    actual: &Value,
    runtime_cgroup_driver: Option<&str>,
) -> Vec<ConfigzDiff> {
    let shown = actual.get("cgroupDriver").and_then(Value::as_str);
    match runtime_cgroup_driver {
        Some(runtime) if shown == Some(runtime) && expect.cgroup_driver.as_deref() != shown => {
            let mut taken = expect.clone();
            taken.cgroup_driver = Some(runtime.to_string());
            configz_diff(&taken, actual)
        }
        _ => configz_diff(expect, actual),
    }
}

/// Every field where `actual` (configz's `kubeletconfig` object) differs from what a
/// kubelet running `expect` shows ([`shown_by_configz`]). Empty when they agree.
pub fn configz_diff(expect: &KubeletConfiguration, actual: &Value) -> Vec<ConfigzDiff> {
    config_diff(shown_by_configz(expect).as_ref(), actual)
}

/// Every field where `actual` (a KubeletConfiguration in v1beta1 JSON) differs from
/// `expect`, compared as [`configz_diff`] compares but without the changes a running
/// kubelet makes: the comparison of core's effective config with the kubelet's own
/// start-up code (the oracle of `upstream/cmd/kubelet-oracle`).
pub fn config_diff(expect: &KubeletConfiguration, actual: &Value) -> Vec<ConfigzDiff> {
    let want = match serde_json::to_value(expect) {
        Ok(v) => normalize(strip_type_meta(v), false),
        Err(e) => {
            return vec![ConfigzDiff {
                field: String::new(),
                expected: Some(Value::String(format!("<unrenderable: {e}>"))),
                actual: None,
            }];
        }
    };
    let got = normalize(canonical_actual(actual), false);
    let mut out = Vec::new();
    diff_values("", want.as_ref(), got.as_ref(), &mut out);
    out
}

/// The top-level fields of `actual` that [`configz_diff`] leaves out: those the model does
/// not know.
pub fn unknown_fields(actual: &Value) -> Vec<String> {
    let Value::Object(fields) = actual else {
        return Vec::new();
    };
    fields
        .keys()
        .filter(|key| *key != "apiVersion" && *key != "kind" && !known(key))
        .cloned()
        .collect()
}

/// `key` alone, with `value`, read through the model.
fn probe(key: &str, value: Value) -> Result<KubeletConfiguration, serde_json::Error> {
    let mut m = Map::new();
    m.insert(key.to_string(), value);
    serde_json::from_value::<KubeletConfiguration>(Value::Object(m))
}

/// Whether the model knows top-level field `key` (it refuses unknown fields).
fn known(key: &str) -> bool {
    probe(key, Value::Null).is_ok()
}

fn strip_type_meta(mut v: Value) -> Value {
    if let Value::Object(m) = &mut v {
        m.remove("apiVersion");
        m.remove("kind");
    }
    v
}

/// configz's object with each field the model knows re-rendered through the model
/// (canonical durations and the like), fields it does not know dropped, and fields
/// whose value the model rejects kept as they are (so they show as differences).
fn canonical_actual(actual: &Value) -> Value {
    let Value::Object(fields) = actual else {
        return actual.clone();
    };
    let mut out = Map::new();
    for (key, value) in fields {
        if key == "apiVersion" || key == "kind" || !known(key) {
            continue;
        }
        let canonical = probe(key, value.clone())
            .ok()
            .and_then(|cfg| serde_json::to_value(cfg).ok())
            .and_then(|mut v| v.get_mut(key.as_str()).map(Value::take));
        out.insert(key.clone(), canonical.unwrap_or_else(|| value.clone()));
    }
    Value::Object(out)
}

/// Drops null and zero values (`false`, `0`, `""`, `"0s"`, `[]`, `{}`), recursively;
/// `None` when nothing is left. Under `featureGates` a `false` stays.
fn normalize(v: Value, keep_false: bool) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Bool(false) if !keep_false => None,
        Value::Number(n) if n.as_f64() == Some(0.0) => None,
        Value::String(s) if s.is_empty() || s == "0s" => None,
        Value::Array(items) => {
            let items: Vec<Value> = items
                .into_iter()
                .map(|i| normalize(i, keep_false).unwrap_or(Value::Null))
                .collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        Value::Object(m) => {
            let m: Map<String, Value> = m
                .into_iter()
                .filter_map(|(k, v)| {
                    let keep = keep_false || k == "featureGates";
                    normalize(v, keep).map(|v| (k, v))
                })
                .collect();
            (!m.is_empty()).then_some(Value::Object(m))
        }
        other => Some(other),
    }
}

fn diff_values(path: &str, want: Option<&Value>, got: Option<&Value>, out: &mut Vec<ConfigzDiff>) {
    match (want, got) {
        (Some(Value::Object(w)), Some(Value::Object(g))) => {
            let mut keys: Vec<&String> = w.keys().chain(g.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                diff_values(&sub, w.get(k), g.get(k), out);
            }
        }
        (w, g) if w == g => {}
        (w, g) => out.push(ConfigzDiff {
            field: path.to_string(),
            expected: w.cloned(),
            actual: g.cloned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg(v: Value) -> KubeletConfiguration {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn configz_comparison_is_semantic() {
        let expect = cfg(json!({
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "maxPods": 12, "syncFrequency": "1m0s", "failSwapOn": false,
            "featureGates": {"A": false}, "enforceNodeAllocatable": [],
            "evictionHard": {"memory.available": "100Mi"}
        }));
        // configz renders durations its way, omits empty values and may carry fields this
        // agent does not know.
        let actual = json!({
            "maxPods": 12, "syncFrequency": "60s", "featureGates": {"A": false},
            "evictionHard": {"memory.available": "100Mi"}, "someNewField": {"x": 1}
        });
        assert_eq!(configz_diff(&expect, &actual), []);

        let old = json!({"maxPods": 30, "syncFrequency": "1m", "featureGates": {},
            "evictionHard": {"memory.available": "200Mi"}});
        let diffs: Vec<String> = configz_diff(&expect, &old)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            diffs,
            [
                "evictionHard.memory.available: expected \"100Mi\", kubelet has \"200Mi\"",
                "featureGates: expected {\"A\":false}, kubelet has unset",
                "maxPods: expected 12, kubelet has 30",
            ]
        );
        // A value the model rejects shows as a difference rather than being skipped.
        let d = configz_diff(
            &expect,
            &json!({"maxPods": "twelve", "syncFrequency": "1m",
            "featureGates": {"A": false}, "evictionHard": {"memory.available": "100Mi"}}),
        );
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].field, "maxPods");
    }

    #[test]
    fn fields_the_model_does_not_know_are_named() {
        let actual = json!({
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "maxPods": "twelve", "someNewField": {"x": 1}
        });
        assert_eq!(unknown_fields(&actual), ["someNewField"]);
        assert!(unknown_fields(&json!("not an object")).is_empty());
    }

    #[test]
    fn reserved_system_cpus_rewrite_the_cpu_reservations_configz_shows() {
        let mut cfg = KubeletConfiguration {
            reserved_system_cpus: Some("0-1,4".into()),
            system_reserved: Some(
                [
                    ("cpu".to_string(), "500m".to_string()),
                    ("memory".to_string(), "1Gi".to_string()),
                ]
                .into(),
            ),
            kube_reserved: Some([("cpu".to_string(), "250m".to_string())].into()),
            ..KubeletConfiguration::default()
        };
        let shown = shown_by_configz(&cfg);
        assert_eq!(shown.system_reserved.as_ref().unwrap()["cpu"], "3");
        assert_eq!(shown.system_reserved.as_ref().unwrap()["memory"], "1Gi");
        assert!(shown.kube_reserved.as_ref().unwrap().is_empty());
        // What a real v1.36 kubelet served for the demo's gpu pool.
        let real = serde_json::json!({
            "reservedSystemCPUs": "0-1,4",
            "systemReserved": {"cpu": "3", "memory": "1Gi"},
            "kubeReserved": {},
        });
        assert_eq!(configz_diff(&cfg, &real), vec![]);
        let unchanged = serde_json::json!({
            "reservedSystemCPUs": "0-1,4",
            "systemReserved": {"cpu": "500m", "memory": "1Gi"},
            "kubeReserved": {"cpu": "250m"},
        });
        assert_eq!(configz_diff(&cfg, &unchanged).len(), 2);

        // Without the maps the kubelet makes new ones that configz does not see.
        cfg.system_reserved = None;
        cfg.kube_reserved = None;
        assert!(shown_by_configz(&cfg).system_reserved.is_none());
        // Without reservedSystemCPUs nothing changes.
        let plain = KubeletConfiguration {
            system_reserved: Some([("cpu".to_string(), "500m".to_string())].into()),
            ..KubeletConfiguration::default()
        };
        assert!(matches!(
            shown_by_configz(&plain),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn configz_showing_the_runtimes_cgroup_driver_is_not_a_difference() {
        // The config leaves cgroupDriver to the default (cgroupfs); a kubelet whose
        // runtime reports systemd runs, and shows, systemd.
        let expect = cfg(json!({"cgroupDriver": "cgroupfs", "maxPods": 12}));
        let actual = json!({"cgroupDriver": "systemd", "maxPods": 12});
        assert_eq!(configz_diff_on(&expect, &actual, Some("systemd")), []);
        // Without the runtime's driver, or with another, it is one.
        let d = configz_diff_on(&expect, &actual, None);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].field, "cgroupDriver");
        assert_eq!(configz_diff_on(&expect, &actual, Some("cgroupfs")).len(), 1);
        // The other fields are still compared.
        let other = json!({"cgroupDriver": "systemd", "maxPods": 30});
        let d = configz_diff_on(&expect, &other, Some("systemd"));
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].field, "maxPods");
    }
}
