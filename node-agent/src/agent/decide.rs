//! The agent's decisions, as one pure function: [`decide`] looks at everything observed
//! (the Node's annotations, the checkpoint metadata, the kubelet's probe, the clock) and
//! returns the next [`Step`]. The driver ([`super::drive`]) carries the step out, persists
//! its phase, and asks again. Nothing here touches the disk, the kubelet or the API server.
//!
//! Resuming after a crash needs no special path: the persisted phase of the assignment in
//! flight says what comes next (`Checkpointed` -> write, `Written` -> restart,
//! `Restarted` -> verify), and the verdict recorded with a rollback
//! ([`Assignment::failed`]) says which config failed: it is never retried by itself,
//! whether or not the API server ever heard of it. (A `RolledBack` state the Node shows
//! about the desired config counts too: older agents and people write verdicts there.)
//! A person clears a verdict by removing it from the Node once it was reported there,
//! and a new desired config clears it.
//!
//! The few things held in memory only limit work and never decide correctness: when a
//! failed download may be retried, the outcome of the last verification, and the override
//! note for the message. Lose them (a restart) and the agent retries once, or verifies
//! once more.

use kubelet_gitops_core::protocol::{ConfigRef, LOCAL, State, reason};

use crate::checkpoint::ApplyPhase;
use crate::report::Report;

/// What the Node's desired-config annotation says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Desired {
    /// Absent: the node's local config.
    Local,
    /// A ConfigMap.
    Config(ConfigRef),
    /// A value that is not a config reference.
    Invalid {
        /// The annotation's value.
        value: String,
        /// Why it does not parse.
        reason: String,
    },
}

impl Desired {
    /// Parses the annotation value (`None`: absent).
    pub fn parse(value: Option<&str>) -> Desired {
        match value {
            None => Desired::Local,
            Some(v) => match v.parse::<ConfigRef>() {
                // `local` as a value means the same as no annotation.
                Ok(ConfigRef::Local) => Desired::Local,
                Ok(r) => Desired::Config(r),
                Err(e) => Desired::Invalid {
                    value: v.to_string(),
                    reason: e.to_string(),
                },
            },
        }
    }

    /// The value the agent reports as observed-config for this desire.
    pub fn observed_value(&self) -> String {
        match self {
            Desired::Local => LOCAL.to_string(),
            Desired::Config(r) => r.to_string(),
            Desired::Invalid { value, .. } => value.clone(),
        }
    }
}

/// The assignment from the checkpoint metadata (`meta/assigned`), reduced to what the
/// decision needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// What the agent drives the kubelet to.
    pub config: ConfigRef,
    /// How far it got.
    pub phase: ApplyPhase,
    /// When it entered that phase (unix seconds).
    pub since: u64,
    /// Where its payload is kept on the node (a checkpoint, or the saved local config),
    /// for messages that ask a person to act.
    pub file: String,
    /// Set when this assignment is a rollback: the verdict on the config it replaces.
    pub failed: Option<Failed>,
}

/// The verdict on a config the kubelet failed with, recorded on the node before the
/// fallback was written ([`crate::checkpoint::Verdict`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// The config that failed.
    pub config: ConfigRef,
    /// Why: `kubelet did not become healthy within 2m: ...`.
    pub reason: String,
    /// Where its payload is kept on the node.
    pub file: String,
    /// The verdict reached this Node object once. A Node that no longer shows it then had
    /// it removed by a person, which asks for a retry.
    pub reported: bool,
}

/// The pods cgroup of the config the kubelet runs, checked against node allocatable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodsCgroup {
    /// Its limits are what the kubelet computes for the config.
    Matches,
    /// They are not: what differs (starts with [`PODS_CGROUP`]).
    Differs(String),
}

/// How a pods-cgroup finding starts in a message; what follows it is the finding.
pub const PODS_CGROUP: &str = "pods cgroup ";

/// The kubelet config file on disk compared with what the agent last wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disk {
    /// Its sha256 is the checkpoint's.
    Matches,
    /// It differs: its sha256, or `None` when the file is missing.
    Differs {
        /// What was found.
        found: Option<String>,
    },
}

/// A failed verification of the assignment in flight (kept in memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyFailure {
    /// The config that was verified.
    pub config: ConfigRef,
    /// The assignment's `since` when it was verified (identifies the attempt).
    pub since: u64,
    /// Why: `kubelet did not become healthy within 2m: ...`.
    pub reason: String,
    /// When it failed (unix seconds).
    pub at: u64,
}

/// When a config that failed to download or validate may be tried again (in memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// The config.
    pub config: ConfigRef,
    /// Not before this (unix seconds).
    pub at: u64,
}

/// Everything the decision looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// Now (unix seconds).
    pub now: u64,
    /// The Node's desired-config.
    pub desired: Desired,
    /// The health timeout in seconds (annotation, else the agent's default).
    pub health_timeout: u64,
    /// The last-known-good grace in seconds (annotation, else the agent's default).
    pub lkg_grace: u64,
    /// How often a node stuck with an unhealthy kubelet is verified again (seconds).
    pub recheck: u64,
    /// What the Node's annotations report now.
    pub report: Report,
    /// `meta/assigned`; `None`: the node runs its local config.
    pub assigned: Option<Assignment>,
    /// `meta/last-known-good`; [`ConfigRef::Local`] when none was promoted.
    pub last_known_good: ConfigRef,
    /// Whether the node's own config was saved (it can be returned to).
    pub has_local_original: bool,
    /// The drift check, when one was made for this decision: the file against the
    /// checkpoint of the config the node runs, or, on the local config (replace mode),
    /// against the saved local original.
    pub disk: Option<Disk>,
    /// The pods-cgroup check of the config the node runs, when one was made.
    pub pods_cgroup: Option<PodsCgroup>,
    /// The kubelet's healthz, when probed for this decision.
    pub kubelet_healthy: Option<bool>,
    /// The last failed verification.
    pub verification: Option<VerifyFailure>,
    /// Back-off of a failed download or validation.
    pub retry: Option<Retry>,
    /// The flag-override note for the desired config, when known.
    pub note: Option<String>,
}

impl Observed {
    /// What the kubelet runs when nothing is in flight.
    pub fn current(&self) -> ConfigRef {
        match &self.assigned {
            Some(a) if a.phase == ApplyPhase::Verified => a.config.clone(),
            Some(_) => ConfigRef::Local,
            None => ConfigRef::Local,
        }
    }

    fn desired_is(&self, config: &ConfigRef) -> bool {
        matches!(&self.desired, Desired::Config(x) if x == config)
    }

    fn reported_about(&self, config: &ConfigRef) -> bool {
        self.report.observed.as_deref() == Some(config.to_string().as_str())
    }

    fn can_run(&self, config: &ConfigRef) -> bool {
        *config != ConfigRef::Local || self.has_local_original
    }

    /// What desired-config asks the kubelet to run (`None`: an invalid value).
    fn wanted(&self) -> Option<ConfigRef> {
        match &self.desired {
            Desired::Local => Some(ConfigRef::Local),
            Desired::Config(x) => Some(x.clone()),
            Desired::Invalid { .. } => None,
        }
    }

    /// The verdict recorded on the node about the config desired-config asks for, unless
    /// a person removed it from the Node after it had been reported there.
    pub fn verdict(&self) -> Option<&Failed> {
        let f = self.assigned.as_ref()?.failed.as_ref()?;
        if Some(&f.config) != self.wanted().as_ref() {
            return None;
        }
        let shown = self.report.state == Some(State::RolledBack) && self.reported_about(&f.config);
        if f.reported && !shown {
            return None;
        }
        Some(f)
    }
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Fetch the ConfigMap, checkpoint it, validate it; if it passes, assign it
    /// (phase `Checkpointed`).
    Download {
        /// The config.
        config: ConfigRef,
    },
    /// Assign the node's saved original config (phase `Checkpointed`).
    ReturnToLocal,
    /// Write the assigned config (`Checkpointed` -> `Written`).
    Write,
    /// Restart the kubelet (`Written` -> `Restarted`).
    Restart,
    /// Wait until the kubelet is healthy and runs the config, at most until `deadline`
    /// (`Restarted` -> `Verified`, or a [`VerifyFailure`]).
    Verify {
        /// Unix seconds.
        deadline: u64,
    },
    /// The assignment in flight failed: assign `to` instead (phase `Checkpointed`) and
    /// report `RolledBack` with `reason`.
    RollBack {
        /// The fallback: last-known-good, or the local config.
        to: ConfigRef,
        /// Why.
        reason: String,
    },
    /// The config file was changed behind the agent's back: write it again, restart,
    /// verify (the assignment goes back to `Checkpointed`).
    RestoreDrift {
        /// The sha256 found on disk, `None` when the file is missing.
        found: Option<String>,
    },
    /// The node runs its local config and its file was changed by its owner (a
    /// `kubeadm upgrade`): save it again as the config to return to.
    RefreshLocal {
        /// The sha256 found on disk.
        found: String,
    },
    /// Make `config` the last-known-good.
    Promote {
        /// The config.
        config: ConfigRef,
    },
    /// Nothing to do: make the Node show `report`, and look again at `wake_at` (unix
    /// seconds) or on the next event.
    Idle {
        /// The report.
        report: Report,
        /// When something becomes due (promotion, retry, re-check).
        wake_at: Option<u64>,
    },
}

/// The next step. See the module documentation.
pub fn decide(o: &Observed) -> Step {
    if let Some(a) = &o.assigned
        && a.phase != ApplyPhase::Verified
    {
        return in_flight(o, a);
    }
    let current = o.current();
    // On its local config the node's file is its owner's: a change is not drift but the
    // new original to return to. Saved before anything else, so that an apply that
    // starts now keeps the file as it is.
    if current == ConfigRef::Local
        && o.has_local_original
        && let Some(Disk::Differs { found: Some(found) }) = &o.disk
    {
        return Step::RefreshLocal {
            found: found.clone(),
        };
    }
    let verdict = o.verdict();
    let mut wake_at = None;
    match &o.desired {
        // The return to the local config failed and was rolled back: as for a config,
        // only a new desired-config (or a person) moves on.
        Desired::Local if current != ConfigRef::Local && verdict.is_some() => {}
        Desired::Local if current != ConfigRef::Local => {
            if o.has_local_original {
                return Step::ReturnToLocal;
            }
            return Step::Idle {
                report: Report {
                    state: Some(State::Degraded),
                    observed: Some(LOCAL.to_string()),
                    message: Some(format!(
                        "{}: cannot return to the local config: the node's original config was never saved in the checkpoint directory",
                        reason::INTERNAL_ERROR
                    )),
                    ..steady_report(o)
                },
                wake_at: None,
            };
        }
        Desired::Config(x) if *x != current => {
            if verdict.is_some() {
                // The kubelet failed with it and was rolled back (recorded on the node
                // before the fallback was written): only a new desired-config moves on.
            } else if o
                .assigned
                .as_ref()
                .and_then(|a| a.failed.as_ref())
                .is_some_and(|f| f.config == *x)
            {
                // A verdict a person removed from the Node after it was reported: a retry.
                return Step::Download { config: x.clone() };
            } else if o.reported_about(x) {
                match o.report.state {
                    // The kubelet was touched and failed: only a new desired-config moves on.
                    Some(State::RolledBack) => {}
                    // Rejected or not downloaded: retry after the back-off.
                    Some(State::Degraded) => match &o.retry {
                        Some(r) if r.config == *x && o.now < r.at => wake_at = Some(r.at),
                        _ => return Step::Download { config: x.clone() },
                    },
                    _ => return Step::Download { config: x.clone() },
                }
            } else {
                return Step::Download { config: x.clone() };
            }
        }
        _ => {}
    }

    // Steady: the kubelet runs `current`, which is the desired config or the fallback
    // after a failure.
    if let Some(a) = &o.assigned {
        if a.config != ConfigRef::Local
            && let Some(Disk::Differs { found }) = &o.disk
        {
            return Step::RestoreDrift {
                found: found.clone(),
            };
        }
        if a.config != o.last_known_good {
            let due = a.since.saturating_add(o.lkg_grace);
            if o.now >= due {
                if o.kubelet_healthy == Some(true) {
                    return Step::Promote {
                        config: a.config.clone(),
                    };
                }
                // Not healthy now: look again later.
                wake_at = earliest(wake_at, Some(o.now.saturating_add(o.recheck)));
            } else {
                wake_at = earliest(wake_at, Some(due));
            }
        }
    }
    Step::Idle {
        report: steady_report(o),
        wake_at,
    }
}

fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

fn in_flight(o: &Observed, a: &Assignment) -> Step {
    match a.phase {
        ApplyPhase::Checkpointed => Step::Write,
        ApplyPhase::Written => Step::Restart,
        ApplyPhase::Restarted | ApplyPhase::Verified => {
            let deadline = a.since.saturating_add(o.health_timeout);
            let failure = o
                .verification
                .as_ref()
                .filter(|f| f.config == a.config && f.since == a.since);
            let Some(failure) = failure else {
                return Step::Verify { deadline };
            };
            let fallback = &o.last_known_good;
            // A fallback that fails is not rolled back in turn: there is nothing safer
            // to go to, and swapping configs would only restart the kubelet more.
            if a.failed.is_none() && a.config != *fallback && o.can_run(fallback) {
                return Step::RollBack {
                    to: fallback.clone(),
                    reason: failure.reason.clone(),
                };
            }
            // Nothing left to fall back to: report, and verify again now and then (the
            // kubelet's own restart policy keeps trying; a fixed node recovers).
            let again = failure.at.saturating_add(o.recheck);
            if o.now >= again {
                return Step::Verify { deadline: o.now };
            }
            Step::Idle {
                report: stuck_report(o, a, failure),
                wake_at: Some(again),
            }
        }
    }
}

/// The report of a node whose last resort did not come back healthy.
fn stuck_report(o: &Observed, a: &Assignment, failure: &VerifyFailure) -> Report {
    if let Some(f) = &a.failed {
        // A rollback whose fallback failed too: the kubelet is unhealthy on both, and the
        // agent has nothing left to try. It verifies again now and then (systemd keeps
        // restarting the kubelet; a fixed node recovers), but a person must act.
        return Report {
            state: Some(State::RolledBack),
            observed: Some(f.config.to_string()),
            current: Some(a.config.to_string()),
            last_known_good: Some(o.last_known_good.to_string()),
            message: Some(rollback_failed_message(f, a, &failure.reason)),
        };
    }
    let desired = o.desired.observed_value();
    let rolled_back = o.report.state == Some(State::RolledBack)
        && o.report.observed.as_deref() == Some(desired.as_str())
        && !o.desired_is(&a.config);
    let message = if rolled_back {
        // A rollback started by an older agent, which kept its verdict on the Node only.
        let first = o
            .report
            .message
            .as_deref()
            .and_then(|m| m.split("; rolling back").next())
            .unwrap_or(reason::UNHEALTHY);
        format!(
            "{first}; rolling back to {} did not help either: {}",
            a.config, failure.reason
        )
    } else {
        format!(
            "{}; there is no last-known-good to fall back to",
            failure.reason
        )
    };
    Report {
        state: Some(if rolled_back {
            State::RolledBack
        } else {
            State::Degraded
        }),
        observed: Some(desired),
        current: Some(a.config.to_string()),
        last_known_good: Some(o.last_known_good.to_string()),
        message: Some(message),
    }
}

/// The message of a rollback whose fallback `a` failed too (`why`): both failures, and
/// what a person has to look at.
pub fn rollback_failed_message(f: &Failed, a: &Assignment, why: &str) -> String {
    format!(
        "{}; rolling back to {} did not help either: {why}; a person must act: the kubelet is not healthy on the failed config nor on its fallback (the fallback's file is {}, the failed config's {}; the kubelet's own reason is in its journal, journalctl -u kubelet); the agent verifies again every resync interval",
        f.reason, a.config, a.file, f.file
    )
}

/// The message of a finished rollback.
pub fn rolled_back_message(f: &Failed, to: &ConfigRef) -> String {
    format!("{}; rolled back to {to}", f.reason)
}

/// The message of a rollback in progress.
pub fn rolling_back_message(reason: &str, to: &ConfigRef) -> String {
    format!("{reason}; rolling back to {to}")
}

/// The Done message: the notes about the config (flag overrides, warnings, pods; from
/// memory, else as the Node shows them), then the pods-cgroup finding (the latest
/// check's, else as the Node shows it).
fn done_message(o: &Observed, x: &ConfigRef) -> Option<String> {
    let shown = if o.report.state == Some(State::Done) && o.reported_about(x) {
        o.report.message.as_deref()
    } else {
        None
    };
    // The Node's message is `<notes>; pods cgroup ...` or `pods cgroup ...`.
    let (shown_notes, shown_cgroup) = match shown {
        Some(m) if m.starts_with(PODS_CGROUP) => (None, Some(m)),
        Some(m) => match m.find(&format!("; {PODS_CGROUP}")) {
            Some(i) => (Some(&m[..i]), Some(&m[i + 2..])),
            None => (Some(m), None),
        },
        None => (None, None),
    };
    let notes = match &o.note {
        Some(n) => Some(n.as_str()),
        None => shown_notes.filter(|n| !n.is_empty()),
    };
    let cgroup = match &o.pods_cgroup {
        Some(PodsCgroup::Differs(m)) => Some(m.as_str()),
        Some(PodsCgroup::Matches) => None,
        None => shown_cgroup,
    };
    match (notes, cgroup) {
        (Some(n), Some(c)) => Some(format!("{n}; {c}")),
        (Some(n), None) => Some(n.to_string()),
        (None, Some(c)) => Some(c.to_string()),
        (None, None) => None,
    }
}

/// The report of a node that is not applying anything.
pub fn steady_report(o: &Observed) -> Report {
    let current = o.current();
    let base = Report {
        current: Some(current.to_string()),
        last_known_good: Some(o.last_known_good.to_string()),
        ..Report::default()
    };
    // The verdict recorded on the node, whatever the Node shows (a report that did not
    // reach the API server yet, or an older one).
    if let Some(f) = o.verdict()
        && f.config != current
    {
        return Report {
            state: Some(State::RolledBack),
            observed: Some(f.config.to_string()),
            message: Some(rolled_back_message(f, &current)),
            ..base
        };
    }
    match &o.desired {
        Desired::Local if current == ConfigRef::Local => base,
        Desired::Local => Report {
            state: o.report.state,
            observed: o.report.observed.clone(),
            message: o.report.message.clone(),
            ..base
        },
        Desired::Invalid { value, reason: why } => Report {
            state: Some(State::Degraded),
            observed: Some(value.clone()),
            message: Some(format!(
                "failed to sync: invalid {}: {why}",
                kubelet_gitops_core::protocol::DESIRED_CONFIG
            )),
            ..base
        },
        Desired::Config(x) if *x == current => Report {
            state: Some(State::Done),
            observed: Some(x.to_string()),
            message: done_message(o, x),
            ..base
        },
        // A failure about the desired config: keep its state and message.
        Desired::Config(_) => Report {
            state: o.report.state,
            observed: o.report.observed.clone(),
            message: o.report.message.clone(),
            ..base
        },
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    fn cm(name: &str) -> ConfigRef {
        ConfigRef::configmap("kubelet-gitops", name)
    }

    /// A builder for observations, starting from a node on its local config with nothing
    /// assigned, at t=1000.
    #[derive(Clone)]
    pub(in crate::agent) struct Obs(pub(in crate::agent) Observed);

    pub(in crate::agent) fn node() -> Obs {
        Obs(Observed {
            now: 1000,
            desired: Desired::Local,
            health_timeout: 120,
            lkg_grace: 600,
            recheck: 60,
            report: Report::default(),
            assigned: None,
            last_known_good: ConfigRef::Local,
            has_local_original: false,
            disk: None,
            pods_cgroup: None,
            kubelet_healthy: None,
            verification: None,
            retry: None,
            note: None,
        })
    }

    impl Obs {
        pub(in crate::agent) fn desired(mut self, name: &str) -> Self {
            self.0.desired = Desired::Config(cm(name));
            self
        }
        fn assigned(mut self, config: ConfigRef, phase: ApplyPhase, since: u64) -> Self {
            self.0.assigned = Some(Assignment {
                file: format!("/cp/{config}"),
                config,
                phase,
                since,
                failed: None,
            });
            self.0.has_local_original = true;
            self
        }
        /// The assignment is a rollback away from `config`, its verdict recorded (and
        /// `reported` on this Node object).
        fn replacing(mut self, config: ConfigRef, reported: bool) -> Self {
            let a = self.0.assigned.as_mut().expect("an assignment");
            a.failed = Some(Failed {
                file: format!("/cp/{config}"),
                config,
                reason: "kubelet did not become healthy within 2m: connection refused".into(),
                reported,
            });
            self
        }
        fn lkg(mut self, config: ConfigRef) -> Self {
            self.0.last_known_good = config;
            self
        }
        fn reported(mut self, state: State, observed: &str, message: &str) -> Self {
            self.0.report = Report {
                state: Some(state),
                observed: Some(observed.into()),
                message: Some(message.into()),
                ..Report::default()
            };
            self
        }
        fn at(mut self, now: u64) -> Self {
            self.0.now = now;
            self
        }
        fn healthy(mut self, h: bool) -> Self {
            self.0.kubelet_healthy = Some(h);
            self
        }
        fn verify_failed(mut self, config: ConfigRef, since: u64, at: u64) -> Self {
            self.0.verification = Some(VerifyFailure {
                config,
                since,
                reason: "kubelet did not become healthy within 2m: connection refused".into(),
                at,
            });
            self
        }
        fn decide(&self) -> Step {
            decide(&self.0)
        }
    }

    fn idle_report(step: Step) -> (Report, Option<u64>) {
        match step {
            Step::Idle { report, wake_at } => (report, wake_at),
            other => panic!("expected Idle, got {other:?}"),
        }
    }

    #[test]
    fn a_new_desired_config_is_downloaded() {
        assert_eq!(
            node().desired("kubelet-a-1").decide(),
            Step::Download {
                config: cm("kubelet-a-1")
            }
        );
    }

    #[test]
    fn a_local_node_without_desire_reports_local_and_nothing_else() {
        let (r, wake) = idle_report(node().decide());
        assert_eq!(r.state, None);
        assert_eq!(r.observed, None);
        assert_eq!(r.message, None);
        assert_eq!(r.current.as_deref(), Some("local"));
        assert_eq!(r.last_known_good.as_deref(), Some("local"));
        assert_eq!(wake, None);
    }

    #[test]
    fn the_persisted_phase_says_what_comes_next() {
        let base = node().desired("a");
        assert_eq!(
            base.clone()
                .assigned(cm("a"), ApplyPhase::Checkpointed, 900)
                .decide(),
            Step::Write
        );
        assert_eq!(
            base.clone()
                .assigned(cm("a"), ApplyPhase::Written, 900)
                .decide(),
            Step::Restart
        );
        assert_eq!(
            base.clone()
                .assigned(cm("a"), ApplyPhase::Restarted, 900)
                .decide(),
            Step::Verify { deadline: 1020 },
            "the deadline runs from the persisted restart time, across agent restarts"
        );
    }

    #[test]
    fn work_in_flight_finishes_before_a_new_desire_is_looked_at() {
        let o = node()
            .desired("b")
            .assigned(cm("a"), ApplyPhase::Written, 900);
        assert_eq!(o.decide(), Step::Restart);
    }

    #[test]
    fn a_verified_desired_config_is_done_and_keeps_its_note() {
        let mut o = node()
            .desired("a")
            .assigned(cm("a"), ApplyPhase::Verified, 990);
        o.0.note = Some("maxPods is overridden by --max-pods=50".into());
        let (r, wake) = idle_report(o.decide());
        assert_eq!(r.state, Some(State::Done));
        assert_eq!(r.observed.as_deref(), Some("kubelet-gitops/a"));
        assert_eq!(r.current.as_deref(), Some("kubelet-gitops/a"));
        assert_eq!(
            r.message.as_deref(),
            Some("maxPods is overridden by --max-pods=50")
        );
        assert_eq!(wake, Some(990 + 600), "wakes for the promotion");

        // After an agent restart the note is gone from memory but stays on the Node.
        let mut again = o
            .clone()
            .reported(State::Done, "kubelet-gitops/a", "from before");
        again.0.note = None;
        let (r, _) = idle_report(again.decide());
        assert_eq!(r.message.as_deref(), Some("from before"));
    }

    #[test]
    fn a_failed_verification_rolls_back_to_last_known_good() {
        let o = node()
            .desired("b")
            .lkg(cm("a"))
            .assigned(cm("b"), ApplyPhase::Restarted, 900)
            .verify_failed(cm("b"), 900, 1020);
        match o.decide() {
            Step::RollBack { to, reason } => {
                assert_eq!(to, cm("a"));
                assert!(reason.starts_with("kubelet did not become healthy within 2m"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn without_a_last_known_good_the_rollback_goes_to_the_local_config() {
        let o = node()
            .desired("b")
            .assigned(cm("b"), ApplyPhase::Restarted, 900)
            .verify_failed(cm("b"), 900, 1020);
        assert!(matches!(
            o.decide(),
            Step::RollBack {
                to: ConfigRef::Local,
                ..
            }
        ));
        let mut lost = o.clone();
        lost.0.has_local_original = false;
        let (r, _) = idle_report(lost.decide());
        assert_eq!(r.state, Some(State::Degraded), "nothing to go back to");
        assert!(r.message.unwrap().contains("no last-known-good"));
    }

    #[test]
    fn a_failure_of_an_older_attempt_does_not_count() {
        let o = node()
            .desired("b")
            .assigned(cm("b"), ApplyPhase::Restarted, 950)
            .verify_failed(cm("b"), 900, 1020);
        assert_eq!(o.decide(), Step::Verify { deadline: 1070 });
    }

    #[test]
    fn a_rolled_back_config_is_not_tried_again() {
        let o = node()
            .desired("b")
            .lkg(cm("a"))
            .assigned(cm("a"), ApplyPhase::Verified, 1030)
            .reported(
                State::RolledBack,
                "kubelet-gitops/b",
                "kubelet did not become healthy within 2m: x",
            );
        let (r, _) = idle_report(o.decide());
        assert_eq!(r.state, Some(State::RolledBack));
        assert_eq!(r.observed.as_deref(), Some("kubelet-gitops/b"));
        assert_eq!(r.current.as_deref(), Some("kubelet-gitops/a"));
        assert!(r.message.unwrap().starts_with(reason::UNHEALTHY));
        // A new desired config moves on.
        assert_eq!(
            o.clone().desired("c").decide(),
            Step::Download { config: cm("c") }
        );
    }

    #[test]
    fn a_rejected_config_is_retried_after_its_back_off_only() {
        let mut o = node().desired("b").reported(
            State::Degraded,
            "kubelet-gitops/b",
            "failed to validate config: x",
        );
        o.0.retry = Some(Retry {
            config: cm("b"),
            at: 1300,
        });
        let (r, wake) = idle_report(o.decide());
        assert_eq!(r.state, Some(State::Degraded));
        assert_eq!(wake, Some(1300));
        assert_eq!(
            o.clone().at(1300).decide(),
            Step::Download { config: cm("b") }
        );
        // Without memory (an agent restart) it is tried once more at once.
        o.0.retry = None;
        assert_eq!(o.decide(), Step::Download { config: cm("b") });
    }

    #[test]
    fn the_fallback_that_fails_too_is_reported_and_rechecked() {
        let o = node()
            .desired("b")
            .lkg(cm("a"))
            .assigned(cm("a"), ApplyPhase::Restarted, 1030)
            .reported(
                State::RolledBack,
                "kubelet-gitops/b",
                "kubelet did not become healthy within 2m: x; rolling back to kubelet-gitops/a",
            )
            .verify_failed(cm("a"), 1030, 1150)
            .at(1160);
        let (r, wake) = idle_report(o.decide());
        assert_eq!(r.state, Some(State::RolledBack));
        let m = r.message.unwrap();
        assert!(
            m.starts_with("kubelet did not become healthy within 2m: x; rolling back to kubelet-gitops/a did not help either"),
            "{m}"
        );
        assert_eq!(wake, Some(1210));
        assert_eq!(
            o.at(1210).decide(),
            Step::Verify { deadline: 1210 },
            "checks again, without waiting"
        );
    }

    #[test]
    fn promotion_after_the_grace_when_healthy() {
        let o = node()
            .desired("a")
            .assigned(cm("a"), ApplyPhase::Verified, 1000);
        let (_, wake) = idle_report(o.clone().at(1599).healthy(true).decide());
        assert_eq!(wake, Some(1600));
        assert_eq!(
            o.clone().at(1600).healthy(true).decide(),
            Step::Promote { config: cm("a") }
        );
        let (_, wake) = idle_report(o.clone().at(1600).healthy(false).decide());
        assert_eq!(
            wake,
            Some(1660),
            "unhealthy now: not promoted, looked at again"
        );
        let (_, wake) = idle_report(o.lkg(cm("a")).at(5000).healthy(true).decide());
        assert_eq!(wake, None, "already last-known-good");
    }

    #[test]
    fn removal_returns_to_the_local_config() {
        let o = node()
            .lkg(cm("a"))
            .assigned(cm("a"), ApplyPhase::Verified, 100)
            .reported(State::Done, "kubelet-gitops/a", "");
        assert_eq!(o.decide(), Step::ReturnToLocal);
        // Back on local: every annotation but current and last-known-good goes.
        let back = o
            .assigned(ConfigRef::Local, ApplyPhase::Verified, 1000)
            .at(1001);
        let (r, _) = idle_report(back.decide());
        assert_eq!(
            r,
            Report {
                current: Some("local".into()),
                last_known_good: Some("kubelet-gitops/a".into()),
                ..Report::default()
            }
        );
        // And local becomes last-known-good after the grace.
        assert_eq!(
            back.at(1600).healthy(true).decide(),
            Step::Promote {
                config: ConfigRef::Local
            }
        );
    }

    #[test]
    fn drift_is_restored_but_local_edits_are_the_owners() {
        let mut o = node()
            .desired("a")
            .lkg(cm("a"))
            .assigned(cm("a"), ApplyPhase::Verified, 100);
        o.0.disk = Some(Disk::Differs {
            found: Some("abc".into()),
        });
        assert_eq!(
            o.decide(),
            Step::RestoreDrift {
                found: Some("abc".into())
            }
        );
        let mut local = node().assigned(ConfigRef::Local, ApplyPhase::Verified, 100);
        local.0.disk = Some(Disk::Differs { found: None });
        assert!(matches!(local.decide(), Step::Idle { .. }));
    }

    #[test]
    fn an_invalid_desired_config_is_degraded_without_touching_anything() {
        let mut o = node()
            .assigned(cm("a"), ApplyPhase::Verified, 100)
            .lkg(cm("a"));
        o.0.desired = Desired::parse(Some("not a ref"));
        let (r, _) = idle_report(o.decide());
        assert_eq!(r.state, Some(State::Degraded));
        assert_eq!(r.observed.as_deref(), Some("not a ref"));
        assert_eq!(r.current.as_deref(), Some("kubelet-gitops/a"));
        assert!(r.message.unwrap().starts_with("failed to sync: invalid"));
    }

    #[test]
    fn desired_values_parse() {
        assert_eq!(Desired::parse(None), Desired::Local);
        assert_eq!(Desired::parse(Some("local")), Desired::Local);
        assert_eq!(
            Desired::parse(Some("ns/x")),
            Desired::Config(ConfigRef::configmap("ns", "x"))
        );
        assert!(matches!(Desired::parse(Some("x")), Desired::Invalid { .. }));
    }

    #[test]
    fn returning_to_local_needs_the_saved_original() {
        let mut o = node().assigned(cm("a"), ApplyPhase::Verified, 100);
        o.0.has_local_original = false;
        let (r, _) = idle_report(o.decide());
        assert_eq!(r.state, Some(State::Degraded));
        assert!(r.message.unwrap().contains("never saved"));
    }

    #[test]
    fn a_verdict_on_the_node_keeps_the_failed_config_whatever_the_node_object_shows() {
        // The API server never heard of the rollback: the Node still says Verifying.
        let o = node()
            .desired("b")
            .lkg(cm("a"))
            .assigned(cm("a"), ApplyPhase::Verified, 1030)
            .replacing(cm("b"), false)
            .reported(
                State::Verifying,
                "kubelet-gitops/b",
                "kubelet restarted; waiting",
            );
        let (r, _) = idle_report(o.decide());
        assert_eq!(r.state, Some(State::RolledBack));
        assert_eq!(r.observed.as_deref(), Some("kubelet-gitops/b"));
        assert_eq!(r.current.as_deref(), Some("kubelet-gitops/a"));
        assert_eq!(
            r.message.as_deref(),
            Some(
                "kubelet did not become healthy within 2m: connection refused; rolled back to kubelet-gitops/a"
            )
        );
        // Nor does an agent that restarted with nothing in memory and no Node report.
        let mut bare = o.clone();
        bare.0.report = Report::default();
        assert!(matches!(bare.decide(), Step::Idle { .. }));
        // A new desired config moves on.
        assert_eq!(o.desired("c").decide(), Step::Download { config: cm("c") });
    }

    #[test]
    fn a_rollback_in_flight_goes_on_from_its_phase_without_any_report() {
        let base = node().desired("b").lkg(cm("a")).reported(
            State::Verifying,
            "kubelet-gitops/b",
            "waiting",
        );
        for (phase, step) in [
            (ApplyPhase::Checkpointed, Step::Write),
            (ApplyPhase::Written, Step::Restart),
            (ApplyPhase::Restarted, Step::Verify { deadline: 1020 }),
        ] {
            let o = base
                .clone()
                .assigned(cm("a"), phase, 900)
                .replacing(cm("b"), false);
            assert_eq!(o.decide(), step, "{phase:?}");
        }
    }

    #[test]
    fn a_reported_verdict_removed_from_the_node_is_a_retry() {
        let o = node()
            .desired("b")
            .lkg(cm("a"))
            .assigned(cm("a"), ApplyPhase::Verified, 1030)
            .replacing(cm("b"), true);
        // A person removed state and observed-config from the Node.
        assert_eq!(o.decide(), Step::Download { config: cm("b") });
        // Still shown: kept.
        let shown = o.clone().reported(
            State::RolledBack,
            "kubelet-gitops/b",
            "kubelet did not become healthy within 2m: x; rolled back to kubelet-gitops/a",
        );
        assert!(matches!(shown.decide(), Step::Idle { .. }));
        // Never reported (this Node object never had it): kept, and reported.
        let unreported = node()
            .desired("b")
            .lkg(cm("a"))
            .assigned(cm("a"), ApplyPhase::Verified, 1030)
            .replacing(cm("b"), false);
        let (r, _) = idle_report(unreported.decide());
        assert_eq!(r.state, Some(State::RolledBack));
    }

    #[test]
    fn a_fallback_that_fails_too_is_not_rolled_back_again_and_asks_a_person() {
        let o = node()
            .desired("b")
            // last-known-good moved on in between (it cannot, but nothing chains).
            .lkg(cm("z"))
            .assigned(cm("a"), ApplyPhase::Restarted, 1030)
            .replacing(cm("b"), false)
            .verify_failed(cm("a"), 1030, 1150)
            .at(1160);
        let (r, wake) = idle_report(o.decide());
        assert_eq!(r.state, Some(State::RolledBack));
        assert_eq!(r.observed.as_deref(), Some("kubelet-gitops/b"));
        assert_eq!(r.current.as_deref(), Some("kubelet-gitops/a"));
        let m = r.message.unwrap();
        assert!(
            m.starts_with(
                "kubelet did not become healthy within 2m: connection refused; rolling back to kubelet-gitops/a did not help either: kubelet did not become healthy"
            ),
            "{m}"
        );
        assert!(m.contains("a person must act"), "{m}");
        assert!(
            m.contains("/cp/kubelet-gitops/a") && m.contains("/cp/kubelet-gitops/b"),
            "names both files: {m}"
        );
        assert_eq!(wake, Some(1210));
        assert_eq!(o.at(1210).decide(), Step::Verify { deadline: 1210 });
    }

    #[test]
    fn a_failed_return_to_local_is_not_retried_by_itself() {
        let o = node()
            .lkg(cm("a"))
            .assigned(cm("a"), ApplyPhase::Verified, 1030)
            .replacing(ConfigRef::Local, false);
        let (r, _) = idle_report(o.decide());
        assert_eq!(r.state, Some(State::RolledBack));
        assert_eq!(r.observed.as_deref(), Some("local"));
        assert_eq!(r.current.as_deref(), Some("kubelet-gitops/a"));
    }

    #[test]
    fn a_changed_file_on_the_local_config_is_saved_again_and_on_a_desired_config_is_drift() {
        let changed = Some(Disk::Differs {
            found: Some("abc".into()),
        });
        // On the local config, after a return to it, or never assigned anything.
        let mut back = node().assigned(ConfigRef::Local, ApplyPhase::Verified, 100);
        back.0.disk = changed.clone();
        assert_eq!(
            back.decide(),
            Step::RefreshLocal {
                found: "abc".into()
            }
        );
        let mut never = node();
        never.0.has_local_original = true;
        never.0.disk = changed.clone();
        assert!(matches!(never.decide(), Step::RefreshLocal { .. }));
        // Before a download that starts now.
        let mut wanted = back.clone().desired("b");
        wanted.0.disk = changed.clone();
        assert!(matches!(wanted.decide(), Step::RefreshLocal { .. }));
        // Nothing saved yet: the first apply saves it.
        let mut unsaved = node();
        unsaved.0.disk = changed.clone();
        assert!(matches!(unsaved.decide(), Step::Idle { .. }));
        // A return to local in flight: not yet on it.
        let mut returning = node().assigned(ConfigRef::Local, ApplyPhase::Written, 100);
        returning.0.disk = changed.clone();
        assert_eq!(returning.decide(), Step::Restart);
        // On a desired config the same finding is drift.
        let mut on_a = node()
            .desired("a")
            .assigned(cm("a"), ApplyPhase::Verified, 100);
        on_a.0.disk = changed;
        assert!(matches!(on_a.decide(), Step::RestoreDrift { .. }));
    }

    #[test]
    fn a_pods_cgroup_finding_is_added_to_the_done_message_and_dropped_when_gone() {
        let finding = "pods cgroup /kubepods.slice limits differ from node allocatable: kubepods.slice/memory.max is 1, expected 2";
        let mut o = node()
            .desired("a")
            .lkg(cm("a"))
            .assigned(cm("a"), ApplyPhase::Verified, 100);
        o.0.note = Some("maxPods (--max-pods gives 50, not 64)".into());
        o.0.pods_cgroup = Some(PodsCgroup::Differs(finding.into()));
        let (r, _) = idle_report(o.decide());
        assert_eq!(r.state, Some(State::Done), "reported, not rolled back");
        let shown = format!("maxPods (--max-pods gives 50, not 64); {finding}");
        assert_eq!(r.message.as_deref(), Some(shown.as_str()));

        // Not checked this time, and nothing in memory (a restarted agent): as shown.
        let mut again = o.clone().reported(State::Done, "kubelet-gitops/a", &shown);
        again.0.note = None;
        again.0.pods_cgroup = None;
        let (r, _) = idle_report(again.decide());
        assert_eq!(r.message.as_deref(), Some(shown.as_str()));
        // Checked and fine again: the finding goes, the note stays.
        again.0.pods_cgroup = Some(PodsCgroup::Matches);
        let (r, _) = idle_report(again.decide());
        assert_eq!(
            r.message.as_deref(),
            Some("maxPods (--max-pods gives 50, not 64)")
        );
        // A finding alone.
        let mut alone = node()
            .desired("a")
            .lkg(cm("a"))
            .assigned(cm("a"), ApplyPhase::Verified, 100)
            .reported(State::Done, "kubelet-gitops/a", finding);
        alone.0.pods_cgroup = Some(PodsCgroup::Matches);
        let (r, _) = idle_report(alone.decide());
        assert_eq!(r.message, None);
    }
}
