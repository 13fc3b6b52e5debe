//! Offline checks of the deployment manifests in `deploy/` (nothing here reaches a
//! cluster).
//!
//! `kubectl kustomize` renders `deploy/base` and `deploy/overlays/example`; every rendered
//! object is deserialized into its k8s-openapi type and serialized back, and the two JSON
//! trees must be equal (k8s-openapi ignores unknown fields, so a misspelled or misplaced
//! field shows up as one the round trip dropped). Then the invariants the manifests promise:
//! hardened containers with resources and probes, pinned images, least-privilege RBAC
//! granting exactly the documented rules, admission policies naming the keys of
//! `kubelet_gitops_core::protocol` and the identities the workloads run as, every option
//! the manifests pass known to the binary that reads it, every path option pointing into a
//! volume, and a Dockerfile that builds the binaries the manifests start. When PyPI's
//! `kubernetes-validate` is installed, it also validates every object against the
//! Kubernetes schemas.
//!
//! kubectl (1.32 ships kustomize 5.5) is needed; without it each test prints why it skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Namespace, PodSpec, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kubelet_gitops_core::protocol;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::support::commands::{read, repo_root, stdout_of};
use crate::support::options::{agent_options, agent_sources, help_options};

/// The kustomizations under test, relative to the repository root.
const KUSTOMIZATIONS: [&str; 2] = ["deploy/base", "deploy/overlays/example"];

/// The lowest Kubernetes version the manifests support (ValidatingAdmissionPolicy v1 and
/// the node name in service-account tokens), and the one k8s-openapi is built for here.
const KUBERNETES_VERSIONS: [&str; 2] = ["1.30.0", "1.36.0"];

// ---------------------------------------------------------------------------------------
// Rendering and strict parsing

/// One rendered kustomization, every object typed.
struct Rendered {
    dir: &'static str,
    text: String,
    namespaces: Vec<Namespace>,
    service_accounts: Vec<ServiceAccount>,
    cluster_roles: Vec<ClusterRole>,
    roles: Vec<Role>,
    cluster_role_bindings: Vec<ClusterRoleBinding>,
    role_bindings: Vec<RoleBinding>,
    config_maps: Vec<ConfigMap>,
    deployments: Vec<Deployment>,
    daemon_sets: Vec<DaemonSet>,
    disruption_budgets: Vec<PodDisruptionBudget>,
    policies: Vec<ValidatingAdmissionPolicy>,
    policy_bindings: Vec<ValidatingAdmissionPolicyBinding>,
    /// (kind, namespace, name) of every object, in order.
    identities: Vec<(String, Option<String>, String)>,
}

/// The renders, once per test process; `None` when kubectl is not installed.
fn renders() -> Option<&'static [Rendered]> {
    static RENDERS: OnceLock<Option<Vec<Rendered>>> = OnceLock::new();
    RENDERS
        .get_or_init(|| {
            let kubectl = kubectl()?;
            Some(
                KUSTOMIZATIONS
                    .iter()
                    .map(|dir| render(&kubectl, dir))
                    .collect(),
            )
        })
        .as_deref()
}

/// kubectl with a kustomize that understands these kustomizations (5.x: `labels:`,
/// transformer directories), or `None` when there is none.
pub(crate) fn kubectl() -> Option<PathBuf> {
    let candidates = [PathBuf::from("kubectl"), PathBuf::from("/usr/bin/kubectl")];
    for candidate in candidates {
        if let Ok(out) = Command::new(&candidate)
            .args(["version", "--client"])
            .output()
            && out.status.success()
        {
            let version = String::from_utf8_lossy(&out.stdout);
            let kustomize_major = version
                .lines()
                .find_map(|l| l.strip_prefix("Kustomize Version: v"))
                .and_then(|v| v.split('.').next()?.parse::<u32>().ok());
            if kustomize_major.is_some_and(|major| major >= 5) {
                return Some(candidate);
            }
            eprintln!("{} has no kustomize 5 ({version})", candidate.display());
        }
    }
    None
}

/// Runs a test body with the renders, or prints why it skipped.
fn with_renders(test: &str, body: impl FnOnce(&[Rendered])) {
    match renders() {
        Some(r) => body(r),
        None => eprintln!(
            "skipped {test}: no kubectl with kustomize 5 (it renders the kustomizations; \
             kubectl 1.27 or later has it)"
        ),
    }
}

fn render(kubectl: &Path, dir: &'static str) -> Rendered {
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(repo_root().join(dir))
        .output()
        .unwrap_or_else(|e| panic!("run kubectl kustomize {dir}: {e}"));
    assert!(
        out.status.success(),
        "kubectl kustomize {dir} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("kustomize prints UTF-8");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .unwrap_or_else(|e| panic!("{dir}: the rendered YAML does not parse: {e}"));
    let mut r = Rendered {
        dir,
        text,
        namespaces: Vec::new(),
        service_accounts: Vec::new(),
        cluster_roles: Vec::new(),
        roles: Vec::new(),
        cluster_role_bindings: Vec::new(),
        role_bindings: Vec::new(),
        config_maps: Vec::new(),
        deployments: Vec::new(),
        daemon_sets: Vec::new(),
        disruption_budgets: Vec::new(),
        policies: Vec::new(),
        policy_bindings: Vec::new(),
        identities: Vec::new(),
    };
    for doc in docs.iter().filter(|d| !d.is_null()) {
        let api_version = doc["apiVersion"].as_str().unwrap_or_default();
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        let what = format!("{dir}: {kind} {name}");
        r.identities.push((
            kind.clone(),
            doc["metadata"]["namespace"].as_str().map(str::to_string),
            name.to_string(),
        ));
        match (api_version, kind.as_str()) {
            ("v1", "Namespace") => r.namespaces.push(parse(doc, &what)),
            ("v1", "ServiceAccount") => r.service_accounts.push(parse(doc, &what)),
            ("v1", "ConfigMap") => r.config_maps.push(parse(doc, &what)),
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
                r.cluster_roles.push(parse(doc, &what))
            }
            ("rbac.authorization.k8s.io/v1", "Role") => r.roles.push(parse(doc, &what)),
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
                r.cluster_role_bindings.push(parse(doc, &what))
            }
            ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
                r.role_bindings.push(parse(doc, &what))
            }
            ("apps/v1", "Deployment") => r.deployments.push(parse(doc, &what)),
            ("apps/v1", "DaemonSet") => r.daemon_sets.push(parse(doc, &what)),
            ("policy/v1", "PodDisruptionBudget") => r.disruption_budgets.push(parse(doc, &what)),
            ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy") => {
                r.policies.push(parse(doc, &what))
            }
            ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding") => {
                r.policy_bindings.push(parse(doc, &what))
            }
            _ => panic!(
                "{what}: no strict check for {api_version} {kind}: add its k8s-openapi type \
                 to render()"
            ),
        }
    }
    r
}

/// [`strict`], or a panic naming the object.
fn parse<T: DeserializeOwned + Serialize>(doc: &Value, what: &str) -> T {
    strict(doc).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Deserializes `doc` into `T` (naming the path of a type error) and checks that
/// serializing it back gives the same JSON: a field the typed model does not know would
/// be silently dropped by the deserializer, and shows up here.
fn strict<T: DeserializeOwned + Serialize>(doc: &Value) -> Result<T, String> {
    let typed: T = serde_path_to_error::deserialize(doc.clone()).map_err(|e| {
        format!(
            "does not deserialize as {}: at {}: {}",
            std::any::type_name::<T>(),
            e.path(),
            e.inner()
        )
    })?;
    let back = serde_json::to_value(&typed).map_err(|e| format!("re-serializing: {e}"))?;
    let mut problems = Vec::new();
    compare(doc, &back, "", &mut problems);
    if problems.is_empty() {
        Ok(typed)
    } else {
        Err(format!(
            "not a faithful {} (unknown or misplaced fields?):\n  {}",
            std::any::type_name::<T>(),
            problems.join("\n  ")
        ))
    }
}

/// Every difference between the rendered tree and the round-tripped one, by path.
fn compare(orig: &Value, back: &Value, path: &str, out: &mut Vec<String>) {
    match (orig, back) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let p = format!("{path}.{k}");
                match b.get(k) {
                    Some(w) => compare(v, w, &p, out),
                    None if v.is_null() => {}
                    None => out.push(format!("{p}: dropped (not a field of the typed model)")),
                }
            }
            for k in b.keys().filter(|k| !a.contains_key(*k)) {
                out.push(format!(
                    "{path}.{k}: added by the typed model (a required field?)"
                ));
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                compare(v, w, &format!("{path}[{i}]"), out);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (a, b) if a == b => {}
        (a, b) => out.push(format!("{path}: {a} became {b}")),
    }
}

// ---------------------------------------------------------------------------------------
// Accessors

impl Rendered {
    /// The one namespace everything namespaced lives in.
    fn namespace(&self) -> &str {
        assert_eq!(self.namespaces.len(), 1, "{}: one Namespace", self.dir);
        self.namespaces[0]
            .metadata
            .name
            .as_deref()
            .expect("the Namespace has a name")
    }

    fn reconciler(&self) -> &Deployment {
        assert_eq!(self.deployments.len(), 1, "{}: one Deployment", self.dir);
        &self.deployments[0]
    }

    fn agent(&self) -> &DaemonSet {
        assert_eq!(self.daemon_sets.len(), 1, "{}: one DaemonSet", self.dir);
        &self.daemon_sets[0]
    }

    fn config_map(&self, name: &str) -> &ConfigMap {
        self.config_maps
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("{}: no ConfigMap {name}", self.dir))
    }

    fn policy(&self, name: &str) -> &ValidatingAdmissionPolicy {
        self.policies
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("{}: no ValidatingAdmissionPolicy {name}", self.dir))
    }

    /// Every workload's pod spec with the workload's name.
    fn pods(&self) -> Vec<(String, &PodSpec)> {
        let deployments = self.deployments.iter().map(|d| {
            let spec = d.spec.as_ref().and_then(|s| s.template.spec.as_ref());
            (d.metadata.name.clone(), spec)
        });
        let daemon_sets = self.daemon_sets.iter().map(|d| {
            let spec = d.spec.as_ref().and_then(|s| s.template.spec.as_ref());
            (d.metadata.name.clone(), spec)
        });
        deployments
            .chain(daemon_sets)
            .map(|(name, spec)| {
                let name = name.unwrap_or_default();
                let spec = spec.unwrap_or_else(|| panic!("{}: {name} has no pod spec", self.dir));
                (name, spec)
            })
            .collect()
    }

    /// The container's environment as the process sees it: `envFrom` ConfigMaps first,
    /// then `env` (which wins), with downward-API values replaced by `placeholder`.
    fn environment(&self, c: &Container, placeholder: &str) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        for from in c.env_from.iter().flatten() {
            assert!(from.secret_ref.is_none(), "{}: envFrom a Secret", self.dir);
            let cm = from
                .config_map_ref
                .as_ref()
                .unwrap_or_else(|| panic!("{}: envFrom without a ConfigMap", self.dir));
            let prefix = from.prefix.clone().unwrap_or_default();
            for (k, v) in self.config_map(&cm.name).data.iter().flatten() {
                env.insert(format!("{prefix}{k}"), v.clone());
            }
        }
        for var in c.env.iter().flatten() {
            let value = match (&var.value, &var.value_from) {
                (Some(v), None) => v.clone(),
                (None, Some(from)) => {
                    assert!(
                        from.field_ref.is_some(),
                        "{}: {} comes from something other than the downward API",
                        self.dir,
                        var.name
                    );
                    placeholder.to_string()
                }
                _ => panic!("{}: {} has no value", self.dir, var.name),
            };
            env.insert(var.name.clone(), value);
        }
        env
    }
}

fn container<'a>(pod: &'a PodSpec, name: &str) -> &'a Container {
    pod.containers
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

fn labels_match(
    selector: &BTreeMap<String, String>,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    let labels = labels.cloned().unwrap_or_default();
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

// ---------------------------------------------------------------------------------------
// The tests

#[test]
fn every_rendered_object_parses_strictly_into_its_kubernetes_type() {
    with_renders(
        "every_rendered_object_parses_strictly_into_its_kubernetes_type",
        |renders| {
            for r in renders {
                let ns = r.namespace();
                assert_eq!(r.service_accounts.len(), 2, "{}", r.dir);
                assert_eq!(r.cluster_roles.len(), 2, "{}", r.dir);
                assert_eq!(r.roles.len(), 2, "{}", r.dir);
                assert_eq!(r.cluster_role_bindings.len(), 2, "{}", r.dir);
                assert_eq!(r.role_bindings.len(), 2, "{}", r.dir);
                assert_eq!(r.disruption_budgets.len(), 1, "{}", r.dir);
                assert_eq!(r.policies.len(), 2, "{}", r.dir);
                assert_eq!(r.policy_bindings.len(), 2, "{}", r.dir);
                let cluster_scoped = [
                    "Namespace",
                    "ClusterRole",
                    "ClusterRoleBinding",
                    "ValidatingAdmissionPolicy",
                    "ValidatingAdmissionPolicyBinding",
                ];
                let mut seen = BTreeSet::new();
                for (kind, namespace, name) in &r.identities {
                    assert!(
                        seen.insert((kind, namespace, name)),
                        "{}: {kind} {name} twice",
                        r.dir
                    );
                    if cluster_scoped.contains(&kind.as_str()) {
                        assert_eq!(
                            namespace, &None,
                            "{}: cluster-scoped {kind} {name} has a namespace (a kustomization \
                             without the cluster-scoped-admission transformer?)",
                            r.dir
                        );
                    } else {
                        assert_eq!(
                            namespace.as_deref(),
                            Some(ns),
                            "{}: {kind} {name} is not in the Namespace {ns}",
                            r.dir
                        );
                    }
                }
                // No credentials in the manifests: Secrets are created outside git.
                assert!(
                    !r.text.contains("kind: Secret"),
                    "{}: a Secret in the manifests",
                    r.dir
                );
            }
            let [base, example] = renders else {
                unreachable!("two kustomizations")
            };
            assert_ne!(
                base.namespace(),
                example.namespace(),
                "the example overlay moves the install"
            );
        },
    );
}

#[test]
fn the_strict_parse_rejects_unknown_and_misplaced_fields() {
    let deployment = serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "i:1"}]}
            }
        }
    });
    strict::<Deployment>(&deployment).expect("a correct Deployment");

    let mut misspelled = deployment.clone();
    misspelled["spec"]["replicaz"] = Value::from(2);
    let err = strict::<Deployment>(&misspelled).expect_err("replicaz");
    assert!(err.contains(".spec.replicaz: dropped"), "{err}");

    let mut misplaced = deployment.clone();
    misplaced["spec"]["template"]["spec"]["containers"][0]["runAsNonRoot"] = Value::from(true);
    let err = strict::<Deployment>(&misplaced).expect_err("runAsNonRoot outside securityContext");
    assert!(
        err.contains(".spec.template.spec.containers[0].runAsNonRoot: dropped"),
        "{err}"
    );

    let mut wrong_type = deployment;
    wrong_type["spec"]["replicas"] = Value::from("two");
    let err = strict::<Deployment>(&wrong_type).expect_err("a string for replicas");
    assert!(err.contains("spec.replicas"), "{err}");
}

#[test]
fn containers_are_hardened_with_resources_probes_and_pinned_images() {
    with_renders(
        "containers_are_hardened_with_resources_probes_and_pinned_images",
        |renders| {
            for r in renders {
                let mut images = BTreeSet::new();
                for (workload, pod) in r.pods() {
                    let pod_sc = pod.security_context.clone().unwrap_or_default();
                    assert_eq!(
                        pod_sc.seccomp_profile.as_ref().map(|p| p.type_.as_str()),
                        Some("RuntimeDefault"),
                        "{}: {workload}: pod seccomp profile",
                        r.dir
                    );
                    let all = pod
                        .containers
                        .iter()
                        .chain(pod.init_containers.iter().flatten());
                    for c in all {
                        let what = format!("{}: {workload}/{}", r.dir, c.name);
                        // Resources: requests for scheduling, a memory limit for the node.
                        let res = c.resources.clone().unwrap_or_default();
                        let requests = res.requests.unwrap_or_default();
                        let limits = res.limits.unwrap_or_default();
                        for key in ["cpu", "memory"] {
                            assert!(requests.contains_key(key), "{what}: no {key} request");
                        }
                        assert!(limits.contains_key("memory"), "{what}: no memory limit");

                        let sc = c.security_context.clone().unwrap_or_default();
                        assert_eq!(sc.privileged, Some(false), "{what}: privileged");
                        assert_eq!(
                            sc.allow_privilege_escalation,
                            Some(false),
                            "{what}: privilege escalation"
                        );
                        assert_eq!(
                            sc.read_only_root_filesystem,
                            Some(true),
                            "{what}: writable root filesystem"
                        );
                        let caps = sc.capabilities.clone().unwrap_or_default();
                        assert_eq!(
                            caps.drop.unwrap_or_default(),
                            ["ALL"],
                            "{what}: capabilities not all dropped"
                        );
                        assert_eq!(caps.add, None, "{what}: added capabilities");
                        assert_eq!(
                            sc.seccomp_profile.as_ref().map(|p| p.type_.as_str()),
                            Some("RuntimeDefault"),
                            "{what}: seccomp profile"
                        );

                        let image = c.image.clone().unwrap_or_default();
                        let (_, tag) = image
                            .rsplit_once(':')
                            .filter(|(repo, _)| !repo.is_empty())
                            .unwrap_or_else(|| panic!("{what}: image {image:?} has no tag"));
                        assert!(
                            image.contains("@sha256:")
                                || (!tag.contains('/') && tag != "latest" && !tag.is_empty()),
                            "{what}: image {image:?} is not pinned to a tag or digest"
                        );
                        assert_eq!(
                            c.image_pull_policy.as_deref(),
                            Some("IfNotPresent"),
                            "{what}"
                        );
                        images.insert(image);

                        // Probes on the admin port, whose number is the one the process
                        // binds (KUBELET_GITOPS_ADMIN_ADDR).
                        let env = r.environment(c, "x");
                        let admin_port: i32 = env
                            .get("KUBELET_GITOPS_ADMIN_ADDR")
                            .and_then(|a| a.rsplit_once(':'))
                            .and_then(|(_, p)| p.parse().ok())
                            .unwrap_or_else(|| panic!("{what}: KUBELET_GITOPS_ADMIN_ADDR"));
                        let named_port = |port: &IntOrString| -> i32 {
                            match port {
                                IntOrString::Int(n) => *n,
                                IntOrString::String(name) => c
                                    .ports
                                    .iter()
                                    .flatten()
                                    .find(|p| p.name.as_deref() == Some(name))
                                    .map(|p| p.container_port)
                                    .unwrap_or_else(|| panic!("{what}: no port named {name}")),
                            }
                        };
                        for (probe, path) in [
                            (&c.liveness_probe, "/healthz"),
                            (&c.readiness_probe, "/readyz"),
                        ] {
                            let get = probe
                                .as_ref()
                                .and_then(|p| p.http_get.as_ref())
                                .unwrap_or_else(|| panic!("{what}: no HTTP probe for {path}"));
                            assert_eq!(get.path.as_deref(), Some(path), "{what}");
                            assert_eq!(named_port(&get.port), admin_port, "{what}: {path} port");
                        }
                    }
                }
                assert_eq!(
                    images.len(),
                    1,
                    "{}: one image for both binaries: {images:?}",
                    r.dir
                );
            }
            let [base, example] = renders else {
                unreachable!("two kustomizations")
            };
            let image = |r: &Rendered| {
                let pod = r
                    .reconciler()
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.spec.as_ref());
                container(pod.expect("a pod spec"), "reconciler")
                    .image
                    .clone()
                    .unwrap_or_default()
            };
            assert_ne!(
                image(base),
                image(example),
                "the overlay pins its own image"
            );
        },
    );
}

#[test]
fn the_reconciler_is_non_root_highly_available_and_meets_restricted() {
    with_renders(
        "the_reconciler_is_non_root_highly_available_and_meets_restricted",
        |renders| {
            for r in renders {
                let d = r.reconciler();
                let spec = d.spec.as_ref().expect("a Deployment spec");
                assert_eq!(spec.replicas, Some(2), "{}: two replicas", r.dir);
                let pod = spec.template.spec.as_ref().expect("a pod spec");
                let c = container(pod, "reconciler");
                let args = c.args.clone().unwrap_or_default();
                assert_eq!(args.first().map(String::as_str), Some("run"), "{}", r.dir);
                assert!(
                    args.iter().any(|a| a == "--leader-elect"),
                    "{}: two replicas need --leader-elect",
                    r.dir
                );

                // Pod Security "restricted".
                let pod_sc = pod.security_context.clone().unwrap_or_default();
                let sc = c.security_context.clone().unwrap_or_default();
                assert_eq!(sc.run_as_non_root.or(pod_sc.run_as_non_root), Some(true));
                let uid = sc.run_as_user.or(pod_sc.run_as_user);
                assert!(uid.is_some_and(|u| u != 0), "{}: uid {uid:?}", r.dir);
                for host in [pod.host_network, pod.host_pid, pod.host_ipc] {
                    assert_ne!(host, Some(true), "{}: a host namespace", r.dir);
                }
                for v in pod.volumes.iter().flatten() {
                    assert!(
                        v.empty_dir.is_some()
                            || v.secret.is_some()
                            || v.config_map.is_some()
                            || v.projected.is_some()
                            || v.downward_api.is_some(),
                        "{}: volume {} is not allowed by restricted",
                        r.dir,
                        v.name
                    );
                }

                // The git cache is an emptyDir; credentials come from Secrets (never
                // from the environment).
                let env = r.environment(c, "kubelet-gitops");
                let cache = &env["KUBELET_GITOPS_CACHE_DIR"];
                let mount = c
                    .volume_mounts
                    .iter()
                    .flatten()
                    .find(|m| &m.mount_path == cache)
                    .unwrap_or_else(|| panic!("{}: nothing mounted at {cache}", r.dir));
                let volume = pod
                    .volumes
                    .iter()
                    .flatten()
                    .find(|v| v.name == mount.name)
                    .expect("the mounted volume");
                assert!(
                    volume.empty_dir.is_some(),
                    "{}: the cache is an emptyDir",
                    r.dir
                );
                let secrets: BTreeSet<_> = pod
                    .volumes
                    .iter()
                    .flatten()
                    .filter_map(|v| v.secret.as_ref()?.secret_name.clone())
                    .collect();
                assert_eq!(
                    secrets,
                    BTreeSet::from(["kubelet-gitops-forge".into(), "kubelet-gitops-git".into()]),
                    "{}: git credentials and forge token Secrets",
                    r.dir
                );

                // A disruption budget keeps one replica.
                let pdb = r.disruption_budgets[0].spec.as_ref().expect("a PDB spec");
                assert_eq!(pdb.min_available, Some(IntOrString::Int(1)), "{}", r.dir);
                let selector = pdb
                    .selector
                    .as_ref()
                    .and_then(|s| s.match_labels.clone())
                    .unwrap_or_default();
                assert!(
                    labels_match(
                        &selector,
                        spec.template
                            .metadata
                            .as_ref()
                            .and_then(|m| m.labels.as_ref())
                    ),
                    "{}: the PodDisruptionBudget selects the reconciler's pods",
                    r.dir
                );
                assert!(
                    !labels_match(
                        &selector,
                        r.agent()
                            .spec
                            .as_ref()
                            .and_then(|s| s.template.metadata.as_ref())
                            .and_then(|m| m.labels.as_ref())
                    ),
                    "{}: and not the agent's",
                    r.dir
                );
            }
        },
    );
}

#[test]
fn the_agent_runs_on_every_node_with_only_the_host_access_it_explains() {
    with_renders(
        "the_agent_runs_on_every_node_with_only_the_host_access_it_explains",
        |renders| {
            for r in renders {
                let ds = r.agent();
                let spec = ds.spec.as_ref().expect("a DaemonSet spec");
                let strategy = spec.update_strategy.clone().unwrap_or_default();
                assert_eq!(
                    strategy.type_.as_deref(),
                    Some("RollingUpdate"),
                    "{}",
                    r.dir
                );
                assert_eq!(
                    strategy.rolling_update.and_then(|u| u.max_unavailable),
                    Some(IntOrString::Int(1)),
                    "{}: one node at a time",
                    r.dir
                );
                let pod = spec.template.spec.as_ref().expect("a pod spec");
                assert_eq!(
                    pod.priority_class_name.as_deref(),
                    Some("system-node-critical"),
                    "{}",
                    r.dir
                );
                assert!(
                    pod.tolerations.iter().flatten().any(|t| t.key.is_none()
                        && t.operator.as_deref() == Some("Exists")
                        && t.effect.is_none()),
                    "{}: tolerates every taint",
                    r.dir
                );

                let c = container(pod, "agent");
                let env = r.environment(c, "node-1");
                let node_name = c
                    .env
                    .iter()
                    .flatten()
                    .find(|v| v.name == "NODE_NAME")
                    .and_then(|v| v.value_from.as_ref()?.field_ref.as_ref())
                    .map(|f| f.field_path.as_str());
                assert_eq!(node_name, Some("spec.nodeName"), "{}: NODE_NAME", r.dir);

                // hostPID exactly when the flags are read from /proc.
                let from_proc =
                    env.get("KUBELET_GITOPS_FLAGS_FROM").map(String::as_str) == Some("proc");
                assert_eq!(
                    pod.host_pid.unwrap_or(false),
                    from_proc,
                    "{}: hostPID only with --flags-from=proc",
                    r.dir
                );
                assert_ne!(pod.host_ipc, Some(true), "{}: hostIPC", r.dir);
                // hostNetwork exactly when the kubelet's healthz is on the node's loopback.
                let healthz = env
                    .get("KUBELET_GITOPS_HEALTHZ_URL")
                    .map(String::as_str)
                    .unwrap_or("http://127.0.0.1:10248/healthz");
                let loopback = healthz.contains("://127.0.0.1") || healthz.contains("://localhost");
                assert_eq!(pod.host_network.unwrap_or(false), loopback, "{}", r.dir);

                // Every host path is mounted once, at its own path (the agent runs with
                // --host-root=/) or under /host.
                let mounts: BTreeMap<_, _> = c
                    .volume_mounts
                    .iter()
                    .flatten()
                    .map(|m| (m.name.as_str(), m))
                    .collect();
                let mut host_paths = BTreeSet::new();
                for v in pod.volumes.iter().flatten() {
                    let host = v.host_path.as_ref().unwrap_or_else(|| {
                        panic!("{}: agent volume {} is not a hostPath", r.dir, v.name)
                    });
                    assert!(
                        host.type_.is_some(),
                        "{}: hostPath {} has no type",
                        r.dir,
                        v.name
                    );
                    let mount = mounts
                        .get(v.name.as_str())
                        .unwrap_or_else(|| panic!("{}: volume {} is not mounted", r.dir, v.name));
                    assert!(
                        mount.mount_path == host.path
                            || mount.mount_path == format!("/host{}", host.path),
                        "{}: {} mounted at {}",
                        r.dir,
                        host.path,
                        mount.mount_path
                    );
                    assert!(mount.mount_propagation.is_none(), "{}: propagation", r.dir);
                    host_paths.insert(host.path.as_str());
                }
                assert_eq!(
                    host_paths,
                    BTreeSet::from([
                        "/etc/default",
                        "/etc/kubernetes/kubelet.conf.d",
                        "/etc/kubernetes/pki/ca.crt",
                        "/run/dbus",
                        "/sys/fs/cgroup",
                        "/var/lib/kubelet",
                        "/var/lib/kubelet-gitops",
                    ]),
                    "{}: the host paths deploy/base/agent.yaml explains",
                    r.dir
                );
                // Read-only wherever the agent only reads.
                for name in ["kubernetes-ca", "etc-default", "dbus"] {
                    assert_eq!(mounts[name].read_only, Some(true), "{}: {name}", r.dir);
                }
            }
            // Each mount is explained: a comment right above it in the source.
            let source = read("deploy/base/agent.yaml");
            let lines: Vec<&str> = source.lines().collect();
            let mut explained = 0;
            for (i, line) in lines.iter().enumerate() {
                let next_is_mount = lines
                    .get(i + 1)
                    .is_some_and(|l| l.trim_start().starts_with("mountPath:"));
                if line.trim_start().starts_with("- name:") && next_is_mount {
                    let above = lines[..i]
                        .iter()
                        .rev()
                        .find(|l| !l.trim().is_empty())
                        .map(|l| l.trim_start())
                        .unwrap_or_default();
                    assert!(
                        above.starts_with('#'),
                        "deploy/base/agent.yaml: the mount {line:?} has no comment saying why"
                    );
                    explained += 1;
                }
            }
            assert_eq!(explained, 7, "every agent mount found in the source");
        },
    );
}

// ---------------------------------------------------------------------------------------
// Options against the binaries

/// The options of `kubelet-gitops run`, from its `--help`: (flags, env vars).
fn reconciler_run_options() -> (BTreeSet<String>, BTreeSet<String>) {
    let options = help_options(&stdout_of(&["run", "--help"]));
    let flags: BTreeSet<String> = options.iter().map(|o| o.flag.clone()).collect();
    let envs: BTreeSet<String> = options.iter().filter_map(|o| o.env.clone()).collect();
    assert!(
        flags.contains("--repo-url") && envs.contains("KUBELET_GITOPS_REPO_URL"),
        "run --help parsed: {flags:?} {envs:?}"
    );
    (flags, envs)
}

/// Environment variables the agent's container sets that are not agent options, and why.
const AGENT_FOREIGN_ENV: &[(&str, &str)] = &[(
    "DBUS_SYSTEM_BUS_ADDRESS",
    "read by zbus, the D-Bus library, to find the system bus",
)];

#[test]
fn every_flag_and_variable_the_manifests_pass_exists_in_the_binary() {
    with_renders(
        "every_flag_and_variable_the_manifests_pass_exists_in_the_binary",
        |renders| {
            let (run_flags, run_envs) = reconciler_run_options();
            let agent = agent_options(&agent_sources());
            for r in renders {
                // The reconciler: `kubelet-gitops run` and its options.
                let pod = r
                    .reconciler()
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.spec.as_ref());
                let c = container(pod.expect("a pod spec"), "reconciler");
                let args = c.args.clone().unwrap_or_default();
                for arg in args.iter().skip(1) {
                    let flag = arg.split('=').next().unwrap_or_default();
                    assert!(
                        run_flags.contains(flag),
                        "{}: `kubelet-gitops run` has no option {flag} (run --help: {run_flags:?})",
                        r.dir
                    );
                }
                let env = r.environment(c, "kubelet-gitops");
                for name in env.keys() {
                    assert!(
                        run_envs.contains(name),
                        "{}: `kubelet-gitops run` reads no variable {name} (run --help: {run_envs:?})",
                        r.dir
                    );
                }
                // And clap accepts every value: with the manifest's environment (and
                // nothing else), `run --leader-elect --once` gets past parsing every
                // value and stops at the one conflict on purpose.
                let out = Command::new(env!("CARGO_BIN_EXE_kubelet-gitops"))
                    .env_clear()
                    .envs(&env)
                    .args(["run", "--leader-elect", "--once"])
                    .output()
                    .expect("run kubelet-gitops run");
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(2), "{}: {stderr}", r.dir);
                assert!(
                    stderr.contains("cannot be used with") && !stderr.contains("invalid value"),
                    "{}: `kubelet-gitops run` rejects the manifest's environment: {stderr}",
                    r.dir
                );

                // The agent: every variable is an option (or a documented foreign one),
                // every enum value is one clap accepts.
                let pod = r
                    .agent()
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.spec.as_ref());
                let c = container(pod.expect("a pod spec"), "agent");
                for arg in c.args.iter().flatten() {
                    let flag = arg.split('=').next().unwrap_or_default();
                    assert!(
                        agent.iter().any(|o| o.flag == flag),
                        "{}: kubelet-gitops-agent has no option {flag}",
                        r.dir
                    );
                }
                for (name, value) in r.environment(c, "node-1") {
                    if AGENT_FOREIGN_ENV.iter().any(|(n, _)| *n == name) {
                        continue;
                    }
                    let option = agent
                        .iter()
                        .find(|o| o.env.as_deref() == Some(name.as_str()))
                        .unwrap_or_else(|| {
                            panic!(
                                "{}: kubelet-gitops-agent reads no variable {name} \
                                 (node-agent/src/args.rs)",
                                r.dir
                            )
                        });
                    if let Some(values) = &option.values {
                        assert!(
                            values.contains(&value),
                            "{}: {name}={value}: {} accepts {values:?}",
                            r.dir,
                            option.flag
                        );
                    }
                }
            }
        },
    );
}

#[test]
fn every_path_an_option_names_is_mounted() {
    with_renders("every_path_an_option_names_is_mounted", |renders| {
        for r in renders {
            for (workload, pod) in r.pods() {
                for c in &pod.containers {
                    let what = format!("{}: {workload}/{}", r.dir, c.name);
                    let mounts: Vec<_> = c.volume_mounts.iter().flatten().collect();
                    for (name, value) in r.environment(c, "x") {
                        let paths: Vec<String> = if name == "DBUS_SYSTEM_BUS_ADDRESS" {
                            let path = value
                                .strip_prefix("unix:path=")
                                .unwrap_or_else(|| panic!("{what}: {name}={value}"));
                            vec![path.to_string()]
                        } else if name.ends_with("_FILE")
                            || name.ends_with("_DIR")
                            || name == "KUBELET_GITOPS_CGROUP_ROOT"
                            || name == "KUBELET_GITOPS_KUBECONFIG"
                        {
                            value.split(',').map(str::to_string).collect()
                        } else {
                            continue;
                        };
                        let writable = name.ends_with("_DIR") || name.ends_with("CGROUP_ROOT");
                        for path in paths {
                            let mount = mounts
                                .iter()
                                .filter(|m| Path::new(&path).starts_with(&m.mount_path))
                                .max_by_key(|m| m.mount_path.len())
                                .unwrap_or_else(|| panic!("{what}: {name}={path} is in no volume"));
                            if writable {
                                assert_ne!(
                                    mount.read_only,
                                    Some(true),
                                    "{what}: {name}={path} is on a read-only mount"
                                );
                            }
                            // A file from a Secret volume: the key must be projected.
                            let volume = pod
                                .volumes
                                .iter()
                                .flatten()
                                .find(|v| v.name == mount.name)
                                .expect("the mounted volume");
                            if let Some(secret) = &volume.secret
                                && let Some(items) = &secret.items
                            {
                                let rel = Path::new(&path)
                                    .strip_prefix(&mount.mount_path)
                                    .expect("under the mount");
                                assert!(
                                    items.iter().any(|i| Path::new(&i.path) == rel),
                                    "{what}: {name}={path} is not a key of the Secret volume"
                                );
                            }
                        }
                    }
                }
            }
        }
    });
}

// ---------------------------------------------------------------------------------------
// RBAC and admission

/// A rule flattened to (apiGroup, resource, verb, resourceNames).
type Grant = (String, String, String, String);

fn grants(rules: &[PolicyRule]) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for rule in rules {
        assert!(rule.non_resource_urls.is_none(), "a non-resource rule");
        let names = rule.resource_names.clone().unwrap_or_default().join(",");
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    assert!(
                        group != "*" && resource != "*" && verb != "*",
                        "a wildcard in {rule:?}"
                    );
                    out.insert((group.clone(), resource.clone(), verb.clone(), names.clone()));
                }
            }
        }
    }
    out
}

fn expected(rules: &[(&str, &str, &[&str], &str)]) -> BTreeSet<Grant> {
    rules
        .iter()
        .flat_map(|(group, resource, verbs, names)| {
            verbs.iter().map(move |verb| {
                (
                    group.to_string(),
                    resource.to_string(),
                    verb.to_string(),
                    names.to_string(),
                )
            })
        })
        .collect()
}

#[test]
fn rbac_grants_exactly_the_documented_permissions() {
    with_renders(
        "rbac_grants_exactly_the_documented_permissions",
        |renders| {
            for r in renders {
                let lease = r.environment(
                    container(
                        r.reconciler()
                            .spec
                            .as_ref()
                            .and_then(|s| s.template.spec.as_ref())
                            .expect("a pod spec"),
                        "reconciler",
                    ),
                    "x",
                )["KUBELET_GITOPS_LEASE_NAME"]
                    .clone();
                let cluster_role = |name: &str| {
                    let role = r
                        .cluster_roles
                        .iter()
                        .find(|c| c.metadata.name.as_deref() == Some(name))
                        .unwrap_or_else(|| panic!("{}: no ClusterRole {name}", r.dir));
                    grants(role.rules.as_deref().unwrap_or_default())
                };
                let role = |name: &str| {
                    let role = r
                        .roles
                        .iter()
                        .find(|c| c.metadata.name.as_deref() == Some(name))
                        .unwrap_or_else(|| panic!("{}: no Role {name}", r.dir));
                    grants(role.rules.as_deref().unwrap_or_default())
                };
                // Any change here is a change of privilege: update rbac-*.yaml's comments,
                // docs/deploy.md and this list together.
                assert_eq!(
                    cluster_role("kubelet-gitops-reconciler"),
                    expected(&[
                        ("", "nodes", &["get", "list", "watch", "patch"], ""),
                        ("", "pods", &["list", "delete"], ""),
                        ("", "pods/eviction", &["create"], ""),
                    ]),
                    "{}",
                    r.dir
                );
                assert_eq!(
                    role("kubelet-gitops-reconciler"),
                    expected(&[
                        (
                            "",
                            "configmaps",
                            &["create", "get", "list", "watch", "delete"],
                            ""
                        ),
                        ("", "configmaps", &["update"], "kubelet-gitops-rollout"),
                        ("coordination.k8s.io", "leases", &["create"], ""),
                        (
                            "coordination.k8s.io",
                            "leases",
                            &["get", "update"],
                            lease.as_str()
                        ),
                    ]),
                    "{}: the Lease rule names KUBELET_GITOPS_LEASE_NAME",
                    r.dir
                );
                assert_eq!(
                    cluster_role("kubelet-gitops-agent"),
                    expected(&[
                        ("", "nodes", &["get", "list", "watch", "patch"], ""),
                        ("", "nodes/status", &["patch"], ""),
                        ("", "nodes/configz", &["get"], ""),
                        ("", "pods", &["list"], ""),
                        ("", "events", &["create"], ""),
                    ]),
                    "{}",
                    r.dir
                );
                assert_eq!(
                    role("kubelet-gitops-agent"),
                    expected(&[("", "configmaps", &["get", "list", "watch"], "")]),
                    "{}",
                    r.dir
                );

                // Bindings: to the roles above, for the service accounts the workloads use,
                // in the namespace they live in.
                let ns = r.namespace();
                let accounts: BTreeSet<&str> = r
                    .service_accounts
                    .iter()
                    .filter_map(|s| s.metadata.name.as_deref())
                    .collect();
                let check_subjects = |binding: &str, subjects: Option<&Vec<Subject>>| {
                    let subjects = subjects.map(Vec::as_slice).unwrap_or_default();
                    assert_eq!(subjects.len(), 1, "{}: {binding}", r.dir);
                    let s = &subjects[0];
                    assert_eq!(s.kind, "ServiceAccount", "{}: {binding}", r.dir);
                    assert!(accounts.contains(s.name.as_str()), "{}: {binding}", r.dir);
                    assert_eq!(s.namespace.as_deref(), Some(ns), "{}: {binding}", r.dir);
                    assert_eq!(binding, s.name, "{}: {binding} binds its namesake", r.dir);
                };
                for b in &r.cluster_role_bindings {
                    let name = b.metadata.name.clone().unwrap_or_default();
                    assert_eq!(b.role_ref.kind, "ClusterRole");
                    assert_eq!(b.role_ref.name, name, "{}: {name}", r.dir);
                    check_subjects(&name, b.subjects.as_ref());
                }
                for b in &r.role_bindings {
                    let name = b.metadata.name.clone().unwrap_or_default();
                    assert_eq!(b.role_ref.kind, "Role");
                    assert_eq!(b.role_ref.name, name, "{}: {name}", r.dir);
                    check_subjects(&name, b.subjects.as_ref());
                }
                for (workload, pod) in r.pods() {
                    let sa = pod.service_account_name.as_deref().unwrap_or("default");
                    assert_eq!(
                        workload, sa,
                        "{}: {workload} runs as its own account",
                        r.dir
                    );
                }
            }
        },
    );
}

/// The single-quoted string literals of a CEL expression.
fn cel_strings(expression: &str) -> Vec<String> {
    expression
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn variable<'a>(policy: &'a ValidatingAdmissionPolicy, name: &str) -> &'a str {
    policy
        .spec
        .as_ref()
        .and_then(|s| s.variables.as_ref())
        .and_then(|v| v.iter().find(|v| v.name == name))
        .map(|v| v.expression.as_str())
        .unwrap_or_else(|| panic!("policy has no variable {name}"))
}

#[test]
fn the_admission_policies_name_the_protocol_keys_and_the_workload_identities() {
    with_renders(
        "the_admission_policies_name_the_protocol_keys_and_the_workload_identities",
        |renders| {
            for r in renders {
                let agent = r.policy("kubelet-gitops-agent");
                let reconciler = r.policy("kubelet-gitops-reconciler");
                let keys = |p: &ValidatingAdmissionPolicy| -> BTreeSet<String> {
                    cel_strings(variable(p, "ownAnnotations"))
                        .into_iter()
                        .collect()
                };
                let set = |keys: &[&str]| -> BTreeSet<String> {
                    keys.iter().map(|k| k.to_string()).collect()
                };
                assert_eq!(keys(agent), set(protocol::AGENT_ANNOTATIONS), "{}", r.dir);
                assert_eq!(
                    keys(reconciler),
                    set(protocol::RECONCILER_ANNOTATIONS),
                    "{}",
                    r.dir
                );
                assert_eq!(
                    cel_strings(variable(agent, "ownCondition")),
                    [protocol::CONDITION_TYPE],
                    "{}",
                    r.dir
                );
                // The messages list the same keys (short names after the domain).
                for (policy, keys) in [
                    (agent, protocol::AGENT_ANNOTATIONS),
                    (reconciler, protocol::RECONCILER_ANNOTATIONS),
                ] {
                    let messages: String = policy
                        .spec
                        .as_ref()
                        .and_then(|s| s.validations.as_ref())
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.message.clone())
                        .collect();
                    for key in keys {
                        let short = key.trim_start_matches("kubelet-gitops.io/");
                        assert!(messages.contains(short), "{}: message lacks {short}", r.dir);
                    }
                }

                // Each policy matches the identity its workload runs as.
                let account = |workload: &str| -> String {
                    r.pods()
                        .into_iter()
                        .find(|(w, _)| w == workload)
                        .and_then(|(_, p)| p.service_account_name.clone())
                        .unwrap_or_else(|| panic!("{}: {workload}'s account", r.dir))
                };
                for (policy, workload) in [
                    (agent, "kubelet-gitops-agent"),
                    (reconciler, "kubelet-gitops-reconciler"),
                ] {
                    let spec = policy.spec.as_ref().expect("a policy spec");
                    let name = policy.metadata.name.clone().unwrap_or_default();
                    assert_eq!(spec.failure_policy.as_deref(), Some("Fail"), "{name}");
                    let conditions = spec.match_conditions.as_deref().unwrap_or_default();
                    assert_eq!(conditions.len(), 1, "{name}");
                    let pattern = format!("'^system:serviceaccount:[^:]+:{}$'", account(workload));
                    assert!(
                        conditions[0].expression.contains(&pattern),
                        "{}: {name} must match {pattern}, has {}",
                        r.dir,
                        conditions[0].expression
                    );
                    let rules = spec
                        .match_constraints
                        .as_ref()
                        .and_then(|m| m.resource_rules.as_deref())
                        .unwrap_or_default();
                    for resource in ["nodes", "nodes/status"] {
                        assert!(
                            rules.iter().any(|rule| {
                                rule.resources.iter().flatten().any(|r| r == resource)
                                    && rule.operations.iter().flatten().any(|o| o == "UPDATE")
                            }),
                            "{}: {name} does not cover UPDATE {resource}",
                            r.dir
                        );
                    }
                    // A message with a line break is rejected by the API server; a CEL
                    // string literal cannot span lines.
                    for v in spec.validations.iter().flatten() {
                        for text in [&v.message, &v.message_expression].into_iter().flatten() {
                            assert!(!text.contains('\n'), "{name}: a line break in {text:?}");
                        }
                        assert_eq!(v.reason.as_deref(), Some("Forbidden"), "{name}");
                    }
                    // Bound, denying.
                    let binding = r
                        .policy_bindings
                        .iter()
                        .find(|b| b.spec.policy_name == name)
                        .unwrap_or_else(|| panic!("{}: {name} is not bound", r.dir));
                    let actions = &binding.spec.validation_actions;
                    assert!(actions.iter().any(|a| a == "Deny"), "{name}: {actions:?}");
                }
                // The agent's own-node rule reads the node name bound into its token.
                let node_claim = variable(agent, "tokenNode");
                assert!(
                    node_claim.contains("'authentication.kubernetes.io/node-name'"),
                    "{node_claim}"
                );
            }
        },
    );
}

// ---------------------------------------------------------------------------------------
// The image

#[test]
fn the_dockerfile_builds_the_binaries_the_manifests_start() {
    let dockerfile = read("Dockerfile");
    let build = dockerfile
        .lines()
        .skip_while(|l| !l.contains("cargo build"))
        .take_while(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        build.contains("--release") && build.contains("--locked"),
        "{build}"
    );
    // The [[bin]] names of both packages.
    for (manifest, bin) in [
        ("reconciler/Cargo.toml", "kubelet-gitops"),
        ("node-agent/Cargo.toml", "kubelet-gitops-agent"),
    ] {
        let toml = read(manifest);
        assert!(
            toml.contains(&format!("name = \"{bin}\"")),
            "{manifest} has no bin {bin}"
        );
        let words: Vec<&str> = build.split_whitespace().collect();
        assert!(
            words.windows(2).any(|w| w == ["--bin", bin]),
            "the build does not build {bin}: {build}"
        );
    }
    // What the runtime stage ships, and as whom.
    let stages: Vec<&str> = dockerfile.split("\nFROM ").collect();
    let runtime = stages.last().expect("a runtime stage");
    assert!(stages.len() >= 3, "a multi-stage build");
    let shipped: BTreeSet<&str> = runtime
        .lines()
        .filter(|l| l.starts_with("COPY --from="))
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    assert!(
        runtime.lines().any(|l| l.trim() == "USER 65532:65532"),
        "the image runs as the non-root user"
    );
    for line in dockerfile.lines().filter(|l| l.starts_with("FROM ")) {
        let image = line.split_whitespace().nth(1).unwrap_or_default();
        assert!(
            image.contains(':') && !image.ends_with(":latest"),
            "unpinned base image {image}"
        );
    }
    let ignore = read(".dockerignore");
    assert!(
        ignore.lines().any(|l| l.trim() == "target/"),
        ".dockerignore keeps target/ out"
    );

    with_renders(
        "the_dockerfile_builds_the_binaries_the_manifests_start",
        |renders| {
            for r in renders {
                for (workload, pod) in r.pods() {
                    for c in &pod.containers {
                        let command = c.command.clone().unwrap_or_default();
                        let binary = command.first().map(String::as_str).unwrap_or_default();
                        assert!(
                            shipped.contains(binary),
                            "{}: {workload} runs {binary:?}, the image has {shipped:?}",
                            r.dir
                        );
                    }
                }
            }
        },
    );
}

// ---------------------------------------------------------------------------------------
// kubernetes-validate (PyPI), when installed

fn kubernetes_validate(file: &Path, version: &str) -> Option<std::process::Output> {
    match Command::new("kubernetes-validate")
        .args(["--strict", "--quiet", "--kubernetes-version", version])
        .arg(file)
        .output()
    {
        Ok(out) => Some(out),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("run kubernetes-validate: {e}"),
    }
}

#[test]
fn kubernetes_validate_accepts_every_object() {
    with_renders("kubernetes_validate_accepts_every_object", |renders| {
        let dir = tempfile::tempdir().expect("a temp dir");
        // The tool must be able to fail: a misspelled field in a copy is rejected.
        let broken = dir.path().join("broken.yaml");
        let text = &renders[0].text;
        assert!(text.contains("\n  replicas: 2\n"), "the base's Deployment");
        std::fs::write(
            &broken,
            text.replacen("\n  replicas: 2\n", "\n  replicaz: 2\n", 1),
        )
        .expect("write");
        let Some(out) = kubernetes_validate(&broken, KUBERNETES_VERSIONS[1]) else {
            eprintln!(
                "skipped kubernetes_validate_accepts_every_object: kubernetes-validate is not \
                 installed (pip install kubernetes-validate; .ci/run does)"
            );
            return;
        };
        assert!(
            !out.status.success(),
            "kubernetes-validate accepted `replicaz`: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        for r in renders {
            let file = dir.path().join(r.dir.replace('/', "_") + ".yaml");
            std::fs::write(&file, &r.text).expect("write the render");
            for version in KUBERNETES_VERSIONS {
                let out = kubernetes_validate(&file, version).expect("installed");
                assert!(
                    out.status.success(),
                    "{} against Kubernetes {version}:\n{}{}",
                    r.dir,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    });
}

// ---------------------------------------------------------------------------------------
// The admission policies' CEL, evaluated (cel-python, when installed)

/// Evaluates ValidatingAdmissionPolicy specs the way the API server does, with PyPI's
/// cel-python: matchConditions (all true, or the policy does not apply), then the
/// variables in order (an error is kept as the variable's value, so that, as with the
/// API server's lazy variables, it only matters where it is used), then every validation
/// (false or an error denies, with failurePolicy Fail). Reads {"policies": {name: spec},
/// "cases": [{request, object, oldObject}]} on stdin; prints, per case and policy,
/// "not matched", or the messages of the validations that denied (empty: allowed).
const CEL_DRIVER: &str = r#"
import json, sys
try:
    import celpy
    from celpy import celtypes
    from celpy.evaluation import CELEvalError
except ImportError as e:
    print(json.dumps({"skip": "cel-python is not installed (%s)" % e}))
    sys.exit(0)

data = json.load(sys.stdin)
env = celpy.Environment()
programs = {}

def run(expression, activation):
    if expression not in programs:
        programs[expression] = env.program(env.compile(expression))
    try:
        return programs[expression].evaluate(activation)
    except CELEvalError as e:
        return e

def is_true(value):
    return isinstance(value, celtypes.BoolType) and bool(value)

results = []
for case in data["cases"]:
    verdicts = {}
    for name, spec in data["policies"].items():
        activation = {
            "request": celpy.json_to_cel(case["request"]),
            "object": celpy.json_to_cel(case["object"]),
            "oldObject": celpy.json_to_cel(case["oldObject"]),
        }
        conditions = [run(m["expression"], activation) for m in spec.get("matchConditions", [])]
        if not all(is_true(c) for c in conditions):
            errors = [str(c) for c in conditions if isinstance(c, CELEvalError)]
            verdicts[name] = {"matched": False, "errors": errors, "denied": []}
            continue
        variables = {}
        for v in spec.get("variables", []):
            activation["variables"] = celtypes.MapType(variables)
            variables[celtypes.StringType(v["name"])] = run(v["expression"], activation)
        activation["variables"] = celtypes.MapType(variables)
        denied = []
        for v in spec.get("validations", []):
            result = run(v["expression"], activation)
            if is_true(result):
                continue
            message = v.get("message", v["expression"])
            if "messageExpression" in v:
                m = run(v["messageExpression"], activation)
                message = str(m) if isinstance(m, str) else message
            if isinstance(result, CELEvalError):
                message = "error (%s): %s" % (result, message)
            denied.append(message)
        verdicts[name] = {"matched": True, "errors": [], "denied": denied}
    results.append(verdicts)
print(json.dumps({"results": results}))
"#;

/// What one policy does with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// matchConditions exclude the request: the policy says nothing.
    NotMatched,
    /// Every validation passes.
    Allowed,
    /// These validations deny: each expected fragment is in one denial message, and
    /// every denial is matched by a fragment.
    Denied(Vec<&'static str>),
}

struct AdmissionCase {
    name: &'static str,
    request: Value,
    object: Value,
    old_object: Value,
    agent: Verdict,
    reconciler: Verdict,
}

/// A Node as the API server hands it to admission (trimmed but realistic).
fn node(name: &str) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": "6d0c3b7e-6d7f-4b8e-9a61-0f7c1c2b9d10",
            "resourceVersion": "1000",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"kubernetes.io/hostname": name, "node.kubernetes.io/pool": "gpu"},
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                protocol::DESIRED_CONFIG: "kubelet-gitops/kubelet-gpu-7t2h5c8m9k",
                protocol::STATE: "Applying",
                protocol::MESSAGE: "restarting the kubelet",
            },
            "managedFields": [{
                "manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                "time": "2026-01-01T00:00:00Z"
            }]
        },
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]},
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "7", "memory": "30Gi", "pods": "110"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                 "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ],
            "nodeInfo": {"kubeletVersion": "v1.33.0", "containerRuntimeVersion": "containerd://2.0.0"},
            "images": [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 320368}]
        }
    })
}

/// `old` changed by `edit`, with what the API server itself changes on every write.
fn edited(old: &Value, edit: impl FnOnce(&mut Value)) -> Value {
    let mut new = old.clone();
    edit(&mut new);
    new["metadata"]["resourceVersion"] = Value::from("1001");
    new["metadata"]["managedFields"] = serde_json::json!([
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z"},
        {"manager": "kubelet-gitops", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:05:00Z"}
    ]);
    new
}

fn request(user: &str, node_claim: Option<&str>, name: &str, operation: &str) -> Value {
    let mut extra = serde_json::Map::new();
    if let Some(node) = node_claim {
        extra.insert(
            "authentication.kubernetes.io/node-name".into(),
            serde_json::json!([node]),
        );
        extra.insert(
            "authentication.kubernetes.io/pod-name".into(),
            serde_json::json!(["kubelet-gitops-agent-x7k2p"]),
        );
    }
    serde_json::json!({
        "name": name,
        "operation": operation,
        "subResource": "",
        "resource": {"group": "", "version": "v1", "resource": "nodes"},
        "userInfo": {
            "username": user,
            "groups": ["system:serviceaccounts", "system:authenticated"],
            "extra": extra
        }
    })
}

/// Sets the annotations `pairs` on a Node.
fn set_annotations(pairs: &[(&str, &str)]) -> impl Fn(&mut Value) + use<> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |n: &mut Value| {
        for (k, v) in &pairs {
            n["metadata"]["annotations"][k] = Value::from(v.as_str());
        }
    }
}

/// Removes the annotation `key` from a Node.
fn remove_annotation(key: &'static str) -> impl Fn(&mut Value) {
    move |n: &mut Value| {
        n["metadata"]["annotations"]
            .as_object_mut()
            .expect("annotations")
            .remove(key);
    }
}

/// The agent's condition on a Node, with `status`.
fn own_condition(status: &str) -> Value {
    serde_json::json!({
        "type": protocol::CONDITION_TYPE, "status": status, "reason": "Done",
        "message": "kubelet runs kubelet-gitops/kubelet-gpu-7t2h5c8m9k",
        "lastHeartbeatTime": "2026-01-01T00:05:00Z", "lastTransitionTime": "2026-01-01T00:05:00Z"
    })
}

/// Adds the agent's condition (True) to a Node.
fn add_own_condition(n: &mut Value) {
    n["status"]["conditions"]
        .as_array_mut()
        .expect("conditions")
        .push(own_condition("True"));
}

fn admission_cases() -> Vec<AdmissionCase> {
    const AGENT: &str = "system:serviceaccount:platform-kubelet:kubelet-gitops-agent";
    const RECONCILER: &str = "system:serviceaccount:platform-kubelet:kubelet-gitops-reconciler";
    const CONFIG: &str = "kubelet-gitops/kubelet-gpu-7t2h5c8m9k";
    use Verdict::{Allowed, Denied, NotMatched};
    let n1 = node("node-1");
    let n2 = node("node-2");
    let ann = |k: &str, v: &str| set_annotations(&[(k, v)]);
    let mut with_condition = edited(&n1, add_own_condition);
    with_condition["metadata"]["resourceVersion"] = Value::from("1000");

    let case = |name: &'static str, request: Value, old: &Value, new: Value| AdmissionCase {
        name,
        request,
        object: new,
        old_object: old.clone(),
        agent: NotMatched,
        reconciler: NotMatched,
    };
    let agent = |name, req, old: &Value, new, agent| AdmissionCase {
        agent,
        ..case(name, req, old, new)
    };
    let reconciler = |name, req, old: &Value, new, reconciler| AdmissionCase {
        reconciler,
        ..case(name, req, old, new)
    };
    let own = || request(AGENT, Some("node-1"), "node-1", "UPDATE");
    let rec = || request(RECONCILER, None, "node-1", "UPDATE");
    // The agent on node-1 (the reconciler) changes node-1 by `edit`.
    let by_agent = |name, edit: &dyn Fn(&mut Value), verdict| {
        agent(name, own(), &n1, edited(&n1, edit), verdict)
    };
    let by_reconciler = |name, edit: &dyn Fn(&mut Value), verdict| {
        reconciler(name, rec(), &n1, edited(&n1, edit), verdict)
    };
    vec![
        by_agent(
            "the agent reports on its own Node",
            &set_annotations(&[
                (protocol::STATE, "Done"),
                (protocol::CURRENT_CONFIG, CONFIG),
                (protocol::OBSERVED_CONFIG, CONFIG),
                (protocol::LAST_KNOWN_GOOD, "local"),
            ]),
            Allowed,
        ),
        by_agent(
            "the agent removes its own annotation",
            &remove_annotation(protocol::MESSAGE),
            Allowed,
        ),
        by_agent(
            "the agent reports its node's kubelet set-up",
            &ann(
                protocol::NODE_SETUP,
                r#"{"version":1,"mode":"replace","flags":["--max-pods=110"],"runtimeCgroupDriver":"systemd"}"#,
            ),
            Allowed,
        ),
        agent(
            "the agent reports a kubelet set-up on another Node",
            request(AGENT, Some("node-1"), "node-2", "UPDATE"),
            &n2,
            edited(&n2, ann(protocol::NODE_SETUP, r#"{"version":1}"#)),
            Denied(vec!["only the Node its pod runs on"]),
        ),
        by_agent("the agent adds its condition", &add_own_condition, Allowed),
        agent(
            "the agent changes its condition",
            own(),
            &with_condition,
            edited(&with_condition, |n| {
                n["status"]["conditions"][2] = own_condition("False");
            }),
            Allowed,
        ),
        agent(
            "the agent writes on another Node",
            request(AGENT, Some("node-1"), "node-2", "UPDATE"),
            &n2,
            edited(&n2, ann(protocol::STATE, "Done")),
            Denied(vec!["only the Node its pod runs on"]),
        ),
        agent(
            "a token without the node-name claim",
            request(AGENT, None, "node-1", "UPDATE"),
            &n1,
            edited(&n1, ann(protocol::STATE, "Done")),
            Denied(vec!["only the Node its pod runs on"]),
        ),
        by_agent(
            "the agent sets the reconciler's key",
            &ann(protocol::DESIRED_CONFIG, "kubelet-gitops/other"),
            Denied(vec!["only the annotations"]),
        ),
        by_agent(
            "the agent changes a foreign annotation",
            &ann("node.alpha.kubernetes.io/ttl", "30"),
            Denied(vec!["only the annotations"]),
        ),
        by_agent(
            "the agent removes a foreign annotation",
            &remove_annotation("node.alpha.kubernetes.io/ttl"),
            Denied(vec!["only the annotations"]),
        ),
        by_agent(
            "the agent labels its Node",
            &|n| n["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] = Value::from(""),
            Denied(vec!["labels"]),
        ),
        by_agent(
            "the agent taints its Node",
            &|n| n["spec"]["taints"] = serde_json::json!([{"key": "k", "effect": "NoSchedule"}]),
            Denied(vec!["spec"]),
        ),
        by_agent(
            "the agent flips the Ready condition",
            &|n| n["status"]["conditions"][1]["status"] = Value::from("False"),
            Denied(vec!["only the KubeletConfigReady condition"]),
        ),
        by_agent(
            "the agent changes the capacity",
            &|n| n["status"]["capacity"]["pods"] = Value::from("250"),
            Denied(vec!["only the KubeletConfigReady condition"]),
        ),
        agent(
            "the agent deletes its Node",
            request(AGENT, Some("node-1"), "node-1", "DELETE"),
            &n1,
            Value::Null,
            Denied(vec!["never create or delete"]),
        ),
        case(
            "the kubelet is not the agent",
            request("system:node:node-1", None, "node-1", "UPDATE"),
            &n1,
            edited(&n1, ann(protocol::STATE, "Done")),
        ),
        case(
            "a look-alike account name",
            request(
                "system:serviceaccount:x:kubelet-gitops-agent-debug",
                Some("node-1"),
                "node-1",
                "UPDATE",
            ),
            &n1,
            edited(&n1, ann(protocol::DESIRED_CONFIG, "x/y")),
        ),
        by_reconciler(
            "the reconciler assigns a config",
            &set_annotations(&[
                (
                    protocol::DESIRED_CONFIG,
                    "kubelet-gitops/kubelet-gpu-9mbkccg2cc",
                ),
                (protocol::POOL, "gpu"),
                (protocol::HEALTH_TIMEOUT, "2m"),
                (protocol::LKG_GRACE, "10m"),
            ]),
            Allowed,
        ),
        by_reconciler(
            "the reconciler returns a node to its local config",
            &remove_annotation(protocol::DESIRED_CONFIG),
            Allowed,
        ),
        by_reconciler(
            "the reconciler writes the agent's state",
            &ann(protocol::STATE, "Done"),
            Denied(vec!["only the annotations"]),
        ),
        by_reconciler(
            "the reconciler writes a node's kubelet set-up",
            &ann(protocol::NODE_SETUP, r#"{"version":1}"#),
            Denied(vec!["only the annotations"]),
        ),
        by_reconciler(
            "the reconciler labels a Node",
            &|n| n["metadata"]["labels"]["x"] = Value::from("y"),
            Denied(vec!["labels"]),
        ),
        by_reconciler(
            "the reconciler writes a condition",
            &add_own_condition,
            Denied(vec!["nothing of its status"]),
        ),
        by_reconciler(
            "the reconciler cordons a node it drains",
            &|n| {
                n["spec"]["unschedulable"] = Value::Bool(true);
                set_annotations(&[
                    (protocol::DRAIN, "kubelet-gitops/kubelet-gpu-9mbkccg2cc"),
                    (protocol::DRAIN_SINCE, "2026-11-28T12:00:00Z"),
                    (protocol::CORDONED, "true"),
                ])(n);
            },
            Allowed,
        ),
        by_reconciler(
            "the reconciler uncordons a node",
            &|n| {
                n["spec"]["unschedulable"] = Value::Bool(false);
            },
            Allowed,
        ),
        by_reconciler(
            "the reconciler taints a Node",
            &|n| n["spec"]["taints"] = serde_json::json!([{"key": "k", "effect": "NoSchedule"}]),
            Denied(vec!["only spec.unschedulable"]),
        ),
        by_reconciler(
            "the reconciler changes a Node's podCIDR",
            &|n| n["spec"]["podCIDR"] = Value::from("10.9.0.0/24"),
            Denied(vec!["only spec.unschedulable"]),
        ),
        reconciler(
            "the reconciler deletes a Node",
            request(RECONCILER, None, "node-1", "DELETE"),
            &n1,
            Value::Null,
            Denied(vec!["never create or delete"]),
        ),
    ]
}

#[test]
fn the_admission_policies_allow_exactly_the_protocol_writes() {
    with_renders(
        "the_admission_policies_allow_exactly_the_protocol_writes",
        |renders| {
            let cases = admission_cases();
            for r in renders {
                let policies: serde_json::Map<String, Value> = r
                    .policies
                    .iter()
                    .map(|p| {
                        let name = p.metadata.name.clone().unwrap_or_default();
                        (name, serde_json::to_value(&p.spec).expect("serialize"))
                    })
                    .collect();
                let input = serde_json::json!({
                    "policies": policies,
                    "cases": cases.iter().map(|c| serde_json::json!({
                        "request": c.request,
                        "object": c.object,
                        "oldObject": c.old_object,
                    })).collect::<Vec<_>>(),
                });
                let child = Command::new("python3")
                    .args(["-c", CEL_DRIVER])
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn();
                let mut child = match child {
                    Ok(c) => c,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        eprintln!(
                            "skipped the_admission_policies_allow_exactly_the_protocol_writes: \
                             python3 is not installed"
                        );
                        return;
                    }
                    Err(e) => panic!("run python3: {e}"),
                };
                {
                    use std::io::Write;
                    let mut stdin = child.stdin.take().expect("stdin");
                    // Without cel-python the driver answers "skip" and exits before it
                    // reads: a broken pipe here is that, and its answer says so.
                    match stdin.write_all(input.to_string().as_bytes()) {
                        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                            panic!("write the cases: {e}")
                        }
                        _ => {}
                    }
                }
                let out = child.wait_with_output().expect("wait for python3");
                assert!(
                    out.status.success(),
                    "the CEL driver failed (a CEL compile error?):\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let answer: Value = serde_json::from_slice(&out.stdout).expect("driver JSON");
                if let Some(reason) = answer["skip"].as_str() {
                    eprintln!(
                        "skipped the_admission_policies_allow_exactly_the_protocol_writes: \
                         {reason} (pip install cel-python; .ci/run does)"
                    );
                    return;
                }
                let results = answer["results"].as_array().expect("results");
                assert_eq!(results.len(), cases.len());
                for (case, result) in cases.iter().zip(results) {
                    for (policy, expected) in [
                        ("kubelet-gitops-agent", &case.agent),
                        ("kubelet-gitops-reconciler", &case.reconciler),
                    ] {
                        let got = &result[policy];
                        let what = format!("{}: {}: {policy}", r.dir, case.name);
                        assert_eq!(
                            got["errors"].as_array().map(Vec::len),
                            Some(0),
                            "{what}: {got}"
                        );
                        let denied: Vec<&str> = got["denied"]
                            .as_array()
                            .expect("denied")
                            .iter()
                            .filter_map(Value::as_str)
                            .collect();
                        match expected {
                            Verdict::NotMatched => {
                                assert_eq!(got["matched"], false, "{what}: {got}")
                            }
                            Verdict::Allowed => {
                                assert_eq!(got["matched"], true, "{what}: {got}");
                                assert!(denied.is_empty(), "{what}: denied: {denied:#?}");
                            }
                            Verdict::Denied(fragments) => {
                                assert_eq!(got["matched"], true, "{what}: {got}");
                                for fragment in fragments {
                                    assert!(
                                        denied.iter().any(|m| m.contains(fragment)),
                                        "{what}: no denial says {fragment:?}: {denied:#?}"
                                    );
                                }
                                for message in &denied {
                                    assert!(
                                        fragments.iter().any(|f| message.contains(f)),
                                        "{what}: also denied by {message:?}"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        },
    );
}
