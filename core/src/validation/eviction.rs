//! Eviction settings as the kubelet parses them at start (`eviction.ParseThresholdConfig`):
//! `evictionHard`, `evictionSoft` and its grace periods, `evictionMinimumReclaim`.

use crate::duration::Duration;
use crate::eviction::{self, SIGNALS};
use crate::quantity::Quantity;
use crate::types::KubeletConfiguration;

use super::{ValidationError, err};

pub(super) fn check(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    for (signal, val) in c.eviction_hard.iter().flatten() {
        if let Err(e) = eviction::parse_threshold(signal, val) {
            out.push(err(format!("evictionHard.{signal}"), e.to_string()));
        }
    }
    let grace = c.eviction_soft_grace_period.as_ref();
    for (signal, val) in c.eviction_soft.iter().flatten() {
        match eviction::parse_threshold(signal, val) {
            Err(e) => out.push(err(format!("evictionSoft.{signal}"), e.to_string())),
            Ok(Some(_)) if !grace.is_some_and(|g| g.contains_key(signal)) => out.push(err(
                format!("evictionSoftGracePeriod.{signal}"),
                format!("grace period must be specified for the soft eviction threshold {signal}"),
            )),
            Ok(_) => {}
        }
    }
    for (signal, val) in grace.into_iter().flatten() {
        let problem = if !SIGNALS.contains(&signal.as_str()) {
            Some(format!("unsupported eviction signal {signal}"))
        } else {
            match Duration::parse(val) {
                Err(e) => Some(e.to_string()),
                Ok(d) if d.is_negative() => Some(format!(
                    "invalid eviction grace period specified: {val}, must be a positive value"
                )),
                Ok(_) => None,
            }
        };
        if let Some(p) = problem {
            out.push(err(format!("evictionSoftGracePeriod.{signal}"), p));
        }
    }
    for (signal, val) in c.eviction_minimum_reclaim.iter().flatten() {
        let problem = if !SIGNALS.contains(&signal.as_str()) {
            Some(format!("unsupported eviction signal {signal}"))
        } else if val.ends_with('%') {
            match eviction::parse_percentage(val) {
                Err(e) => Some(e.to_string()),
                Ok(p) if p <= 0.0 => Some(format!(
                    "eviction percentage minimum reclaim {signal} must be positive: {val}"
                )),
                Ok(_) => None,
            }
        } else {
            match Quantity::parse(val) {
                Err(e) => Some(e.to_string()),
                Ok(q) if q.is_negative() => Some(format!(
                    "negative eviction minimum reclaim specified for {signal}"
                )),
                Ok(_) => None,
            }
        };
        if let Some(p) = problem {
            out.push(err(format!("evictionMinimumReclaim.{signal}"), p));
        }
    }
}
