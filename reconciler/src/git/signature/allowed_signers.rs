//! git's allowed-signers file (`gpg.ssh.allowedSignersFile`, the format of
//! ssh-keygen(1) "ALLOWED SIGNERS"): one signer a line,
//!
//! ```text
//! # comment
//! alice@example.com,"bob@example.com" namespaces="git",valid-before="20300101Z" ssh-ed25519 AAAA... laptop
//! ```
//!
//! principals (a comma-separated pattern list, quoted or not), then optional
//! comma-separated options, then the key type, the base64 key and an optional comment.
//! The options git documents are read: `namespaces="..."` (a pattern list the signature's
//! namespace, `git`, must match), `valid-after="..."` and `valid-before="..."`
//! (`YYYYMMDD[Z]` or `YYYYMMDDHHMM[SS][Z]`). `cert-authority` (trusting every certificate a
//! CA signed) and any other option are refused, naming the line: a trust file read
//! differently than the person who wrote it meant is worse than one refused.
//!
//! A time without `Z` is local time to ssh-keygen; the reconciler takes it as UTC (its
//! image has no local time zone, so ssh-keygen there would too).

use ssh_key::PublicKey;

/// One line of the file: who, with which key, for which namespaces and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedSigner {
    /// 1-based line in the file.
    pub line: usize,
    /// The principals field as written (without quotes).
    pub principals: String,
    /// The key.
    pub key: PublicKey,
    /// The `namespaces` pattern list, if given (absent: any namespace).
    pub namespaces: Option<String>,
    /// `valid-after`, seconds since the Unix epoch.
    pub valid_after: Option<i64>,
    /// `valid-before`, seconds since the Unix epoch.
    pub valid_before: Option<i64>,
}

/// Where a line of the file went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct LineError {
    pub line: usize,
    pub reason: String,
}

/// Key types an allowed-signers line may name (what `ssh-keygen -Y sign` can sign with).
const KEY_TYPES: &[&str] = &[
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// Every signer of the file's text; the first bad line is an error naming it.
pub fn parse(text: &str) -> Result<Vec<AllowedSigner>, LineError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        out.push(parse_line(trimmed, line).map_err(|reason| LineError { line, reason })?);
    }
    Ok(out)
}

fn parse_line(text: &str, line: usize) -> Result<AllowedSigner, String> {
    let (principals, rest) = next_field(text)?;
    if principals.is_empty() {
        return Err("no principals".to_string());
    }
    let (mut namespaces, mut valid_after, mut valid_before) = (None, None, None);
    let (first, after_first) = next_field(rest)?;
    // A key blob's base64 starts with `AAAA` (its length prefix): then `first` was meant
    // as a key type, not options.
    let looks_like_key = after_first.trim_start().starts_with("AAAA");
    let key_text = if is_key_type(&first) || (looks_like_key && !first.contains('=')) {
        rest
    } else {
        for option in split_options(&first)? {
            let (name, value) = match option.split_once('=') {
                Some((n, v)) => (n.to_ascii_lowercase(), Some(dequote(v, &option)?)),
                None => (option.to_ascii_lowercase(), None),
            };
            match (name.as_str(), value) {
                ("namespaces", Some(v)) => namespaces = Some(v),
                ("valid-after", Some(v)) => valid_after = Some(parse_time(&v)?),
                ("valid-before", Some(v)) => valid_before = Some(parse_time(&v)?),
                ("cert-authority", _) => {
                    return Err(
                        "cert-authority is not supported (a commit signed with a certificate is \
                         refused): list the signing keys themselves"
                            .to_string(),
                    );
                }
                (_, _) => {
                    return Err(format!(
                        "unknown option {option:?} (known: namespaces=\"...\", \
                         valid-after=\"...\", valid-before=\"...\")"
                    ));
                }
            }
        }
        after_first
    };
    let mut parts = key_text.split_whitespace();
    let (Some(kind), Some(base64)) = (parts.next(), parts.next()) else {
        return Err("expected a key type and a base64 key after the principals".to_string());
    };
    if !is_key_type(kind) {
        return Err(format!(
            "unknown key type {kind:?} (known: {})",
            KEY_TYPES.join(", ")
        ));
    }
    let key = PublicKey::from_openssh(&format!("{kind} {base64}"))
        .map_err(|e| format!("the {kind} key does not parse: {e}"))?;
    if let (Some(after), Some(before)) = (valid_after, valid_before)
        && after > before
    {
        return Err("valid-after is later than valid-before: the key is never valid".to_string());
    }
    Ok(AllowedSigner {
        line,
        principals,
        key,
        namespaces,
        valid_after,
        valid_before,
    })
}

fn is_key_type(word: &str) -> bool {
    KEY_TYPES.contains(&word)
}

/// The next whitespace-separated field, quotes keeping spaces inside it (the quotes of a
/// field that is wholly quoted are removed), and the rest of the line.
fn next_field(text: &str) -> Result<(String, &str), String> {
    let text = text.trim_start();
    if let Some(inner) = text.strip_prefix('"') {
        let end = inner
            .find('"')
            .ok_or_else(|| "a quote is not closed".to_string())?;
        return Ok((inner[..end].to_string(), &inner[end + 1..]));
    }
    let mut in_quotes = false;
    for (i, c) in text.char_indices() {
        match c {
            '"' => in_quotes = !in_quotes,
            c if c.is_whitespace() && !in_quotes => return Ok((text[..i].to_string(), &text[i..])),
            _ => {}
        }
    }
    if in_quotes {
        return Err("a quote is not closed".to_string());
    }
    Ok((text.to_string(), ""))
}

/// The options field split at commas outside quotes.
fn split_options(field: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_quotes = false;
    for c in field.chars() {
        match c {
            '"' => {
                in_quotes = !in_quotes;
                current.push(c);
            }
            ',' if !in_quotes => out.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    out.push(current);
    if out.iter().any(String::is_empty) {
        return Err(format!("empty option in {field:?}"));
    }
    Ok(out)
}

/// An option's value, which ssh-keygen wants in double quotes.
fn dequote(value: &str, option: &str) -> Result<String, String> {
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .map(str::to_string)
        .ok_or_else(|| format!("option {option:?}: the value must be in double quotes"))
}

/// `YYYYMMDD[Z]` or `YYYYMMDDHHMM[SS][Z]`, as UTC seconds since the Unix epoch (from
/// 1970 on: humantime checks the date, leap years included).
pub(super) fn parse_time(value: &str) -> Result<i64, String> {
    let digits = value.strip_suffix(['Z', 'z']).unwrap_or(value);
    let bad = || {
        format!("time {value:?}: expected YYYYMMDD or YYYYMMDDHHMM[SS], optionally followed by Z")
    };
    if !digits.bytes().all(|b| b.is_ascii_digit()) || ![8, 12, 14].contains(&digits.len()) {
        return Err(bad());
    }
    let part = |range: std::ops::Range<usize>| digits.get(range).unwrap_or("00");
    let rfc3339 = format!(
        "{}-{}-{}T{}:{}:{}Z",
        part(0..4),
        part(4..6),
        part(6..8),
        part(8..10),
        part(10..12),
        part(12..14)
    );
    let time = humantime::parse_rfc3339(&rfc3339).map_err(|_| bad())?;
    time.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_secs()).ok())
        .ok_or_else(bad)
}

/// Whether `name` matches the comma-separated pattern list `list` (ssh_config(5)
/// PATTERNS: `*` and `?` wildcards, a `!` before a pattern negates it; a negated match
/// wins over any other).
pub(super) fn matches_pattern_list(name: &str, list: &str) -> bool {
    let mut matched = false;
    for pattern in list.split(',').map(str::trim) {
        match pattern.strip_prefix('!') {
            Some(negated) if wildcard(name.as_bytes(), negated.as_bytes()) => return false,
            Some(_) => {}
            None => matched |= wildcard(name.as_bytes(), pattern.as_bytes()),
        }
    }
    matched
}

fn wildcard(name: &[u8], pattern: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            wildcard(name, &pattern[1..]) || (!name.is_empty() && wildcard(&name[1..], pattern))
        }
        (Some(b'?'), Some(_)) => wildcard(&name[1..], &pattern[1..]),
        (Some(p), Some(n)) if p == n => wildcard(&name[1..], &pattern[1..]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILM+rvN+ot98qgEN796jTiQfZfG1KaT0PtFDJ/XFSqti";

    #[test]
    fn lines_with_and_without_options_comments_and_quotes() {
        let text = format!(
            "# who may sign\n\nalice@example.com {KEY} laptop\n\
             \"bob@example.com,carol@*\" namespaces=\"git,file\",valid-after=\"20240101\",VALID-BEFORE=\"20300101120000Z\" {KEY}\n"
        );
        let signers = parse(&text).expect("valid");
        assert_eq!(signers.len(), 2);
        assert_eq!(signers[0].line, 3);
        assert_eq!(signers[0].principals, "alice@example.com");
        assert_eq!(signers[0].namespaces, None);
        assert_eq!(signers[1].line, 4);
        assert_eq!(signers[1].principals, "bob@example.com,carol@*");
        assert_eq!(signers[1].namespaces.as_deref(), Some("git,file"));
        assert_eq!(signers[1].valid_after, Some(1_704_067_200));
        assert_eq!(signers[1].valid_before, Some(1_893_499_200));
        assert_eq!(signers[0].key, signers[1].key);
    }

    #[test]
    fn every_bad_line_is_refused_naming_it() {
        let cases = [
            (format!("a@b cert-authority {KEY}"), "cert-authority"),
            (format!("a@b no-touch-required {KEY}"), "unknown option"),
            (format!("a@b namespaces=git {KEY}"), "double quotes"),
            (
                format!("a@b valid-before=\"2030\" {KEY}"),
                "expected YYYYMMDD",
            ),
            (
                format!("a@b valid-before=\"20300231\" {KEY}"),
                "expected YYYYMMDD",
            ),
            (
                format!("a@b valid-after=\"20300101\",valid-before=\"20200101\" {KEY}"),
                "never valid",
            ),
            ("a@b ssh-ed25519".to_string(), "expected a key type"),
            (
                "a@b ssh-dss AAAAB3NzaC1kc3M=".to_string(),
                "unknown key type",
            ),
            (
                "a@b ssh-ed25519 AAAAnotbase64!".to_string(),
                "does not parse",
            ),
            (format!("\"a@b {KEY}"), "quote is not closed"),
        ];
        for (text, says) in cases {
            let err = parse(&format!("# first\n{text}\n")).expect_err(&text);
            assert_eq!(err.line, 2, "{text}");
            assert!(err.to_string().contains(says), "{text}: {err}");
            assert!(err.to_string().starts_with("line 2: "), "{err}");
        }
    }

    #[test]
    fn times_are_utc_with_or_without_z() {
        assert_eq!(parse_time("19700101"), Ok(0));
        assert_eq!(parse_time("19700101Z"), Ok(0));
        assert_eq!(parse_time("197001020000"), Ok(86_400));
        assert_eq!(parse_time("20000229235959Z"), Ok(951_868_799));
        assert!(parse_time("20010229").is_err(), "not a leap year");
        assert!(parse_time("2024010112").is_err(), "10 digits");
        assert!(parse_time("20240101246000").is_err());
    }

    #[test]
    fn pattern_lists_match_as_ssh_does() {
        assert!(matches_pattern_list("git", "git"));
        assert!(matches_pattern_list("git", "file,git"));
        assert!(matches_pattern_list("git", "g*"));
        assert!(matches_pattern_list("git", "g?t"));
        assert!(!matches_pattern_list("git", "file"));
        assert!(!matches_pattern_list("git", "*,!git"));
        assert!(!matches_pattern_list("git", "gi"));
        assert!(!matches_pattern_list("git", ""));
    }
}
