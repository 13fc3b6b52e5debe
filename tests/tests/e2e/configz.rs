//! Parity, measured on every backend: what a kubelet serves on `/configz` after a rollout
//! is, field by field and in both directions, the effective config core computes from the
//! node's files (the config file the agent wrote, the flags of its `kubeadm-flags.env`).
//! On the real cluster that is a v1.36.3 kubelet's own answer; a field core defaults
//! that the kubelet does not have (`draManagerReconcilePeriod` was one), or a default or
//! flag core gets wrong, fails here with every difference named.
//!
//! A field Go omits when empty (`omitempty`) and a field core leaves unset compare equal
//! when the other side holds the type's zero value (`false`, `0`, `""`, `"0s"`, `[]`,
//! `{}`).

use kubelet_gitops_core::effective::{self, Source};
use kubelet_gitops_core::flags::{KubeletFlags, kubeadm_args};
use kubelet_gitops_e2e::{Backend, E2e, E2eError, NodeSpec, Options, Pool, both_backends};
use serde_json::Value;

both_backends!(every_kubelets_configz_is_cores_effective_config);

async fn every_kubelets_configz_is_cores_effective_config(
    backend: Backend,
) -> Result<(), E2eError> {
    let mut canary = NodeSpec::new("general-1", "general");
    canary.canary = true;
    let mut general = Pool::new("general", 0, 11);
    // Fields away from their defaults, of every kind: quantities, maps, lists, durations,
    // booleans, percentages.
    general.kubelet = vec![
        "maxPods: 50".into(),
        "serializeImagePulls: false".into(),
        "imageGCHighThresholdPercent: 90".into(),
        "containerLogMaxSize: 20Mi".into(),
        "evictionHard: {memory.available: 200Mi, nodefs.available: 5%}".into(),
        "systemReserved: {cpu: 100m, memory: 100Mi}".into(),
        "kubeReserved: {cpu: 50m}".into(),
        "nodeStatusUpdateFrequency: 20s".into(),
        "allowedUnsafeSysctls: [net.core.somaxconn]".into(),
    ];
    let options = Options {
        nodes: vec![canary, NodeSpec::new("gpu-1", "gpu")],
        pools: vec![general, Pool::new("gpu", 20, 21)],
        ..Options::on(backend)
    };
    let Some(mut e2e) = E2e::start("configz", options).await? else {
        return Ok(());
    };
    e2e.wait_converged().await?;
    let mut report = Vec::new();
    for (name, k) in e2e.kubelets().clone() {
        let file = k.config()?;
        let flags_path = k.root.join("var/lib/kubelet/kubeadm-flags.env");
        let flags_text = std::fs::read_to_string(&flags_path)
            .map_err(E2eError::io(format!("reading {}", flags_path.display())))?;
        let unexpected = |what: &str, e: String| E2eError::Unexpected {
            what: format!("{what} of {name}"),
            message: e,
        };
        let args = kubeadm_args(&flags_text).map_err(|e| unexpected("flags", e.to_string()))?;
        let flags = KubeletFlags::parse(&args).map_err(|e| unexpected("flags", e.to_string()))?;
        let ours = effective::effective(
            Some(Source::new("config.yaml", file.as_bytes())),
            &[],
            Some(&flags),
        )
        .map_err(|e| unexpected("core's effective config", e.to_string()))?;
        let mut ours = serde_json::to_value(&ours.config)
            .map_err(|e| unexpected("core's effective config", e.to_string()))?;
        let mut theirs = e2e.configz(&name).await?;
        for v in [&mut ours, &mut theirs] {
            if let Some(o) = v.as_object_mut() {
                o.remove("apiVersion");
                o.remove("kind");
            }
        }
        let mut diffs = Vec::new();
        diff("", &ours, &theirs, &mut diffs);
        if !diffs.is_empty() {
            report.push(format!("{name}:\n  {}", diffs.join("\n  ")));
        }
        // Something real was compared: the pool's values are there.
        let qps = if name == "general-1" { 11 } else { 21 };
        assert_eq!(theirs["kubeAPIQPS"], qps, "{name}");
    }
    assert!(
        report.is_empty(),
        "configz differs from core's effective config (ours, then the kubelet's):\n{}",
        report.join("\n")
    );
    e2e.finish().await
}

/// Whether `v` is its type's zero value, as Go's `omitempty` drops it.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty() || s == "0s",
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_zero),
    }
}

/// Every path where `ours` and `theirs` differ, a missing field equal to a zero one.
fn diff(path: &str, ours: &Value, theirs: &Value, out: &mut Vec<String>) {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => diff(&p, x, y, out),
                    (Some(x), None) if !is_zero(x) => out.push(format!("{p}: {x} / unset")),
                    (None, Some(y)) if !is_zero(y) => out.push(format!("{p}: unset / {y}")),
                    _ => {}
                }
            }
        }
        (a, b) if a == b => {}
        (a, b) if is_zero(a) && is_zero(b) => {}
        (a, b) => out.push(format!("{path}: {a} / {b}")),
    }
}
