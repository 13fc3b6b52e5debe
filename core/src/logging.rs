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

/// One line of a JSON log, read strictly: a JSON object in which no object, at any depth,
/// has a key twice. serde_json (like most collectors) silently keeps the last of repeated
/// keys, so a line with `"target"` twice loses one of them; tests of every binary read
/// their logs with this to keep that from happening again. The error names the key and
/// the line.
pub fn parse_json_line(line: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str::<Strict>(line) {
        Ok(Strict(serde_json::Value::Object(map))) => Ok(map),
        Ok(_) => Err(format!("not a JSON object: {line}")),
        Err(e) => Err(format!("{e}: {line}")),
    }
}

/// A JSON value whose objects are checked for repeated keys as they are read.
struct Strict(serde_json::Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Strict, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Strict;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Strict, E> {
        Ok(Strict(v.into()))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Strict, E> {
        Ok(Strict(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Strict, E> {
        Ok(Strict(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Strict, E> {
        Ok(Strict(v.into()))
    }

    fn visit_str<E>(self, v: &str) -> Result<Strict, E> {
        Ok(Strict(v.into()))
    }

    fn visit_string<E>(self, v: String) -> Result<Strict, E> {
        Ok(Strict(v.into()))
    }

    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(Strict(serde_json::Value::Null))
    }

    fn visit_none<E>(self) -> Result<Strict, E> {
        Ok(Strict(serde_json::Value::Null))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Strict(serde_json::Value::Array(items)))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Strict(value) = map.next_value()?;
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!("duplicate key {key:?}")));
            }
            out.insert(key, value);
        }
        Ok(Strict(serde_json::Value::Object(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_at_any_depth_is_an_error() {
        let ok = parse_json_line(
            r#"{"timestamp":"t","level":"INFO","message":"m","n":[1,{"a":null}],"span":{"name":"s","x":1.5}}"#,
        )
        .unwrap();
        assert_eq!(ok["span"]["x"], 1.5);
        for (line, key) in [
            (
                r#"{"target":"kube-system/cm","message":"m","target":"reconciler"}"#,
                "target",
            ),
            (r#"{"span":{"name":"s","name":"t"}}"#, "name"),
            (r#"{"spans":[{"a":1,"a":2}]}"#, "a"),
        ] {
            let err = parse_json_line(line).unwrap_err();
            assert!(err.contains(&format!("duplicate key \"{key}\"")), "{err}");
            assert!(err.ends_with(line), "{err}");
        }
        assert!(
            parse_json_line("[1]")
                .unwrap_err()
                .contains("not a JSON object")
        );
        assert!(parse_json_line("INFO text").is_err());
        // What serde_json alone makes of it: the first value is lost without a word.
        let lax: serde_json::Value =
            serde_json::from_str(r#"{"target":"kube-system/cm","target":"reconciler"}"#).unwrap();
        assert_eq!(lax["target"], "reconciler");
    }

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
