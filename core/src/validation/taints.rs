//! `registerWithTaints` (`utiltaints.CheckTaintValidation`, and no `timeAdded`).

use crate::names::{self, Wording};
use crate::types::Taint;

use super::{ValidationError, err};

pub(super) fn check(taints: &[Taint], out: &mut Vec<ValidationError>) {
    for (i, taint) in taints.iter().enumerate() {
        if let Some((part, detail)) = check_taint(taint) {
            out.push(err(
                format!("registerWithTaints[{i}].{part}"),
                format!("invalid taint: {}: {detail}", go_taint(taint)),
            ));
        }
        if taint.time_added.is_some() {
            out.push(err(
                format!("registerWithTaints[{i}].timeAdded"),
                "invalid configuration: taint.TimeAdded is not nil",
            ));
        }
    }
}

/// The first problem with `t`: which part of it, and why.
fn check_taint(t: &Taint) -> Option<(&'static str, String)> {
    let key_errs = names::label_key_errors(&t.key, Wording::Validation);
    if !key_errs.is_empty() {
        return Some(("key", format!("invalid taint key: {}", key_errs.join("; "))));
    }
    let value = t.value.as_deref().unwrap_or("");
    if !value.is_empty() {
        let errs = names::label_value_errors(value, Wording::Validation);
        if !errs.is_empty() {
            return Some(("value", format!("invalid taint value: {}", errs.join("; "))));
        }
    }
    if !t.effect.is_empty()
        && !matches!(
            t.effect.as_str(),
            "NoSchedule" | "PreferNoSchedule" | "NoExecute"
        )
    {
        return Some((
            "effect",
            format!(
                "invalid taint effect: {}, unsupported taint effect",
                t.effect
            ),
        ));
    }
    None
}

/// A taint as Go's `%v` prints a `v1.Taint`: `{key value effect <nil>}`.
fn go_taint(t: &Taint) -> String {
    format!(
        "{{{} {} {} {}}}",
        t.key,
        t.value.as_deref().unwrap_or(""),
        t.effect,
        t.time_added.as_deref().unwrap_or("<nil>")
    )
}
