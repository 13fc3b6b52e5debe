//! The text format's fields, each on the line it belongs to: tracing-subscriber prints a
//! `%` field (and the message) as it is, so a newline in a path or a kubelet message
//! would start a forged log line and an ANSI escape would repaint the terminal. This
//! wraps tracing-subscriber's field formatter and passes every value through
//! [`message::escape_line`] first. JSON lines need nothing: JSON escapes control
//! characters itself.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::{DefaultFields, Writer};

use crate::message;

/// [`DefaultFields`] with every value escaped to one line.
#[derive(Debug, Default)]
pub(super) struct OneLineFields(DefaultFields);

impl<'a> MakeVisitor<Writer<'a>> for OneLineFields {
    type Visitor = OneLineVisitor<<DefaultFields as MakeVisitor<Writer<'a>>>::Visitor>;

    fn make_visitor(&self, target: Writer<'a>) -> Self::Visitor {
        OneLineVisitor(self.0.make_visitor(target))
    }
}

/// Escapes each value, then records it with the inner visitor (which keeps its layout:
/// `key=value`, the message first, colours at a terminal).
pub(super) struct OneLineVisitor<V>(V);

impl<V: Visit> OneLineVisitor<V> {
    /// Records `text` (a value already formatted) escaped, unquoted as a `%` field is.
    fn record_text(&mut self, field: &Field, text: &str) {
        let escaped = message::escape_line(text);
        self.0.record_debug(field, &format_args!("{escaped}"));
    }
}

impl<V: Visit> Visit for OneLineVisitor<V> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        if message::has_unsafe(&text) {
            self.record_text(field, &text);
        } else {
            self.0.record_debug(field, value);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        // A `&str` field other than the message prints quoted, escaped by `Debug`.
        if field.name() == "message" && message::has_unsafe(value) {
            self.record_text(field, value);
        } else {
            self.0.record_str(field, value);
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_text(field, &message::error_chain(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.record_i64(field, value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.record_u64(field, value);
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        self.0.record_i128(field, value);
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        self.0.record_u128(field, value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.record_f64(field, value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.record_bool(field, value);
    }
}

impl<V: VisitOutput<fmt::Result>> VisitOutput<fmt::Result> for OneLineVisitor<V> {
    fn finish(self) -> fmt::Result {
        self.0.finish()
    }
}

impl<V: VisitFmt> VisitFmt for OneLineVisitor<V> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        self.0.writer()
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    /// Log output kept in memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read pools/a.yaml\nERROR forged: line")]
    struct Failure;

    #[test]
    fn every_field_and_the_message_stay_on_one_line() {
        let out = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .without_time()
            .fmt_fields(OneLineFields::default())
            .with_writer(out.clone())
            .finish();
        let path = "pools/x.yaml: valid\n2026-01-01T00:00:00Z  INFO kubelet-gitops: success";
        let node_message = "kubelet failed\r\n\u{1b}[2J\u{1b}[31mall good\u{202e}";
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("reconcile", commit = %"abc\ndef");
            let _entered = span.enter();
            tracing::error!(
                path = %path,
                reason = node_message,
                error = &Failure as &(dyn std::error::Error + 'static),
                count = 3,
                "commit rejected: {path}"
            );
            tracing::info!(pool = %"gpu", "plain fields are untouched");
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(!message::has_unsafe(&text.replace('\n', "")), "{text:?}");
        let first = lines[0];
        assert!(
            first.contains("commit rejected: pools/x.yaml: valid\\n2026-01-01T00:00:00Z  INFO"),
            "{first}"
        );
        assert!(first.contains("path=pools/x.yaml: valid\\n2026"), "{first}");
        assert!(
            first.contains(r#"reason="kubelet failed\r\n\u{1b}[2J\u{1b}[31mall good\u{202e}""#),
            "{first}"
        );
        assert!(
            first.contains("error=cannot read pools/a.yaml\\nERROR forged: line"),
            "{first}"
        );
        assert!(first.contains("count=3"), "{first}");
        assert!(first.contains("reconcile{commit=abc\\ndef}"), "{first}");
        assert!(
            lines[1].ends_with("plain fields are untouched pool=gpu"),
            "{}",
            lines[1]
        );
    }
}
