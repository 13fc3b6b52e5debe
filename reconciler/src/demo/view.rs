//! What the demo shows about each node: the node protocol's annotations, read from the
//! simulated API server's store (reading it costs no API request and is not logged).

use kubelet_gitops_core::protocol::{
    CURRENT_CONFIG, DESIRED_CONFIG, LAST_KNOWN_GOOD, MESSAGE, OBSERVED_CONFIG, POOL, STATE,
};
use kubelet_gitops_sim::cluster::Sim;
use kubelet_gitops_sim::resources::kinds;
use kubelet_gitops_sim::store::ListOptions;
use serde_json::Value;

/// One node as the node protocol shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeView {
    pub name: String,
    /// The pool the reconciler assigned it to (`kubelet-gitops.io/pool`).
    pub pool: Option<String>,
    pub desired: Option<String>,
    pub observed: Option<String>,
    pub current: Option<String>,
    pub last_known_good: Option<String>,
    pub state: Option<String>,
    pub message: Option<String>,
}

impl NodeView {
    /// The view of a Node object.
    pub fn from_node(node: &Value) -> NodeView {
        let meta = &node["metadata"];
        let annotation = |key: &str| meta["annotations"][key].as_str().map(str::to_string);
        NodeView {
            name: meta["name"].as_str().unwrap_or_default().to_string(),
            pool: annotation(POOL),
            desired: annotation(DESIRED_CONFIG),
            observed: annotation(OBSERVED_CONFIG),
            current: annotation(CURRENT_CONFIG),
            last_known_good: annotation(LAST_KNOWN_GOOD),
            state: annotation(STATE),
            message: annotation(MESSAGE),
        }
    }

    /// Whether the node runs `target` (`<namespace>/<configmap>`) and its agent says Done.
    pub fn done_on(&self, target: &str) -> bool {
        self.desired.as_deref() == Some(target)
            && self.observed.as_deref() == Some(target)
            && self.current.as_deref() == Some(target)
            && self.state.as_deref() == Some("Done")
    }

    /// What the agent is doing with `target`, if the node was assigned it and has not
    /// settled yet: `Some("Verifying")`, or `Some("assigned")` before the agent reports.
    pub fn activity_on(&self, target: &str) -> Option<&str> {
        if self.desired.as_deref() != Some(target) || self.done_on(target) {
            return None;
        }
        if self.observed.as_deref() != Some(target) {
            return Some("assigned");
        }
        Some(self.state.as_deref().unwrap_or("assigned"))
    }
}

/// Every Node, sorted by name.
pub fn snapshot(sim: &Sim) -> Vec<NodeView> {
    let items = sim
        .store()
        .list(kinds::nodes(), None, &ListOptions::default())
        .map(|l| l.items)
        .unwrap_or_default();
    let mut nodes: Vec<NodeView> = items.iter().map(NodeView::from_node).collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    nodes
}

/// The ConfigMap name of a `<namespace>/<configmap>` reference (`local` stays `local`).
pub fn short(reference: &str) -> &str {
    reference.rsplit('/').next().unwrap_or(reference)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(annotations: Value) -> NodeView {
        NodeView::from_node(&json!({"metadata": {"name": "gpu-1", "annotations": annotations}}))
    }

    #[test]
    fn done_needs_every_annotation_on_the_target() {
        let t = "kubelet-gitops/kubelet-gpu-abc";
        let done = node(json!({
            DESIRED_CONFIG: t, OBSERVED_CONFIG: t, CURRENT_CONFIG: t, STATE: "Done",
        }));
        assert!(done.done_on(t));
        assert_eq!(done.activity_on(t), None);

        let verifying = node(json!({
            DESIRED_CONFIG: t, OBSERVED_CONFIG: t, CURRENT_CONFIG: "local", STATE: "Verifying",
        }));
        assert!(!verifying.done_on(t));
        assert_eq!(verifying.activity_on(t), Some("Verifying"));

        // Assigned, but the agent still reports about its previous config.
        let assigned = node(json!({
            DESIRED_CONFIG: t, OBSERVED_CONFIG: "kubelet-gitops/old", CURRENT_CONFIG: "kubelet-gitops/old", STATE: "Done",
        }));
        assert_eq!(assigned.activity_on(t), Some("assigned"));
        assert_eq!(assigned.activity_on("kubelet-gitops/other"), None);
    }

    #[test]
    fn short_names() {
        assert_eq!(short("kubelet-gitops/kubelet-gpu-abc"), "kubelet-gpu-abc");
        assert_eq!(short("local"), "local");
    }
}
