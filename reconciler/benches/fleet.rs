//! The reconciler's node model at 100,000 nodes and 1,000 pools, in process (no API
//! server): what a node costs in memory, what a Node event costs, and what planning
//! costs when little changed.
//!
//! Each node looks like an EKS node (20 labels: host name, zone, instance type, node
//! group ...; its Node object as the watch sends it is about 9 KiB of JSON with
//! managedFields, 6 conditions and 20 images), is Done on its pool's config (all eight
//! protocol annotations and an agent's set-up report), and belongs to one of 1,000 pools
//! selecting `eks.amazonaws.com/nodegroup`.
//!
//! Figures:
//! - heap bytes per node, measured by a counting allocator (`cap`): the [`Fleet`] (what `run`
//!   keeps since issue 15) against what it kept before (kube's reflector store of the
//!   slimmed `PartialObjectMeta<Node>` plus a `NodeInfo` of `BTreeMap`s per node);
//! - a status heartbeat (nothing the reconciler reads changed): the watch event decoded
//!   from its JSON and handed to the fleet, and the hand-over alone, per event;
//! - a label change (a node moves pool) and an agent report (an annotation), each
//!   followed by the plan of the round;
//! - planning with nothing changed; a new commit changing one pool's config; one
//!   changing a selector (every node placed again); the first plan of the whole fleet.
//!
//! Run: `cargo bench -p reconciler --bench fleet` (`FLEET_NODES`, `FLEET_POOLS` to resize;
//! about 3 minutes, most of it generating the Nodes' JSON). Prints a table. Figures on the
//! project's 2-core machine (release build, load average 3 to 4 from other builds):
//!
//! | measure (100,000 nodes, 1,000 pools) | figure | target (issue 15) |
//! | --- | --- | --- |
//! | heap per node, before: reflector store + `NodeInfo` of maps | 9,383 B | |
//! | heap per node, the fleet (shared strings) | 1,375 B (131 MiB in all) | < 2 KiB |
//! | heartbeat event: decode the JSON + hand over | 58.9 µs (17,000/s) | 10,000/s |
//! | heartbeat event: hand over only | 12.9 µs (77,000/s) | |
//! | plan, nothing changed | 0.63 ms | |
//! | agent report (1 node) + plan | 1.7 ms | |
//! | label change (1 node moves pool) + plan | 2.6 ms | |
//! | new commit, 1 pool's config changed: set pools + plan | 3.4 ms | |
//! | new commit, a selector changed: place all + plan all | 0.97 s | |
//! | first plan of the whole fleet | 0.70 s | |

use std::alloc::System;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use cap::Cap;
use k8s_openapi::api::core::v1::Node;
use kube::api::PartialObjectMeta;
use kube::core::WatchEvent;
use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use kubelet_gitops_core::node_setup::{NodeSetup, REPORT_VERSION};
use kubelet_gitops_core::protocol::{
    CURRENT_CONFIG, ConfigRef, DESIRED_CONFIG, HEALTH_TIMEOUT, LAST_KNOWN_GOOD, LKG_GRACE,
    NODE_SETUP, OBSERVED_CONFIG, POOL, STATE,
};
use reconciler::fleet::{Fleet, is_protocol_key};
use reconciler::model::{LabelSelector, PoolSpec, Rollout};
use reconciler::rollout::PoolTarget;
use serde_json::{Value, json};

/// Counts the bytes in use (the `cap` crate: the workspace forbids `unsafe`).
#[global_allocator]
static ALLOC: Cap<System> = Cap::new(System, usize::MAX);

fn live() -> isize {
    ALLOC.allocated() as isize
}

const NS: &str = "kubelet-gitops";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pool_name(i: usize) -> String {
    format!("ng-{i:04}")
}

fn configmap(pool: usize, version: u32) -> String {
    format!("kubelet-{}-{version:010x}", pool_name(pool))
}

/// A Node as the API server sends it in a watch event.
fn node_json(i: usize, pools: usize) -> Value {
    let pool = i % pools;
    let host = format!(
        "ip-10-{}-{}-{}.eu-west-1.compute.internal",
        i >> 16,
        (i >> 8) & 255,
        i & 255
    );
    let zone = ["eu-west-1a", "eu-west-1b", "eu-west-1c"][i % 3];
    let itype = ["m7i.2xlarge", "c7g.4xlarge", "r7i.8xlarge", "g6.12xlarge"][pool % 4];
    let cm = ConfigRef::configmap(NS, configmap(pool, 1)).to_string();
    let setup = NodeSetup {
        version: REPORT_VERSION,
        flags: vec![
            "--node-ip=10.0.0.1".into(),
            "--max-pods=110".into(),
            format!(
                "--node-labels=eks.amazonaws.com/nodegroup={}",
                pool_name(pool)
            ),
        ],
        runtime_cgroup_driver: Some("systemd".into()),
        cgroup_version: Some("v2".into()),
        ..NodeSetup::default()
    }
    .to_annotation();
    let condition = |t: &str, s: &str| {
        json!({"type": t, "status": s, "lastHeartbeatTime": "2026-11-27T10:00:00Z",
               "lastTransitionTime": "2026-11-01T10:00:00Z", "reason": format!("Kubelet{t}"),
               "message": format!("kubelet has {t} condition {s}")})
    };
    let images: Vec<Value> = (0..20)
        .map(|k| json!({"names": [format!("602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/image-{k}@sha256:{:064x}", k), format!("602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/image-{k}:v1.{k}.0")], "sizeBytes": 30_000_000 + k}))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": host,
            "uid": format!("{:08x}-0000-4000-8000-{:012x}", i, i),
            "resourceVersion": format!("{}", 1_000_000 + i),
            "creationTimestamp": "2026-11-01T10:00:00Z",
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": itype,
                "beta.kubernetes.io/os": "linux",
                "eks.amazonaws.com/capacityType": "ON_DEMAND",
                "eks.amazonaws.com/nodegroup": pool_name(pool),
                "eks.amazonaws.com/nodegroup-image": "ami-0123456789abcdef0",
                "eks.amazonaws.com/sourceLaunchTemplateId": format!("lt-{:017x}", pool),
                "eks.amazonaws.com/sourceLaunchTemplateVersion": "1",
                "failure-domain.beta.kubernetes.io/region": "eu-west-1",
                "failure-domain.beta.kubernetes.io/zone": zone,
                "k8s.io/cloud-provider-aws": "0123456789abcdef0123456789abcdef",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": host,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": itype,
                "topology.ebs.csi.aws.com/zone": zone,
                "topology.k8s.aws/zone-id": format!("euw1-az{}", i % 3 + 1),
                "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": zone,
                "team": format!("team-{}", pool % 40),
            },
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": "10.0.0.1",
                "csi.volume.kubernetes.io/nodeid": format!("{{\"ebs.csi.aws.com\":\"i-{:017x}\"}}", i),
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                DESIRED_CONFIG: cm,
                HEALTH_TIMEOUT: "2m",
                LKG_GRACE: "10m",
                POOL: pool_name(pool),
                OBSERVED_CONFIG: cm,
                CURRENT_CONFIG: cm,
                LAST_KNOWN_GOOD: cm,
                STATE: "Done",
                NODE_SETUP: setup,
            },
            "managedFields": [
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-11-27T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/hostname": {}}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-11-27T10:00:00Z", "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {"f:lastHeartbeatTime": {}}}}}},
                {"manager": "kubelet-gitops-reconciler", "operation": "Update", "apiVersion": "v1", "time": "2026-11-27T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {"f:kubelet-gitops.io/desired-config": {}}}}}
            ]
        },
        "spec": {"providerID": format!("aws:///{zone}/i-{:017x}", i)},
        "status": {
            "capacity": {"cpu": "8", "memory": "32386544Ki", "pods": "110", "ephemeral-storage": "104845292Ki"},
            "allocatable": {"cpu": "7910m", "memory": "31369712Ki", "pods": "110", "ephemeral-storage": "95551679124"},
            "conditions": [condition("MemoryPressure", "False"), condition("DiskPressure", "False"), condition("PIDPressure", "False"), condition("Ready", "True"), condition("KubeletConfigReady", "True"), condition("NetworkUnavailable", "False")],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": host}, {"type": "InternalDNS", "address": host}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": format!("{:032x}", i), "systemUUID": format!("{:032x}", i), "bootID": format!("{:032x}", i), "kernelVersion": "6.1.112-124.190.amzn2023.x86_64", "osImage": "Amazon Linux 2023.6.20241121", "containerRuntimeVersion": "containerd://1.7.23", "kubeletVersion": "v1.36.3-eks-1234567", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
            "images": images
        }
    })
}

fn specs(pools: usize) -> Vec<PoolSpec> {
    (0..pools)
        .map(|i| PoolSpec {
            name: pool_name(i),
            source_path: format!("pools/{}.yaml", pool_name(i)),
            selector: LabelSelector {
                match_labels: BTreeMap::from([(
                    "eks.amazonaws.com/nodegroup".to_string(),
                    pool_name(i),
                )]),
                match_expressions: Vec::new(),
            },
            priority: 0,
            rollout: Rollout::default(),
        })
        .collect()
}

fn targets<'a>(specs: &'a [PoolSpec], versions: &[u32]) -> Vec<PoolTarget<'a>> {
    specs
        .iter()
        .enumerate()
        .map(|(i, spec)| PoolTarget {
            spec,
            target: ConfigRef::configmap(NS, configmap(i, versions[i])),
            target_created: Some("2026-11-01T09:00:00Z".into()),
            class: None,
            wave_opened: None,
        })
        .collect()
}

fn meta_of(json: &Value) -> PartialObjectMeta<Node> {
    serde_json::from_value(json.clone()).expect("node metadata")
}

/// The node as `run` kept it before issue 15: the reflector store's slimmed metadata and
/// a planning copy of maps.
#[allow(dead_code)]
struct OldNode {
    name: String,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    created: Option<String>,
    resource_version: Option<String>,
    setup: Option<String>,
}

/// The time of one of `n` operations that took `total`.
fn each(total: Duration, n: usize) -> Duration {
    total / n.max(1) as u32
}

fn main() {
    let nodes = env_usize("FLEET_NODES", 100_000);
    let pools = env_usize("FLEET_POOLS", 1_000);
    println!(
        "fleet bench: {nodes} nodes, {pools} pools (each node's Node JSON: {} bytes)",
        serde_json::to_string(&node_json(0, pools)).unwrap().len()
    );
    let specs = specs(pools);
    let mut versions = vec![1u32; pools];
    let mut rows: Vec<(String, String)> = Vec::new();

    // Memory before: reflector store + NodeInfo of maps.
    let old_bytes = {
        let base = live();
        let (reader, mut writer) = reflector::store::<PartialObjectMeta<Node>>();
        let mut old = Vec::with_capacity(nodes);
        writer.apply_watcher_event(&Event::Init);
        for i in 0..nodes {
            let mut meta = meta_of(&node_json(i, pools));
            meta.metadata.managed_fields = None;
            if let Some(a) = meta.metadata.annotations.as_mut() {
                a.retain(|k, _| is_protocol_key(k));
            }
            let m = &meta.metadata;
            old.push(OldNode {
                name: m.name.clone().unwrap_or_default(),
                labels: m.labels.clone().unwrap_or_default(),
                annotations: m
                    .annotations
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|(k, _)| k != NODE_SETUP)
                    .collect(),
                created: m.creation_timestamp.as_ref().map(|t| t.0.to_string()),
                resource_version: m.resource_version.clone(),
                setup: m
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(NODE_SETUP))
                    .cloned(),
            });
            writer.apply_watcher_event(&Event::InitApply(meta));
        }
        writer.apply_watcher_event(&Event::InitDone);
        black_box(reader.len());
        let bytes = live() - base;
        drop(old);
        drop(reader);
        drop(writer);
        bytes
    };

    // The fleet, built from the same events.
    let base = live();
    let mut fleet = Fleet::new();
    fleet.set_pools(NS, &targets(&specs, &versions));
    for i in 0..nodes {
        let meta = meta_of(&node_json(i, pools));
        fleet.upsert_meta(&meta, Instant::now());
    }
    let started = Instant::now();
    let plan = fleet.plan(jiff::Timestamp::UNIX_EPOCH, &Default::default());
    let first_plan = started.elapsed();
    assert!(
        plan.actions.is_empty(),
        "every node is Done on its pool's config"
    );
    assert_eq!(plan.pools.len(), pools);
    drop(plan);
    let fleet_bytes = live() - base;
    rows.push((
        "heap per node: before (reflector store + NodeInfo of maps)".into(),
        format!("{:.0} B", old_bytes as f64 / nodes as f64),
    ));
    rows.push((
        "heap per node: the fleet (shared strings)".into(),
        format!("{:.0} B", fleet_bytes as f64 / nodes as f64),
    ));
    rows.push((
        "the fleet: all nodes".into(),
        format!("{:.1} MiB", fleet_bytes as f64 / 1_048_576.0),
    ));
    rows.push((
        "first plan of the whole fleet".into(),
        format!("{first_plan:.2?}"),
    ));

    // Heartbeats: the same node, a new resourceVersion and heartbeat time.
    let sample = 10_000.min(nodes);
    let events: Vec<String> = (0..sample)
        .map(|i| {
            let mut n = node_json(i * (nodes / sample), pools);
            n["metadata"]["resourceVersion"] = json!(format!("{}", 2_000_000 + i));
            n["status"]["conditions"][3]["lastHeartbeatTime"] = json!("2026-11-27T10:05:00Z");
            serde_json::to_string(&json!({"type": "MODIFIED", "object": n})).unwrap()
        })
        .collect();
    let started = Instant::now();
    let mut news = 0;
    for e in &events {
        let event: WatchEvent<PartialObjectMeta<Node>> = serde_json::from_str(e).expect("event");
        if let WatchEvent::Modified(meta) = event {
            news += usize::from(fleet.upsert_meta(&meta, Instant::now()));
        }
    }
    let decoded = started.elapsed();
    assert_eq!(news, 0, "a heartbeat is not news");
    let metas: Vec<PartialObjectMeta<Node>> = events
        .iter()
        .map(|e| match serde_json::from_str(e).unwrap() {
            WatchEvent::Modified(m) => m,
            _ => unreachable!(),
        })
        .collect();
    let started = Instant::now();
    for m in &metas {
        fleet.upsert_meta(m, Instant::now());
    }
    let handed = started.elapsed();
    assert_eq!(fleet.marked_pools(), 0);
    let d = each(decoded, sample);
    rows.push((
        "heartbeat event: decode JSON + hand over".into(),
        format!("{d:.2?} ({:.0}/s)", 1.0 / d.as_secs_f64()),
    ));
    let d = each(handed, sample);
    rows.push((
        "heartbeat event: hand over only".into(),
        format!("{d:.2?} ({:.0}/s)", 1.0 / d.as_secs_f64()),
    ));

    // Idle planning.
    let started = Instant::now();
    let rounds = 100;
    for _ in 0..rounds {
        black_box(fleet.plan(jiff::Timestamp::UNIX_EPOCH, &Default::default()));
    }
    let d = each(started.elapsed(), rounds);
    rows.push(("plan, nothing changed".into(), format!("{d:.2?}")));

    // An agent report: one annotation, then the round's plan.
    let started = Instant::now();
    for i in 0..rounds {
        let mut n = node_json(i * 7, pools);
        n["metadata"]["annotations"][STATE] = json!("Verifying");
        assert!(fleet.upsert_meta(&meta_of(&n), Instant::now()));
        black_box(fleet.plan(jiff::Timestamp::UNIX_EPOCH, &Default::default()));
    }
    let d = each(started.elapsed(), rounds);
    rows.push(("agent report (1 node) + plan".into(), format!("{d:.2?}")));

    // A node moves pool.
    let started = Instant::now();
    for i in 0..rounds {
        let mut n = node_json(i * 13, pools);
        n["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] =
            json!(pool_name((i * 13 + 1) % pools));
        assert!(fleet.upsert_meta(&meta_of(&n), Instant::now()));
        black_box(fleet.plan(jiff::Timestamp::UNIX_EPOCH, &Default::default()));
    }
    let d = each(started.elapsed(), rounds);
    rows.push((
        "label change (1 node moves pool) + plan".into(),
        format!("{d:.2?}"),
    ));

    // A new commit: one pool's config changes.
    let started = Instant::now();
    for i in 0..rounds {
        versions[i % pools] += 1;
        fleet.set_pools(NS, &targets(&specs, &versions));
        let plan = fleet.plan(jiff::Timestamp::UNIX_EPOCH, &Default::default());
        assert!(!plan.actions.is_empty());
    }
    let d = each(started.elapsed(), rounds);
    rows.push((
        "new commit, 1 pool's config changed: set pools + plan".into(),
        format!("{d:.2?}"),
    ));

    // A new commit changing a selector: every node placed again.
    let mut respecs = specs.clone();
    respecs[0]
        .selector
        .match_labels
        .insert("team".into(), "team-0".into());
    let started = Instant::now();
    fleet.set_pools(NS, &targets(&respecs, &versions));
    black_box(fleet.plan(jiff::Timestamp::UNIX_EPOCH, &Default::default()));
    rows.push((
        "new commit, a selector changed: place all + plan all".into(),
        format!("{:.2?}", started.elapsed()),
    ));

    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    println!();
    for (k, v) in &rows {
        println!("| {k:width$} | {v:>24} |");
    }
}
