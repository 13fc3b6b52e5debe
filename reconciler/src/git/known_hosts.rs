//! OpenSSH `known_hosts` files: parsing, and checking the host key an SSH server presents.
//!
//! Supported: plain host patterns (comma-separated, `*` and `?` wildcards, `!` negation),
//! `[host]:port` for non-22 ports, hashed entries (`|1|salt|hash`, HMAC-SHA1 of the host
//! name as `ssh-keygen -H` writes them), and the `@revoked` marker. `@cert-authority` lines
//! are skipped: certificate host keys are not supported. Malformed lines are skipped, as
//! OpenSSH does, and counted in [`KnownHosts::skipped_lines`].

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;
use sha2::{Digest, Sha256};

/// A parsed known_hosts file.
#[derive(Debug, Clone, Default)]
pub struct KnownHosts {
    entries: Vec<KnownHost>,
    skipped: Vec<usize>,
}

#[derive(Debug, Clone)]
struct KnownHost {
    line: usize,
    revoked: bool,
    hosts: HostPatterns,
    /// The public key blob in SSH wire format (the base64 field, decoded).
    key: Vec<u8>,
}

#[derive(Debug, Clone)]
enum HostPatterns {
    Plain(Vec<String>),
    Hashed { salt: Vec<u8>, hash: Vec<u8> },
}

/// The host key a server presented.
#[derive(Debug, Clone, Copy)]
pub enum PresentedKey<'a> {
    /// The key blob in SSH wire format (it starts with the type name, `ssh-ed25519` ...).
    Raw(&'a [u8]),
    /// Only the SHA-256 of the key blob is known.
    Sha256(&'a [u8; 32]),
}

/// The verdict on a presented host key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKeyCheck {
    /// The key is listed for the host, on this line.
    Match { line: usize },
    /// The host is listed, on these lines, but never with this key.
    Mismatch { lines: Vec<usize> },
    /// The key is marked `@revoked` on this line.
    Revoked { line: usize },
    /// The host is not listed at all.
    Unknown,
}

impl KnownHosts {
    /// Parses the text of a known_hosts file. Never fails: malformed lines are skipped.
    pub fn parse(text: &str) -> KnownHosts {
        let mut out = KnownHosts::default();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            match parse_line(line, trimmed) {
                Some(Some(entry)) => out.entries.push(entry),
                Some(None) => {}
                None => out.skipped.push(line),
            }
        }
        out
    }

    /// The lines that could not be parsed and were skipped.
    pub fn skipped_lines(&self) -> &[usize] {
        &self.skipped
    }

    /// How many host keys the file lists.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the file lists no host key.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Checks the key `host` presented on `port`. A revoked key wins over a listed one.
    pub fn check(&self, host: &str, port: u16, presented: PresentedKey<'_>) -> HostKeyCheck {
        let name = lookup_name(host, port);
        let mut matched = None;
        let mut lines = Vec::new();
        for entry in self.entries.iter().filter(|e| e.hosts.matches(&name)) {
            let same = match presented {
                PresentedKey::Raw(key) => entry.key == key,
                PresentedKey::Sha256(hash) => Sha256::digest(&entry.key).as_slice() == hash,
            };
            if entry.revoked {
                if same {
                    return HostKeyCheck::Revoked { line: entry.line };
                }
                continue;
            }
            if same && matched.is_none() {
                matched = Some(entry.line);
            }
            lines.push(entry.line);
        }
        match matched {
            Some(line) => HostKeyCheck::Match { line },
            None if lines.is_empty() => HostKeyCheck::Unknown,
            None => HostKeyCheck::Mismatch { lines },
        }
    }
}

/// The name a host is listed under: `host` on port 22, `[host]:port` otherwise.
fn lookup_name(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_ascii_lowercase()
    } else {
        format!("[{}]:{port}", host.to_ascii_lowercase())
    }
}

/// `None`: malformed. `Some(None)`: valid but not used (`@cert-authority`).
fn parse_line(line: usize, text: &str) -> Option<Option<KnownHost>> {
    let mut fields = text.split_whitespace();
    let mut first = fields.next()?;
    let mut revoked = false;
    if let Some(marker) = first.strip_prefix('@') {
        match marker {
            "revoked" => revoked = true,
            "cert-authority" => return Some(None),
            _ => return None,
        }
        first = fields.next()?;
    }
    // The key type field; the blob repeats it, so comparing blobs compares types too.
    fields.next()?;
    let key = STANDARD.decode(fields.next()?).ok()?;
    let hosts = if let Some(hashed) = first.strip_prefix("|1|") {
        let (salt, hash) = hashed.split_once('|')?;
        HostPatterns::Hashed {
            salt: STANDARD.decode(salt).ok()?,
            hash: STANDARD.decode(hash).ok()?,
        }
    } else {
        HostPatterns::Plain(first.split(',').map(str::to_ascii_lowercase).collect())
    };
    Some(Some(KnownHost {
        line,
        revoked,
        hosts,
        key,
    }))
}

impl HostPatterns {
    fn matches(&self, name: &str) -> bool {
        match self {
            HostPatterns::Hashed { salt, hash } => {
                let Ok(mut mac) = Hmac::<Sha1>::new_from_slice(salt) else {
                    return false;
                };
                mac.update(name.as_bytes());
                mac.verify_slice(hash).is_ok()
            }
            HostPatterns::Plain(patterns) => {
                let mut positive = false;
                for pattern in patterns {
                    if let Some(negated) = pattern.strip_prefix('!') {
                        if wildcard_match(negated.as_bytes(), name.as_bytes()) {
                            return false;
                        }
                    } else if wildcard_match(pattern.as_bytes(), name.as_bytes()) {
                        positive = true;
                    }
                }
                positive
            }
        }
    }
}

/// OpenSSH's `match_pattern`: `*` any run of characters, `?` one character.
fn wildcard_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// The key type name libgit2 reports, as known_hosts spells it.
pub(crate) fn key_type_name(kind: Option<git2::cert::SshHostKeyType>) -> &'static str {
    kind.map_or("unknown key type", |k| k.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two distinct ed25519-shaped key blobs (wire format: string "ssh-ed25519", 32 bytes).
    fn blob(fill: u8) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&11u32.to_be_bytes());
        b.extend_from_slice(b"ssh-ed25519");
        b.extend_from_slice(&32u32.to_be_bytes());
        b.extend_from_slice(&[fill; 32]);
        b
    }

    fn b64(bytes: &[u8]) -> String {
        STANDARD.encode(bytes)
    }

    fn raw(key: &[u8]) -> PresentedKey<'_> {
        PresentedKey::Raw(key)
    }

    /// A hashed entry exactly as `ssh-keygen -H` writes it.
    fn hashed(name: &str, salt: &[u8]) -> String {
        let mut mac = Hmac::<Sha1>::new_from_slice(salt).expect("any key length");
        mac.update(name.as_bytes());
        format!("|1|{}|{}", b64(salt), b64(&mac.finalize().into_bytes()))
    }

    #[test]
    fn plain_entries_match_by_name_list_and_wildcard() {
        let (a, b) = (blob(1), blob(2));
        let text = format!(
            "# comment\n\
             github.com,140.82.112.3 ssh-ed25519 {a}\n\
             \n\
             *.example.org,!bad.example.org ssh-ed25519 {b} comment here\n",
            a = b64(&a),
            b = b64(&b)
        );
        let kh = KnownHosts::parse(&text);
        assert_eq!(kh.len(), 2);
        assert!(kh.skipped_lines().is_empty());
        assert_eq!(
            kh.check("github.com", 22, raw(&a)),
            HostKeyCheck::Match { line: 2 }
        );
        assert_eq!(
            kh.check("GitHub.com", 22, raw(&a)),
            HostKeyCheck::Match { line: 2 }
        );
        assert_eq!(
            kh.check("140.82.112.3", 22, raw(&a)),
            HostKeyCheck::Match { line: 2 }
        );
        assert_eq!(
            kh.check("github.com", 22, raw(&b)),
            HostKeyCheck::Mismatch { lines: vec![2] }
        );
        assert_eq!(
            kh.check("git.example.org", 22, raw(&b)),
            HostKeyCheck::Match { line: 4 }
        );
        assert_eq!(
            kh.check("bad.example.org", 22, raw(&b)),
            HostKeyCheck::Unknown
        );
        assert_eq!(kh.check("example.org", 22, raw(&b)), HostKeyCheck::Unknown);
        // Port 22 entries do not cover other ports.
        assert_eq!(kh.check("github.com", 2222, raw(&a)), HostKeyCheck::Unknown);
    }

    #[test]
    fn port_entries_use_brackets() {
        let a = blob(3);
        let text = format!("[gitea.local]:2222 ssh-ed25519 {}\n", b64(&a));
        let kh = KnownHosts::parse(&text);
        assert_eq!(
            kh.check("gitea.local", 2222, raw(&a)),
            HostKeyCheck::Match { line: 1 }
        );
        assert_eq!(kh.check("gitea.local", 22, raw(&a)), HostKeyCheck::Unknown);
        assert_eq!(
            kh.check("gitea.local", 2223, raw(&a)),
            HostKeyCheck::Unknown
        );
    }

    #[test]
    fn hashed_entries_match_plain_and_port_names() {
        let (a, b) = (blob(4), blob(5));
        let text = format!(
            "{} ssh-ed25519 {}\n{} ssh-ed25519 {}\n",
            hashed("git.internal", b"0123456789abcdefghij"),
            b64(&a),
            hashed("[git.internal]:2222", b"salt-two-salt-two-xx"),
            b64(&b),
        );
        let kh = KnownHosts::parse(&text);
        assert_eq!(kh.len(), 2);
        assert_eq!(
            kh.check("git.internal", 22, raw(&a)),
            HostKeyCheck::Match { line: 1 }
        );
        assert_eq!(
            kh.check("git.internal", 22, raw(&b)),
            HostKeyCheck::Mismatch { lines: vec![1] }
        );
        assert_eq!(
            kh.check("git.internal", 2222, raw(&b)),
            HostKeyCheck::Match { line: 2 }
        );
        assert_eq!(
            kh.check("other.internal", 22, raw(&a)),
            HostKeyCheck::Unknown
        );
    }

    #[test]
    fn real_ssh_keygen_hashed_lines_match() {
        // Written by `ssh-keygen -H` (OpenSSH 9.2) for "localhost" and "[localhost]:2222",
        // with a key from `ssh-keygen -t ed25519`.
        let key64 = "AAAAC3NzaC1lZDI1NTE5AAAAIKK7ZqOM0ferHqr3a8WmWw4jv5VJEnNzG1EPMY/UZuf3";
        let text = format!(
            "|1|DlStyzZVtmvTOKjds2LhGj/bTck=|X1D7i6LzVmh66Nqk+7sLOzq1TcE= ssh-ed25519 {key64}\n\
             |1|4k1DGUvGgXYfeGiPflkgDnaUGn4=|f3VUcbDF3jNs5H/6Cx4qVWtb/6c= ssh-ed25519 {key64}\n"
        );
        let kh = KnownHosts::parse(&text);
        let key = STANDARD.decode(key64).expect("base64");
        assert_eq!(
            kh.check("localhost", 22, raw(&key)),
            HostKeyCheck::Match { line: 1 }
        );
        assert_eq!(
            kh.check("localhost", 2222, raw(&key)),
            HostKeyCheck::Match { line: 2 }
        );
        assert_eq!(
            kh.check("localhost", 2223, raw(&key)),
            HostKeyCheck::Unknown
        );
        assert_eq!(kh.check("localhost2", 22, raw(&key)), HostKeyCheck::Unknown);
    }

    #[test]
    fn sha256_only_keys_are_compared_by_digest() {
        let a = blob(6);
        let kh = KnownHosts::parse(&format!("h ssh-ed25519 {}", b64(&a)));
        let digest: [u8; 32] = Sha256::digest(&a).into();
        assert_eq!(
            kh.check("h", 22, PresentedKey::Sha256(&digest)),
            HostKeyCheck::Match { line: 1 }
        );
        let other: [u8; 32] = Sha256::digest(blob(7)).into();
        assert_eq!(
            kh.check("h", 22, PresentedKey::Sha256(&other)),
            HostKeyCheck::Mismatch { lines: vec![1] }
        );
    }

    #[test]
    fn revoked_and_cert_authority_markers() {
        let (a, b) = (blob(8), blob(9));
        let text = format!(
            "@revoked h ssh-ed25519 {a}\nh ssh-ed25519 {a}\nh ssh-ed25519 {b}\n\
             @cert-authority *.corp ssh-ed25519 {b}\n",
            a = b64(&a),
            b = b64(&b)
        );
        let kh = KnownHosts::parse(&text);
        assert_eq!(
            kh.check("h", 22, raw(&a)),
            HostKeyCheck::Revoked { line: 1 }
        );
        assert_eq!(kh.check("h", 22, raw(&b)), HostKeyCheck::Match { line: 3 });
        assert_eq!(kh.check("x.corp", 22, raw(&b)), HostKeyCheck::Unknown);
    }

    #[test]
    fn malformed_lines_are_skipped_and_counted() {
        let a = blob(10);
        let text = format!(
            "onlyhost\nh ssh-ed25519 !!notbase64!!\n|1|bad ssh-ed25519 {a}\n@weird h ssh-ed25519 {a}\n\
             good ssh-ed25519 {a}\n",
            a = b64(&a)
        );
        let kh = KnownHosts::parse(&text);
        assert_eq!(kh.skipped_lines(), &[1, 2, 3, 4]);
        assert_eq!(
            kh.check("good", 22, raw(&a)),
            HostKeyCheck::Match { line: 5 }
        );
    }

    #[test]
    fn wildcards() {
        for (p, t, want) in [
            ("*", "anything", true),
            ("git?.x", "git1.x", true),
            ("git?.x", "git12.x", false),
            ("*.x", ".x", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("[h]:22*", "[h]:2222", true),
        ] {
            assert_eq!(wildcard_match(p.as_bytes(), t.as_bytes()), want, "{p} {t}");
        }
    }
}
