//! Fault injection: seeded and deterministic (same seed, same codes), 429 with
//! Retry-After, 500, 409 on writes only, dropped watch streams, latency, and changing
//! faults at run time.

use std::time::{Duration, Instant};

use crate::support::api::{RawWatch, Sim, configmap, node};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kubelet_gitops_sim::faults::FaultConfig;
use serde_json::json;

fn faulty(seed: u64) -> FaultConfig {
    FaultConfig {
        seed,
        error_500_rate: 0.15,
        throttle_429_rate: 0.15,
        retry_after_seconds: 2,
        conflict_409_rate_on_writes: 0.25,
        ..FaultConfig::default()
    }
}

/// A fixed sequence of reads and writes; returns (verb, code) per request.
async fn run_sequence(sim: &Sim) -> Vec<(&'static str, u16)> {
    let mut codes = Vec::new();
    for i in 0..60 {
        let (verb, r) = match i % 4 {
            0 => (
                "create",
                sim.send_json(
                    "POST",
                    "/api/v1/namespaces/default/configmaps",
                    "application/json",
                    &configmap("default", &format!("c{i}"), &[]),
                )
                .await,
            ),
            1 => (
                "get",
                sim.get("/api/v1/namespaces/default/configmaps/c0").await,
            ),
            2 => (
                "list",
                sim.get("/api/v1/namespaces/default/configmaps").await,
            ),
            _ => (
                "patch",
                sim.send_json(
                    "PATCH",
                    "/api/v1/namespaces/default/configmaps/c0",
                    "application/merge-patch+json",
                    &json!({"data": {"i": i.to_string()}}),
                )
                .await,
            ),
        };
        match r.status {
            429 => {
                assert_eq!(r.header("retry-after"), Some("2"));
                let s = r.json();
                assert_eq!(s["reason"], "TooManyRequests");
                assert_eq!(s["details"]["retryAfterSeconds"], 2);
            }
            500 => assert_eq!(r.json()["reason"], "InternalError"),
            409 if verb == "patch" => {
                let s = r.json();
                assert_eq!(s["reason"], "Conflict");
                assert_eq!(
                    s["message"],
                    "Operation cannot be fulfilled on configmaps \"c0\": the object has been modified; please apply your changes to the latest version and try again"
                );
            }
            _ => {}
        }
        codes.push((verb, r.status));
    }
    codes
}

#[tokio::test]
async fn same_seed_same_sequence_of_codes() {
    let a = Sim::start_with_faults(faulty(7)).await;
    let b = Sim::start_with_faults(faulty(7)).await;
    let c = Sim::start_with_faults(faulty(8)).await;
    let codes_a = run_sequence(&a).await;
    let codes_b = run_sequence(&b).await;
    let codes_c = run_sequence(&c).await;
    assert_eq!(codes_a, codes_b, "same seed, same codes");
    assert_ne!(codes_a, codes_c, "another seed, other codes");
    for code in [429, 500, 409] {
        assert!(
            codes_a.iter().any(|(_, c)| *c == code),
            "{code} never injected: {codes_a:?}"
        );
    }
    // 409 only on writes (reads cannot conflict).
    assert!(
        codes_a
            .iter()
            .all(|(v, c)| *c != 409 || matches!(*v, "create" | "patch"))
    );
    // Each faulted request is in the log with its code.
    let logged: Vec<u16> = a.server.log.entries().iter().map(|e| e.status).collect();
    assert_eq!(logged, codes_a.iter().map(|(_, c)| *c).collect::<Vec<_>>());

    // set_faults at run time: none, then the seed again, which restarts the same
    // fault sequence (429s and 500s at the same positions, though the store changed).
    let d = Sim::start().await;
    let clean = run_sequence(&d).await;
    assert!(
        clean.iter().all(|(_, c)| matches!(c, 200 | 201)),
        "{clean:?}"
    );
    d.server.set_faults(faulty(7));
    assert_eq!(d.server.faults(), faulty(7));
    let again = run_sequence(&d).await;
    let injected = |codes: &[(&str, u16)]| -> Vec<(usize, u16)> {
        codes
            .iter()
            .enumerate()
            .filter(|(_, (_, c))| matches!(c, 429 | 500))
            .map(|(i, (_, c))| (i, *c))
            .collect()
    };
    assert_eq!(injected(&again), injected(&codes_a));
}

#[tokio::test]
async fn kube_client_sees_injected_errors() {
    let sim = Sim::start_with_faults(FaultConfig {
        seed: 1,
        error_500_rate: 1.0,
        ..FaultConfig::default()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client().await, "default");
    match cms.get("x").await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 500);
            assert_eq!(s.reason, "InternalError");
        }
        other => panic!("expected a 500, got {other:?}"),
    }
    sim.server.set_faults(FaultConfig::default());
    match cms.get("x").await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 404),
        other => panic!("expected a 404, got {other:?}"),
    }
}

#[tokio::test]
async fn dropped_watch_streams() {
    let sim = Sim::start().await;
    for i in 0..5 {
        sim.send_json(
            "POST",
            "/api/v1/nodes",
            "application/json",
            &node(&format!("n{i}")),
        )
        .await;
    }
    sim.server.set_faults(FaultConfig {
        seed: 3,
        drop_watch_rate: 1.0,
        ..FaultConfig::default()
    });
    let mut w = RawWatch::open(
        sim.addr(),
        "/api/v1/nodes?watch=true&timeoutSeconds=60",
        &[],
    )
    .await;
    assert_eq!(w.status, 200);
    let ev = w
        .next_event(Duration::from_secs(10))
        .await
        .expect("one event");
    assert_eq!(ev["type"], "ADDED");
    assert!(
        w.ended_within(Duration::from_secs(5)).await,
        "stream dropped right after the first event"
    );

    // Without drops all five initial events arrive and the stream stays open.
    sim.server.set_faults(FaultConfig::default());
    let mut w = RawWatch::open(
        sim.addr(),
        "/api/v1/nodes?watch=true&timeoutSeconds=60",
        &[],
    )
    .await;
    for _ in 0..5 {
        assert!(w.next_event(Duration::from_secs(10)).await.is_some());
    }
    assert!(!w.ended_within(Duration::from_millis(300)).await);
}

#[tokio::test]
async fn added_latency() {
    let sim = Sim::start_with_faults(FaultConfig {
        seed: 4,
        latency: Duration::from_millis(150),
        latency_jitter: Duration::from_millis(50),
        ..FaultConfig::default()
    })
    .await;
    let started = Instant::now();
    let r = sim.get("/api/v1/nodes").await;
    let took = started.elapsed();
    assert_eq!(r.status, 200);
    assert!(took >= Duration::from_millis(150), "took {took:?}");
    // Health and discovery are not delayed.
    let started = Instant::now();
    assert_eq!(sim.get("/healthz").await.status, 200);
    assert!(started.elapsed() < Duration::from_millis(150));
}
