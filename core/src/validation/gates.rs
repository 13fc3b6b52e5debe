//! `featureGates`: unknown gates, gates locked to their default, enabled gates whose
//! dependencies are disabled ([`crate::features::gate_problems`]), each reported on the
//! gate it concerns.

use crate::features;
use crate::types::KubeletConfiguration;

use super::{ValidationError, err};

pub(super) fn check(cfg: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    let Some(gates) = cfg.feature_gates.as_ref() else {
        return;
    };
    for problem in features::gate_problems(gates) {
        let field = match problem.gate {
            Some(name) => format!("featureGates.{name}"),
            None => "featureGates".to_string(),
        };
        out.push(err(field, problem.message));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, bool)]) -> Vec<String> {
        let cfg = KubeletConfiguration {
            feature_gates: Some(pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()),
            ..KubeletConfiguration::default()
        };
        let mut out = Vec::new();
        check(&cfg, &mut out);
        out.into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn each_problem_is_reported_on_the_gate_it_concerns() {
        // An unknown gate named like a word of another gate's message keeps its own.
        assert_eq!(
            fields(&[("gate", true), ("Foo", true)]),
            ["featureGates.Foo", "featureGates.gate"]
        );
        assert_eq!(
            fields(&[("KubeletTracing", false)]),
            ["featureGates.KubeletTracing"]
        );
        // A dependency turned off: reported on it when the gate needing it is a default.
        assert_eq!(
            fields(&[("GracefulNodeShutdown", false)]),
            [
                "featureGates.GracefulNodeShutdown",
                "featureGates.GracefulNodeShutdown"
            ]
        );
        assert_eq!(
            fields(&[
                ("GracefulNodeShutdown", false),
                ("GracefulNodeShutdownBasedOnPodPriority", true)
            ])[0],
            "featureGates.GracefulNodeShutdownBasedOnPodPriority"
        );
        assert_eq!(fields(&[("", true)]), ["featureGates"]);
    }

    #[test]
    fn many_unknown_gates_give_one_error_each() {
        let pairs: Vec<(String, bool)> = (0..5_000).map(|i| (format!("G{i}"), true)).collect();
        let refs: Vec<(&str, bool)> = pairs.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let got = fields(&refs);
        assert_eq!(got.len(), 5_000);
        assert!(got.iter().all(|f| f.starts_with("featureGates.G")));
    }
}
