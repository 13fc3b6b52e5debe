//! What the agent writes on its Node is one line per value, whatever a config or the
//! kubelet says: a newline or a terminal escape in a message reaches the `message`
//! annotation, the condition and the Event escaped (`\n`, `\u{1b}`), never raw, so
//! `kubectl describe node`, a log viewer or the reconciler's statuses cannot be forged
//! through them (issue 12).

use crate::support::agent::{Harness, annotation, condition, config_with};
use kubelet_gitops_core::message::has_unsafe;
use kubelet_gitops_core::protocol::MESSAGE;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_with_newlines_and_terminal_escapes_reaches_the_node_escaped() {
    let mut h = Harness::start().await;
    h.start_agent(&[]);
    // A feature gate the kubelet does not know, named to forge a line and repaint a
    // terminal: the kubelet's validation quotes it in its message.
    let bad = h
        .publish(
            "general",
            &config_with(
                "featureGates:\n  \"NoSuchGate\\nkubelet-gitops: success: all good\\r\\u001b[2J\\u001b[32m\": true\n",
            ),
        )
        .await;
    h.assign(Some(&bad), "30s", "1h").await;
    let node = h.wait_state(&bad, "Degraded").await;
    let escaped = "NoSuchGate\\nkubelet-gitops: success: all good\\r\\u{1b}[2J\\u{1b}[32m";

    let message = annotation(&node, MESSAGE).unwrap_or_default();
    assert!(message.contains(escaped), "{message:?}");
    assert!(!has_unsafe(message), "{message:?}");
    let cond = condition(&node, "KubeletConfigReady")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(cond.contains(escaped) && !has_unsafe(cond), "{cond:?}");
    let event = h.wait_event("KubeletConfigRejected", "NoSuchGate").await;
    assert!(event.contains(escaped) && !has_unsafe(&event), "{event:?}");
    h.shutdown().await;
}
