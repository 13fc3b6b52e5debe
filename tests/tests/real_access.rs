//! deploy/ applied for real (issue 13 point 3): the manifests, the RBAC and the admission
//! policies of `deploy/`, checked by a real Kubernetes v1.36 API server and real kubelets
//! (the harness's [`RealCluster`], from `upstream/build.sh`'s binaries), never by our
//! reading of them.
//!
//! - [`example_overlay_applies_after_a_server_side_dry_run`]: `kubectl apply -k
//!   deploy/overlays/example` on a control plane without kubelets (the overlay's DaemonSet
//!   would make a kubelet create hostPath directories on this machine).
//! - [`rbac_admission_and_kubelet_access_of_each_component`]: one cluster with the
//!   kubelets `node-a` and `node-b` and deploy/base's RBAC and policies; labelled steps,
//!   each of which fails on its own, run with the service accounts' own tokens (the
//!   agent's bound to Node `node-a`, as its DaemonSet pod's projected token is): `kubectl
//!   auth can-i` for each component, the ValidatingAdmissionPolicies as the API server
//!   evaluates them, and the kubelets' `/configz` authorization.
//!
//! Without the upstream binaries each test prints `SKIPPED: ...` and passes, unless
//! `KUBELET_GITOPS_E2E_REQUIRE` is set. A failed test keeps its directory (logs of every
//! process) and prints where it is.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use kubelet_gitops_core::protocol;
use kubelet_gitops_e2e::real::{
    self as real, NodeSetup, RealCluster, UpstreamBinaries, kubelet_base,
};
use kubelet_gitops_e2e::{KEEP_ENV, NAMESPACE, PATIENCE};
use serde_json::{Value, json};

/// The overlay under test, and the namespace it sets.
const OVERLAY: &str = "deploy/overlays/example";
const OVERLAY_NAMESPACE: &str = "platform-kubelet";
/// deploy/'s ServiceAccounts (and the names of their roles, bindings and policies).
const AGENT: &str = "kubelet-gitops-agent";
const RECONCILER: &str = "kubelet-gitops-reconciler";
/// The field managers the binaries write with (node-agent `report::FIELD_MANAGER`,
/// reconciler `publish::FIELD_MANAGER`).
const AGENT_MANAGER: &str = "kubelet-gitops-agent";
const RECONCILER_MANAGER: &str = "kubelet-gitops";

// ---------------------------------------------------------------------------------------
// The tests

/// `kubectl apply -k deploy/overlays/example` against the real API server, after a
/// server-side dry run, on a control plane without kubelets or controllers; then every
/// object it renders exists, and `kubectl diff -k` finds nothing to change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_overlay_applies_after_a_server_side_dry_run() {
    let Some(bins) = upstream("example_overlay_applies_after_a_server_side_dry_run") else {
        return;
    };
    let work = Workdir::new("overlay");
    let result = async {
        let mut cluster = RealCluster::start(work.path(), &work.logs(), bins, &[], false)
            .await
            .map_err(fail)?;
        let admin = cluster.admin_kubeconfig().to_path_buf();
        let rendered = render(OVERLAY).await?;
        let mut steps = Steps::default();
        // The namespace first, then the dry run of everything: a server-side dry run
        // creates nothing, so the overlay's namespaced objects fail it while their
        // namespace does not exist. The first step shows that this is so (and the only
        // failure); the second applies the overlay's own Namespace object alone, dry run
        // first, as a person would before `kubectl apply -k`.
        steps
            .run(
                "dry run before the namespace exists: fails only for lack of it",
                dry_run_without_namespace(&admin, &rendered),
            )
            .await;
        steps
            .run(
                "the overlay's Namespace alone: server dry run, then applied",
                apply_namespace(&admin, &rendered, work.path()),
            )
            .await;
        steps
            .run(
                "kubectl apply -k --dry-run=server: every object passes",
                apply_overlay(&admin, &rendered, true),
            )
            .await;
        steps
            .run(
                "kubectl apply -k: every object created",
                apply_overlay(&admin, &rendered, false),
            )
            .await;
        steps
            .run(
                "every object exists: policies, bindings, accounts, roles",
                overlay_objects_exist(&admin, &rendered),
            )
            .await;
        steps
            .run(
                "kubectl diff -k: nothing differs after the apply",
                overlay_unchanged(&admin),
            )
            .await;
        cluster.stop().await.map_err(fail)?;
        steps.finish()
    }
    .await;
    work.finish(result);
}

/// On one cluster (kubelets `node-a` and `node-b`, deploy/base's RBAC and admission
/// policies) with the service accounts' own tokens: what RBAC grants each component, what
/// the ValidatingAdmissionPolicies let each write, and the kubelets' `/configz`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_admission_and_kubelet_access_of_each_component() {
    let Some(bins) = upstream("rbac_admission_and_kubelet_access_of_each_component") else {
        return;
    };
    let work = Workdir::new("access");
    let result = async {
        let nodes: Vec<NodeSetup> = ["node-a", "node-b"]
            .into_iter()
            .map(|name| NodeSetup {
                name: name.into(),
                labels: Vec::new(),
                config: kubelet_base(work.path()),
                flags: Vec::new(),
            })
            .collect();
        let mut cluster = RealCluster::start(work.path(), &work.logs(), bins, &nodes, true)
            .await
            .map_err(fail)?;
        cluster.apply_deploy_base().await.map_err(fail)?;
        let ids = Identities::create(&cluster, work.path()).await?;
        let policies = Policies::read()?;
        let mut steps = Steps::default();
        steps
            .run(
                "rbac: node agent",
                rbac(&ids.agent_kubeconfig, &agent_rbac()),
            )
            .await;
        steps
            .run(
                "rbac: reconciler",
                rbac(&ids.reconciler_kubeconfig, &reconciler_rbac()),
            )
            .await;
        steps
            .run(
                "admission: the policies type-check against Node v1",
                policies_type_check(&cluster, &policies),
            )
            .await;
        steps
            .run(
                "admission: node agent (token bound to node-a)",
                agent_admission(&cluster, &ids, &policies),
            )
            .await;
        steps
            .run(
                "admission: reconciler",
                reconciler_admission(&cluster, &ids, &policies),
            )
            .await;
        steps
            .run(
                "kubelet: /configz and /pods",
                kubelet_access(&cluster, &ids),
            )
            .await;
        cluster.stop().await.map_err(fail)?;
        steps.finish()
    }
    .await;
    work.finish(result);
}

// ---------------------------------------------------------------------------------------
// The example overlay

/// `kubectl apply -k OVERLAY --dry-run=server` while the overlay's namespace does not
/// exist: one error per namespaced object, each `namespaces "..." not found`.
async fn dry_run_without_namespace(admin: &Path, rendered: &[Object]) -> Result<(), String> {
    let overlay = repo_path(OVERLAY);
    let out = kubectl(admin, &["apply", "-k", &overlay, "--dry-run=server"]).await?;
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("Error from server"))
        .collect();
    let namespaced = rendered.iter().filter(|o| o.namespace.is_some()).count();
    let missing = format!("namespaces \"{OVERLAY_NAMESPACE}\" not found");
    let mut f = Findings::default();
    f.check(!out.success, || format!("it succeeded:\n{}", out.stdout));
    f.check(errors.len() == namespaced, || {
        format!(
            "{} errors for the {namespaced} objects rendered with a namespace:\n{}",
            errors.len(),
            out.stderr
        )
    });
    for e in &errors {
        f.check(e.contains(&missing), || {
            format!("an error other than `{missing}`: {e}")
        });
    }
    f.done()
}

/// The overlay's Namespace object, on its own: a server-side dry run, then applied.
async fn apply_namespace(admin: &Path, rendered: &[Object], dir: &Path) -> Result<(), String> {
    let ns = rendered
        .iter()
        .find(|o| o.kind == "Namespace")
        .ok_or("the overlay renders no Namespace")?;
    let file = dir.join("namespace.json");
    std::fs::write(&file, ns.object.to_string()).map_err(fail)?;
    let file = file.display().to_string();
    kubectl(admin, &["apply", "--dry-run=server", "-f", &file])
        .await?
        .ok()?;
    kubectl(admin, &["apply", "-f", &file]).await?.ok()?;
    Ok(())
}

/// `kubectl apply -k OVERLAY` (with `--dry-run=server` when `dry_run`): every object but
/// the Namespace (applied already, so `unchanged`) passes or is created.
async fn apply_overlay(admin: &Path, rendered: &[Object], dry_run: bool) -> Result<(), String> {
    let overlay = repo_path(OVERLAY);
    let mut args = vec!["apply", "-k", overlay.as_str()];
    let suffix = if dry_run {
        args.push("--dry-run=server");
        " created (server dry run)"
    } else {
        " created"
    };
    let out = kubectl(admin, &args).await?.ok()?;
    let done = out.lines().filter(|l| l.ends_with(suffix)).count();
    let expected = rendered.len() - 1;
    check(done == expected, || {
        format!("{done} lines end with `{suffix}`, expected {expected}:\n{out}")
    })
}

/// Every object the overlay renders is on the server (`kubectl get -k`), by kind,
/// namespace and name, among them the ones issue 13 names; and the bindings name the
/// overlay's ServiceAccounts.
async fn overlay_objects_exist(admin: &Path, rendered: &[Object]) -> Result<(), String> {
    let overlay = repo_path(OVERLAY);
    let out = kubectl(admin, &["get", "-k", &overlay, "-o", "json"])
        .await?
        .ok()?;
    let list: Value = serde_json::from_str(&out).map_err(fail)?;
    let live: BTreeSet<Identity> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(Object::identity_of)
        .collect();
    let mut f = Findings::default();
    for o in rendered {
        f.check(live.contains(&o.identity()), || {
            format!("{} missing on the server", o.describe())
        });
    }
    let ns = Some(OVERLAY_NAMESPACE);
    let required = [
        ("ValidatingAdmissionPolicy", None, AGENT),
        ("ValidatingAdmissionPolicy", None, RECONCILER),
        ("ValidatingAdmissionPolicyBinding", None, AGENT),
        ("ValidatingAdmissionPolicyBinding", None, RECONCILER),
        ("ServiceAccount", ns, AGENT),
        ("ServiceAccount", ns, RECONCILER),
        ("ClusterRole", None, AGENT),
        ("ClusterRole", None, RECONCILER),
        ("ClusterRoleBinding", None, AGENT),
        ("ClusterRoleBinding", None, RECONCILER),
        ("Role", ns, AGENT),
        ("Role", ns, RECONCILER),
        ("RoleBinding", ns, AGENT),
        ("RoleBinding", ns, RECONCILER),
        ("DaemonSet", ns, AGENT),
        ("Deployment", ns, RECONCILER),
    ];
    for (kind, ns, name) in required {
        let id = (kind.to_string(), ns.map(str::to_string), name.to_string());
        f.check(live.contains(&id), || {
            format!(
                "{kind} {}{name} missing on the server",
                ns.map(|n| format!("{n}/")).unwrap_or_default()
            )
        });
    }
    // The bindings follow the overlay's namespace.
    let in_ns = format!("-n {OVERLAY_NAMESPACE}");
    for (who, ask) in [
        (AGENT, "patch nodes".to_string()),
        (AGENT, format!("watch configmaps {in_ns}")),
        (RECONCILER, "patch nodes".to_string()),
        (RECONCILER, format!("create configmaps {in_ns}")),
    ] {
        let as_flag = format!("--as=system:serviceaccount:{OVERLAY_NAMESPACE}:{who}");
        let mut args: Vec<&str> = ask.split_whitespace().collect();
        args.push(&as_flag);
        let allowed = can_i(admin, &args).await?;
        f.check(allowed, || {
            format!("{who} of the overlay's namespace may not {ask}")
        });
    }
    f.done()
}

/// `kubectl diff -k OVERLAY` exits 0: what the server holds is what the overlay says.
async fn overlay_unchanged(admin: &Path) -> Result<(), String> {
    let out = kubectl(admin, &["diff", "-k", &repo_path(OVERLAY)]).await?;
    check(out.code == Some(0), || {
        format!("exit {:?}:\n{}{}", out.code, out.stdout, out.stderr)
    })
}

// ---------------------------------------------------------------------------------------
// RBAC

/// One `kubectl auth can-i` question and the answer deploy/'s RBAC must give.
struct Ask {
    /// The arguments after `kubectl auth can-i`.
    args: String,
    /// Whether it must be allowed.
    allowed: bool,
}

fn yes(args: impl Into<String>) -> Ask {
    Ask {
        args: args.into(),
        allowed: true,
    }
}

fn no(args: impl Into<String>) -> Ask {
    Ask {
        args: args.into(),
        allowed: false,
    }
}

/// The node agent: what its API calls need (node-agent `watch.rs`, `report.rs`,
/// `agent/ready.rs`, `kubelet/probe.rs`) and some of what rbac-agent.yaml withholds.
fn agent_rbac() -> Vec<Ask> {
    let ns = format!("-n {NAMESPACE}");
    vec![
        // watch.rs: its own Node, watched with a field selector.
        yes("get nodes"),
        yes("list nodes"),
        yes("watch nodes"),
        // report.rs: its annotations (merge patch) and KubeletConfigReady (status).
        yes("patch nodes"),
        yes("patch nodes --subresource=status"),
        // report.rs: Events about its Node, in `default`.
        yes("create events -n default"),
        // agent/ready.rs: its node's pods (spec.nodeName selector), across namespaces.
        yes("list pods --all-namespaces"),
        // watch.rs: the ConfigMap its desired-config names.
        yes(format!("get configmaps {ns}")),
        yes(format!("list configmaps {ns}")),
        yes(format!("watch configmaps {ns}")),
        // kubelet/probe.rs: the kubelet's /configz.
        yes("get nodes --subresource=configz"),
        // Not Nodes' lifecycle, nor a whole-object update.
        no("create nodes"),
        no("update nodes"),
        no("delete nodes"),
        no("update nodes --subresource=status"),
        // Not the whole kubelet API (exec, logs, port-forward on every node).
        no("get nodes --subresource=proxy"),
        no("create nodes --subresource=proxy"),
        // Pods: list only; no exec, no reads of one pod, no evictions: only the
        // reconciler drains.
        no("get pods -n default"),
        no("create pods --subresource=eviction -n default"),
        no("delete pods -n default"),
        no("create pods --subresource=exec -n default"),
        // No Secrets anywhere.
        no(format!("get secrets {ns}")),
        no("list secrets --all-namespaces"),
        no(format!("update secrets {ns}")),
        // ConfigMaps: read-only, and only in its namespace.
        no(format!("create configmaps {ns}")),
        no(format!("update configmaps {ns}")),
        no(format!("delete configmaps {ns}")),
        no("get configmaps -n kube-system"),
        // Events: create only.
        no("list events -n default"),
        // No Lease: it is the reconciler's.
        no(format!("create leases.coordination.k8s.io {ns}")),
    ]
}

/// The reconciler: what its API calls need (reconciler `controller/observe.rs`,
/// `controller/reconcile.rs`, `publish.rs`, `leader.rs`, `cli/plan.rs`) and some of what
/// rbac-reconciler.yaml withholds.
fn reconciler_rbac() -> Vec<Ask> {
    let ns = format!("-n {NAMESPACE}");
    let lease = "leases.coordination.k8s.io";
    vec![
        // controller/observe.rs: a metadata watch of every Node; cli/plan.rs: a list.
        yes("get nodes"),
        yes("list nodes"),
        yes("watch nodes"),
        // controller/reconcile.rs: its annotations (merge patch of the metadata), and
        // the cordon of a drain (spec.unschedulable, in the same patch).
        yes("patch nodes"),
        // controller/drain.rs: a drained node's pods, listed, evicted (or deleted, for
        // drainForce); never read one by one, never created or exec'd into.
        yes("list pods --all-namespaces"),
        yes("create pods --subresource=eviction -n default"),
        yes("delete pods -n default"),
        no("get pods -n default"),
        no("create pods -n default"),
        no("create pods --subresource=exec -n default"),
        no("patch pods -n default"),
        // publish.rs and observe.rs: immutable ConfigMaps, created, watched, collected.
        yes(format!("create configmaps {ns}")),
        yes(format!("get configmaps {ns}")),
        yes(format!("list configmaps {ns}")),
        yes(format!("watch configmaps {ns}")),
        yes(format!("delete configmaps {ns}")),
        // leader.rs: the Lease named by --lease-name.
        yes(format!("create {lease} {ns}")),
        yes(format!("get {lease}/kubelet-gitops {ns}")),
        yes(format!("update {lease}/kubelet-gitops {ns}")),
        // Never a Node's lifecycle, a whole-object update or its status.
        no("create nodes"),
        no("update nodes"),
        no("delete nodes"),
        no("patch nodes --subresource=status"),
        no("update nodes --subresource=status"),
        // Never the kubelet's API.
        no("get nodes --subresource=configz"),
        no("get nodes --subresource=proxy"),
        // record.rs: the rollout record, updated by name; every other ConfigMap is
        // immutable, and only in its namespace.
        yes(format!("update configmaps/kubelet-gitops-rollout {ns}")),
        no(format!("update configmaps/kubelet-other {ns}")),
        no(format!("update configmaps {ns}")),
        no(format!("patch configmaps {ns}")),
        no("create configmaps -n default"),
        no("list configmaps -n kube-system"),
        // No Secrets or Events.
        no(format!("get secrets {ns}")),
        no("list secrets --all-namespaces"),
        no("create events -n default"),
        // Only its own Lease, never deleted.
        no(format!("get {lease}/other {ns}")),
        no(format!("update {lease}/other {ns}")),
        no(format!("delete {lease}/kubelet-gitops {ns}")),
    ]
}

/// Asks every question with the identity of `kubeconfig` (a SelfSubjectAccessReview per
/// question), all at once.
async fn rbac(kubeconfig: &Path, asks: &[Ask]) -> Result<(), String> {
    let answers = futures::future::join_all(asks.iter().map(|ask| async move {
        let args: Vec<&str> = ask.args.split_whitespace().collect();
        (ask, can_i(kubeconfig, &args).await)
    }))
    .await;
    let mut f = Findings::default();
    for (ask, answer) in answers {
        match answer {
            Ok(allowed) => f.check(allowed == ask.allowed, || {
                format!(
                    "`kubectl auth can-i {}`: {}, expected {}",
                    ask.args,
                    yes_no(allowed),
                    yes_no(ask.allowed)
                )
            }),
            Err(e) => f.fail(format!("`kubectl auth can-i {}`: {e}", ask.args)),
        }
    }
    f.done()
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// `kubectl auth can-i ARGS`: true for `yes`, false for `no` (its exit code is 1 for both
/// `no` and an error, so the answer is read from stdout).
async fn can_i(kubeconfig: &Path, args: &[&str]) -> Result<bool, String> {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let out = kubectl(kubeconfig, &all).await?;
    match out.stdout.trim() {
        "yes" if out.success => Ok(true),
        "no" => Ok(false),
        _ => Err(format!(
            "no answer (exit {:?}): {}{}",
            out.code, out.stdout, out.stderr
        )),
    }
}

// ---------------------------------------------------------------------------------------
// Admission

/// The service accounts' kubeconfigs and clients, with their own tokens.
struct Identities {
    agent_kubeconfig: PathBuf,
    reconciler_kubeconfig: PathBuf,
    /// The agent's token, bound to Node `node-a`.
    agent_token: String,
    reconciler_token: String,
    agent: Client,
    reconciler: Client,
}

impl Identities {
    async fn create(cluster: &RealCluster, dir: &Path) -> Result<Identities, String> {
        let agent_kubeconfig = dir.join("agent-node-a.conf");
        let reconciler_kubeconfig = dir.join("reconciler.conf");
        let agent_token = cluster
            .service_account_kubeconfig(&agent_kubeconfig, NAMESPACE, AGENT, Some("node-a"))
            .await
            .map_err(fail)?;
        let reconciler_token = cluster
            .service_account_kubeconfig(&reconciler_kubeconfig, NAMESPACE, RECONCILER, None)
            .await
            .map_err(fail)?;
        Ok(Identities {
            agent: client(&agent_kubeconfig).await?,
            reconciler: client(&reconciler_kubeconfig).await?,
            agent_kubeconfig,
            reconciler_kubeconfig,
            agent_token,
            reconciler_token,
        })
    }
}

/// deploy/base/admission-policy.yaml's two policies, read from the file.
struct Policies {
    agent: Value,
    reconciler: Value,
}

impl Policies {
    fn read() -> Result<Policies, String> {
        let path = repo_path("deploy/base/admission-policy.yaml");
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
        let mut agent = None;
        let mut reconciler = None;
        for doc in text.split("\n---\n") {
            let v: Value = serde_saphyr::from_str(doc).map_err(|e| format!("{path}: {e}"))?;
            if v["kind"] != "ValidatingAdmissionPolicy" {
                continue;
            }
            match v["metadata"]["name"].as_str() {
                Some(AGENT) => agent = Some(v),
                Some(RECONCILER) => reconciler = Some(v),
                _ => {}
            }
        }
        Ok(Policies {
            agent: agent.ok_or_else(|| format!("{path}: no policy {AGENT}"))?,
            reconciler: reconciler.ok_or_else(|| format!("{path}: no policy {RECONCILER}"))?,
        })
    }

    /// The denial message of the agent's validation whose message says `about`, for a
    /// request on Node `node`.
    fn agent(&self, about: &str, node: &str) -> Result<String, String> {
        message(validations(&self.agent), about, node)
    }

    fn reconciler(&self, about: &str, node: &str) -> Result<String, String> {
        message(validations(&self.reconciler), about, node)
    }
}

fn validations(policy: &Value) -> &[Value] {
    policy["spec"]["validations"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

/// The denial message of the validation in `validations` whose message (or message
/// expression) contains `about`. A `messageExpression` must have the policy's one shape,
/// `'<text>' + request.name`: the text, then `node`.
fn message(validations: &[Value], about: &str, node: &str) -> Result<String, String> {
    for v in validations {
        if let Some(m) = v["message"].as_str()
            && m.contains(about)
        {
            return Ok(m.to_string());
        }
        if let Some(e) = v["messageExpression"].as_str()
            && e.contains(about)
        {
            let text = e
                .trim()
                .strip_prefix('\'')
                .and_then(|t| t.strip_suffix("' + request.name"))
                .ok_or_else(|| {
                    format!("messageExpression not of the form '...' + request.name: {e}")
                })?;
            return Ok(format!("{text}{node}"));
        }
    }
    Err(format!("no validation's message says `{about}`"))
}

/// The one expression shape the type checker may warn about: walking a Node's `metadata`
/// as a map. The type checker sees the ObjectMeta type there, which `all()` cannot range
/// over; admission evaluates `object` untyped, where it is a map, and the write steps
/// show that these rules work.
const METADATA_AS_MAP: &str = "object.metadata.all(";

/// The API server type-checks a policy's expressions against the schemas of the kinds it
/// matches, and lists what does not check in its status. deploy/'s policies match
/// `apiVersions: ["*"]`, which it does not check (a misspelt field there goes unnoticed),
/// so this creates a copy of each that matches `v1` only, bound to nothing (never
/// enforced), and reads what the server says of it: any warning but [`METADATA_AS_MAP`]'s
/// fails.
async fn policies_type_check(cluster: &RealCluster, policies: &Policies) -> Result<(), String> {
    let api: Api<ValidatingAdmissionPolicy> = Api::all(cluster.client().clone());
    let mut f = Findings::default();
    for policy in [&policies.agent, &policies.reconciler] {
        let name = format!(
            "{}-typecheck-v1",
            policy["metadata"]["name"].as_str().unwrap_or_default()
        );
        let mut copy = policy.clone();
        copy["metadata"] = json!({ "name": name });
        let rules = copy["spec"]["matchConstraints"]["resourceRules"].as_array_mut();
        for rule in rules.into_iter().flatten() {
            rule["apiVersions"] = json!(["v1"]);
        }
        let copy: ValidatingAdmissionPolicy = serde_json::from_value(copy).map_err(fail)?;
        let created = api
            .create(&Default::default(), &copy)
            .await
            .map_err(|e| format!("creating {name}: {e}"))?;
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            let p = api.get(&name).await.map_err(fail)?;
            let status = p.status.unwrap_or_default();
            if status.observed_generation.is_some()
                && status.observed_generation == created.metadata.generation
            {
                break status;
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{name} not type-checked within {PATIENCE:?}: status {status:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        api.delete(&name, &Default::default()).await.map_err(fail)?;
        let warnings = status
            .type_checking
            .and_then(|t| t.expression_warnings)
            .unwrap_or_default();
        for w in &warnings {
            let expression = w
                .field_ref
                .strip_prefix("spec.validations[")
                .and_then(|r| r.strip_suffix("].expression"))
                .and_then(|i| i.parse::<usize>().ok())
                .and_then(|i| validations(policy).get(i))
                .and_then(|v| v["expression"].as_str())
                .unwrap_or_default();
            f.check(expression.contains(METADATA_AS_MAP), || {
                format!("{name}: {}: {}", w.field_ref, w.warning)
            });
        }
        eprintln!(
            "  {name}: {} type-checking warnings, on {METADATA_AS_MAP}",
            warnings.len()
        );
    }
    f.done()
}

/// A write to a Node, as the binaries send theirs.
enum Write {
    /// A JSON merge patch of the Node (the agent's annotations, node-agent `report.rs`).
    Merge(Value),
    /// A JSON merge patch of the Node's metadata (the reconciler's annotations,
    /// reconciler `controller/reconcile.rs`).
    MergeMetadata(Value),
    /// A strategic merge patch of the Node's status (the agent's condition).
    Status(Value),
    /// Deleting the Node.
    Delete,
}

/// What a write must come to.
enum Expect {
    /// It goes through.
    Allowed,
    /// 403 from the ValidatingAdmissionPolicy `policy`, in its own words `message`.
    DeniedByPolicy {
        policy: &'static str,
        message: String,
    },
    /// 403 from RBAC.
    DeniedByRbac {
        verb: &'static str,
        resource: &'static str,
    },
}

/// One write, on one Node, and what it must come to.
struct Case {
    what: &'static str,
    node: &'static str,
    write: Write,
    expect: Expect,
}

fn case(what: &'static str, node: &'static str, write: Write, expect: Expect) -> Case {
    Case {
        what,
        node,
        write,
        expect,
    }
}

/// Sends every write of `cases` in order with `client` (field manager `manager`) and
/// checks what each came to.
async fn writes(client: &Client, manager: &str, cases: &[Case], f: &mut Findings) {
    let api: Api<Node> = Api::all(client.clone());
    let pp = PatchParams {
        field_manager: Some(manager.to_string()),
        ..PatchParams::default()
    };
    for Case {
        what,
        node,
        write,
        expect,
    } in cases
    {
        let result = match write {
            Write::Merge(v) => api.patch(node, &pp, &Patch::Merge(v)).await.map(drop),
            Write::MergeMetadata(v) => api
                .patch_metadata(node, &pp, &Patch::Merge(v))
                .await
                .map(drop),
            Write::Status(v) => api
                .patch_status(node, &pp, &Patch::Strategic(v))
                .await
                .map(drop),
            Write::Delete => api.delete(node, &Default::default()).await.map(drop),
        };
        let what = format!("{what} on {node}");
        match (expect, result) {
            (Expect::Allowed, Ok(())) => {}
            (Expect::Allowed, Err(e)) => f.fail(format!("{what}: denied, expected allowed: {e}")),
            (_, Ok(())) => f.fail(format!("{what}: allowed, expected denied")),
            (Expect::DeniedByPolicy { policy, message }, Err(e)) => {
                let (code, text) = status_of(&e);
                let by = format!(
                    "ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request"
                );
                let ok = code == Some(403) && text.contains(&by) && text.contains(message.as_str());
                f.check(ok, || {
                    format!("{what}: expected 403 from `{by}: {message}`, got {code:?}: {text}")
                });
            }
            (Expect::DeniedByRbac { verb, resource }, Err(e)) => {
                let (code, text) = status_of(&e);
                let says = format!("cannot {verb} resource \"{resource}\"");
                f.check(code == Some(403) && text.contains(&says), || {
                    format!("{what}: expected 403 `{says}` (RBAC), got {code:?}: {text}")
                });
            }
        }
    }
}

fn status_of(e: &kube::Error) -> (Option<u16>, String) {
    match e {
        kube::Error::Api(s) => (Some(s.code), s.message.clone()),
        other => (None, other.to_string()),
    }
}

/// A merge patch of annotations (`None` removes the key).
fn annotations(pairs: &[(&str, Option<&str>)]) -> Value {
    let map: serde_json::Map<String, Value> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.map_or(Value::Null, |v| json!(v))))
        .collect();
    json!({ "metadata": { "annotations": map } })
}

/// `annotations` ([`annotations`]) and `condition` ([`condition`]) as one patch.
fn with_condition(annotations: Value, condition: Value) -> Value {
    let mut patch = condition;
    if let (Some(patch), Value::Object(extra)) = (patch.as_object_mut(), annotations) {
        patch.extend(extra);
    }
    patch
}

/// A strategic merge patch of one condition.
fn condition(kind: &str, status: &str) -> Value {
    json!({ "status": { "conditions": [{
        "type": kind,
        "status": status,
        "reason": "RealAccessTest",
        "message": "written by tests/tests/real_access.rs",
        "lastHeartbeatTime": "2026-01-01T00:00:00Z",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }] } })
}

const TEST_LABEL: &str = "example.com/real-access";
const OTHER_ANNOTATION: &str = "other.io/x";
const OTHER_CONDITION: &str = "ExampleCondition";

fn label_patch() -> Value {
    json!({ "metadata": { "labels": { TEST_LABEL: "y" } } })
}

fn cordon_patch() -> Value {
    json!({ "spec": { "unschedulable": true } })
}

/// A Node as admin reads it, for the checks of what the writes left.
struct Seen(Node);

impl Seen {
    async fn get(cluster: &RealCluster, name: &str) -> Result<Seen, String> {
        let api: Api<Node> = Api::all(cluster.client().clone());
        api.get(name).await.map(Seen).map_err(fail)
    }

    fn annotation(&self, key: &str) -> Option<&str> {
        self.0
            .metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    fn condition(&self, kind: &str) -> Option<&str> {
        let conditions = self.0.status.as_ref()?.conditions.as_ref()?;
        conditions
            .iter()
            .find(|c| c.type_ == kind)
            .map(|c| c.status.as_str())
    }

    fn labelled(&self) -> bool {
        self.0
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(TEST_LABEL))
    }

    fn cordoned(&self) -> bool {
        self.0.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
    }

    /// Checks that annotation `key` is `want`.
    fn expect_annotation(&self, key: &str, want: Option<&str>, f: &mut Findings) {
        let got = self.annotation(key);
        let name = self.0.metadata.name.as_deref().unwrap_or_default();
        f.check(got == want, || {
            format!("{name}: annotation {key} is {got:?}, expected {want:?}")
        });
    }

    /// Checks that none of the denied writes took effect.
    fn expect_untouched(&self, f: &mut Findings) {
        let name = self.0.metadata.name.as_deref().unwrap_or_default();
        f.check(!self.labelled(), || {
            format!("{name} has label {TEST_LABEL}")
        });
        f.check(!self.cordoned(), || format!("{name} is unschedulable"));
        self.expect_annotation(OTHER_ANNOTATION, None, f);
        let other = self.condition(OTHER_CONDITION);
        f.check(other.is_none(), || {
            format!("{name} has condition {OTHER_CONDITION}")
        });
    }
}

/// The agent, with its token bound to `node-a`: its annotations and its condition on
/// `node-a`, and nothing else.
async fn agent_admission(
    cluster: &RealCluster,
    ids: &Identities,
    policies: &Policies,
) -> Result<(), String> {
    const VALUE: &str = "real-access";
    // The agent writes a phase's annotations with its condition through nodes/status,
    // whose strategy keeps metadata changes (node-agent `report.rs`, `report_write`).
    const VIA_STATUS: &str = "real-access-via-status";
    let own: Vec<(&str, Option<&str>)> = protocol::AGENT_ANNOTATIONS
        .iter()
        .map(|k| (*k, Some(VALUE)))
        .collect();
    let denied = |about: &str, node: &str| -> Result<Expect, String> {
        Ok(Expect::DeniedByPolicy {
            policy: AGENT,
            message: policies.agent(about, node)?,
        })
    };
    let only_ours = || denied("only the annotations", "node-a");
    let ready = || condition(protocol::CONDITION_TYPE, "True");
    let cases = [
        case(
            "every agent annotation",
            "node-a",
            Write::Merge(annotations(&own)),
            Expect::Allowed,
        ),
        case(
            "removing its message annotation",
            "node-a",
            Write::Merge(annotations(&[(protocol::MESSAGE, None)])),
            Expect::Allowed,
        ),
        case(
            "its KubeletConfigReady condition",
            "node-a",
            Write::Status(ready()),
            Expect::Allowed,
        ),
        case(
            "its observed-config annotation with its condition, one nodes/status patch",
            "node-a",
            Write::Status(with_condition(
                annotations(&[(protocol::OBSERVED_CONFIG, Some(VIA_STATUS))]),
                ready(),
            )),
            Expect::Allowed,
        ),
        case(
            "annotation other.io/x with its condition, one nodes/status patch",
            "node-a",
            Write::Status(with_condition(
                annotations(&[(OTHER_ANNOTATION, Some("y"))]),
                ready(),
            )),
            only_ours()?,
        ),
        case(
            "its state annotation",
            "node-b",
            Write::Merge(annotations(&[(protocol::STATE, Some("Done"))])),
            denied("only the Node its pod runs on", "node-b")?,
        ),
        case(
            "its KubeletConfigReady condition",
            "node-b",
            Write::Status(ready()),
            denied("only the Node its pod runs on", "node-b")?,
        ),
        case(
            "a label",
            "node-a",
            Write::Merge(label_patch()),
            denied("labels", "node-a")?,
        ),
        case(
            "spec.unschedulable",
            "node-a",
            Write::Merge(cordon_patch()),
            denied("spec", "node-a")?,
        ),
        case(
            "annotation other.io/x",
            "node-a",
            Write::Merge(annotations(&[(OTHER_ANNOTATION, Some("y"))])),
            only_ours()?,
        ),
        case(
            "the reconciler's desired-config",
            "node-a",
            Write::Merge(annotations(&[(protocol::DESIRED_CONFIG, Some("x/y"))])),
            only_ours()?,
        ),
        case(
            "another condition",
            "node-a",
            Write::Status(condition(OTHER_CONDITION, "True")),
            denied("only the KubeletConfigReady condition", "node-a")?,
        ),
        case(
            "deleting the Node",
            "node-b",
            Write::Delete,
            Expect::DeniedByRbac {
                verb: "delete",
                resource: "nodes",
            },
        ),
    ];
    let mut f = Findings::default();
    writes(&ids.agent, AGENT_MANAGER, &cases, &mut f).await;

    // What the allowed writes left, and the denied ones did not.
    let a = Seen::get(cluster, "node-a").await?;
    for key in protocol::AGENT_ANNOTATIONS {
        let want = match *key {
            protocol::MESSAGE => None,
            protocol::OBSERVED_CONFIG => Some(VIA_STATUS),
            _ => Some(VALUE),
        };
        a.expect_annotation(key, want, &mut f);
    }
    a.expect_annotation(protocol::DESIRED_CONFIG, None, &mut f);
    let ours = a.condition(protocol::CONDITION_TYPE);
    f.check(ours == Some("True"), || {
        format!("node-a: condition {} is {ours:?}", protocol::CONDITION_TYPE)
    });
    let kubelets = a.condition("Ready");
    f.check(kubelets == Some("True"), || {
        format!("node-a: condition Ready is {kubelets:?}")
    });
    a.expect_untouched(&mut f);
    let b = Seen::get(cluster, "node-b").await?;
    b.expect_annotation(protocol::STATE, None, &mut f);
    let theirs = b.condition(protocol::CONDITION_TYPE);
    f.check(theirs.is_none(), || {
        format!(
            "node-b: condition {} is {theirs:?}",
            protocol::CONDITION_TYPE
        )
    });
    f.done()
}

/// The reconciler: its annotations on any Node, and nothing else. Runs after
/// [`agent_admission`], whose annotations on `node-a` it may not touch.
async fn reconciler_admission(
    cluster: &RealCluster,
    ids: &Identities,
    policies: &Policies,
) -> Result<(), String> {
    let value = |key: &str| match key {
        protocol::DESIRED_CONFIG => format!("{NAMESPACE}/kubelet-general-0123456789"),
        protocol::HEALTH_TIMEOUT => "2m".to_string(),
        protocol::LKG_GRACE => "10m".to_string(),
        _ => "general".to_string(),
    };
    let own: Vec<(&str, String)> = protocol::RECONCILER_ANNOTATIONS
        .iter()
        .map(|k| (*k, value(k)))
        .collect();
    let own_patch: Vec<(&str, Option<&str>)> =
        own.iter().map(|(k, v)| (*k, Some(v.as_str()))).collect();
    let denied = |about: &str| -> Result<Expect, String> {
        Ok(Expect::DeniedByPolicy {
            policy: RECONCILER,
            message: policies.reconciler(about, "node-a")?,
        })
    };
    let only_ours = || denied("only the annotations");
    let set_own = || Write::MergeMetadata(annotations(&own_patch));
    let cases = [
        case(
            "every reconciler annotation",
            "node-a",
            set_own(),
            Expect::Allowed,
        ),
        case(
            "every reconciler annotation",
            "node-b",
            set_own(),
            Expect::Allowed,
        ),
        case(
            "removing its pool annotation",
            "node-b",
            Write::MergeMetadata(annotations(&[(protocol::POOL, None)])),
            Expect::Allowed,
        ),
        case(
            "the agent's state annotation",
            "node-a",
            Write::MergeMetadata(annotations(&[(protocol::STATE, Some("Done"))])),
            only_ours()?,
        ),
        case(
            "removing the agent's current-config",
            "node-a",
            Write::MergeMetadata(annotations(&[(protocol::CURRENT_CONFIG, None)])),
            only_ours()?,
        ),
        case(
            "annotation other.io/x",
            "node-a",
            Write::MergeMetadata(annotations(&[(OTHER_ANNOTATION, Some("y"))])),
            only_ours()?,
        ),
        case(
            "a label",
            "node-a",
            Write::Merge(label_patch()),
            denied("labels")?,
        ),
        // A drain's cordon (controller/reconcile.rs: the annotations and the flag in one
        // patch), then its uncordon; the Node is left as it was.
        case(
            "a drain's cordon",
            "node-b",
            Write::MergeMetadata(json!({
                "metadata": {"annotations": {
                    protocol::DRAIN: value(protocol::DRAIN),
                    protocol::CORDONED: value(protocol::CORDONED),
                }},
                "spec": {"unschedulable": true},
            })),
            Expect::Allowed,
        ),
        case(
            "a drain's uncordon",
            "node-b",
            Write::MergeMetadata(json!({"spec": {"unschedulable": null}})),
            Expect::Allowed,
        ),
        case(
            "a taint",
            "node-a",
            Write::Merge(json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}})),
            denied("only spec.unschedulable")?,
        ),
        case(
            "the agent's condition",
            "node-a",
            Write::Status(condition(protocol::CONDITION_TYPE, "False")),
            Expect::DeniedByRbac {
                verb: "patch",
                resource: "nodes/status",
            },
        ),
    ];
    let mut f = Findings::default();
    writes(&ids.reconciler, RECONCILER_MANAGER, &cases, &mut f).await;

    for node in ["node-a", "node-b"] {
        let n = Seen::get(cluster, node).await?;
        for (key, v) in &own {
            let want = (node == "node-a" || *key != protocol::POOL).then_some(v.as_str());
            n.expect_annotation(key, want, &mut f);
        }
        n.expect_untouched(&mut f);
    }
    // The agent's report on node-a, as the agent left it.
    let a = Seen::get(cluster, "node-a").await?;
    a.expect_annotation(protocol::STATE, Some("real-access"), &mut f);
    a.expect_annotation(protocol::CURRENT_CONFIG, Some("real-access"), &mut f);
    let ours = a.condition(protocol::CONDITION_TYPE);
    f.check(ours == Some("True"), || {
        format!("node-a: condition {} is {ours:?}", protocol::CONDITION_TYPE)
    });
    f.done()
}

// ---------------------------------------------------------------------------------------
// The kubelet's API

/// What a kubelet answered.
struct Answer {
    code: u16,
    body: String,
}

impl Answer {
    /// The subresources the kubelet asked the API server about, from its 403 body:
    /// `Forbidden (user=..., verb=get, resource=nodes, subresource(s)=[configz proxy])`.
    fn subresources(&self) -> Option<Vec<String>> {
        let rest = self.body.split("subresource(s)=[").nth(1)?;
        let list = rest.split(']').next()?;
        Some(list.split_whitespace().map(str::to_string).collect())
    }
}

/// `GET https://127.0.0.1:<port>/<path>` with `token` (none: anonymous), trusting only
/// the cluster CA, as the agent's configz probe does.
async fn kubelet_get(
    http: &reqwest::Client,
    port: u16,
    path: &str,
    token: Option<&str>,
) -> Result<Answer, String> {
    let url = format!("https://127.0.0.1:{port}{path}");
    let mut req = http.get(&url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.map_err(|e| format!("GET {url}: {e:?}"))?;
    let code = resp.status().as_u16();
    let body = resp.text().await.map_err(|e| format!("GET {url}: {e:?}"))?;
    Ok(Answer { code, body })
}

/// The kubelets decide who reads their API by asking the API server (webhook
/// authentication and authorization): the agent's token reads `/configz`, the
/// reconciler's does not, and neither reads anything else. The 403 bodies name what the
/// kubelet asked for, which the checks pin down, so a change upstream shows here.
async fn kubelet_access(cluster: &RealCluster, ids: &Identities) -> Result<(), String> {
    let http = real::tls_client(cluster.ca(), None)
        .map_err(fail)?
        .timeout(Duration::from_secs(20))
        .build()
        .map_err(fail)?;
    let a = cluster.node("node-a").map_err(fail)?;
    let b = cluster.node("node-b").map_err(fail)?;
    let agent = Some(ids.agent_token.as_str());
    let reconciler = Some(ids.reconciler_token.as_str());
    let mut f = Findings::default();

    let got = kubelet_get(&http, a.port, "/configz", agent).await?;
    f.check(got.code == 200, || {
        format!("agent GET node-a /configz: {} {}", got.code, got.body)
    });
    if got.code == 200 {
        let v: Value = serde_json::from_str(&got.body).map_err(fail)?;
        let config = &v["kubeletconfig"];
        f.check(config["port"] == json!(a.port), || {
            format!(
                "node-a /configz: port {}, expected {}",
                config["port"], a.port
            )
        });
        f.check(config["authorization"]["mode"] == "Webhook", || {
            format!("node-a /configz: authorization {}", config["authorization"])
        });
    }

    let denied = |got: &Answer, who: &str, path: &str, asked: &[&str], f: &mut Findings| {
        let user =
            format!("user=system:serviceaccount:{NAMESPACE}:{who}, verb=get, resource=nodes");
        f.check(got.code == 403 && got.body.contains(&user), || {
            let (code, body) = (got.code, got.body.trim());
            format!("{who} GET {path}: expected 403 naming `{user}`, got {code} {body}")
        });
        let subresources = got.subresources();
        let want: Vec<String> = asked.iter().map(|s| s.to_string()).collect();
        f.check(subresources.as_ref() == Some(&want), || {
            let body = got.body.trim();
            format!(
                "{who} GET {path}: the kubelet asked about {subresources:?}, not {want:?}: {body}"
            )
        });
    };
    // A 1.36 kubelet asks for nodes/configz first (KubeletFineGrainedAuthz), then
    // nodes/proxy; the agent has the first only (the rbac step checks it), so its 200
    // above is the fine-grained permission at work.
    let got = kubelet_get(&http, a.port, "/configz", reconciler).await?;
    denied(
        &got,
        RECONCILER,
        "node-a /configz",
        &["configz", "proxy"],
        &mut f,
    );
    let got = kubelet_get(&http, a.port, "/pods", agent).await?;
    denied(&got, AGENT, "node-a /pods", &["pods", "proxy"], &mut f);
    let got = kubelet_get(&http, a.port, "/configz", None).await?;
    f.check(got.code == 401, || {
        format!("anonymous GET node-a /configz: {} {}", got.code, got.body)
    });
    // RBAC rules name no node: a token bound to node-a reads node-b's /configz too (the
    // admission policy narrows writes only). Pinned so that a change is noticed.
    let got = kubelet_get(&http, b.port, "/configz", agent).await?;
    f.check(got.code == 200, || {
        format!(
            "agent of node-a GET node-b /configz: {} {}",
            got.code, got.body
        )
    });
    f.done()
}

// ---------------------------------------------------------------------------------------
// Support

/// The upstream binaries, or `None` after printing why the test skips (a panic when
/// KUBELET_GITOPS_E2E_REQUIRE is set).
fn upstream(test: &str) -> Option<UpstreamBinaries> {
    UpstreamBinaries::locate_or_skip(&format!("real_access {test}"))
}

/// A test's directory: removed when the test passes, kept (and named) when it fails or
/// KUBELET_GITOPS_E2E_KEEP is set.
struct Workdir {
    dir: tempfile::TempDir,
    started: Instant,
}

impl Workdir {
    fn new(name: &str) -> Workdir {
        let dir = tempfile::Builder::new()
            .prefix(&format!("kubelet-gitops-real-{name}-"))
            .tempdir()
            .expect("creating the test directory");
        Workdir {
            dir,
            started: Instant::now(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn logs(&self) -> PathBuf {
        self.dir.path().join("logs")
    }

    fn finish(self, result: Result<(), String>) {
        let took = self.started.elapsed();
        let keep = result.is_err() || std::env::var(KEEP_ENV).is_ok_and(|v| !v.is_empty());
        let where_ = if keep {
            format!("; kept: {}", self.dir.keep().display())
        } else {
            String::new()
        };
        match result {
            Ok(()) => eprintln!("passed in {took:.1?}{where_}"),
            Err(e) => panic!("failed after {took:.1?}{where_}\n{e}"),
        }
    }
}

/// Labelled steps: each runs whatever the others did, and the test fails at the end
/// naming every step that failed.
#[derive(Default)]
struct Steps {
    failed: Vec<String>,
}

impl Steps {
    async fn run(&mut self, name: &str, step: impl Future<Output = Result<(), String>>) {
        let started = Instant::now();
        match step.await {
            Ok(()) => eprintln!("step `{name}`: ok ({:.1?})", started.elapsed()),
            Err(e) => {
                eprintln!("step `{name}`: FAILED ({:.1?})\n{e}", started.elapsed());
                self.failed.push(format!("step `{name}`:\n{e}"));
            }
        }
    }

    fn finish(self) -> Result<(), String> {
        if self.failed.is_empty() {
            Ok(())
        } else {
            Err(self.failed.join("\n"))
        }
    }
}

/// The failed checks of one step (every one is reported, not only the first).
#[derive(Default)]
struct Findings(Vec<String>);

impl Findings {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }

    fn fail(&mut self, what: String) {
        self.0.push(what);
    }

    fn done(self) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(format!("  - {}", self.0.join("\n  - ")))
        }
    }
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(what()) }
}

fn fail(e: impl Display) -> String {
    e.to_string()
}

/// A path of the repository, absolute.
fn repo_path(relative: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
        .display()
        .to_string()
}

/// What kubectl did.
struct Output {
    success: bool,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Output {
    /// Its stdout, or an error with everything it said.
    fn ok(self) -> Result<String, String> {
        if self.success {
            Ok(self.stdout)
        } else {
            Err(format!(
                "exit {:?}: {}{}",
                self.code,
                self.stderr.trim(),
                self.stdout.trim()
            ))
        }
    }
}

/// Runs `kubectl --kubeconfig=<kubeconfig> ARGS`, whatever its exit code.
async fn kubectl(kubeconfig: &Path, args: &[&str]) -> Result<Output, String> {
    let out = tokio::process::Command::new("kubectl")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("running kubectl {}: {e}", args.join(" ")))?;
    Ok(Output {
        success: out.status.success(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// A client with the identity of `kubeconfig`.
async fn client(kubeconfig: &Path) -> Result<Client, String> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).map_err(fail)?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(fail)?;
    Client::try_from(config).map_err(fail)
}

/// An object's kind, namespace and name.
type Identity = (String, Option<String>, String);

/// One object of a rendered kustomization.
struct Object {
    kind: String,
    namespace: Option<String>,
    name: String,
    object: Value,
}

impl Object {
    fn identity_of(v: &Value) -> Identity {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        (
            s(&v["kind"]),
            v["metadata"]["namespace"].as_str().map(str::to_string),
            s(&v["metadata"]["name"]),
        )
    }

    fn identity(&self) -> Identity {
        (self.kind.clone(), self.namespace.clone(), self.name.clone())
    }

    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// `kubectl kustomize <dir>`, one [`Object`] per document.
async fn render(dir: &str) -> Result<Vec<Object>, String> {
    let text = kubectl(Path::new("/dev/null"), &["kustomize", &repo_path(dir)])
        .await?
        .ok()?;
    text.split("\n---\n")
        .filter(|doc| !doc.trim().is_empty())
        .map(|doc| {
            let object: Value =
                serde_saphyr::from_str(doc).map_err(|e| format!("kubectl kustomize {dir}: {e}"))?;
            let (kind, namespace, name) = Object::identity_of(&object);
            Ok(Object {
                kind,
                namespace,
                name,
                object,
            })
        })
        .collect()
}
