//! `deploy/components/monitoring`: the PodMonitors, the alerts (a PrometheusRule) and the
//! Grafana dashboard.
//!
//! - promtool (Debian's `prometheus` package) checks the rule groups of the
//!   PrometheusRule's `spec` and runs their unit tests (`tests/alerts.test.yaml`), and
//!   parses every PromQL expression of the rules and the dashboard. Without promtool these
//!   tests fail saying how to install it, unless `KUBELET_GITOPS_SKIP_PROMTOOL=1`.
//! - Every alert has a severity, a summary naming its pool or node, a runbook_url whose
//!   anchor is a heading of docs/operations.md, and a unit test where it fires and one
//!   where it stays silent.
//! - `kubectl kustomize deploy/overlays/example-monitoring` is the example site plus the
//!   component's four objects. kubernetes-validate has no schema for the Prometheus
//!   Operator's kinds (it warns and passes them), so the PodMonitors and the
//!   PrometheusRule are validated against the operator's own CRDs: generated from its API
//!   types (`upstream/monitoring-crds`, run by `upstream/build.sh`) and checked strictly
//!   (`tests/validate_crds.py`: an undeclared field is an error). They are also read
//!   strictly into the `monitoring.coreos.com/v1` fields they may use (modelled below),
//!   and their selectors, ports and job names are checked against the manifests they
//!   scrape.
//! - A real run: the sim, the reconciler and an agent per node (the e2e harness), a
//!   rollout and a rollback that halts a pool; every metric name and label the rules and
//!   the dashboard select must be in what the reconciler and the agents then serve on
//!   `/metrics`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kubelet_gitops_e2e::{Backend, E2e, E2eError, Options};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::deploy_manifests::kubectl;
use crate::readme::anchors;
use crate::support::commands::{read, repo_root, text};
use crate::support::serial;

const COMPONENT: &str = "deploy/components/monitoring";
const RULES: &str = "deploy/components/monitoring/prometheusrule.yaml";
const RULE_TESTS: &str = "deploy/components/monitoring/tests/alerts.test.yaml";
const DASHBOARD: &str = "deploy/components/monitoring/dashboard.json";
const OVERLAY: &str = "deploy/overlays/example-monitoring";
const EXAMPLE: &str = "deploy/overlays/example";
const OPERATIONS: &str = "docs/operations.md";
/// Where every runbook_url points: a heading of docs/operations.md.
const RUNBOOKS: &str =
    "https://github.com/kubelet-gitops/kubelet-gitops/blob/main/docs/operations.md#";
/// Set (to anything but `0`) to skip the promtool tests where promtool is not installed.
const SKIP_PROMTOOL_ENV: &str = "KUBELET_GITOPS_SKIP_PROMTOOL";
const SEVERITIES: [&str; 3] = ["critical", "warning", "info"];
/// The jobs the PodMonitors name (their relabelings) and the rules select.
const RECONCILER_JOB: &str = "kubelet-gitops-reconciler";
const AGENT_JOB: &str = "kubelet-gitops-agent";
/// Labels a scrape adds (the operator's target labels, and the agents' `node`): not in
/// what a process serves.
const SCRAPE_LABELS: [&str; 7] = [
    "job",
    "instance",
    "namespace",
    "pod",
    "container",
    "endpoint",
    "node",
];
/// Metrics the rules use that our processes do not serve, and who does.
const EXTERNAL_METRICS: [(&str, &str); 3] = [
    ("up", "Prometheus, per scrape target"),
    (
        "kube_daemonset_status_desired_number_scheduled",
        "kube-state-metrics",
    ),
    ("kube_daemonset_status_number_ready", "kube-state-metrics"),
];

// ---------------------------------------------------------------------------------------
// The files

fn yaml(rel: &str) -> Value {
    serde_saphyr::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The rule groups: the PrometheusRule's `spec`, as Prometheus reads a rule file.
fn rule_file() -> Value {
    let rule = yaml(RULES);
    assert_eq!(rule["kind"], "PrometheusRule", "{RULES}");
    rule["spec"].clone()
}

/// Every rule of every group.
fn rules(spec: &Value) -> Vec<&Value> {
    spec["groups"]
        .as_array()
        .expect("spec.groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("a group's rules"))
        .collect()
}

fn alert_names(spec: &Value) -> Vec<String> {
    rules(spec)
        .iter()
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect()
}

fn dashboard() -> Value {
    serde_json::from_str(&read(DASHBOARD)).unwrap_or_else(|e| panic!("{DASHBOARD}: {e}"))
}

/// Every panel, rows' collapsed panels included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().expect("panels") {
        out.push(p);
        if let Some(inner) = p["panels"].as_array() {
            out.extend(inner);
        }
    }
    out
}

/// Every PromQL expression of the dashboard (panel targets, and the query of each query
/// variable), Grafana's variables replaced by values Prometheus accepts.
fn dashboard_exprs(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in panels(dashboard) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("panel {:?}: a target without expr: {t}", p["title"]));
            out.push((format!("panel {:?}", p["title"]), grafana_vars(expr)));
        }
    }
    for v in dashboard["templating"]["list"]
        .as_array()
        .expect("templating")
    {
        if v["type"] == "query" {
            let q = v["query"]["query"]
                .as_str()
                .expect("a query variable's query");
            // label_values(METRIC, LABEL): the selector is the expression.
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|s| s.strip_suffix(')'))
                .and_then(|s| s.rsplit_once(','))
                .map(|(sel, _)| sel.trim())
                .unwrap_or_else(|| panic!("variable {:?}: not label_values(...): {q}", v["name"]));
            out.push((format!("variable {:?}", v["name"]), inner.to_string()));
        }
    }
    out
}

fn grafana_vars(expr: &str) -> String {
    let e = expr
        .replace("$__rate_interval", "5m")
        .replace("$__interval", "1m")
        .replace("$__range", "1h")
        .replace("$pool", ".*");
    assert!(
        !e.contains('$'),
        "a Grafana variable the test does not know: {expr}"
    );
    e
}

/// Every expression of the rules and the dashboard, with where it is.
fn all_exprs() -> Vec<(String, String)> {
    let spec = rule_file();
    let mut out: Vec<(String, String)> = rules(&spec)
        .iter()
        .map(|r| {
            let name = r["alert"].as_str().or(r["record"].as_str()).unwrap_or("?");
            (
                format!("rule {name}"),
                r["expr"].as_str().expect("expr").to_string(),
            )
        })
        .collect();
    out.extend(dashboard_exprs(&dashboard()));
    out
}

// ---------------------------------------------------------------------------------------
// promtool

/// promtool, or `None` (said) when [`SKIP_PROMTOOL_ENV`] is set; without it, a failure
/// saying how to install it.
fn promtool(test: &str) -> Option<PathBuf> {
    if std::env::var(SKIP_PROMTOOL_ENV).is_ok_and(|v| !v.is_empty() && v != "0") {
        eprintln!("skipped {test}: {SKIP_PROMTOOL_ENV} is set");
        return None;
    }
    match Command::new("promtool").arg("--version").output() {
        Ok(out) if out.status.success() => {
            eprintln!("{}", text(&out.stdout).lines().next().unwrap_or_default());
            Some(PathBuf::from("promtool"))
        }
        Ok(out) => panic!("promtool --version failed: {}", text(&out.stderr)),
        Err(e) => panic!(
            "{test}: promtool is not installed ({e}); it checks the alerts of {COMPONENT}. \
             Install it (Debian: apt-get install prometheus; .ci/run does), or set \
             {SKIP_PROMTOOL_ENV}=1 to skip this test"
        ),
    }
}

fn run(promtool: &Path, dir: &Path, args: &[&str]) -> Output {
    Command::new(promtool)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("run promtool {args:?}: {e}"))
}

fn both(out: &Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

/// A temp dir holding the rule file (`rules.yaml`, JSON being YAML) and a copy of the
/// unit tests that name it.
fn rules_dir(spec: &Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(
        dir.path().join("rules.yaml"),
        serde_json::to_string_pretty(spec).expect("JSON"),
    )
    .expect("write rules.yaml");
    std::fs::write(dir.path().join("alerts.test.yaml"), read(RULE_TESTS))
        .expect("write the unit tests");
    dir
}

#[test]
fn promtool_checks_the_rules_and_passes_their_unit_tests() {
    let Some(promtool) = promtool("promtool_checks_the_rules_and_passes_their_unit_tests") else {
        return;
    };
    let spec = rule_file();
    let dir = rules_dir(&spec);
    let out = run(&promtool, dir.path(), &["check", "rules", "rules.yaml"]);
    assert!(
        out.status.success(),
        "promtool check rules:\n{}",
        both(&out)
    );
    let n = rules(&spec).len();
    assert!(
        both(&out).contains(&format!("SUCCESS: {n} rules found")),
        "{}",
        both(&out)
    );
    let out = run(
        &promtool,
        dir.path(),
        &["test", "rules", "alerts.test.yaml"],
    );
    assert!(
        out.status.success(),
        "promtool test rules {RULE_TESTS}:\n{}",
        both(&out)
    );
    eprintln!("promtool test rules: {}", both(&out).trim());

    // The tests can fail: a halt alert that wants the phase gauge at 2 never fires.
    let mut broken = spec.clone();
    let halted = broken["groups"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .flat_map(|g| g["rules"].as_array_mut().unwrap().iter_mut())
        .find(|r| r["alert"] == "KubeletGitopsPoolHalted")
        .expect("the halt alert");
    let expr = halted["expr"].as_str().unwrap().replace("== 1", "== 2");
    halted["expr"] = Value::String(expr);
    let dir = rules_dir(&broken);
    let out = run(
        &promtool,
        dir.path(),
        &["test", "rules", "alerts.test.yaml"],
    );
    assert!(
        !out.status.success() && both(&out).contains("KubeletGitopsPoolHalted"),
        "a broken halt alert passed its tests:\n{}",
        both(&out)
    );
}

#[test]
fn every_promql_expression_of_the_rules_and_the_dashboard_parses() {
    let Some(promtool) = promtool("every_promql_expression_of_the_rules_and_the_dashboard_parses")
    else {
        return;
    };
    let exprs = all_exprs();
    // Each expression as a recording rule: `promtool check rules` parses it.
    let records: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(
            |(i, (_, expr))| serde_json::json!({"record": format!("check:expr_{i}"), "expr": expr}),
        )
        .collect();
    let file = serde_json::json!({"groups": [{"name": "every-expression", "rules": records}]});
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(dir.path().join("exprs.yaml"), file.to_string()).expect("write");
    let out = run(&promtool, dir.path(), &["check", "rules", "exprs.yaml"]);
    let listing: Vec<String> = exprs
        .iter()
        .enumerate()
        .map(|(i, (w, e))| format!("expr_{i} ({w}): {e}"))
        .collect();
    assert!(
        out.status.success(),
        "promtool does not parse an expression:\n{}\n{}",
        both(&out),
        listing.join("\n")
    );
    assert!(
        both(&out).contains(&format!("SUCCESS: {} rules found", exprs.len())),
        "{}",
        both(&out)
    );

    // And it says so when one does not parse.
    std::fs::write(
        dir.path().join("bad.yaml"),
        serde_json::json!({"groups": [{"name": "bad", "rules": [
            {"record": "check:bad", "expr": "sum by (pool (kubelet_gitops_pool_nodes)"}
        ]}]})
        .to_string(),
    )
    .expect("write");
    let out = run(&promtool, dir.path(), &["check", "rules", "bad.yaml"]);
    assert!(!out.status.success(), "{}", both(&out));
}

// ---------------------------------------------------------------------------------------
// Alerts: metadata, runbooks, tests

/// The labels an expression aggregates `by`.
fn grouped_by(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = expr;
    while let Some(at) = rest.find("by (") {
        let after = &rest[at + 4..];
        let end = after.find(')').expect("a closed by list");
        out.extend(after[..end].split(',').map(|l| l.trim().to_string()));
        rest = &after[end..];
    }
    out
}

#[test]
fn every_alert_has_severity_summary_runbook_and_a_firing_and_a_silent_test() {
    let spec = rule_file();
    let docs = read(OPERATIONS);
    let doc_anchors = anchors(&docs);
    let tests = yaml(RULE_TESTS);
    let cases: Vec<&Value> = tests["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().into_iter().flatten())
        .collect();
    let names = alert_names(&spec);
    assert!(names.len() >= 15, "{names:?}");
    let mut problems = Vec::new();
    for rule in rules(&spec) {
        let Some(name) = rule["alert"].as_str() else {
            continue;
        };
        let labels = &rule["labels"];
        let severity = labels["severity"].as_str().unwrap_or_default();
        if !SEVERITIES.contains(&severity) {
            problems.push(format!(
                "{name}: severity {severity:?} not one of {SEVERITIES:?}"
            ));
        }
        let annotations = &rule["annotations"];
        let summary = annotations["summary"].as_str().unwrap_or_default();
        if summary.is_empty() {
            problems.push(format!("{name}: no summary"));
        }
        // A per-pool or per-node alert names its pool or node.
        let expr = rule["expr"].as_str().unwrap_or_default();
        for label in ["pool", "node"] {
            if grouped_by(expr).contains(label)
                && !summary.contains(&format!("{{{{ $labels.{label} }}}}"))
            {
                problems.push(format!(
                    "{name}: aggregates by {label} but its summary does not name it: {summary}"
                ));
            }
        }
        let runbook = annotations["runbook_url"].as_str().unwrap_or_default();
        let want = format!("{RUNBOOKS}{}", name.to_lowercase());
        if runbook != want {
            problems.push(format!("{name}: runbook_url {runbook:?}, want {want:?}"));
        }
        let anchor = want.rsplit_once('#').map(|(_, a)| a).unwrap_or_default();
        if !doc_anchors.contains(anchor) {
            problems.push(format!("{name}: {OPERATIONS} has no heading #{anchor}"));
        }
        let mine: Vec<&&Value> = cases.iter().filter(|c| c["alertname"] == name).collect();
        let firing = mine
            .iter()
            .any(|c| c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()));
        let silent = mine
            .iter()
            .any(|c| c["exp_alerts"].as_array().is_none_or(|a| a.is_empty()));
        if !firing || !silent {
            problems.push(format!(
                "{name}: {RULE_TESTS} has {} a case where it fires and {} a case where it stays silent",
                if firing { "" } else { "no" },
                if silent { "" } else { "no" }
            ));
        }
    }
    for c in &cases {
        let n = c["alertname"].as_str().unwrap_or_default();
        if !names.iter().any(|a| a == n) {
            problems.push(format!("{RULE_TESTS}: a test of {n}, which is no alert"));
        }
    }
    // The monitoring section lists every alert.
    let monitoring = docs
        .split("\n## Monitoring\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/operations.md has ## Monitoring");
    for n in &names {
        if !monitoring.contains(n.as_str()) {
            problems.push(format!("{OPERATIONS} ## Monitoring does not mention {n}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_dashboard_shows_progress_rollbacks_latency_api_errors_and_status_delivery() {
    let d = dashboard();
    assert_eq!(d["uid"], "kubelet-gitops");
    let mut ids = BTreeSet::new();
    for p in panels(&d) {
        assert!(
            ids.insert(p["id"].as_u64().expect("an id")),
            "panel id twice: {p}"
        );
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(
            p["datasource"]["uid"], "${datasource}",
            "panel {:?} does not use the datasource variable",
            p["title"]
        );
        assert!(
            p["targets"].as_array().is_some_and(|t| !t.is_empty()),
            "panel {:?} has no query",
            p["title"]
        );
    }
    let used: BTreeSet<String> = dashboard_exprs(&d)
        .iter()
        .flat_map(|(_, e)| metric_names(e))
        .collect();
    // What the issue asked the dashboard to show.
    for (what, metric) in [
        ("pools' progress", "kubelet_gitops_pool_nodes"),
        ("halts", "kubelet_gitops_pool_phase"),
        ("rollbacks", "kubelet_gitops_agent_rollbacks_total"),
        (
            "reconcile latency",
            "kubelet_gitops_reconcile_duration_seconds_bucket",
        ),
        (
            "git poll latency",
            "kubelet_gitops_git_poll_duration_seconds_bucket",
        ),
        ("API errors", "kubelet_gitops_api_errors_total"),
        ("status delivery", "kubelet_gitops_status_posts_total"),
        ("status delivery", "kubelet_gitops_status_outbox"),
    ] {
        assert!(used.contains(metric), "{what}: no panel uses {metric}");
    }
}

// ---------------------------------------------------------------------------------------
// The component in the example overlay, against the operator's API

/// The objects `kubectl kustomize DIR` renders.
fn kustomize(kubectl: &Path, dir: &str) -> Vec<Value> {
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(repo_root().join(dir))
        .output()
        .unwrap_or_else(|e| panic!("run kubectl kustomize {dir}: {e}"));
    assert!(
        out.status.success(),
        "kubectl kustomize {dir}: {}",
        text(&out.stderr)
    );
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text(&out.stdout)).unwrap_or_else(|e| panic!("{dir}: {e}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn identity(d: &Value) -> (String, String) {
    (
        d["kind"].as_str().unwrap_or_default().to_string(),
        d["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// `monitoring.coreos.com/v1` objects, read strictly: the fields of the operator's API
/// (v0.7x-0.9x) that these manifests may use. A field the model lacks fails the read; if
/// it is a real field of the operator's API, add it here.
mod operator {
    // Most fields are here to be accepted (or type-checked), not read.
    #![allow(dead_code)]

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Object<S> {
        pub api_version: String,
        pub kind: String,
        pub metadata: ObjectMeta,
        pub spec: S,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct PodMonitorSpec {
        pub selector: LabelSelector,
        pub namespace_selector: Option<NamespaceSelector>,
        pub pod_metrics_endpoints: Vec<PodMetricsEndpoint>,
        pub job_label: Option<String>,
        pub pod_target_labels: Option<Vec<String>>,
        pub sample_limit: Option<u64>,
        pub target_limit: Option<u64>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct NamespaceSelector {
        pub any: Option<bool>,
        pub match_names: Option<Vec<String>>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct PodMetricsEndpoint {
        pub port: Option<String>,
        pub port_number: Option<u16>,
        pub path: Option<String>,
        pub scheme: Option<String>,
        pub interval: Option<String>,
        pub scrape_timeout: Option<String>,
        pub honor_labels: Option<bool>,
        pub honor_timestamps: Option<bool>,
        pub relabelings: Option<Vec<RelabelConfig>>,
        pub metric_relabelings: Option<Vec<RelabelConfig>>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct RelabelConfig {
        pub action: Option<String>,
        pub source_labels: Option<Vec<String>>,
        pub separator: Option<String>,
        pub target_label: Option<String>,
        pub regex: Option<String>,
        pub modulus: Option<u64>,
        pub replacement: Option<String>,
    }

    /// The operator's relabel actions (it takes either case).
    pub const ACTIONS: [&str; 11] = [
        "replace",
        "keep",
        "drop",
        "hashmod",
        "labelmap",
        "labeldrop",
        "labelkeep",
        "lowercase",
        "uppercase",
        "keepequal",
        "dropequal",
    ];

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct PrometheusRuleSpec {
        pub groups: Vec<RuleGroup>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "snake_case")]
    pub struct RuleGroup {
        pub name: String,
        pub interval: Option<String>,
        pub limit: Option<u64>,
        pub query_offset: Option<String>,
        pub partial_response_strategy: Option<String>,
        pub labels: Option<BTreeMap<String, String>>,
        pub rules: Vec<Rule>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "snake_case")]
    pub struct Rule {
        pub alert: Option<String>,
        pub record: Option<String>,
        pub expr: String,
        #[serde(rename = "for")]
        pub for_: Option<String>,
        pub keep_firing_for: Option<String>,
        pub labels: Option<BTreeMap<String, String>>,
        pub annotations: Option<BTreeMap<String, String>>,
    }

    /// The operator's duration pattern: `0`, or units y w d h m s ms in that order.
    pub fn is_duration(s: &str) -> bool {
        if s == "0" {
            return true;
        }
        let units = ["y", "w", "d", "h", "ms", "m", "s"];
        let order = ["y", "w", "d", "h", "m", "s", "ms"];
        let mut rest = s;
        let mut last = None;
        while !rest.is_empty() {
            let digits = rest.chars().take_while(char::is_ascii_digit).count();
            if digits == 0 {
                return false;
            }
            rest = &rest[digits..];
            let Some(unit) = units.iter().find(|u| rest.starts_with(**u)) else {
                return false;
            };
            let at = order.iter().position(|o| o == unit).unwrap();
            if last.is_some_and(|l| at <= l) {
                return false;
            }
            last = Some(at);
            rest = &rest[unit.len()..];
        }
        last.is_some()
    }
}

fn strict<T: DeserializeOwned>(doc: &Value, what: &str) -> Result<T, String> {
    serde_path_to_error::deserialize(doc.clone())
        .map_err(|e| format!("{what}: at {}: {}", e.path(), e.inner()))
}

/// The pod template a PodMonitor's selector must pick, and the port it scrapes.
fn check_pod_monitor(
    pm: &operator::Object<operator::PodMonitorSpec>,
    template: &PodTemplateSpec,
    port: i32,
    job: &str,
    namespace: &str,
) {
    let name = pm.metadata.name.as_deref().unwrap_or_default();
    assert_eq!(pm.api_version, "monitoring.coreos.com/v1", "{name}");
    assert_eq!(pm.kind, "PodMonitor");
    assert_eq!(pm.metadata.namespace.as_deref(), Some(namespace), "{name}");
    assert!(
        pm.spec.namespace_selector.is_none(),
        "{name}: its own namespace"
    );
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let selector = pm.spec.selector.match_labels.clone().unwrap_or_default();
    assert!(!selector.is_empty(), "{name}: selects every pod");
    assert!(pm.spec.selector.match_expressions.is_none(), "{name}");
    for (k, v) in &selector {
        assert_eq!(
            labels.get(k),
            Some(v),
            "{name}: selects {k}={v}: {labels:?}"
        );
    }
    let [endpoint] = pm.spec.pod_metrics_endpoints.as_slice() else {
        panic!("{name}: one endpoint");
    };
    let container_ports: Vec<_> = template
        .spec
        .as_ref()
        .expect("a pod spec")
        .containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .collect();
    let named = endpoint.port.as_deref().expect("a named port");
    assert!(
        container_ports
            .iter()
            .any(|p| p.name.as_deref() == Some(named) && p.container_port == port),
        "{name}: port {named} is not container port {port}: {container_ports:?}"
    );
    assert_eq!(endpoint.path.as_deref(), Some("/metrics"), "{name}");
    for d in [&endpoint.interval, &endpoint.scrape_timeout]
        .into_iter()
        .flatten()
    {
        assert!(operator::is_duration(d), "{name}: duration {d:?}");
    }
    let relabelings = endpoint.relabelings.as_deref().unwrap_or_default();
    for r in relabelings {
        let action = r.action.as_deref().unwrap_or("replace").to_lowercase();
        assert!(
            operator::ACTIONS.contains(&action.as_str()),
            "{name}: action {action}"
        );
    }
    assert!(
        relabelings
            .iter()
            .any(|r| r.target_label.as_deref() == Some("job")
                && r.replacement.as_deref() == Some(job)
                && r.source_labels.is_none()),
        "{name}: sets job={job}, the job the alerts select"
    );
}

#[test]
fn the_component_adds_its_objects_to_the_example_site_and_fits_the_operators_api() {
    let Some(kubectl) = kubectl() else {
        eprintln!(
            "skipped the_component_adds_its_objects_to_the_example_site_and_fits_the_operators_api: \
             no kubectl with kustomize 5 (it renders the kustomizations)"
        );
        return;
    };
    let with = kustomize(&kubectl, OVERLAY);
    let without = kustomize(&kubectl, EXAMPLE);
    // The example site unchanged, plus the component's four objects.
    let base: BTreeMap<_, _> = without.iter().map(|d| (identity(d), d)).collect();
    let mut added = BTreeMap::new();
    for d in &with {
        match base.get(&identity(d)) {
            Some(b) => assert_eq!(*b, d, "{OVERLAY} changes {:?}", identity(d)),
            None => {
                added.insert(identity(d), d);
            }
        }
    }
    assert_eq!(with.len(), without.len() + added.len());
    let kinds: Vec<(&str, &str)> = added
        .keys()
        .map(|(k, n)| (k.as_str(), n.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("ConfigMap", "kubelet-gitops-dashboard"),
            ("PodMonitor", "kubelet-gitops-agent"),
            ("PodMonitor", "kubelet-gitops-reconciler"),
            ("PrometheusRule", "kubelet-gitops"),
        ]
    );
    let deployment: Deployment = serde_json::from_value(
        (*base[&("Deployment".into(), "kubelet-gitops-reconciler".into())]).clone(),
    )
    .expect("the Deployment");
    let daemon_set: DaemonSet = serde_json::from_value(
        (*base[&("DaemonSet".into(), "kubelet-gitops-agent".into())]).clone(),
    )
    .expect("the DaemonSet");
    let namespace = deployment.metadata.namespace.clone().expect("namespaced");

    // The dashboard, as the Grafana sidecar finds it.
    let cm: ConfigMap = serde_json::from_value(
        (*added[&("ConfigMap".into(), "kubelet-gitops-dashboard".into())]).clone(),
    )
    .expect("the dashboard ConfigMap");
    assert_eq!(cm.metadata.namespace.as_deref(), Some(namespace.as_str()));
    assert_eq!(
        cm.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("grafana_dashboard"))
            .map(String::as_str),
        Some("1")
    );
    let data = cm.data.expect("data");
    assert_eq!(data.keys().collect::<Vec<_>>(), ["kubelet-gitops.json"]);
    assert_eq!(data["kubelet-gitops.json"], read(DASHBOARD));

    // The PodMonitors pick the pods and ports they scrape, and name the jobs the rules use.
    let rules_text = read(RULES);
    for job in [RECONCILER_JOB, AGENT_JOB] {
        assert!(rules_text.contains(&format!("job=\"{job}\"")), "{job}");
    }
    let pm = |name: &str| -> operator::Object<operator::PodMonitorSpec> {
        strict(added[&("PodMonitor".into(), name.into())], name).unwrap_or_else(|e| panic!("{e}"))
    };
    let reconciler = pm("kubelet-gitops-reconciler");
    let dspec = deployment.spec.as_ref().expect("spec");
    check_pod_monitor(
        &reconciler,
        &dspec.template,
        9090,
        RECONCILER_JOB,
        &namespace,
    );
    let agent = pm("kubelet-gitops-agent");
    let aspec = daemon_set.spec.as_ref().expect("spec");
    check_pod_monitor(&agent, &aspec.template, 9102, AGENT_JOB, &namespace);
    let agent_relabelings = agent.spec.pod_metrics_endpoints[0]
        .relabelings
        .as_deref()
        .unwrap_or_default();
    assert!(
        agent_relabelings
            .iter()
            .any(|r| r.target_label.as_deref() == Some("node")
                && r.source_labels.as_deref()
                    == Some(&["__meta_kubernetes_pod_node_name".to_string()][..])),
        "the agents' series carry the node's name as `node`"
    );

    // The PrometheusRule, strictly; its groups are what promtool checks.
    let rule_doc = added[&("PrometheusRule".into(), "kubelet-gitops".into())];
    let rule: operator::Object<operator::PrometheusRuleSpec> =
        strict(rule_doc, "PrometheusRule").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rule.api_version, "monitoring.coreos.com/v1");
    assert_eq!(rule.metadata.namespace.as_deref(), Some(namespace.as_str()));
    assert_eq!(
        rule_doc["spec"],
        rule_file(),
        "the rendered spec is the file's"
    );
    let mut groups = BTreeSet::new();
    for g in &rule.spec.groups {
        assert!(groups.insert(g.name.as_str()), "group {} twice", g.name);
        for r in &g.rules {
            assert!(
                r.alert.is_some() != r.record.is_some(),
                "{}: exactly one of alert and record",
                g.name
            );
            for d in [&r.for_, &r.keep_firing_for].into_iter().flatten() {
                assert!(operator::is_duration(d), "{:?}: duration {d:?}", r.alert);
            }
        }
    }

    // The strict read fails on a misspelled field.
    let mut misspelled = added[&("PodMonitor".into(), "kubelet-gitops-agent".into())].clone();
    let endpoints = misspelled["spec"]
        .as_object_mut()
        .unwrap()
        .remove("podMetricsEndpoints")
        .unwrap();
    misspelled["spec"]["podMetricEndpoints"] = endpoints;
    let e = strict::<operator::Object<operator::PodMonitorSpec>>(&misspelled, "misspelled")
        .expect_err("a misspelled field is refused");
    assert!(e.contains("podMetricEndpoints"), "{e}");
    assert!(!operator::is_duration("30 s") && !operator::is_duration("1m1h"));
    assert!(operator::is_duration("1h30m") && operator::is_duration("30s"));

    // kubernetes-validate: the ConfigMap against Kubernetes' schemas; it has none for
    // the operator's kinds (it says so, and passes them: hence the strict read above).
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("monitoring.yaml");
    let objects: Vec<String> = added
        .values()
        .map(|d| serde_json::to_string(d).expect("JSON"))
        .collect();
    std::fs::write(&file, objects.join("\n---\n")).expect("write");
    match Command::new("kubernetes-validate")
        .args(["--strict", "--kubernetes-version", "1.36.0"])
        .arg(&file)
        .output()
    {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => eprintln!(
            "kubernetes-validate is not installed: the dashboard ConfigMap was not checked \
             against the Kubernetes schemas (pip install kubernetes-validate; .ci/run does)"
        ),
        Err(e) => panic!("run kubernetes-validate: {e}"),
        Ok(out) => {
            let said = both(&out);
            assert!(out.status.success(), "{said}");
            assert!(
                said.contains("passed for resource configmap/kubelet-gitops-dashboard"),
                "{said}"
            );
            let warned = said.lines().filter(|l| l.starts_with("WARN")).count();
            assert_eq!(
                warned, 3,
                "no schema for the 3 operator objects only: {said}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Metric names, against a real run

/// The vector selectors of a PromQL expression: each metric name with the label names its
/// matchers use. Strings, ranges, function names, keywords and grouping lists are left
/// out. Enough for the expressions we write (no `{__name__=...}` selectors).
fn selectors(expr: &str) -> Vec<(String, BTreeSet<String>)> {
    const KEYWORDS: [&str; 12] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "and",
        "or",
        "unless",
        "offset",
        "atan2",
    ];
    const LISTS: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    const AGGREGATIONS: [&str; 14] = [
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let skip_spaces = |mut i: usize| {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        i
    };
    // The index after the quote closing the string that starts at `i`.
    let skip_string = |mut i: usize| {
        let quote = chars[i];
        i += 1;
        while i < chars.len() && chars[i] != quote {
            if chars[i] == '\\' {
                i += 1;
            }
            i += 1;
        }
        i + 1
    };
    // The index after `close`, strings skipped.
    let skip_to = |mut i: usize, close: char| {
        while i < chars.len() && chars[i] != close {
            if matches!(chars[i], '"' | '\'' | '`') {
                i = skip_string(i);
            } else {
                i += 1;
            }
        }
        i + 1
    };
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if matches!(c, '"' | '\'' | '`') {
            i = skip_string(i);
        } else if c == '[' {
            i = skip_to(i, ']');
        } else if c == '{' {
            i = skip_to(i, '}');
        } else if c.is_ascii_digit() || c == '.' {
            // Numbers and durations (5m, 1e3, 0.99).
            while i < chars.len() && (word(chars[i]) || chars[i] == '.') {
                i += 1;
            }
        } else if word(c) {
            let start = i;
            while i < chars.len() && word(chars[i]) {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect();
            let next = skip_spaces(i);
            let lower = name.to_lowercase();
            if KEYWORDS.contains(&lower.as_str()) {
                if LISTS.contains(&lower.as_str()) && chars.get(next) == Some(&'(') {
                    i = skip_to(next, ')');
                }
            } else if chars.get(next) == Some(&'(') || AGGREGATIONS.contains(&lower.as_str()) {
                // A function, or an aggregation (`sum by (x) (...)`).
            } else if lower == "inf" || lower == "nan" {
            } else {
                let mut labels = BTreeSet::new();
                if chars.get(next) == Some(&'{') {
                    let end = skip_to(next, '}');
                    let inside: String = chars[next + 1..end - 1].iter().collect();
                    labels = matcher_labels(&inside);
                    i = end;
                }
                out.push((name, labels));
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The label names of the matchers `a="x", b=~"y|z"`.
fn matcher_labels(inside: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = inside;
    while let Some(op) = rest.find(['=', '!']) {
        let label = rest[..op].trim().trim_start_matches(',').trim();
        if !label.is_empty() {
            out.insert(label.to_string());
        }
        // Past the quoted value.
        let after = &rest[op..];
        let Some(q) = after.find('"') else { break };
        let value = &after[q + 1..];
        let mut end = 0;
        let bytes = value.as_bytes();
        while end < bytes.len() && bytes[end] != b'"' {
            if bytes[end] == b'\\' {
                end += 1;
            }
            end += 1;
        }
        rest = value.get(end + 1..).unwrap_or_default();
    }
    out
}

/// The metric names an expression selects.
fn metric_names(expr: &str) -> BTreeSet<String> {
    selectors(expr).into_iter().map(|(n, _)| n).collect()
}

#[test]
fn the_selector_reader_finds_metrics_and_their_matchers() {
    let got = selectors(
        r#"(sum(increase(a_total{result=~"x|y", b!="}"}[15m])) or vector(0)) == 0 and on () max by (pool, le) (c{d="e"}) / on (pool) group_left (x) sum without (y) (f) offset 5m > bool 0.5e1"#,
    );
    let want: Vec<(String, BTreeSet<String>)> = vec![
        (
            "a_total".into(),
            ["result".to_string(), "b".to_string()].into(),
        ),
        ("c".into(), ["d".to_string()].into()),
        ("f".into(), BTreeSet::new()),
    ];
    assert_eq!(got, want);
}

/// What one `/metrics` text serves: sample names with their label names, and the names
/// its `# TYPE` lines promise (a family with no sample yet serves none: an error counter
/// that never counted).
#[derive(Debug, Default)]
struct Served {
    samples: BTreeMap<String, BTreeSet<String>>,
    typed: BTreeSet<String>,
}

impl Served {
    fn add(&mut self, text: &str) {
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut words = rest.split_whitespace();
                let (Some(name), Some(kind)) = (words.next(), words.next()) else {
                    continue;
                };
                let suffixes: &[&str] = match kind {
                    "counter" => &["_total"],
                    "histogram" => &["_bucket", "_sum", "_count"],
                    "summary" => &["", "_sum", "_count"],
                    _ => &[""],
                };
                self.typed
                    .extend(suffixes.iter().map(|s| format!("{name}{s}")));
            } else if !line.starts_with('#') && !line.trim().is_empty() {
                let end = line.find(['{', ' ']).unwrap_or(line.len());
                let labels = self.samples.entry(line[..end].to_string()).or_default();
                if line[end..].starts_with('{') {
                    let close = line.rfind('}').expect("a closed label set");
                    labels.extend(matcher_labels(&line[end + 1..close]));
                }
            }
        }
    }

    fn has(&self, name: &str) -> bool {
        self.samples.contains_key(name) || self.typed.contains(name)
    }
}

/// Every metric and matcher label of the rules and the dashboard that `served` lacks.
fn unserved(served: &Served) -> Vec<String> {
    let mut problems = Vec::new();
    let mut external_used = BTreeSet::new();
    for (what, expr) in all_exprs() {
        for (name, labels) in selectors(&expr) {
            if let Some((_, who)) = EXTERNAL_METRICS.iter().find(|(n, _)| *n == name) {
                external_used.insert(name.clone());
                eprintln!("{what}: {name} comes from {who}");
                continue;
            }
            if !served.has(&name) {
                problems.push(format!("{what}: {name} is not served: {expr}"));
                continue;
            }
            // Label names, where the run has samples of the metric.
            if let Some(have) = served.samples.get(&name) {
                for l in &labels {
                    if !have.contains(l) && !SCRAPE_LABELS.contains(&l.as_str()) {
                        problems.push(format!(
                            "{what}: {name} has no label {l} (it has {have:?}): {expr}"
                        ));
                    }
                }
            }
        }
    }
    let listed: BTreeSet<String> = EXTERNAL_METRICS
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    if external_used != listed {
        problems.push(format!(
            "EXTERNAL_METRICS lists {listed:?}; the expressions use {external_used:?}"
        ));
    }
    problems
}

#[test]
fn an_unserved_metric_or_label_is_reported() {
    let mut served = Served::default();
    served.add(
        "# TYPE kubelet_gitops_pool_phase gauge\nkubelet_gitops_pool_phase{pool=\"a\",phase=\"Halted\"} 1\n",
    );
    let problems = unserved(&served);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("kubelet_gitops_git_polls_total is not served")),
        "{problems:?}"
    );
    assert!(
        !problems
            .iter()
            .any(|p| p.contains("kubelet_gitops_pool_phase is not served")),
        "{problems:?}"
    );
    let mut wrong = Served::default();
    wrong.add("kubelet_gitops_pool_phase{pool=\"a\",stage=\"Halted\"} 1\n");
    assert!(
        unserved(&wrong)
            .iter()
            .any(|p| p.contains("kubelet_gitops_pool_phase has no label phase")),
    );
}

/// A rollout, then a config the canary's kubelet cannot start with: rolled back, the pool
/// halted (as the e2e `rollback` scenario, on the sim). Then every metric name and label
/// the rules and the dashboard select must be served by the reconciler or the agents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rules_and_the_dashboard_select_only_what_a_real_run_serves() -> Result<(), E2eError> {
    let _turn = serial::shared();
    // Half of all writes answered 409 Conflict, so the API error counter has series: the
    // reconciler makes some twenty writes here, so the chance that none is refused is
    // about one in a million (at a tenth it was one in six, and a CI run failed so).
    // The agents and the reconciler retry them at once; the run still converges.
    let options = Options {
        sim_args: ["--fault-409-rate", "0.5", "--fault-seed", "17"]
            .map(String::from)
            .to_vec(),
        ..Options::on(Backend::Sim)
    };
    let Some(mut e2e) = E2e::start("monitoring", options).await? else {
        return Ok(());
    };
    let good = e2e.wait_converged().await?;
    let good_general = good.target("general").to_string();
    e2e.wait_nodes("the good config last-known-good on the canary", |nodes| {
        nodes
            .get("general-3")
            .filter(|n| n.last_known_good.as_deref() == Some(good_general.as_str()))
            .map(|_| ())
    })
    .await?;
    let blocked = e2e.block_pod_logs_dir()?;
    let mut general = e2e.pool("general")?;
    general.kubelet = vec![format!("podLogsDir: {blocked}")];
    e2e.write_pool(&general)?;
    e2e.git()
        .commit_and_push("general: podLogsDir where a file is")
        .await?;
    e2e.wait_nodes("the canary rolled back", |nodes| {
        nodes
            .get("general-3")
            .filter(|n| n.state.as_deref() == Some("RolledBack"))
            .map(|_| ())
    })
    .await?;
    e2e.wait_pool_phase("general", "Halted").await?;

    let reconciler = e2e.metrics().await?;
    let rolled_back = e2e.agent_metrics("general-3").await?;
    let done = e2e.agent_metrics("general-1").await?;
    e2e.finish().await?;

    assert!(
        reconciler.contains("kubelet_gitops_pool_phase{pool=\"general\",phase=\"Halted\"} 1"),
        "{reconciler}"
    );
    assert!(
        rolled_back.contains("kubelet_gitops_agent_state{state=\"RolledBack\"} 1"),
        "{rolled_back}"
    );
    for l in reconciler
        .lines()
        .filter(|l| l.starts_with("kubelet_gitops_api_errors"))
    {
        eprintln!("DBG {l}");
    }
    let mut served = Served::default();
    for t in [&reconciler, &rolled_back, &done] {
        served.add(t);
    }
    // The halt and the rollback left samples, not only TYPE lines.
    for name in [
        "kubelet_gitops_pool_phase",
        "kubelet_gitops_agent_rollbacks_total",
        "kubelet_gitops_agent_applies_total",
        "kubelet_gitops_git_polls_total",
        "kubelet_gitops_api_errors_total",
    ] {
        assert!(served.samples.contains_key(name), "{name}: {served:?}");
    }
    let problems = unserved(&served);
    assert!(
        problems.is_empty(),
        "{}\n\nreconciler /metrics:\n{reconciler}\nagent /metrics:\n{rolled_back}",
        problems.join("\n")
    );
    Ok(())
}

/// The validator of deploy/components/monitoring against the operator's CRDs.
const VALIDATE_CRDS: &str = "deploy/components/monitoring/tests/validate_crds.py";

/// The Prometheus Operator's CRDs `upstream/build.sh` generates from the operator's API
/// types (`upstream/monitoring-crds`), or `None` (said) without them: then the test skips,
/// unless KUBELET_GITOPS_E2E_REQUIRE is set (CI), when it fails.
fn operator_crds(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("UPSTREAM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("upstream/bin"))
        .join("monitoring-crds");
    if dir.join("monitoring.coreos.com_podmonitors.yaml").is_file() {
        return Some(dir);
    }
    let why = format!(
        "{test}: no Prometheus Operator CRDs in {} (run upstream/build.sh, which generates \
         them with upstream/monitoring-crds/generate.sh)",
        dir.display()
    );
    assert!(
        std::env::var_os("KUBELET_GITOPS_E2E_REQUIRE").is_none(),
        "{why}"
    );
    eprintln!("SKIPPED {why}");
    None
}

/// Runs the validator on `objects`; its exit code and output.
fn validate_crds(crds: &Path, objects: &[Value]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("objects.json");
    std::fs::write(&file, serde_json::to_vec(objects).unwrap()).unwrap();
    let out = Command::new("python3")
        .arg(repo_root().join(VALIDATE_CRDS))
        .arg(crds)
        .arg(&file)
        .output()
        .expect("run python3 (the CRD validator)");
    (out.status.code(), both(&out))
}

#[test]
fn the_components_objects_validate_against_the_operators_crds() {
    const TEST: &str = "the_components_objects_validate_against_the_operators_crds";
    let Some(kubectl) = kubectl() else {
        eprintln!("skipped {TEST}: no kubectl with kustomize 5 (it renders the kustomizations)");
        return;
    };
    let Some(crds) = operator_crds(TEST) else {
        return;
    };
    let deps = Command::new("python3")
        .args(["-c", "import jsonschema, yaml"])
        .output();
    if !deps.as_ref().is_ok_and(|o| o.status.success()) {
        // .ci/run installs kubernetes-validate, which brings jsonschema and PyYAML.
        eprintln!("skipped {TEST}: python3 with jsonschema and PyYAML is not installed");
        return;
    }
    let objects = kustomize(&kubectl, OVERLAY);
    let (code, out) = validate_crds(&crds, &objects);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("3 objects checked, 0 problems"), "{out}");

    // It can fail: a misspelled field, a wrong type, an unknown relabel action.
    let mut bad = objects.clone();
    for o in &mut bad {
        match o["kind"].as_str() {
            Some("PodMonitor") => {
                let endpoints = o["spec"]["podMetricsEndpoints"].take();
                o["spec"]["podMetricsEndpoint"] = endpoints;
            }
            Some("PrometheusRule") => {
                o["spec"]["groups"][0]["interval"] = Value::from(30);
            }
            _ => {}
        }
    }
    let (code, out) = validate_crds(&crds, &bad);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("PodMonitor/kubelet-gitops-reconciler: spec: Additional properties are not allowed ('podMetricsEndpoint' was unexpected)"),
        "{out}"
    );
    assert!(
        out.contains(
            "PrometheusRule/kubelet-gitops: spec.groups.0.interval: 30 is not of type 'string'"
        ),
        "{out}"
    );
}
