//! An agent with nothing new to report asks nothing of the API server: once its config is
//! applied and reported, the kubelet's status reports, the resync and the agent's watches
//! bring no write (issue 15: at 100,000 nodes, one status write per node every 5 minutes
//! is 333 writes a second).

use std::time::{Duration, Instant};

use crate::support::agent::{Harness, condition, config_with};

const WRITES: [&str; 4] = ["create", "update", "patch", "delete"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_agent_writes_nothing() {
    let mut h = Harness::start().await;
    // Resync every second (the harness's), the kubelet reporting its status every
    // second instead of every 5 minutes.
    h.start_agent(&[]);
    let cm = h
        .publish("general", &config_with("nodeStatusReportFrequency: 1s\n"))
        .await;
    h.assign(Some(&cm), "30s", "1h").await;
    h.wait_state(&cm, "Done").await;
    // Settled: the Done report and its Event are written.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let log = h.sim.request_log().clone();
    log.reset();
    let heartbeat = |h: &Harness| condition(&h.node(), "Ready")["lastHeartbeatTime"].clone();
    let first = heartbeat(&h);
    let mut reports = 0;
    let mut last = first.clone();
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        let now = heartbeat(&h);
        if now != last {
            reports += 1;
            last = now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        reports >= 2,
        "the kubelet reported its status {reports} times in 5s"
    );
    let writes: Vec<String> = log
        .entries()
        .iter()
        .filter(|e| WRITES.contains(&e.verb.as_str()))
        .map(|e| format!("{} {} {:?}", e.verb, e.resource, e.name))
        .collect();
    assert!(
        writes.is_empty(),
        "an idle agent wrote over 5s (resync 1s, {reports} status reports of the kubelet): {writes:?}"
    );
    let node = h.node();
    assert_eq!(
        condition(&node, "KubeletConfigReady")["reason"],
        "Done",
        "the agent's condition is still on the Node: {}",
        node["status"]["conditions"]
    );
    h.shutdown().await;
}
