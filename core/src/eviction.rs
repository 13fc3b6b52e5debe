//! Eviction thresholds as the kubelet parses them (`pkg/kubelet/eviction/helpers.go`
//! `parseThresholdStatement`, `parsePercentage`), for validation and for the reservation
//! hard eviction makes in node allocatable.

use crate::go;
use crate::quantity::{Quantity, QuantityError};

/// The signals the kubelet knows (`signalToResource`).
pub(crate) const SIGNALS: &[&str] = &[
    "memory.available",
    "allocatableMemory.available",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "nodefs.available",
    "nodefs.inodesFree",
    "pid.available",
];

/// A threshold's value (upstream `ThresholdValue`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ThresholdValue {
    Quantity(Quantity),
    /// A fraction, a `float32` like upstream: in `[0, 1]`, or NaN (`NaN%`), which upstream
    /// accepts.
    Percentage(f32),
}

/// Why the kubelet refuses a threshold; `Display` is its message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum ThresholdError {
    #[error("unsupported eviction signal {signal}")]
    UnsupportedSignal { signal: String },
    /// The number before `%` is not one.
    #[error(transparent)]
    Number(#[from] ParseFloatError),
    #[error("eviction percentage threshold {signal} must be >= 0%: {value}")]
    BelowZero { signal: String, value: String },
    #[error("eviction percentage threshold {signal} must be <= 100%: {value}")]
    AboveHundred { signal: String, value: String },
    #[error(transparent)]
    Quantity(QuantityError),
    #[error("eviction threshold {signal} must be positive: {canonical}")]
    NotPositive { signal: String, canonical: String },
}

/// `strconv.ParseFloat`'s error, and the value it returns with it: ±Inf when the number
/// is out of range, else 0.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct ParseFloatError {
    message: String,
    pub(crate) returned: f32,
}

/// `parseThresholdStatement` for `signal: value`; `None` for the thresholds upstream
/// ignores (`0%` and `100%`, exactly as written).
pub(crate) fn parse_threshold(
    signal: &str,
    value: &str,
) -> Result<Option<ThresholdValue>, ThresholdError> {
    if !SIGNALS.contains(&signal) {
        return Err(ThresholdError::UnsupportedSignal {
            signal: signal.to_string(),
        });
    }
    if value.ends_with('%') {
        if value == "0%" || value == "100%" {
            return Ok(None);
        }
        let p = parse_percentage(value)?;
        if p < 0.0 {
            return Err(ThresholdError::BelowZero {
                signal: signal.to_string(),
                value: value.to_string(),
            });
        }
        if p > 1.0 {
            return Err(ThresholdError::AboveHundred {
                signal: signal.to_string(),
                value: value.to_string(),
            });
        }
        return Ok(Some(ThresholdValue::Percentage(p)));
    }
    let q = Quantity::parse(value).map_err(ThresholdError::Quantity)?;
    if q.is_negative() || q.is_zero() {
        return Err(ThresholdError::NotPositive {
            signal: signal.to_string(),
            canonical: q.canonical(),
        });
    }
    Ok(Some(ThresholdValue::Quantity(q)))
}

/// `parsePercentage`: `strconv.ParseFloat(strings.TrimRight(v, "%"), 32)`, divided by 100
/// in `float32`.
pub(crate) fn parse_percentage(v: &str) -> Result<f32, ParseFloatError> {
    let f = parse_float32(v.trim_end_matches('%'))?;
    Ok(f / 100.0)
}

/// `strconv.ParseFloat(s, 32)` for decimal input, with Go's error messages.
fn parse_float32(s: &str) -> Result<f32, ParseFloatError> {
    // Rust's parser accepts Go's decimal syntax (and `inf`, `infinity`, `nan`); Go's hex
    // floats (`0x1p-2`) are rejected here, a form no one writes for a percentage.
    let f: f32 = s.parse().map_err(|_| ParseFloatError {
        message: format!(
            "strconv.ParseFloat: parsing {}: invalid syntax",
            go::quote(s)
        ),
        returned: 0.0,
    })?;
    let lower = s.trim_start_matches(['+', '-']).to_ascii_lowercase();
    if f.is_infinite() && lower != "inf" && lower != "infinity" {
        return Err(ParseFloatError {
            message: format!(
                "strconv.ParseFloat: parsing {}: value out of range",
                go::quote(s)
            ),
            returned: f,
        });
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_parse_as_upstream() {
        assert_eq!(parse_threshold("memory.available", "0%"), Ok(None));
        assert_eq!(parse_threshold("memory.available", "100%"), Ok(None));
        assert_eq!(
            parse_threshold("nodefs.available", "10%%"),
            Ok(Some(ThresholdValue::Percentage(0.1)))
        );
        assert!(matches!(
            parse_threshold("nodefs.available", "NaN%"),
            Ok(Some(ThresholdValue::Percentage(p))) if p.is_nan()
        ));
        let out_of_range = parse_threshold("nodefs.available", "-1e40%").unwrap_err();
        assert_eq!(
            out_of_range.to_string(),
            "strconv.ParseFloat: parsing \"-1e40\": value out of range"
        );
        assert!(
            matches!(out_of_range, ThresholdError::Number(ParseFloatError { returned, .. }) if returned == f32::NEG_INFINITY)
        );
        assert_eq!(
            parse_threshold("memory.available", "-1Gi")
                .unwrap_err()
                .to_string(),
            "eviction threshold memory.available must be positive: -1Gi"
        );
    }
}
