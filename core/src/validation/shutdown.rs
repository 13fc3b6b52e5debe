//! Graceful node shutdown: `shutdownGracePeriod`, `shutdownGracePeriodCriticalPods` and
//! `shutdownGracePeriodByPodPriority`, and the gates they need.

use crate::duration::{Duration, SECOND};
use crate::types::KubeletConfiguration;

use super::{ValidationError, err};

pub(super) fn check(
    c: &KubeletConfiguration,
    on: &dyn Fn(&str) -> bool,
    out: &mut Vec<ValidationError>,
) {
    let period = c.shutdown_grace_period.unwrap_or(Duration::ZERO);
    let critical = c
        .shutdown_grace_period_critical_pods
        .unwrap_or(Duration::ZERO);
    let (p, cp) = (period.as_nanos(), critical.as_nanos());
    // Both periods zero pass every rule, whatever the gate says.
    let graceful = (p != 0 || cp != 0) && on("GracefulNodeShutdown");
    if graceful {
        if cp > p {
            out.push(err(
                "shutdownGracePeriodCriticalPods",
                format!("invalid configuration: shutdownGracePeriodCriticalPods {{{critical}}} must be <= shutdownGracePeriod {{{period}}}"),
            ));
        }
        if p < 0 || (p > 0 && p < SECOND) {
            out.push(err(
                "shutdownGracePeriod",
                format!("invalid configuration: shutdownGracePeriod {{{period}}} must be either zero or otherwise >= 1 sec"),
            ));
        }
        if cp < 0 || (cp > 0 && cp < SECOND) {
            out.push(err(
                "shutdownGracePeriodCriticalPods",
                format!("invalid configuration: shutdownGracePeriodCriticalPods {{{critical}}} must be either zero or otherwise >= 1 sec"),
            ));
        }
    }
    if (p > 0 || cp > 0) && !graceful {
        out.push(err(
            "shutdownGracePeriod",
            "invalid configuration: specifying shutdownGracePeriod or shutdownGracePeriodCriticalPods requires feature gate GracefulNodeShutdown",
        ));
    }
    let by_priority = c
        .shutdown_grace_period_by_pod_priority
        .as_deref()
        .is_some_and(|l| !l.is_empty());
    if !by_priority {
        return;
    }
    if on("GracefulNodeShutdownBasedOnPodPriority") {
        if p > 0 || cp > 0 {
            out.push(err(
                "shutdownGracePeriodByPodPriority",
                "invalid configuration: Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time",
            ));
        }
    } else {
        out.push(err(
            "shutdownGracePeriodByPodPriority",
            "invalid configuration: Specifying shutdownGracePeriodByPodPriority requires feature gate GracefulNodeShutdownBasedOnPodPriority",
        ));
    }
}
