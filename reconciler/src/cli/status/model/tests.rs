use super::*;

const NS: &str = "kubelet-gitops";

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn now() -> Timestamp {
    ts("2026-01-01T10:00:00Z")
}

/// A node builder: `node("a-1").pool("a").desired("cm").done()`.
struct N(NodeObs);

fn node(name: &str) -> N {
    N(NodeObs {
        name: name.into(),
        ..NodeObs::default()
    })
}

impl N {
    fn set(mut self, k: &str, v: &str) -> N {
        self.0.annotations.insert(k.into(), v.into());
        self
    }
    fn pool(self, p: &str) -> N {
        self.set(POOL, p)
    }
    fn desired(self, cm: &str) -> N {
        self.set(DESIRED_CONFIG, &format!("{NS}/{cm}"))
    }
    /// Settled on its desired config.
    fn done(self) -> N {
        let d = self.0.annotations[DESIRED_CONFIG].clone();
        self.set(OBSERVED_CONFIG, &d)
            .set(CURRENT_CONFIG, &d)
            .set(STATE, "Done")
    }
    fn state(self, s: &str) -> N {
        let d = self.0.annotations[DESIRED_CONFIG].clone();
        self.set(OBSERVED_CONFIG, &d).set(STATE, s)
    }
    fn current(self, cm: &str) -> N {
        self.set(CURRENT_CONFIG, &format!("{NS}/{cm}"))
    }
    fn canary(mut self) -> N {
        self.0
            .labels
            .insert(crate::rollout::CANARY_LABEL.into(), "true".into());
        self
    }
    fn reported(mut self, at: &str) -> N {
        self.0.condition = Some(Condition {
            status: "False".into(),
            reason: Some("RolledBack".into()),
            message: Some("rolled back".into()),
            last_transition_time: Some(ts("2026-01-01T09:00:00Z")),
            last_heartbeat_time: Some(ts(at)),
        });
        self
    }
}

fn cm(name: &str, pool: &str, commit: &str, created: &str) -> ConfigMapObs {
    ConfigMapObs {
        name: name.into(),
        pool: Some(pool.into()),
        commit: Some(commit.into()),
        source_path: Some(format!("pools/{pool}.yaml")),
        created: Some(ts(created)),
    }
}

fn survey_of(nodes: Vec<N>, cms: &[ConfigMapObs]) -> Report {
    let nodes: Vec<NodeObs> = nodes.into_iter().map(|n| n.0).collect();
    survey(&nodes, cms, NS, None, now(), None)
}

fn old_and_new() -> Vec<ConfigMapObs> {
    vec![
        cm("kubelet-a-old", "a", "c0ffee1", "2026-01-01T08:00:00Z"),
        cm("kubelet-a-new", "a", "beef002", "2026-01-01T09:00:00Z"),
    ]
}

#[test]
fn every_node_done_on_the_newest_config_is_complete() {
    let r = survey_of(
        vec![
            node("a-1").pool("a").desired("kubelet-a-new").done(),
            node("a-2").pool("a").desired("kubelet-a-new").done(),
            node("other"),
        ],
        &old_and_new(),
    );
    assert_eq!(r.pools.len(), 1);
    let p = &r.pools[0];
    assert_eq!(p.phase, Phase::Complete);
    assert_eq!(
        p.config_map.as_deref(),
        Some("kubelet-gitops/kubelet-a-new")
    );
    assert_eq!(p.commit.as_deref(), Some("beef002"));
    assert_eq!(p.source_path.as_deref(), Some("pools/a.yaml"));
    assert_eq!(
        p.nodes,
        Counts {
            total: 2,
            done: 2,
            ..Counts::default()
        }
    );
    assert!(p.not_done.is_empty());
    assert_eq!(verdict(&r, None, None), Verdict::Complete);
}

#[test]
fn the_target_is_the_config_created_last_and_the_phase_follows_the_nodes() {
    // Canary: the new config is in flight on one node, none Done on it yet.
    let r = survey_of(
        vec![
            node("a-1")
                .pool("a")
                .desired("kubelet-a-new")
                .state("Applying"),
            node("a-2").pool("a").desired("kubelet-a-old").done(),
            node("a-3").pool("a").desired("kubelet-a-old").done(),
        ],
        &old_and_new(),
    );
    let p = &r.pools[0];
    assert_eq!(p.phase, Phase::Canary);
    assert_eq!(
        p.config_map.as_deref(),
        Some("kubelet-gitops/kubelet-a-new")
    );
    assert_eq!((p.nodes.in_progress, p.nodes.waiting), (1, 2));
    let names: Vec<(&str, NodeProgress)> = p
        .not_done
        .iter()
        .map(|n| (n.node.as_str(), n.progress))
        .collect();
    assert_eq!(
        names,
        [
            ("a-1", NodeProgress::InProgress),
            ("a-2", NodeProgress::Waiting),
            ("a-3", NodeProgress::Waiting)
        ]
    );
    assert_eq!(verdict(&r, None, None), Verdict::Pending);

    // Rolling: the canary is Done, the next one in flight.
    let r = survey_of(
        vec![
            node("a-1").pool("a").desired("kubelet-a-new").done(),
            node("a-2").pool("a").desired("kubelet-a-new"),
            node("a-3").pool("a").desired("kubelet-a-old").done(),
        ],
        &old_and_new(),
    );
    assert_eq!(r.pools[0].phase, Phase::Rolling);

    // Waiting: some Done, nothing in flight (paused, a window, a soak).
    let r = survey_of(
        vec![
            node("a-1").pool("a").desired("kubelet-a-new").done(),
            node("a-2").pool("a").desired("kubelet-a-old").done(),
        ],
        &old_and_new(),
    );
    assert_eq!(r.pools[0].phase, Phase::Waiting);
    assert_eq!(verdict(&r, None, None), Verdict::Pending);
}

#[test]
fn labelled_canaries_keep_the_canary_phase_and_busy_nodes_count_in_flight() {
    let r = survey_of(
        vec![
            node("a-1")
                .pool("a")
                .desired("kubelet-a-new")
                .done()
                .canary(),
            node("a-2")
                .pool("a")
                .desired("kubelet-a-new")
                .state("Verifying")
                .canary(),
            node("a-3")
                .pool("a")
                .desired("kubelet-a-old")
                .state("Applying"),
        ],
        &old_and_new(),
    );
    let p = &r.pools[0];
    assert_eq!(p.phase, Phase::Canary);
    assert_eq!((p.nodes.done, p.nodes.in_progress, p.nodes.busy), (1, 1, 1));
    assert_eq!(p.not_done[1].progress, NodeProgress::Busy);
}

#[test]
fn a_failure_on_the_target_halts_and_a_failure_on_an_older_one_does_not() {
    let r = survey_of(
        vec![
            node("a-1")
                .pool("a")
                .desired("kubelet-a-new")
                .state("RolledBack")
                .current("kubelet-a-old")
                .set(MESSAGE, "kubelet did not become healthy")
                .reported("2026-01-01T09:58:00Z"),
            node("a-2").pool("a").desired("kubelet-a-old").done(),
            node("b-1").pool("b").desired("kubelet-b-1").done(),
        ],
        &[
            old_and_new(),
            vec![cm("kubelet-b-1", "b", "beef002", "2026-01-01T09:00:00Z")],
        ]
        .concat(),
    );
    let a = &r.pools[0];
    assert_eq!(a.phase, Phase::Halted);
    assert_eq!(a.nodes.failed, 1);
    let failed = &a.not_done[0];
    assert_eq!(failed.progress, NodeProgress::Failed);
    assert_eq!(failed.state.as_deref(), Some("RolledBack"));
    assert_eq!(
        failed.message.as_deref(),
        Some("kubelet did not become healthy")
    );
    assert_eq!(failed.since, Some(ts("2026-01-01T09:58:00Z")));
    assert_eq!(r.pools[1].phase, Phase::Complete);
    assert_eq!(verdict(&r, None, None), Verdict::Halted);
    let only_b = Report {
        pools: r.pools.iter().filter(|p| p.pool == "b").cloned().collect(),
        ..r.clone()
    };
    assert_eq!(verdict(&only_b, Some("b"), None), Verdict::Complete);

    // The next commit's config: the failure is about an older target now.
    let mut cms = old_and_new();
    cms.push(cm("kubelet-a-fix", "a", "f1x0003", "2026-01-01T09:30:00Z"));
    let r = survey_of(
        vec![
            node("a-1")
                .pool("a")
                .desired("kubelet-a-new")
                .state("RolledBack")
                .current("kubelet-a-old"),
            node("a-2")
                .pool("a")
                .desired("kubelet-a-fix")
                .state("Applying"),
        ],
        &cms,
    );
    assert_eq!(r.pools[0].phase, Phase::Canary);
    assert_eq!(r.pools[0].commit.as_deref(), Some("f1x0003"));
}

#[test]
fn a_pool_only_published_is_pending_and_wait_leaves_it_out_unless_named() {
    let r = survey_of(
        vec![node("a-1").pool("a").desired("kubelet-a-new").done()],
        &[
            old_and_new(),
            vec![cm(
                "kubelet-new-1",
                "new",
                "beef002",
                "2026-01-01T09:00:00Z",
            )],
        ]
        .concat(),
    );
    assert_eq!(r.pools[1].pool, "new");
    assert_eq!(r.pools[1].phase, Phase::Pending);
    assert_eq!(r.pools[1].nodes.total, 0);
    assert_eq!(verdict(&r, None, None), Verdict::Complete);
    let only_new = survey(
        &[],
        &[cm("kubelet-new-1", "new", "c", "2026-01-01T09:00:00Z")],
        NS,
        Some("new"),
        now(),
        None,
    );
    assert_eq!(verdict(&only_new, Some("new"), None), Verdict::Pending);
    let nothing = survey(&[], &[], NS, Some("gone"), now(), None);
    assert!(nothing.pools.is_empty());
    assert_eq!(verdict(&nothing, Some("gone"), None), Verdict::Pending);
    assert_eq!(
        verdict(&survey(&[], &[], NS, None, now(), None), None, None),
        Verdict::Pending
    );
}

#[test]
fn the_json_structure_is_stable() {
    let r = survey_of(
        vec![
            node("a-1")
                .pool("a")
                .desired("kubelet-a-new")
                .state("Degraded")
                .reported("2026-01-01T09:58:00Z"),
        ],
        &old_and_new(),
    );
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "kind": "KubeletGitopsStatus",
            "version": 1,
            "time": "2026-01-01T10:00:00Z",
            "pools": [{
                "pool": "a",
                "phase": "halted",
                "configMap": "kubelet-gitops/kubelet-a-new",
                "commit": "beef002",
                "sourcePath": "pools/a.yaml",
                "nodes": {"total": 1, "done": 0, "inProgress": 0, "busy": 0, "failed": 1, "waiting": 0},
                "notDone": [{
                    "node": "a-1",
                    "progress": "failed",
                    "state": "Degraded",
                    "desiredConfig": "kubelet-gitops/kubelet-a-new",
                    "currentConfig": null,
                    "message": null,
                    "since": "2026-01-01T09:58:00Z",
                }],
            }],
        })
    );
}

#[test]
fn a_node_report_names_each_config_with_its_commit_and_keeps_the_last_events() {
    let n = node("a-1")
        .pool("a")
        .desired("kubelet-a-new")
        .state("RolledBack")
        .current("kubelet-a-old")
        .set(LAST_KNOWN_GOOD, "kubelet-gitops/kubelet-a-old")
        .reported("2026-01-01T09:58:00Z");
    let events: Vec<EventObs> = (0..12)
        .rev()
        .map(|i| EventObs {
            time: Some(ts(&format!("2026-01-01T09:{i:02}:00Z"))),
            type_: "Normal".into(),
            reason: format!("R{i}"),
            message: "m".into(),
            count: 1,
        })
        .collect();
    let r = node_report(&n.0, &old_and_new(), events, now());
    assert_eq!(r.pool.as_deref(), Some("a"));
    assert_eq!(
        r.desired.as_ref().unwrap().commit.as_deref(),
        Some("beef002")
    );
    assert_eq!(
        r.current.as_ref().unwrap().commit.as_deref(),
        Some("c0ffee1")
    );
    assert_eq!(
        r.last_known_good.as_ref().unwrap().config,
        "kubelet-gitops/kubelet-a-old"
    );
    assert_eq!(r.condition.as_ref().unwrap().status, "False");
    let reasons: Vec<&str> = r.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(
        reasons,
        ["R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9", "R10", "R11"]
    );
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["kind"], "KubeletGitopsNodeStatus");
    assert_eq!(v["lastKnownGood"]["sourcePath"], "pools/a.yaml");
    assert_eq!(v["condition"]["lastHeartbeatTime"], "2026-01-01T09:58:00Z");
    assert_eq!(v["events"][9]["type"], "Normal");
}

fn record(commit: &str, pools: &[(&str, &str, usize)]) -> RolloutRecord {
    RolloutRecord {
        version: crate::record::RECORD_VERSION,
        commit: commit.into(),
        pools: pools
            .iter()
            .map(|(p, cm, n)| {
                (
                    p.to_string(),
                    PoolRecord {
                        target: format!("{NS}/{cm}"),
                        nodes: *n,
                        phase: "Progressing".into(),
                        hold: None,
                    },
                )
            })
            .collect(),
    }
}

#[test]
fn the_record_counts_the_nodes_not_reached_yet_and_names_the_new_target() {
    // A pool's first rollout: the canary is Done, two nodes the reconciler has not
    // reached yet carry nothing. Without the record it looks complete.
    let nodes: Vec<NodeObs> = vec![node("a-1").pool("a").desired("kubelet-a-new").done().0];
    let cms = old_and_new();
    let inferred = survey(&nodes, &cms, NS, None, now(), None);
    assert_eq!(inferred.pools[0].phase, Phase::Complete);
    let rec = record("beef002cafe", &[("a", "kubelet-a-new", 3)]);
    let r = survey(&nodes, &cms, NS, None, now(), Some(&rec));
    let p = &r.pools[0];
    assert_eq!(p.phase, Phase::Waiting, "{p:?}");
    assert_eq!(
        p.nodes,
        Counts {
            total: 3,
            done: 1,
            waiting: 2,
            ..Counts::default()
        }
    );
    assert_eq!(r.applied_commit.as_deref(), Some("beef002cafe"));
    assert_eq!(verdict(&r, None, None), Verdict::Pending);

    // Right after a merge: every node Done on the old config, the record names the new.
    let nodes: Vec<NodeObs> = vec![
        node("a-1").pool("a").desired("kubelet-a-old").done().0,
        node("a-2").pool("a").desired("kubelet-a-old").done().0,
    ];
    let r = survey(&nodes, &cms, NS, None, now(), Some(&rec));
    assert_eq!(
        r.pools[0].config_map.as_deref(),
        Some("kubelet-gitops/kubelet-a-new")
    );
    assert_ne!(r.pools[0].phase, Phase::Complete);
    assert_eq!(verdict(&r, None, None), Verdict::Pending);

    // A pool of the record that no node carries yet is waited for.
    let rec2 = record(
        "beef002cafe",
        &[("a", "kubelet-a-old", 2), ("b", "kubelet-b-1", 2)],
    );
    let r = survey(&nodes, &cms, NS, None, now(), Some(&rec2));
    let b = r.pools.iter().find(|p| p.pool == "b").expect("pool b");
    assert_eq!(b.phase, Phase::Waiting);
    assert_eq!(verdict(&r, None, None), Verdict::Pending);
}

#[test]
fn wait_for_a_commit_until_the_record_applies_it() {
    let nodes: Vec<NodeObs> = vec![node("a-1").pool("a").desired("kubelet-a-new").done().0];
    let rec = record("beef002cafe", &[("a", "kubelet-a-new", 1)]);
    let r = survey(&nodes, &old_and_new(), NS, None, now(), Some(&rec));
    assert_eq!(verdict(&r, None, None), Verdict::Complete);
    assert_eq!(verdict(&r, None, Some("beef002")), Verdict::Complete);
    assert_eq!(verdict(&r, None, Some("beef002cafe")), Verdict::Complete);
    assert_eq!(
        verdict(&r, None, Some("d00d")),
        Verdict::Pending,
        "another commit"
    );
    assert_eq!(verdict(&r, None, Some("")), Verdict::Pending);
    let without = survey(&nodes, &old_and_new(), NS, None, now(), None);
    assert_eq!(
        verdict(&without, None, Some("beef002")),
        Verdict::Pending,
        "no record: the applied commit is unknown"
    );
}
