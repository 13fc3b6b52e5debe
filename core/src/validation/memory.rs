//! Swap and memory QoS: `memorySwap.swapBehavior`, `memoryThrottlingFactor`,
//! `memoryReservationPolicy`, and the gates they need.

use crate::go;
use crate::types::KubeletConfiguration;

use super::{ValidationError, err};

/// `memorySwap.swapBehavior`, when set.
pub(super) fn check_swap(
    c: &KubeletConfiguration,
    on: &dyn Fn(&str) -> bool,
    out: &mut Vec<ValidationError>,
) {
    let behavior = c
        .memory_swap
        .as_ref()
        .and_then(|m| m.swap_behavior.as_deref())
        .unwrap_or("");
    if behavior.is_empty() {
        return;
    }
    if on("NodeSwap") {
        if !matches!(behavior, "" | "NoSwap" | "LimitedSwap") {
            out.push(err(
                "memorySwap.swapBehavior",
                format!(
                    "invalid configuration: memorySwap.swapBehavior {} must be one of: \"\", \"LimitedSwap\" or \"NoSwap\"",
                    go::quote(behavior)
                ),
            ));
        }
    } else {
        out.push(err(
            "memorySwap.swapBehavior",
            "invalid configuration: memorySwap.swapBehavior cannot be set when NodeSwap feature flag is disabled",
        ));
    }
}

/// `MemoryQoS`: the throttling factor and the reservation policy.
pub(super) fn check_qos(
    c: &KubeletConfiguration,
    on: &dyn Fn(&str) -> bool,
    out: &mut Vec<ValidationError>,
) {
    let reservation_policy = c.memory_reservation_policy.as_deref().unwrap_or("");
    let memory_qos = (c.memory_throttling_factor.is_none()
        || reservation_policy == "TieredReservation")
        && on("MemoryQoS");
    if memory_qos && c.memory_throttling_factor.is_none() {
        out.push(err(
            "memoryThrottlingFactor",
            "invalid configuration: memoryThrottlingFactor is required when MemoryQoS feature flag is enabled",
        ));
    }
    if let Some(f) = c.memory_throttling_factor
        && (f <= 0.0 || f > 1.0)
    {
        out.push(err(
            "memoryThrottlingFactor",
            format!("invalid configuration: memoryThrottlingFactor {} must be greater than 0 and less than or equal to 1.0", go::float(f)),
        ));
    }
    if !memory_qos && reservation_policy == "TieredReservation" {
        out.push(err(
            "memoryReservationPolicy",
            "invalid configuration: memoryReservationPolicy \"TieredReservation\" requires MemoryQoS feature gate to be enabled",
        ));
    }
    if !matches!(reservation_policy, "None" | "TieredReservation") {
        out.push(err(
            "memoryReservationPolicy",
            format!(
                "invalid configuration: option {} specified for memoryReservationPolicy. Valid options are \"None\" or \"TieredReservation\"",
                go::quote(reservation_policy)
            ),
        ));
    }
}
