//! `featureGates`: unknown gates, gates locked to their default, enabled gates whose
//! dependencies are disabled ([`crate::features::validate_gates`]), each reported on the
//! gate it names.

use std::collections::BTreeMap;

use crate::features;
use crate::types::KubeletConfiguration;

use super::{ValidationError, err};

pub(super) fn check(cfg: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    let Some(gates) = cfg.feature_gates.as_ref() else {
        return;
    };
    for message in features::validate_gates(gates) {
        let field = match gate_named_in(gates, &message) {
            Some(name) => format!("featureGates.{name}"),
            None => "featureGates".to_string(),
        };
        out.push(err(field, message));
    }
}

/// The gate of `gates` that `message` names (the longest one, as a whole word).
fn gate_named_in<'a>(gates: &'a BTreeMap<String, bool>, message: &str) -> Option<&'a str> {
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.';
    gates
        .keys()
        .filter(|name| {
            !name.is_empty()
                && message.match_indices(name.as_str()).any(|(i, _)| {
                    let before = i.checked_sub(1).and_then(|j| message.as_bytes().get(j));
                    let after = message.as_bytes().get(i + name.len());
                    !before.is_some_and(|b| is_word(*b)) && !after.is_some_and(|b| is_word(*b))
                })
        })
        .max_by_key(|name| name.len())
        .map(String::as_str)
}
