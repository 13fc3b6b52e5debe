//! `logging`: component-base `logs/api/v1` `Validate` as the kubelet runs it, with the
//! kubelet's log formats (`text`, always; `json`, behind `LoggingBetaOptions`) and its
//! feature gates.
//!
//! Messages are those of `field.Error`, the field's path first (`logging.format: Invalid
//! value: ...`, `Forbidden: ...`, `Required value: ...`), as the kubelet prints them. Upstream's check that a non-default format is not combined with
//! klog command-line flags concerns flags, not the config file, and is not made here.

use std::collections::BTreeMap;

use crate::features;
use crate::go;
use crate::types::{LoggingConfiguration, OutputRoutingOptions};

use super::{ValidationError, err};

/// A `field.Error` at `field`: its path, then `detail`.
fn ferr(field: impl Into<String>, detail: impl AsRef<str>) -> ValidationError {
    let field = field.into();
    let message = format!("{field}: {}", detail.as_ref());
    err(field, message)
}

const MAX_INT32: u32 = i32::MAX as u32;

/// Validates `logging` (unset reads as Go's zero value, whose empty format is rejected).
pub(super) fn validate(
    logging: Option<&LoggingConfiguration>,
    gates: Option<&BTreeMap<String, bool>>,
    out: &mut Vec<ValidationError>,
) {
    let default = LoggingConfiguration::default();
    let c = logging.unwrap_or(&default);
    let format = c.format.as_deref().unwrap_or("");

    // Validate's first check: a zero or negative flushFrequency, shown as it would be
    // marshalled (a string when the file wrote one, else nanoseconds).
    if let Some(flush) = c
        .flush_frequency
        .as_ref()
        .filter(|f| f.duration.as_nanos() <= 0)
    {
        let shown = if flush.serialize_as_string {
            go::quote(&flush.duration.to_string())
        } else {
            flush.duration.as_nanos().to_string()
        };
        out.push(ferr(
            "logging.flushFrequency",
            format!("Invalid value: {shown}: Must be greater than zero"),
        ));
    }

    match format {
        "text" => {}
        "json" => {
            if !features::enabled(gates, "LoggingBetaOptions") {
                out.push(ferr(
                    "logging.format",
                    "Forbidden: Log format json is disabled, see LoggingBetaOptions feature",
                ));
            }
        }
        other => out.push(ferr(
            "logging.format",
            format!(
                "Invalid value: {}: Unsupported log format",
                go::quote(other)
            ),
        )),
    }

    let verbosity = c.verbosity.unwrap_or(0);
    if verbosity > MAX_INT32 {
        out.push(ferr(
            "logging.verbosity",
            format!("Invalid value: {verbosity}: Must be <= {MAX_INT32}"),
        ));
    }

    let vmodule = c.vmodule.as_deref().unwrap_or(&[]);
    if !vmodule.is_empty() && !format.is_empty() && format != "text" {
        out.push(ferr(
            "logging.vmodule",
            "Forbidden: Only supported for text log format",
        ));
    }
    for (i, item) in vmodule.iter().enumerate() {
        let field = || format!("logging.vmodule[{i}]");
        if item.file_pattern.is_empty() {
            out.push(ferr(
                field(),
                "Required value: File pattern must not be empty",
            ));
        }
        if item.file_pattern.contains(['=', ',']) {
            out.push(ferr(
                field(),
                format!(
                    "Invalid value: {}: File pattern must not contain equal sign or comma",
                    go::quote(&item.file_pattern)
                ),
            ));
        }
        if item.verbosity > MAX_INT32 {
            out.push(ferr(
                field(),
                format!("Invalid value: {}: Must be <= {MAX_INT32}", item.verbosity),
            ));
        }
    }

    if let Some(options) = c.options.as_ref() {
        check_output_routing(options.text.as_ref(), "text", gates, out);
        check_output_routing(options.json.as_ref(), "json", gates, out);
    }
}

/// `validateTextOptions` / `validateJSONOptions`: splitting streams and buffering need
/// `LoggingAlphaOptions`.
fn check_output_routing(
    o: Option<&OutputRoutingOptions>,
    format: &str,
    gates: Option<&BTreeMap<String, bool>>,
    out: &mut Vec<ValidationError>,
) {
    let Some(o) = o else {
        return;
    };
    let split = o.split_stream.unwrap_or(false);
    let buffered = o.info_buffer_size.as_ref().is_some_and(|q| q.value() != 0);
    if !(split || buffered) || features::enabled(gates, "LoggingAlphaOptions") {
        return;
    }
    if split {
        out.push(ferr(
            format!("logging.options.{format}.splitStream"),
            "Forbidden: Feature LoggingAlphaOptions is disabled",
        ));
    }
    if buffered {
        out.push(ferr(
            format!("logging.options.{format}.infoBufferSize"),
            "Forbidden: Feature LoggingAlphaOptions is disabled",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantity::Quantity;
    use crate::types::{FormatOptions, VModuleItem};

    fn text() -> LoggingConfiguration {
        LoggingConfiguration {
            format: Some("text".into()),
            ..Default::default()
        }
    }

    fn run(c: &LoggingConfiguration, gates: &[(&str, bool)]) -> Vec<ValidationError> {
        let gates: BTreeMap<String, bool> =
            gates.iter().map(|(k, v)| ((*k).to_string(), *v)).collect();
        let mut out = Vec::new();
        validate(Some(c), Some(&gates), &mut out);
        out
    }

    fn one(errs: &[ValidationError], field: &str, part: &str) {
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, field, "{errs:?}");
        assert!(errs[0].message.contains(part), "{} lacks {part:?}", errs[0]);
    }

    #[test]
    fn text_passes_and_unset_format_is_unsupported() {
        assert_eq!(run(&text(), &[]), vec![]);
        let mut out = Vec::new();
        validate(None, None, &mut out);
        one(
            &out,
            "logging.format",
            "Invalid value: \"\": Unsupported log format",
        );
    }

    #[test]
    fn unknown_format() {
        let c = LoggingConfiguration {
            format: Some("invalid".into()),
            ..Default::default()
        };
        let errs = run(&c, &[]);
        one(
            &errs,
            "logging.format",
            "Invalid value: \"invalid\": Unsupported log format",
        );
        assert_eq!(
            errs[0].to_string(),
            "logging.format: Invalid value: \"invalid\": Unsupported log format"
        );
    }

    #[test]
    fn json_needs_logging_beta_options() {
        let c = LoggingConfiguration {
            format: Some("json".into()),
            ..Default::default()
        };
        assert_eq!(run(&c, &[("LoggingBetaOptions", true)]), vec![]);
        one(
            &run(&c, &[("LoggingBetaOptions", false)]),
            "logging.format",
            "Forbidden: Log format json is disabled, see LoggingBetaOptions feature",
        );
    }

    #[test]
    fn verbosity_fits_int32() {
        let mut c = text();
        c.verbosity = Some(i32::MAX as u32);
        assert_eq!(run(&c, &[]), vec![]);
        c.verbosity = Some(u32::MAX);
        one(
            &run(&c, &[]),
            "logging.verbosity",
            "Invalid value: 4294967295: Must be <= 2147483647",
        );
    }

    #[test]
    fn vmodule_rules() {
        let item = |p: &str, v: u32| VModuleItem {
            file_pattern: p.into(),
            verbosity: v,
        };
        let mut c = text();
        c.vmodule = Some(vec![item("kubelet*", 4)]);
        assert_eq!(run(&c, &[]), vec![]);

        c.vmodule = Some(vec![item("", 1)]);
        one(
            &run(&c, &[]),
            "logging.vmodule[0]",
            "Required value: File pattern must not be empty",
        );
        c.vmodule = Some(vec![item("ok", 1), item("a=b", 1)]);
        one(
            &run(&c, &[]),
            "logging.vmodule[1]",
            "File pattern must not contain equal sign or comma",
        );
        c.vmodule = Some(vec![item("x", u32::MAX)]);
        one(&run(&c, &[]), "logging.vmodule[0]", "Must be <= 2147483647");

        let json = LoggingConfiguration {
            format: Some("json".into()),
            vmodule: Some(vec![item("x", 1)]),
            ..Default::default()
        };
        one(
            &run(&json, &[]),
            "logging.vmodule",
            "Forbidden: Only supported for text log format",
        );
    }

    #[test]
    fn output_routing_needs_logging_alpha_options() {
        let routing = OutputRoutingOptions {
            split_stream: Some(true),
            info_buffer_size: Some(Quantity::parse("1Mi").unwrap()),
        };
        let mut c = text();
        c.options = Some(FormatOptions {
            text: None,
            json: Some(routing.clone()),
        });
        assert_eq!(run(&c, &[("LoggingAlphaOptions", true)]), vec![]);
        let errs = run(&c, &[]);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(errs[0].field, "logging.options.json.splitStream");
        assert_eq!(errs[1].field, "logging.options.json.infoBufferSize");
        assert!(
            errs[1]
                .message
                .contains("Feature LoggingAlphaOptions is disabled")
        );

        c.options = Some(FormatOptions {
            text: Some(OutputRoutingOptions {
                split_stream: Some(false),
                info_buffer_size: Some(Quantity::parse("0").unwrap()),
            }),
            json: None,
        });
        assert_eq!(run(&c, &[]), vec![], "false and zero are the defaults");
        c.options = Some(FormatOptions {
            text: Some(routing),
            json: None,
        });
        assert_eq!(run(&c, &[]).len(), 2);
    }
}
