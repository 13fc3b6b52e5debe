//! kubelet: restarting and probing the sim's stand-in kubelet over HTTP (restart with
//! `curl -fsS -X POST <sim>/sim/v1/nodes/<node>/kubelet/restart`), and the HTTP client's
//! token and error handling against a scripted server.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::host::{config, handle, kubelet_client, node_context, start_sim};
use kubelet_gitops_core::atomic::write_atomic;
use kubelet_gitops_core::configz::configz_diff;
use kubelet_gitops_sim::kubelet::KubeletPhase;
use node_agent::error::KubeletError;
use node_agent::kubelet::{Kubelet, KubeletSettings, RecordingRestarter, RestartMethod};
use node_agent::validate::effective_config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn healthz_and_configz_of_a_running_stand_in() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(dir.path(), Some("--max-pods=30"), true).await;
    let kubelet = kubelet_client(&sim);
    kubelet.healthz().await.unwrap();
    let configz = kubelet.configz().await.unwrap();
    assert_eq!(configz["maxPods"], 30);
    assert_eq!(configz["cgroupDriver"], "systemd");

    // What the agent computes as the node's effective config is exactly what the
    // stand-in runs with: no difference at all.
    let ctx = node_context(&sim);
    let ours = effective_config(None, &ctx).unwrap().config;
    assert_eq!(configz_diff(&ours, &configz), []);
    sim.shutdown().await;
}

#[tokio::test]
async fn restart_then_wait_ready_sees_the_new_config() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(dir.path(), None, true).await;
    let k = handle(&sim);
    let kubelet = kubelet_client(&sim);
    let starts = k.state().starts;

    let yaml = config(&sim, 45, "");
    write_atomic(&k.paths().config, yaml.as_bytes()).unwrap();
    let ctx = node_context(&sim);
    let expect = effective_config(None, &ctx).unwrap().config;
    assert_eq!(expect.max_pods, Some(45));

    // Before the restart the stand-in still runs the old config: not ready.
    let err = kubelet
        .wait_ready(&expect, Duration::from_millis(300))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("maxPods: expected 45, kubelet has 30"),
        "{text}"
    );

    kubelet.restart().await.unwrap();
    assert_eq!(k.state().starts, starts + 1, "the command restarted it");
    kubelet
        .wait_ready(&expect, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(kubelet.configz().await.unwrap()["maxPods"], 45);
    sim.shutdown().await;
}

#[tokio::test]
async fn wait_ready_times_out_on_a_config_the_stand_in_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(dir.path(), None, true).await;
    let k = handle(&sim);
    let kubelet = kubelet_client(&sim);

    // A config the kubelet refuses at start: enforcing kube-reserved on a cgroup that does
    // not exist (it passes the config's own validation).
    let yaml = config(
        &sim,
        30,
        "enforceNodeAllocatable: [pods, kube-reserved]\nkubeReserved: {cpu: 500m, memory: 512Mi}\nkubeReservedCgroup: /kube.slice\n",
    );
    write_atomic(&k.paths().config, yaml.as_bytes()).unwrap();
    let ctx = node_context(&sim);
    let expect = effective_config(None, &ctx).unwrap().config;
    // The restart itself succeeds: the command ran; the kubelet exited afterwards.
    kubelet.restart().await.unwrap();
    assert_eq!(k.state().phase, KubeletPhase::Exited);
    assert!(
        k.exit_reason()
            .unwrap_or_default()
            .contains("cgroup does not exist")
    );

    let err = kubelet
        .wait_ready(&expect, Duration::from_millis(800))
        .await
        .unwrap_err();
    match &err {
        KubeletError::NotReady { timeout, last } => {
            assert_eq!(*timeout, Duration::from_millis(800));
            // The endpoint and the one cause, not reqwest's chain of wrappers.
            assert!(last.starts_with("healthz http://127.0.0.1:"), "{last}");
            assert!(last.contains("/healthz: connection refused"), "{last}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        kubelet.healthz().await,
        Err(KubeletError::Http { .. })
    ));
    sim.shutdown().await;
}

#[tokio::test]
async fn a_restart_command_that_fails_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(dir.path(), None, true).await;
    let k = handle(&sim);
    // An unknown node: the sim answers 404 and curl -f exits 22.
    let mut settings = KubeletSettings::new(
        RestartMethod::Command(vec![
            "curl".into(),
            "-fsS".into(),
            "-X".into(),
            "POST".into(),
            format!("{}/sim/v1/nodes/nope/kubelet/restart", sim.url()),
        ]),
        format!("{}/healthz", k.url()),
    );
    settings.restart_timeout = Duration::from_secs(30);
    let kubelet = Kubelet::new(settings).unwrap();
    let err = kubelet.restart().await.unwrap_err();
    assert!(matches!(err, KubeletError::CommandFailed { .. }), "{err}");
    assert!(err.to_string().contains("404"), "{err}");
    sim.shutdown().await;
}

/// A one-request-at-a-time HTTP server answering from a script and recording what it
/// was sent.
struct Scripted {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
}

async fn scripted(answers: Vec<(u16, &'static str)>) -> Scripted {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let log = requests.clone();
    tokio::spawn(async move {
        for (code, body) in answers {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            log.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&buf).into_owned());
            let resp = format!(
                "HTTP/1.1 {code} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = s.write_all(resp.as_bytes()).await;
            let _ = s.shutdown().await;
        }
    });
    Scripted { url, requests }
}

#[tokio::test]
async fn the_bearer_token_is_read_from_its_file_on_every_request() {
    // Restarts the stand-in with a command.
    let _children = crate::support::children().await;
    let server = scripted(vec![
        (200, "ok"),
        (200, "{\"kubeletconfig\": {\"maxPods\": 7}}"),
        (403, "Forbidden (user=system:serviceaccount:x:y, verb=get, resource=nodes, subresource(s)=[configz])"),
        (200, "[]"),
        (200, "{\"kubeletconfig\": 3}"),
        (500, "[-]syncloop failed: reason withheld"),
    ])
    .await;
    let tokens = tempfile::tempdir().unwrap();
    let token = tokens.path().join("token");
    std::fs::write(&token, "first-token\n").unwrap();
    let mut settings = KubeletSettings::new(
        RestartMethod::Command(vec!["true".into()]),
        format!("{}/healthz", server.url),
    );
    settings.configz_url = Some(format!("{}/configz", server.url));
    settings.token_file = Some(token.clone());
    let recorder = Arc::new(RecordingRestarter::new());
    let kubelet = Kubelet::with_restarter(settings, recorder.clone()).unwrap();

    kubelet.healthz().await.unwrap();
    std::fs::write(&token, "rotated-token").unwrap();
    assert_eq!(kubelet.configz().await.unwrap()["maxPods"], 7);
    let err = kubelet.configz().await.unwrap_err();
    assert!(
        matches!(&err, KubeletError::Status { code: 403, body, .. } if body.contains("subresource(s)=[configz]")),
        "{err}"
    );
    assert!(matches!(
        kubelet.configz().await,
        Err(KubeletError::Configz { .. })
    ));
    assert!(matches!(
        kubelet.configz().await,
        Err(KubeletError::Configz { .. })
    ));
    let err = kubelet.healthz().await.unwrap_err();
    assert!(
        err.to_string().contains("HTTP 500") && err.to_string().contains("syncloop"),
        "{err}"
    );

    let seen = server.requests.lock().unwrap().clone();
    assert!(seen[0].starts_with("GET /healthz "), "{}", seen[0]);
    assert!(
        seen[0]
            .to_lowercase()
            .contains("authorization: bearer first-token\r\n"),
        "{}",
        seen[0]
    );
    assert!(seen[1].starts_with("GET /configz "));
    assert!(
        seen[1]
            .to_lowercase()
            .contains("authorization: bearer rotated-token\r\n"),
        "{}",
        seen[1]
    );

    kubelet.restart().await.unwrap();
    assert_eq!(recorder.count(), 1);

    std::fs::remove_file(&token).unwrap();
    assert!(matches!(
        kubelet.healthz().await,
        Err(KubeletError::Token { .. })
    ));
}

#[tokio::test]
async fn a_bad_ca_file_is_reported_at_construction() {
    let d = tempfile::tempdir().unwrap();
    let ca = d.path().join("ca.crt");
    std::fs::write(&ca, "not a certificate").unwrap();
    let mut settings = KubeletSettings::new(
        RestartMethod::Command(vec!["true".into()]),
        "https://127.0.0.1:10250/healthz",
    );
    settings.ca_file = Some(ca.clone());
    let err = Kubelet::new(settings.clone()).unwrap_err();
    assert!(matches!(err, KubeletError::Tls { .. }), "{err}");
    assert!(err.to_string().contains("ca.crt"), "{err}");
    settings.ca_file = Some(d.path().join("missing.crt"));
    assert!(matches!(
        Kubelet::new(settings),
        Err(KubeletError::Tls { .. })
    ));
}
