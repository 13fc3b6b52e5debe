//! The agent's Prometheus metrics (prefix `kubelet_gitops_agent`), served on the admin
//! port's `/metrics`.

use std::sync::Arc;
use std::time::Duration;

use kubelet_gitops_core::protocol::State;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The label of the state gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

/// The label of the outcome counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// The labels of `api_errors_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiErrorLabels {
    verb: &'static str,
    resource: &'static str,
    code: u16,
}

/// The outcome of one apply, for `applies_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The kubelet runs the config.
    Done,
    /// Rejected before the kubelet was touched.
    Rejected,
    /// The kubelet did not come back healthy.
    RolledBack,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::Rejected => "rejected",
            Outcome::RolledBack => "rolled_back",
        }
    }
}

/// Every metric of the agent. Cheap to clone (shared counters).
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    state: Family<StateLabel, Gauge>,
    applies: Family<OutcomeLabel, Counter>,
    rollbacks: Counter,
    drift_restores: Counter,
    errors: Counter,
    api_errors: Family<ApiErrorLabels, Counter>,
    apply_duration: Histogram,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric registered.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("kubelet_gitops_agent");
        let state = Family::<StateLabel, Gauge>::default();
        registry.register(
            "state",
            "1 for the state the agent reports (kubelet-gitops.io/state), 0 for the others",
            state.clone(),
        );
        let applies = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "applies",
            "Configs the agent finished with, by outcome (done, rejected, rolled_back)",
            applies.clone(),
        );
        let rollbacks = Counter::default();
        registry.register(
            "rollbacks",
            "Times the kubelet was returned to last-known-good",
            rollbacks.clone(),
        );
        let drift_restores = Counter::default();
        registry.register(
            "drift_restores",
            "Times the kubelet config file was found changed behind the agent's back and restored",
            drift_restores.clone(),
        );
        let errors = Counter::default();
        registry.register(
            "errors",
            "Steps that failed with an error the agent retries",
            errors.clone(),
        );
        let api_errors = Family::<ApiErrorLabels, Counter>::default();
        registry.register(
            "api_errors",
            "Failed Kubernetes API writes of the agent (its reports and Events), each attempt, by verb, resource and HTTP code (0: no answer)",
            api_errors.clone(),
        );
        // 0.5 s .. ~17 min: a kubelet restart takes seconds, a slow verify minutes.
        let apply_duration = Histogram::new(exponential_buckets(0.5, 2.0, 12));
        registry.register(
            "apply_duration_seconds",
            "From the start of an apply (download) to Done or rolled back",
            apply_duration.clone(),
        );
        // Each outcome from 0, so `increase()` counts the first one.
        for outcome in [Outcome::Done, Outcome::Rejected, Outcome::RolledBack] {
            let _ = applies.get_or_create(&OutcomeLabel {
                outcome: outcome.as_str(),
            });
        }
        Metrics {
            registry: Arc::new(registry),
            state,
            applies,
            rollbacks,
            drift_restores,
            errors,
            api_errors,
            apply_duration,
        }
    }

    /// Sets the state gauge: 1 for `state`, 0 for every other (none when `None`).
    pub fn set_state(&self, state: Option<State>) {
        for s in State::ALL {
            self.state
                .get_or_create(&StateLabel { state: s.as_str() })
                .set(i64::from(Some(s) == state));
        }
    }

    /// Counts a finished apply.
    pub fn applied(&self, outcome: Outcome, took: Option<Duration>) {
        self.applies
            .get_or_create(&OutcomeLabel {
                outcome: outcome.as_str(),
            })
            .inc();
        if outcome == Outcome::RolledBack {
            self.rollbacks.inc();
        }
        if let Some(took) = took {
            self.apply_duration.observe(took.as_secs_f64());
        }
    }

    /// Counts a drift restore.
    pub fn drift_restored(&self) {
        self.drift_restores.inc();
    }

    /// Counts a failed step.
    pub fn error(&self) {
        self.errors.inc();
    }

    /// Counts a failed attempt of an API write.
    pub fn api_error(&self, verb: &'static str, resource: &'static str, code: u16) {
        self.api_errors
            .get_or_create(&ApiErrorLabels {
                verb,
                resource,
                code,
            })
            .inc();
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; an error would be a bug in the encoder.
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_encode_with_the_prefix() {
        let m = Metrics::new();
        m.set_state(Some(State::Done));
        m.applied(Outcome::RolledBack, Some(Duration::from_secs(3)));
        let text = m.encode();
        assert!(
            text.contains("kubelet_gitops_agent_state{state=\"Done\"} 1"),
            "{text}"
        );
        assert!(text.contains("kubelet_gitops_agent_state{state=\"Applying\"} 0"));
        assert!(text.contains("kubelet_gitops_agent_applies_total{outcome=\"rolled_back\"} 1"));
        assert!(text.contains("kubelet_gitops_agent_applies_total{outcome=\"done\"} 0"));
        assert!(text.contains("kubelet_gitops_agent_rollbacks_total 1"));
        assert!(text.contains("kubelet_gitops_agent_apply_duration_seconds_count 1"));
        m.api_error("patch", "nodes/status", 409);
        assert!(
            m.encode().contains(
                "kubelet_gitops_agent_api_errors_total{verb=\"patch\",resource=\"nodes/status\",code=\"409\"} 1"
            )
        );
    }
}
