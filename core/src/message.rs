//! Messages for people: an error with its causes on one line, a list of errors capped per
//! file, and text cut to the limit of where it is shown (a Node annotation, an Event, a
//! commit status description).

use std::fmt;

/// `e` and its sources, `: `-joined, leaving out a source whose message the text so far
/// already contains (a `thiserror` message that prints its source, `"{0}"`, would
/// otherwise say it twice).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = s.source();
    }
    out
}

/// The most errors of one file shown to a person, wherever a list of errors is shown:
/// `validate`, `render` and `plan`, the plan comment on a pull request, `/readyz` and the
/// reconciler's log line for a rejected commit. The others are counted
/// ([`more_errors`]), so a file of ten thousand mistakes still reads in one screen, and
/// what must be fixed first is at the top.
pub const MAX_ERRORS_SHOWN: usize = 20;

/// One line of an error list capped per file ([`cap_per_file`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capped<'a, T> {
    /// An error shown.
    Shown(&'a T),
    /// After the last error shown of `file`: how many more it has.
    More { file: &'a str, hidden: usize },
}

impl<T: fmt::Display> fmt::Display for Capped<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Capped::Shown(error) => error.fmt(f),
            Capped::More { file, hidden } => f.write_str(&more_errors(file, *hidden)),
        }
    }
}

/// The line that stands for the errors of `file` not shown:
/// `pools/gpu.yaml: and 480 more errors (only the first 20 of each file are listed)`.
pub fn more_errors(file: &str, hidden: usize) -> String {
    let s = if hidden == 1 { "" } else { "s" };
    format!(
        "{file}: and {hidden} more error{s} (only the first {MAX_ERRORS_SHOWN} of each file \
         are listed)"
    )
}

/// `errors` with at most [`MAX_ERRORS_SHOWN`] of each file (`file` says which file an
/// error is about; the errors of a file must be next to each other, as in a list sorted by
/// file), each file's last one shown followed by how many more it has. Sort each file's
/// errors (by line) first: the first ones are those shown.
pub fn cap_per_file<'a, T>(errors: &'a [T], file: impl Fn(&'a T) -> &'a str) -> Vec<Capped<'a, T>> {
    let mut out = Vec::with_capacity(errors.len().min(4 * MAX_ERRORS_SHOWN));
    let mut rest = errors;
    while let Some(first) = rest.first() {
        let name = file(first);
        let run = rest.iter().take_while(|e| file(e) == name).count();
        let (group, after) = rest.split_at(run);
        out.extend(group.iter().take(MAX_ERRORS_SHOWN).map(Capped::Shown));
        if run > MAX_ERRORS_SHOWN {
            out.push(Capped::More {
                file: name,
                hidden: run - MAX_ERRORS_SHOWN,
            });
        }
        rest = after;
    }
    out
}

/// A length limit and how it is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// UTF-8 bytes: annotations, Events, log fields.
    Bytes(usize),
    /// Unicode scalar values: what the forges count in a status description.
    Chars(usize),
}

/// `text` as it is when it fits `limit`; otherwise cut at a character boundary so that,
/// with white space at the cut dropped and `marker` appended, it fits (`marker` alone, cut
/// to the limit, when even that does not).
pub fn truncate(text: &str, limit: Limit, marker: &str) -> String {
    let (len, max, marker_len): (fn(&str) -> usize, usize, usize) = match limit {
        Limit::Bytes(max) => (str::len, max, marker.len()),
        Limit::Chars(max) => (|s: &str| s.chars().count(), max, marker.chars().count()),
    };
    if len(text) <= max {
        return text.to_string();
    }
    if marker_len >= max {
        return truncate(marker, limit, "");
    }
    let room = max - marker_len;
    let end = match limit {
        Limit::Bytes(_) => (0..=room)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0),
        Limit::Chars(_) => text.char_indices().nth(room).map_or(text.len(), |(i, _)| i),
    };
    let mut out = text[..end].trim_end().to_string();
    out.push_str(marker);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("failed to write checkpoint /x")]
    struct Outer(#[source] Middle);

    #[derive(Debug, thiserror::Error)]
    #[error("disk: {0}")]
    struct Middle(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Transparent(#[source] std::io::Error);

    #[test]
    fn chains_join_causes_and_say_nothing_twice() {
        let io = || std::io::Error::other("no space left");
        assert_eq!(
            error_chain(&Outer(Middle(io()))),
            "failed to write checkpoint /x: disk: no space left"
        );
        assert_eq!(error_chain(&Transparent(io())), "no space left");
        assert_eq!(error_chain(&io()), "no space left");
    }

    #[test]
    fn errors_are_capped_per_file_with_the_count_of_the_rest() {
        let errors: Vec<(String, usize)> = (0..MAX_ERRORS_SHOWN + 480)
            .map(|i| ("pools/gpu.yaml".to_string(), i))
            .chain((0..3).map(|i| ("pools/cpu.yaml".to_string(), i)))
            .chain((0..MAX_ERRORS_SHOWN + 1).map(|i| ("pools/x.yaml".to_string(), i)))
            .collect();
        let capped = cap_per_file(&errors, |(file, _)| file);
        assert_eq!(
            capped.len(),
            MAX_ERRORS_SHOWN + 1 + 3 + MAX_ERRORS_SHOWN + 1
        );
        // The first errors of each file, in order, then the count of the others.
        assert_eq!(capped[0], Capped::Shown(&errors[0]));
        assert_eq!(
            capped[MAX_ERRORS_SHOWN - 1],
            Capped::Shown(&errors[MAX_ERRORS_SHOWN - 1])
        );
        assert_eq!(
            capped[MAX_ERRORS_SHOWN],
            Capped::More {
                file: "pools/gpu.yaml",
                hidden: 480
            }
        );
        assert_eq!(
            capped[MAX_ERRORS_SHOWN + 1],
            Capped::Shown(&errors[MAX_ERRORS_SHOWN + 480])
        );
        let lines: Vec<String> = capped
            .iter()
            .map(|c| match c {
                Capped::Shown((file, i)) => format!("{file}: {i}"),
                Capped::More { file, hidden } => more_errors(file, *hidden),
            })
            .collect();
        assert_eq!(
            lines[MAX_ERRORS_SHOWN],
            format!(
                "pools/gpu.yaml: and 480 more errors (only the first {MAX_ERRORS_SHOWN} of \
                 each file are listed)"
            )
        );
        assert_eq!(
            lines.last().map(String::as_str),
            Some(
                format!(
                    "pools/x.yaml: and 1 more error (only the first {MAX_ERRORS_SHOWN} of each \
                     file are listed)"
                )
                .as_str()
            )
        );
        // Few errors: all shown, nothing added.
        let few = &errors[MAX_ERRORS_SHOWN + 480..MAX_ERRORS_SHOWN + 483];
        assert_eq!(cap_per_file(few, |(file, _)| file).len(), 3);
        assert!(cap_per_file(&errors[..0], |(file, _)| file).is_empty());
        // Display: an error as itself, the rest as the count.
        let shown: Capped<'_, String> = Capped::More {
            file: "f",
            hidden: 2,
        };
        assert!(shown.to_string().starts_with("f: and 2 more errors"));
        assert_eq!(Capped::Shown(&"x".to_string()).to_string(), "x");
    }

    #[test]
    fn text_that_fits_is_kept() {
        assert_eq!(truncate("abc", Limit::Bytes(3), "..."), "abc");
        assert_eq!(truncate("äbc", Limit::Chars(3), "…"), "äbc");
        assert_eq!(truncate("", Limit::Bytes(0), "..."), "");
    }

    #[test]
    fn bytes_are_cut_at_a_character_boundary_with_the_marker_inside_the_limit() {
        assert_eq!(truncate("abcdefgh", Limit::Bytes(6), "..."), "abc...");
        // "é" is two bytes: a cut inside it moves back before it.
        assert_eq!(truncate("abé defgh", Limit::Bytes(6), "..."), "ab...");
        let long = "x".repeat(100);
        let cut = truncate(&long, Limit::Bytes(40), " ... (truncated)");
        assert_eq!(cut.len(), 40);
        assert!(cut.ends_with("x ... (truncated)"));
    }

    #[test]
    fn chars_count_characters_and_drop_white_space_at_the_cut() {
        assert_eq!(truncate("ääääää", Limit::Chars(4), "…"), "äää…");
        assert_eq!(truncate("one two three", Limit::Chars(5), "…"), "one…");
        assert_eq!(truncate("abc", Limit::Chars(0), "…"), "");
    }

    #[test]
    fn a_marker_longer_than_the_limit_is_cut_itself() {
        assert_eq!(truncate("abcdef", Limit::Bytes(2), "..."), "..");
    }
}
