//! The log set-up every binary shares: tracing's `fmt` subscriber with an `EnvFilter`,
//! human-readable text or JSON lines, coloured only for a person at a terminal (`kubectl
//! logs`, the journal and log shippers get plain text; tracing-subscriber colours whenever
//! `NO_COLOR` is unset, so the terminal check is ours). Behind the `logging` feature, so
//! that a user of the kubelet model alone does not link tracing-subscriber. Text lines
//! show control characters in field values escaped ([`escape`]), so that a value from a
//! repository or a node cannot forge a log line.

mod escape;

use std::io::IsTerminal as _;
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines with `key=value` fields.
    #[default]
    Text,
    /// One JSON object per line (for log collectors).
    Json,
}

/// Where log lines go.
#[derive(Debug)]
pub enum LogOutput {
    /// Standard error, coloured when it is a terminal and `NO_COLOR` is unset or empty.
    Stderr,
    /// A file, never coloured (the demo keeps its processes' logs out of its display).
    File(std::fs::File),
    /// The test harness's captured output (shown for failing tests only).
    Test,
}

/// Why no logger was installed.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    /// The filter does not parse.
    #[error("invalid --log filter {filter:?}: {source}")]
    Filter {
        filter: String,
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// A global subscriber is installed already.
    #[error("cannot install the logger: {0}")]
    Installed(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Whether standard error is a terminal that wants colours.
fn stderr_wants_colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Installs the global subscriber: `filter` in EnvFilter syntax (`info`,
/// `reconciler=debug,kube=warn`), lines in `format`, written to `output`. JSON lines carry
/// the event's fields at the top level and the current span.
pub fn init(format: LogFormat, filter: &str, output: LogOutput) -> Result<(), LoggingError> {
    let env_filter = EnvFilter::try_new(filter).map_err(|source| LoggingError::Filter {
        filter: filter.to_string(),
        source,
    })?;
    let builder = tracing_subscriber::fmt().with_env_filter(env_filter);
    let installed = match (output, format) {
        (LogOutput::Stderr, LogFormat::Text) => builder
            .fmt_fields(escape::OneLineFields::default())
            .with_ansi(stderr_wants_colour())
            .with_writer(std::io::stderr)
            .try_init(),
        (LogOutput::Stderr, LogFormat::Json) => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_writer(std::io::stderr)
            .try_init(),
        (LogOutput::File(file), LogFormat::Text) => builder
            .fmt_fields(escape::OneLineFields::default())
            .with_ansi(false)
            .with_writer(Mutex::new(file))
            .try_init(),
        (LogOutput::File(file), LogFormat::Json) => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_writer(Mutex::new(file))
            .try_init(),
        (LogOutput::Test, LogFormat::Text) => builder
            .fmt_fields(escape::OneLineFields::default())
            .with_test_writer()
            .try_init(),
        (LogOutput::Test, LogFormat::Json) => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_test_writer()
            .try_init(),
    };
    installed.map_err(LoggingError::Installed)
}

/// For tests: text to the harness's captured output, filtered by `RUST_LOG` (default
/// `warn`). A subscriber already installed (by another test of the same binary) is kept.
pub fn init_for_tests() {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_string());
    if init(LogFormat::Text, &filter, LogOutput::Test).is_err() {
        let _ = init(LogFormat::Text, "warn", LogOutput::Test);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_filter_is_named() {
        let err = init(LogFormat::Text, "=[", LogOutput::Test).unwrap_err();
        assert!(
            err.to_string().starts_with("invalid --log filter \"=[\""),
            "{err}"
        );
    }

    #[test]
    fn a_second_logger_is_refused_and_the_first_kept() {
        init_for_tests();
        let err = init(LogFormat::Json, "info", LogOutput::Test).unwrap_err();
        assert!(matches!(err, LoggingError::Installed(_)), "{err}");
    }
}
