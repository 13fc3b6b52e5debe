//! Scenario 5, revert: `git revert` of a change rolls the nodes back to the previous
//! ConfigMap: identical content gets the identical name, and since the old ConfigMap is
//! still there it is reused, not created again.

use kubelet_gitops_e2e::{Backend, E2e, E2eError, Options, both_backends};

both_backends!(a_reverted_change_returns_the_nodes_to_the_previous_configmap);

async fn a_reverted_change_returns_the_nodes_to_the_previous_configmap(
    backend: Backend,
) -> Result<(), E2eError> {
    let Some(mut e2e) = E2e::start("revert", Options::on(backend)).await? else {
        return Ok(());
    };
    let a = e2e.wait_converged().await?;
    let a_general = a.target("general").to_string();
    let a_name = a_general.rsplit('/').next().unwrap_or_default().to_string();
    let a_object = e2e.configmap(&a_name).await?;
    let a_data = e2e.kubelet("general-1")?.config()?;

    let mut general = e2e.pool("general")?;
    general.qps = 12;
    e2e.write_pool(&general)?;
    e2e.git().commit_and_push("general: kubeAPIQPS 12").await?;
    let b = e2e.wait_converged().await?;
    assert_ne!(b.target("general"), a_general);
    for node in e2e.pool_nodes("general") {
        assert_eq!(e2e.configz(&node).await?["kubeAPIQPS"], 12, "{node}");
    }

    let revert = e2e.git().revert_head().await?;
    let c = e2e.wait_converged().await?;
    assert_eq!(c.commit, revert);
    assert_eq!(
        c.target("general"),
        a_general,
        "the same name as before the change"
    );
    assert_eq!(c.targets, a.targets, "every pool back where it was");
    for node in e2e.pool_nodes("general") {
        assert_eq!(e2e.configz(&node).await?["kubeAPIQPS"], 11, "{node}");
        assert_eq!(
            e2e.kubelet(&node)?.config()?,
            a_data,
            "{node}: the same bytes"
        );
    }
    let again = e2e.configmap(&a_name).await?;
    assert_eq!(
        again.metadata.uid, a_object.metadata.uid,
        "the old ConfigMap was reused, not created again"
    );
    let general_cms = e2e
        .configmaps()
        .await?
        .into_iter()
        .filter(|cm| {
            cm.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("kubelet-general-"))
        })
        .count();
    assert_eq!(general_cms, 2, "one ConfigMap per distinct general config");

    e2e.finish().await
}
