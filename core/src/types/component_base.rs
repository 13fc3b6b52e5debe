//! The objects `KubeletConfiguration` takes from component-base: `logging`
//! (`k8s.io/component-base/logs/api/v1`) and `tracing` (`tracing/api/v1`).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::duration::Duration;
use crate::quantity::Quantity;

/// Logging options (component-base logs/api/v1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoggingConfiguration {
    /// Log format: text or json. Default: "text".
    #[serde(rename = "format", default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Maximum time between log flushes: a duration string or integer nanoseconds. Default: 5s.
    #[serde(
        rename = "flushFrequency",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub flush_frequency: Option<TimeOrMetaDuration>,
    /// Log verbosity threshold. Default: 0.
    #[serde(rename = "verbosity", default, skip_serializing_if = "Option::is_none")]
    pub verbosity: Option<u32>,
    /// Per-file verbosity overrides (text format only).
    #[serde(rename = "vmodule", default, skip_serializing_if = "Option::is_none")]
    pub vmodule: Option<Vec<VModuleItem>>,
    /// Format-specific options.
    #[serde(rename = "options", default, skip_serializing_if = "Option::is_none")]
    pub options: Option<FormatOptions>,
}

/// Options of each logging format.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FormatOptions {
    /// Options of the text format.
    #[serde(rename = "text", default, skip_serializing_if = "Option::is_none")]
    pub text: Option<OutputRoutingOptions>,
    /// Options of the json format.
    #[serde(rename = "json", default, skip_serializing_if = "Option::is_none")]
    pub json: Option<OutputRoutingOptions>,
}

/// Output routing of a logging format.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputRoutingOptions {
    /// Errors to stderr, info to stdout with buffering.
    #[serde(
        rename = "splitStream",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub split_stream: Option<bool>,
    /// Size of the info stream buffer when split.
    #[serde(
        rename = "infoBufferSize",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub info_buffer_size: Option<Quantity>,
}

/// Verbosity for files matching a pattern.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VModuleItem {
    /// File name or glob (without .go).
    #[serde(rename = "filePattern", default)]
    pub file_pattern: String,
    /// Verbosity threshold for matching files.
    #[serde(rename = "verbosity", default)]
    pub verbosity: u32,
}

/// `logging.flushFrequency`: upstream's `TimeOrMetaDuration` accepts a duration string
/// (`"5s"`) or an integer count of nanoseconds (`5000000000`), and writes back the form
/// it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeOrMetaDuration {
    pub duration: Duration,
    pub serialize_as_string: bool,
}

impl Serialize for TimeOrMetaDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.serialize_as_string {
            self.duration.serialize(s)
        } else {
            s.serialize_i64(self.duration.as_nanos())
        }
    }
}

impl<'de> Deserialize<'de> for TimeOrMetaDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = TimeOrMetaDuration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration string such as \"5s\" or an integer number of nanoseconds")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(TimeOrMetaDuration {
                    duration: Duration::parse(v).map_err(E::custom)?,
                    serialize_as_string: true,
                })
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(TimeOrMetaDuration {
                    duration: Duration::from_nanos(v),
                    serialize_as_string: false,
                })
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
                let v = i64::try_from(v)
                    .map_err(|_| E::custom(format!("invalid duration \"{v}\": out of range")))?;
                self.visit_i64(v)
            }
        }
        d.deserialize_any(V)
    }
}

/// OpenTelemetry tracing client configuration (component-base tracing/api/v1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TracingConfiguration {
    /// Collector endpoint, host:port.
    #[serde(rename = "endpoint", default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Spans sampled per million.
    #[serde(
        rename = "samplingRatePerMillion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub sampling_rate_per_million: Option<i32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_frequency_keeps_its_form() {
        let s: TimeOrMetaDuration = serde_json::from_str("\"5s\"").unwrap();
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"5s\"");
        let n: TimeOrMetaDuration = serde_json::from_str("5000000000").unwrap();
        assert_eq!(n.duration, Duration::from_secs(5));
        assert_eq!(serde_json::to_string(&n).unwrap(), "5000000000");
    }
}
