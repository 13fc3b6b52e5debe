//! An agent with nothing new to report asks nothing of the API server but its watches:
//! once its config is applied and reported, the kubelet's status reports, the resync and
//! its watches ending and being opened again (at their timeout, or cut by the server)
//! bring no write and no read (issue 15: at 100,000 nodes, one status write per node
//! every 5 minutes is 333 writes a second).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kubelet_gitops_sim::faults::FaultConfig;

use crate::support::NODE;
use crate::support::agent::{Harness, condition, config_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_agent_writes_nothing() {
    let mut h = Harness::start().await;
    // Resync every second (the harness's), each watch held 1 s by the server instead of
    // 30 minutes, the kubelet reporting its status every second instead of every 5
    // minutes.
    h.start_agent(&["--watch-timeout=1s"]);
    let cm = h
        .publish("general", &config_with("nodeStatusReportFrequency: 1s\n"))
        .await;
    h.assign(Some(&cm), "30s", "1h").await;
    h.wait_state(&cm, "Done").await;
    // Settled: the Done report and its Event are written.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let log = h.sim.request_log().clone();
    log.reset();
    // Half the watch events are the last of their watch: the server cuts the stream there
    // (as an API server restarting or shedding watches does).
    h.sim.set_faults(FaultConfig {
        seed: 15,
        drop_watch_rate: 0.5,
        ..FaultConfig::default()
    });
    let heartbeat = |h: &Harness| condition(&h.node(), "Ready")["lastHeartbeatTime"].clone();
    let first = heartbeat(&h);
    let mut reports = 0;
    let mut last = first.clone();
    let end = Instant::now() + Duration::from_secs(6);
    while Instant::now() < end {
        let now = heartbeat(&h);
        if now != last {
            reports += 1;
            last = now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    h.sim.set_faults(FaultConfig::default());
    assert!(
        reports >= 2,
        "the kubelet reported its status {reports} times in 6s"
    );
    let mut requests: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in log.entries() {
        requests.entry(e.verb.clone()).or_default().push(format!(
            "{} {:?} {} {}",
            e.resource,
            e.name,
            e.status,
            e.user_agent.as_deref().unwrap_or("(no User-Agent)")
        ));
    }
    let watches = requests.remove("watch").unwrap_or_default();
    assert!(
        requests.is_empty(),
        "an idle agent made other requests than watches over 6s (resync 1s, {reports} status reports of the kubelet, {} watches): {requests:?}",
        watches.len()
    );
    let agent = node_agent::agent::user_agent(NODE);
    assert!(
        watches.len() >= 4
            && watches
                .iter()
                .all(|w| w.starts_with("nodes ") && w.ends_with(&format!(" {agent}"))),
        "the Node watch was opened again at each timeout and cut, by the agent ({agent}): {watches:?}"
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
