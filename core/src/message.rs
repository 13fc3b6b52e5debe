//! Messages for people: an error with its causes on one line, a list of errors capped per
//! file, text cut to the limit of where it is shown (a Node annotation, an Event, a commit
//! status description), and text from a repository or a node made safe for where it is
//! printed.
//!
//! # Escaping
//!
//! Paths, field names, values and kubelet messages come from people with push rights or
//! from nodes; printed as they are, a newline in them forges a line of output (a `valid`
//! line, a git note line, a log line), an ANSI escape rewrites a terminal, a bidi control
//! reorders what a reviewer reads, and Markdown forges the structure of a plan. Every sink
//! has its escape here:
//!
//! | sink | function |
//! | --- | --- |
//! | a line of terminal or log text, a status description, a git note line, an annotation, an Event | [`escape_line`] ([`OneLine`] in `format!`) |
//! | bytes that may not be UTF-8 (a git path) | [`escape_bytes`] |
//! | Markdown inline code | [`markdown_code`] |
//! | a Markdown table cell | [`markdown_cell`] |
//! | a Markdown fenced code block | [`markdown_fence`] |
//! | Markdown prose | [`markdown_text`] |
//!
//! The line escape shows the characters [`is_unsafe`] names as `\n`, `\r`, `\t` or
//! `\u{1b}` and keeps everything else, printable Unicode included. It is for display,
//! not reversible (a backslash is kept as it is), and idempotent: text escaped once does
//! not change when escaped again, so a value read back from a Node compares equal.

use std::borrow::Cow;
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

/// Whether `c` must not reach output as it is: the C0 and C1 controls and DEL (`\n`,
/// `\r`, `\t`, ESC, NEL ...), the bidirectional formatting characters (U+061C, U+200E,
/// U+200F, U+202A to U+202E, U+2066 to U+2069: "Trojan Source"), and the Unicode line and
/// paragraph separators (U+2028, U+2029), which some terminals, editors and log viewers
/// take as line breaks.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// Whether `text` holds a character [`is_unsafe`] names.
pub fn has_unsafe(text: &str) -> bool {
    text.chars().any(is_unsafe)
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c => {
            use std::fmt::Write as _;
            // Writing to a String cannot fail.
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

/// `text` as one line of output: every character [`is_unsafe`] names shown escaped
/// (`\n`, `\r`, `\t`, `\u{1b}`), everything else as it is. Borrows when there is
/// nothing to escape.
pub fn escape_line(text: &str) -> Cow<'_, str> {
    if !has_unsafe(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Displays its text through [`escape_line`], without an allocation when there is
/// nothing to escape: `eprintln!("{}: valid", OneLine(&name))`,
/// `info!(path = %OneLine(&path))`.
#[derive(Debug, Clone, Copy)]
pub struct OneLine<'a>(pub &'a str);

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(is_unsafe) {
            f.write_str(&rest[..at])?;
            let c = rest[at..].chars().next().unwrap_or_default();
            let mut escaped = String::new();
            push_escaped(&mut escaped, c);
            f.write_str(&escaped)?;
            rest = &rest[at + c.len_utf8()..];
        }
        f.write_str(rest)
    }
}

/// `bytes` as one line: valid UTF-8 escaped as [`escape_line`] does, each byte that is not
/// part of valid UTF-8 shown as `\xff`.
pub fn escape_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 16);
    for chunk in bytes.utf8_chunks() {
        out.push_str(&escape_line(chunk.valid()));
        for b in chunk.invalid() {
            use std::fmt::Write as _;
            // Writing to a String cannot fail.
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// The longest run of backticks in `text`.
fn longest_backtick_run(text: &str) -> usize {
    let (mut longest, mut run) = (0, 0);
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    longest
}

/// `text` as Markdown inline code, on one line ([`escape_line`]): whatever it holds
/// (backticks, `<`, `#`, `[link](x)`, `*`) is shown as it is, never interpreted. The
/// fence is one backtick longer than the longest run inside, padded with a space when the
/// text starts or ends with a backtick or a space (CommonMark strips one such pair).
/// Not for a table cell: use [`markdown_cell`] there.
pub fn markdown_code(text: &str) -> String {
    let text = escape_line(text);
    if text.is_empty() {
        return "` `".to_string();
    }
    let fence = "`".repeat(longest_backtick_run(&text) + 1);
    let pad = text.starts_with(['`', ' ']) || text.ends_with(['`', ' ']);
    let pad = if pad { " " } else { "" };
    format!("{fence}{pad}{text}{pad}{fence}")
}

/// [`markdown_code`] for a cell of a GFM table: a `|` inside is written `\|` (tables are
/// split into cells before code spans are read, and `\|` is the one escape a cell
/// undoes), and an odd run of backslashes before it gets one more, so that no backslash
/// of the text escapes the escape. A cell cannot be split or left by its content.
pub fn markdown_cell(text: &str) -> String {
    let code = markdown_code(text);
    if !code.contains('|') {
        return code;
    }
    let mut out = String::with_capacity(code.len() + 8);
    let mut backslashes = 0usize;
    for c in code.chars() {
        match c {
            '\\' => backslashes += 1,
            '|' => {
                if backslashes % 2 == 1 {
                    out.push('\\');
                }
                out.push_str("\\|");
                backslashes = 0;
                continue;
            }
            _ => backslashes = 0,
        }
        out.push(c);
    }
    out
}

/// The fence of a Markdown fenced code block that holds `content`: three backticks, or
/// one more than the longest run of backticks in it, so that no line of the content
/// closes the block. Write each line of the content through [`escape_line`].
pub fn markdown_fence(content: &str) -> String {
    "`".repeat((longest_backtick_run(content) + 1).max(3))
}

/// `text` as Markdown prose on one line: control characters escaped ([`escape_line`]),
/// and each character that could start Markdown or HTML structure (`\`, `` ` ``, `*`,
/// `_`, `[`, `]`, `<`, `>`, `|`, `&`, `~`, `#`, and a list marker that starts it)
/// backslash-escaped, so that it renders as the text it is (a link needs `[`, an image
/// `![`, HTML `<`, an entity `&`). It does not stop a forge's autolinks (`www.`,
/// `#123`, `@team`): values and names from a repository belong in [`markdown_code`]; this
/// is for text whose characters are known to be plain, such as node names.
pub fn markdown_text(text: &str) -> String {
    let text = escape_line(text);
    let mut out = String::with_capacity(text.len() + 8);
    // At the start of a line, `-`, `+`, `=` and `1.` begin a list or a heading underline.
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if text.starts_with(['-', '+', '=']) {
        out.push('\\');
    } else if digits > 0 && text[digits..].starts_with('.') {
        out.push_str(&text[..digits]);
        out.push('\\');
        out.push_str(&markdown_text(&text[digits..]));
        return out;
    }
    for c in text.chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '&' | '~' | '#'
        ) {
            out.push('\\');
        }
        out.push(c);
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
    fn lines_show_controls_escaped_and_keep_printable_unicode() {
        assert!(matches!(escape_line("pools/gpu.yaml"), Cow::Borrowed(_)));
        assert_eq!(escape_line("grüße, 東京 ✓"), "grüße, 東京 ✓");
        assert_eq!(
            escape_line("pools/x.yaml: valid\nkubelet-gitops: success: all good\r\tx"),
            "pools/x.yaml: valid\\nkubelet-gitops: success: all good\\r\\tx"
        );
        assert_eq!(
            escape_line("\u{1b}[31mred\u{1b}[0m"),
            "\\u{1b}[31mred\\u{1b}[0m"
        );
        // NUL, DEL, C1 (NEL, CSI), bidi overrides and isolates, line separators.
        assert_eq!(
            escape_line("\0\u{7f}\u{85}\u{9b}\u{202e}\u{2067}\u{200f}\u{61c}\u{2028}\u{2029}"),
            "\\u{0}\\u{7f}\\u{85}\\u{9b}\\u{202e}\\u{2067}\\u{200f}\\u{61c}\\u{2028}\\u{2029}"
        );
        // Zero-width joiners (emoji) and non-breaking spaces are printable text.
        assert_eq!(escape_line("👩\u{200d}💻\u{a0}"), "👩\u{200d}💻\u{a0}");
    }

    #[test]
    fn the_line_escape_is_idempotent_and_matches_its_display_form() {
        for text in ["a\nb", "\u{1b}[2J", "x\\ny", "plain", "\u{202e}cod.exe", ""] {
            let once = escape_line(text).into_owned();
            assert_eq!(escape_line(&once), once, "{text:?}");
            assert!(!has_unsafe(&once) && !once.contains('\n'));
            assert_eq!(OneLine(text).to_string(), once);
        }
    }

    #[test]
    fn bytes_show_invalid_utf8_as_hex() {
        assert_eq!(
            escape_bytes(b"pools/a\xffb\n.yaml"),
            "pools/a\\xffb\\n.yaml"
        );
        assert_eq!(escape_bytes("é".as_bytes()), "é");
        assert_eq!(escape_bytes(b"\xc3"), "\\xc3");
    }

    #[test]
    fn code_spans_hold_anything_on_one_line() {
        assert_eq!(markdown_code("maxPods"), "`maxPods`");
        assert_eq!(markdown_code("a`b"), "``a`b``");
        assert_eq!(markdown_code("a``b`"), "``` a``b` ```");
        assert_eq!(markdown_code("`x"), "`` `x ``");
        assert_eq!(markdown_code(" x "), "`  x  `");
        assert_eq!(markdown_code(""), "` `");
        assert_eq!(
            markdown_code("<img src=x> [a](http://e) # h\n- x"),
            "`<img src=x> [a](http://e) # h\\n- x`"
        );
    }

    #[test]
    fn table_cells_cannot_be_split_by_their_content() {
        assert_eq!(markdown_cell("a|b"), "`a\\|b`");
        assert_eq!(markdown_cell("plain"), "`plain`");
        // An odd run of backslashes before a pipe gets one more, so the pipe stays
        // escaped whatever pairs a table parser makes of the backslashes.
        assert_eq!(markdown_cell("a\\|b"), "`a\\\\\\|b`");
        assert_eq!(markdown_cell("a\\\\|b"), "`a\\\\\\|b`");
        for text in ["|", "a\\|b", "\\\\\\|", "x|`|y"] {
            let cell = markdown_cell(text);
            let mut chars = cell.chars();
            // No pipe that a GFM table scanner (backslash escapes any next character)
            // would take for a cell boundary.
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '|' => panic!("a bare pipe in {cell:?}"),
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn fences_are_longer_than_any_backtick_run_inside() {
        assert_eq!(markdown_fence("maxPods: 1 -> 2"), "```");
        assert_eq!(markdown_fence("a ``` b\n````"), "`````");
    }

    #[test]
    fn prose_escapes_markdown_and_html() {
        assert_eq!(markdown_text("node-1, n2.example"), "node-1, n2.example");
        assert_eq!(
            markdown_text("<script> [x](y) *b* `c` | a_b #1 ~s~ &amp; !"),
            "\\<script\\> \\[x\\](y) \\*b\\* \\`c\\` \\| a\\_b \\#1 \\~s\\~ \\&amp; !"
        );
        assert_eq!(markdown_text("# h"), "\\# h");
        assert_eq!(markdown_text("- item"), "\\- item");
        assert_eq!(markdown_text("12. item"), "12\\. item");
        assert_eq!(markdown_text("a\nb"), "a\\\\nb");
    }

    #[test]
    fn a_marker_longer_than_the_limit_is_cut_itself() {
        assert_eq!(truncate("abcdef", Limit::Bytes(2), "..."), "..");
    }
}
