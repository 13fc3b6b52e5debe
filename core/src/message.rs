//! Messages for people: an error with its causes on one line, and text cut to the limit
//! of where it is shown (a Node annotation, an Event, a commit status description).

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
