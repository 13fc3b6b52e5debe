//! The rescue's decision, from the checkpoint directory alone (see [`super`] for what it
//! does and why): nothing in flight or an agent running leaves the node alone; a config in
//! flight is watched through the kubelet's starts, and rolled back once they have gone on
//! for the health timeout; a rollback recorded but not carried out is carried on.

use std::fmt;
use std::time::Duration;

use kubelet_gitops_core::protocol::{ConfigRef, reason};
use serde::{Deserialize, Serialize};

use crate::checkpoint::{ApplyPhase, Assigned, Checkpoint, Verdict};

/// `meta/rescue`: when the rescue first and last saw the apply in flight, identified by its
/// checkpoint and the `since` of its phase (a later attempt of the same config is another
/// apply). A record about anything else is stale and ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sighting {
    /// The config in flight.
    pub checkpoint: Checkpoint,
    /// Its `meta/assigned` `since`.
    pub since: u64,
    /// When the rescue first saw it (unix seconds).
    pub first_seen: u64,
    /// When the rescue last saw it: the kubelet's previous start.
    pub last_seen: u64,
    /// Kubelet starts seen with it.
    pub starts: u32,
}

impl Sighting {
    fn first(a: &Assigned, now: u64) -> Sighting {
        Sighting {
            checkpoint: a.checkpoint.clone(),
            since: a.since,
            first_seen: now,
            last_seen: now,
            starts: 1,
        }
    }

    fn is_about(&self, a: &Assigned) -> bool {
        self.checkpoint == a.checkpoint && self.since == a.since
    }
}

/// Everything [`decide`] looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// Now (unix seconds).
    pub now: u64,
    /// How long the kubelet has to come back healthy, in seconds.
    pub health_timeout: u64,
    /// Someone holds the agent's lock ([`crate::lock::LOCK_FILE`]).
    pub agent_running: bool,
    /// `meta/assigned`.
    pub assigned: Option<Assigned>,
    /// `meta/last-known-good` (`None` also when it is corrupt, as the agent reads it).
    pub last_known_good: Option<Checkpoint>,
    /// The checkpoint of the node's own saved config, when one was saved.
    pub local_original: Option<Checkpoint>,
    /// `meta/rescue` (`None` also when it is corrupt).
    pub sighting: Option<Sighting>,
}

/// Why the rescue leaves the node alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Idle {
    /// No config is in flight.
    NothingInFlight,
    /// The agent runs; it handles the node.
    AgentRunning,
    /// A rollback's fallback is on trial (`Restarted` with a verdict): a fallback that
    /// fails too is not rolled back in turn (nothing is safer); a person must act.
    FallbackOnTrial {
        /// The fallback.
        fallback: ConfigRef,
        /// The config that failed before it.
        failed: ConfigRef,
    },
    /// The kubelet kept failing but there is nothing to fall back to.
    NoFallback {
        /// The config in flight.
        config: ConfigRef,
        /// Why there is nothing.
        why: String,
    },
}

impl fmt::Display for Idle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Idle::NothingInFlight => f.write_str("no config in flight"),
            Idle::AgentRunning => f.write_str("the agent is running and handles the node"),
            Idle::FallbackOnTrial { fallback, failed } => write!(
                f,
                "the fallback {fallback} of a rollback from {failed} is on trial; a fallback is not rolled back in turn"
            ),
            Idle::NoFallback { config, why } => {
                write!(f, "{config} is in flight but there is no fallback: {why}")
            }
        }
    }
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing, and nothing is written.
    Nothing(Idle),
    /// Record `sighting` in `meta/rescue` and let the kubelet start. `fresh`: the first
    /// sighting of this apply, or a new start of the clock.
    Watch {
        /// The record to write.
        sighting: Sighting,
        /// It starts a new count.
        fresh: bool,
    },
    /// Roll back to `to`: write `record` (the verdict, the fallback, phase `Checkpointed`)
    /// as `meta/assigned`, then [`Action::CarryOn`].
    RollBack {
        /// The fallback.
        to: Checkpoint,
        /// The new `meta/assigned`.
        record: Box<Assigned>,
    },
    /// A rollback is recorded: write the fallback where the kubelet reads it (removing
    /// the state files the assignment lists first) and record phase `Restarted`.
    CarryOn,
}

/// The rescue's decision.
pub fn decide(o: &Observed) -> Action {
    let Some(a) = &o.assigned else {
        return Action::Nothing(Idle::NothingInFlight);
    };
    match (a.phase, &a.failed) {
        (ApplyPhase::Verified, _) | (ApplyPhase::Checkpointed, None) => {
            Action::Nothing(Idle::NothingInFlight)
        }
        (ApplyPhase::Restarted, Some(v)) => Action::Nothing(Idle::FallbackOnTrial {
            fallback: a.checkpoint.config.clone(),
            failed: v.config.clone(),
        }),
        _ if o.agent_running => Action::Nothing(Idle::AgentRunning),
        (ApplyPhase::Checkpointed | ApplyPhase::Written, Some(_)) => Action::CarryOn,
        (ApplyPhase::Written | ApplyPhase::Restarted, None) => applying(o, a),
    }
}

/// A config in flight, no verdict, no agent.
fn applying(o: &Observed, a: &Assigned) -> Action {
    let Some(seen) = o.sighting.as_ref().filter(|s| s.is_about(a)) else {
        return Action::Watch {
            sighting: Sighting::first(a, o.now),
            fresh: true,
        };
    };
    if o.now.saturating_sub(seen.last_seen) > o.health_timeout {
        // The kubelet ran longer than the health timeout since its last start, or the
        // node was off: it gets a whole new chance.
        return Action::Watch {
            sighting: Sighting::first(a, o.now),
            fresh: true,
        };
    }
    let starts = seen.starts.saturating_add(1);
    let elapsed = o.now.saturating_sub(seen.first_seen);
    if elapsed < o.health_timeout {
        return Action::Watch {
            sighting: Sighting {
                last_seen: o.now,
                starts,
                ..seen.clone()
            },
            fresh: false,
        };
    }
    let failed = &a.checkpoint.config;
    // The agent's choice: last-known-good, else the node's own config.
    let to = match (&o.last_known_good, &o.local_original) {
        (Some(lkg), _) => lkg.clone(),
        (None, Some(local)) => local.clone(),
        (None, None) => {
            return Action::Nothing(Idle::NoFallback {
                config: failed.clone(),
                why: "there is no last-known-good and the node's own config was never saved".into(),
            });
        }
    };
    if to.config == *failed {
        return Action::Nothing(Idle::NoFallback {
            config: failed.clone(),
            why: format!("it is the last-known-good ({})", to.config),
        });
    }
    let verdict = Verdict {
        config: failed.clone(),
        reason: format!(
            "{}: the kubelet kept failing to start with {failed} while no agent was running (after a reboot, or with the agent's pod gone): {starts} starts in {}; kubelet-gitops-rescue acted before the kubelet's next start",
            reason::UNHEALTHY,
            humantime::format_duration(Duration::from_secs(elapsed)),
        ),
        at: o.now,
        reported_to: None,
    };
    let record = Assigned {
        // The change back undoes the change forward: the state files the failed apply
        // made stale (a policy change) are stale again, now with the failed config's
        // policy in them.
        state_files: a.state_files.clone(),
        failed: Some(verdict),
        ..Assigned::new(
            to.clone(),
            ApplyPhase::Checkpointed,
            o.now,
            Some(a.checkpoint.clone()),
        )
    };
    Action::RollBack {
        to,
        record: Box::new(record),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::sha256_hex;

    fn cm(name: &str) -> ConfigRef {
        ConfigRef::configmap("kubelet-gitops", name)
    }

    fn cp(name: &str, rv: &str) -> Checkpoint {
        Checkpoint {
            config: cm(name),
            uid: format!("u-{name}"),
            resource_version: rv.into(),
            sha256: sha256_hex(name.as_bytes()),
        }
    }

    /// A node with `b` written (phase `Written` since 500), `a` last-known-good, the
    /// local config saved, no agent, at t=1000 with a 120s timeout.
    fn obs() -> Observed {
        Observed {
            now: 1000,
            health_timeout: 120,
            agent_running: false,
            assigned: Some(Assigned::new(
                cp("b", "2"),
                ApplyPhase::Written,
                500,
                Some(cp("a", "1")),
            )),
            last_known_good: Some(cp("a", "1")),
            local_original: Some(Checkpoint::local(b"local")),
            sighting: None,
        }
    }

    fn seen(first: u64, last: u64, starts: u32) -> Option<Sighting> {
        Some(Sighting {
            checkpoint: cp("b", "2"),
            since: 500,
            first_seen: first,
            last_seen: last,
            starts,
        })
    }

    #[test]
    fn nothing_in_flight_is_left_alone() {
        let mut o = obs();
        o.assigned = None;
        assert_eq!(decide(&o), Action::Nothing(Idle::NothingInFlight));
        for phase in [ApplyPhase::Verified, ApplyPhase::Checkpointed] {
            o.assigned = Some(Assigned::new(cp("b", "2"), phase, 500, None));
            assert_eq!(
                decide(&o),
                Action::Nothing(Idle::NothingInFlight),
                "{phase}"
            );
        }
    }

    #[test]
    fn a_running_agent_is_left_to_do_it() {
        let mut o = obs();
        o.agent_running = true;
        o.sighting = seen(800, 990, 20);
        assert_eq!(decide(&o), Action::Nothing(Idle::AgentRunning));
        let mut rolling = o.clone();
        rolling.assigned.as_mut().unwrap().failed = Some(Verdict {
            config: cm("c"),
            reason: "x".into(),
            at: 1,
            reported_to: None,
        });
        assert_eq!(decide(&rolling), Action::Nothing(Idle::AgentRunning));
    }

    #[test]
    fn the_first_sighting_is_recorded_and_the_kubelet_gets_its_chance() {
        for phase in [ApplyPhase::Written, ApplyPhase::Restarted] {
            let mut o = obs();
            o.assigned.as_mut().unwrap().phase = phase;
            assert_eq!(
                decide(&o),
                Action::Watch {
                    sighting: seen(1000, 1000, 1).unwrap(),
                    fresh: true
                },
                "{phase}"
            );
        }
        // A record of another apply (another checkpoint, or the same config's earlier
        // attempt) is stale.
        let mut o = obs();
        o.sighting = seen(100, 990, 9).map(|s| Sighting { since: 400, ..s });
        assert!(matches!(decide(&o), Action::Watch { fresh: true, .. }));
        o.sighting = seen(100, 990, 9).map(|s| Sighting {
            checkpoint: cp("b", "3"),
            ..s
        });
        assert!(matches!(decide(&o), Action::Watch { fresh: true, .. }));
    }

    #[test]
    fn later_starts_are_counted_until_the_timeout() {
        let mut o = obs();
        o.sighting = seen(900, 990, 9);
        assert_eq!(
            decide(&o),
            Action::Watch {
                sighting: seen(900, 1000, 10).unwrap(),
                fresh: false
            }
        );
    }

    #[test]
    fn a_kubelet_that_ran_longer_than_the_timeout_gets_a_new_chance() {
        let mut o = obs();
        o.sighting = seen(100, 870, 9);
        assert_eq!(
            decide(&o),
            Action::Watch {
                sighting: seen(1000, 1000, 1).unwrap(),
                fresh: true
            }
        );
    }

    #[test]
    fn after_the_timeout_it_rolls_back_to_last_known_good_recording_the_verdict() {
        let mut o = obs();
        o.sighting = seen(880, 990, 12);
        o.assigned.as_mut().unwrap().state_files = Some(vec!["cpu_manager_state".into()]);
        let Action::RollBack { to, record } = decide(&o) else {
            panic!("{:?}", decide(&o));
        };
        assert_eq!(to, cp("a", "1"));
        assert_eq!(record.checkpoint, cp("a", "1"));
        assert_eq!(record.phase, ApplyPhase::Checkpointed);
        assert_eq!(record.since, 1000);
        assert_eq!(record.previous, Some(cp("b", "2")));
        assert_eq!(record.state_files, Some(vec!["cpu_manager_state".into()]));
        let v = record.failed.unwrap();
        assert_eq!(v.config, cm("b"));
        assert_eq!(v.at, 1000);
        assert_eq!(v.reported_to, None);
        assert!(v.reason.starts_with(reason::UNHEALTHY), "{}", v.reason);
        assert!(
            v.reason.contains("kubelet-gitops/b")
                && v.reason.contains("no agent was running")
                && v.reason.contains("13 starts in 2m"),
            "{}",
            v.reason
        );
    }

    #[test]
    fn without_last_known_good_it_rolls_back_to_the_local_config() {
        let mut o = obs();
        o.sighting = seen(880, 990, 12);
        o.last_known_good = None;
        let Action::RollBack { to, record } = decide(&o) else {
            panic!("{:?}", decide(&o));
        };
        assert_eq!(to, Checkpoint::local(b"local"));
        assert_eq!(record.checkpoint.config, ConfigRef::Local);
        // Nothing saved either: nothing to go to.
        o.local_original = None;
        assert!(matches!(
            decide(&o),
            Action::Nothing(Idle::NoFallback { .. })
        ));
    }

    #[test]
    fn the_last_known_good_itself_failing_is_not_rolled_back() {
        let mut o = obs();
        o.sighting = seen(880, 990, 12);
        o.last_known_good = Some(cp("b", "2"));
        let Action::Nothing(Idle::NoFallback { config, why }) = decide(&o) else {
            panic!("{:?}", decide(&o));
        };
        assert_eq!(config, cm("b"));
        assert!(why.contains("last-known-good"), "{why}");
    }

    #[test]
    fn a_recorded_rollback_is_carried_on_and_its_fallback_is_not_rolled_back() {
        let verdict = Verdict {
            config: cm("b"),
            reason: "kubelet did not become healthy: x".into(),
            at: 900,
            reported_to: None,
        };
        let mut o = obs();
        for (phase, action) in [
            (ApplyPhase::Checkpointed, Action::CarryOn),
            (ApplyPhase::Written, Action::CarryOn),
            (
                ApplyPhase::Restarted,
                Action::Nothing(Idle::FallbackOnTrial {
                    fallback: cm("a"),
                    failed: cm("b"),
                }),
            ),
            (ApplyPhase::Verified, Action::Nothing(Idle::NothingInFlight)),
        ] {
            o.assigned = Some(Assigned {
                failed: Some(verdict.clone()),
                ..Assigned::new(cp("a", "1"), phase, 900, Some(cp("b", "2")))
            });
            assert_eq!(decide(&o), action, "{phase}");
        }
    }
}
