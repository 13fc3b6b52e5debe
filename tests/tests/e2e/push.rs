//! Scenario 1, push: the first commit rolls every pool out, and so does a later push.
//! Every node ends Done on its pool's ConfigMap, each ConfigMap is named as
//! `kubectl create configmap --append-hash` names it, and every kubelet's `/configz`
//! shows the pool's values.

use kubelet_gitops_core::decode::decode_kubelet_configuration;
use kubelet_gitops_core::protocol;
use kubelet_gitops_e2e::{Backend, Converged, E2e, E2eError, Options, both_backends};

both_backends!(a_push_rolls_every_pool_out);

async fn a_push_rolls_every_pool_out(backend: Backend) -> Result<(), E2eError> {
    let Some(mut e2e) = E2e::start("push", Options::on(backend)).await? else {
        return Ok(());
    };

    // The first commit was pushed before the reconciler started.
    let first = e2e.wait_converged().await?;
    check_pools(&e2e, &first, &[("general", 11), ("gpu", 21), ("infra", 31)]).await?;

    // A push while everything runs, changing every pool.
    for (pool, qps) in [("general", 12), ("gpu", 22), ("infra", 32)] {
        let mut p = e2e.pool(pool)?;
        p.qps = qps;
        e2e.write_pool(&p)?;
    }
    let pushed = e2e
        .git()
        .commit_and_push("raise kubeAPIQPS everywhere")
        .await?;
    let second = e2e.wait_converged().await?;
    assert_eq!(second.commit, pushed);
    check_pools(
        &e2e,
        &second,
        &[("general", 12), ("gpu", 22), ("infra", 32)],
    )
    .await?;
    for pool in ["general", "gpu", "infra"] {
        assert_ne!(
            first.target(pool),
            second.target(pool),
            "{pool} got a new ConfigMap"
        );
    }
    // One ConfigMap per pool and distinct config: nothing created twice.
    let mut names: Vec<String> = e2e
        .configmaps()
        .await?
        .into_iter()
        .filter_map(|cm| cm.metadata.name)
        .collect();
    names.sort();
    let mut want: Vec<String> = first
        .targets
        .values()
        .chain(second.targets.values())
        .map(|t| configmap_of(t).to_string())
        .collect();
    want.sort();
    assert_eq!(names, want);

    e2e.finish().await
}

fn configmap_of(target: &str) -> &str {
    target.rsplit('/').next().unwrap_or(target)
}

/// Each pool's ConfigMap carries the pool's `kubeAPIQPS`, is immutable, labelled,
/// annotated with its commit and named by its content; each node of the pool runs it.
async fn check_pools(
    e2e: &E2e,
    converged: &Converged,
    want: &[(&str, i32)],
) -> Result<(), E2eError> {
    for &(pool, qps) in want {
        let target = converged.target(pool);
        let name = configmap_of(target);
        let cm = e2e.configmap(name).await?;
        assert_eq!(cm.immutable, Some(true), "{name} is immutable");
        let labels = cm.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get(protocol::POOL_LABEL).map(String::as_str),
            Some(pool)
        );
        let annotations = cm.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.get(protocol::SOURCE_COMMIT),
            Some(&converged.commit),
            "{name} names its commit"
        );
        let data = cm
            .data
            .as_ref()
            .and_then(|d| d.get(protocol::CONFIGMAP_KEY))
            .cloned()
            .unwrap_or_default();
        assert_eq!(name, protocol::configmap_name(pool, data.as_bytes()));
        if let Some(kubectl_name) = kubectl_configmap_name(e2e, pool, &data).await? {
            assert_eq!(name, kubectl_name, "the name kubectl --append-hash gives");
        }
        let (config, _) = decode_kubelet_configuration(name, data.as_bytes())
            .unwrap_or_else(|e| panic!("{name} is not a valid KubeletConfiguration: {e}"));
        assert_eq!(config.kube_api_qps, Some(qps), "{name}");

        // Each agent read its node under its host root (the node's root) and found what
        // a node has there, containerd's socket and resolv.conf included: its Done
        // message carries no pre-flight warning.
        let nodes = e2e.nodes().await?;
        for node in e2e.pool_nodes(pool) {
            let message = nodes
                .get(&node)
                .and_then(|n| n.message.clone())
                .unwrap_or_default();
            assert!(!message.contains("warning:"), "{node}: {message}");
        }

        for node in e2e.pool_nodes(pool) {
            let configz = e2e.configz(&node).await?;
            assert_eq!(configz["kubeAPIQPS"], qps, "configz of {node}");
            assert_eq!(
                e2e.kubelet(&node)?.config()?,
                data,
                "{node} runs exactly {name}"
            );
        }
    }
    Ok(())
}

/// The name `kubectl create configmap kubelet-<pool> --from-file=kubelet=... --append-hash`
/// gives `data`, or `None` (said on stderr) where kubectl is not installed.
async fn kubectl_configmap_name(
    e2e: &E2e,
    pool: &str,
    data: &str,
) -> Result<Option<String>, E2eError> {
    let file = e2e.dir().join(format!("rendered-{pool}.yaml"));
    std::fs::write(&file, data).map_err(E2eError::io("writing the rendered config"))?;
    let out = tokio::process::Command::new("kubectl")
        .arg(format!("--kubeconfig={}", e2e.kubeconfig.display()))
        .args(["create", "configmap", &format!("kubelet-{pool}")])
        .arg(format!("--from-file=kubelet={}", file.display()))
        .args(["--append-hash", "--dry-run=client", "-o", "name"])
        .output()
        .await;
    match out {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("kubectl is not installed: the name is checked against core only");
            Ok(None)
        }
        Err(e) => Err(E2eError::io("running kubectl")(e)),
        Ok(o) if o.status.success() => Ok(Some(
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .trim_start_matches("configmap/")
                .to_string(),
        )),
        Ok(o) => Err(E2eError::Command {
            command: "kubectl create configmap --append-hash".into(),
            detail: String::from_utf8_lossy(&o.stderr).into_owned(),
        }),
    }
}
