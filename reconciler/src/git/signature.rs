//! Commit signatures: whether a commit was signed by a key the operator trusts
//! (`run --require-signed-commits`), as `git verify-commit` would decide, without ssh-keygen
//! or gpg.
//!
//! - [`SignaturePolicy::load`] reads the trust files once, at start: git's allowed-signers
//!   file for SSH signatures ([`allowed_signers`]), an armored OpenPGP keyring for gpg
//!   signatures ([`openpgp`]). A file that does not parse stops `run`, naming the file and
//!   the line.
//! - [`CommitSignature`] is what a commit carries: its `gpgsig` header and the bytes that
//!   header signs (the commit object without it), and the committer time
//!   ([`crate::git::CommitSource::signature`] reads them with libgit2).
//! - [`verify`] is the decision, pure: a [`Signer`] (the key's fingerprint, who it belongs
//!   to, where the trust file lists it), or a [`SignatureRefusal`] saying why not
//!   (unsigned, an unknown key, a bad signature, a key outside its validity window, a
//!   revoked key).
//!
//! As git does, the SSH signature must be made for the namespace `git`, and an
//! allowed-signers line's `valid-after` / `valid-before` are compared with the commit's
//! committer time (the time git records for the signature; a signer can set it, so a
//! window limits honest keys, it does not revoke a stolen one: remove that key's line).

pub mod allowed_signers;
pub mod openpgp;

use std::fmt;
use std::path::{Path, PathBuf};

use pgp::composed::{Deserializable, DetachedSignature};
use pgp::packet::SignatureType;
use ssh_key::{HashAlg, PublicKey, SshSig};

use allowed_signers::{AllowedSigner, LineError, matches_pattern_list};
use openpgp::TrustedCert;

/// The namespace git signs commits in (`ssh-keygen -Y sign -n git`).
pub const GIT_NAMESPACE: &str = "git";

/// The two kinds of signature git makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignatureFormat {
    /// `gpg.format=ssh`: an SSHSIG armored signature.
    Ssh,
    /// `gpg.format=openpgp` (git's default): an OpenPGP detached signature.
    OpenPgp,
}

impl fmt::Display for SignatureFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SignatureFormat::Ssh => "ssh",
            SignatureFormat::OpenPgp => "openpgp",
        })
    }
}

/// What a commit carries to be verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitSignature {
    /// The `gpgsig` header's value (armored); `None` when the commit is not signed.
    pub signature: Option<Vec<u8>>,
    /// What the signature signs: the commit object without its `gpgsig` header.
    pub payload: Vec<u8>,
    /// The committer time, seconds since the Unix epoch.
    pub committer_time: i64,
}

/// Who signed a commit, once verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    pub format: SignatureFormat,
    /// The signing key's fingerprint: `SHA256:...` (ssh, as `ssh-keygen -l` prints it), or
    /// the OpenPGP fingerprint in upper-case hex (a subkey's when a subkey signed).
    pub fingerprint: String,
    /// The allowed-signers line's principals, or the OpenPGP certificate's first user ID.
    pub identity: String,
    /// Where the trust file lists the key: `/path/allowed_signers:3`.
    pub listed_at: String,
}

/// Why a commit's signature is not accepted. Each message starts with what matters, for
/// a commit status (forges keep 140 characters of it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureRefusal {
    #[error("not signed (signed commits are required)")]
    Unsigned,
    #[error("signed with {format} but no {flag} is configured, so no {format} key is trusted")]
    FormatNotTrusted {
        format: SignatureFormat,
        flag: &'static str,
    },
    #[error("unsupported signature ({what}): git's ssh and openpgp formats are verified")]
    Unsupported { what: String },
    #[error("malformed {format} signature: {reason}")]
    Malformed {
        format: SignatureFormat,
        reason: String,
    },
    #[error("signed by key {fingerprint}, which is not in {file}")]
    UnknownKey {
        format: SignatureFormat,
        fingerprint: String,
        file: PathBuf,
    },
    #[error("bad signature by key {fingerprint} ({identity}): {reason}")]
    BadSignature {
        format: SignatureFormat,
        fingerprint: String,
        identity: String,
        reason: String,
    },
    #[error(
        "signed by key {fingerprint} ({identity}) outside its validity: committed {committed}, {window} ({listed_at})"
    )]
    OutsideValidity {
        fingerprint: String,
        identity: String,
        committed: String,
        window: String,
        listed_at: String,
    },
    #[error(
        "signed by key {fingerprint} ({identity}), which {listed_at} does not allow for namespace \"git\" (namespaces=\"{namespaces}\")"
    )]
    NamespaceNotAllowed {
        fingerprint: String,
        identity: String,
        namespaces: String,
        listed_at: String,
    },
    #[error("signed by key {fingerprint} ({identity}), which is revoked ({listed_at})")]
    Revoked {
        fingerprint: String,
        identity: String,
        listed_at: String,
    },
}

impl SignatureRefusal {
    /// The refusal as a metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            SignatureRefusal::Unsigned => "unsigned",
            SignatureRefusal::FormatNotTrusted { .. } | SignatureRefusal::Unsupported { .. } => {
                "untrusted_format"
            }
            SignatureRefusal::Malformed { .. } | SignatureRefusal::BadSignature { .. } => {
                "bad_signature"
            }
            SignatureRefusal::UnknownKey { .. } => "unknown_key",
            SignatureRefusal::OutsideValidity { .. }
            | SignatureRefusal::NamespaceNotAllowed { .. }
            | SignatureRefusal::Revoked { .. } => "key_not_valid",
        }
    }

    /// The key the refusal names, for logs.
    pub fn fingerprint(&self) -> Option<&str> {
        match self {
            SignatureRefusal::UnknownKey { fingerprint, .. }
            | SignatureRefusal::BadSignature { fingerprint, .. }
            | SignatureRefusal::OutsideValidity { fingerprint, .. }
            | SignatureRefusal::NamespaceNotAllowed { fingerprint, .. }
            | SignatureRefusal::Revoked { fingerprint, .. } => Some(fingerprint),
            _ => None,
        }
    }
}

/// A trust file that cannot be used: `run` does not start.
#[derive(Debug, thiserror::Error)]
pub enum SignaturePolicyError {
    #[error("{flag} {path}: cannot read it")]
    Read {
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{flag} {path}:{line}: {reason}")]
    Parse {
        flag: &'static str,
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("{flag} {path}: the file lists no {what}")]
    Empty {
        flag: &'static str,
        path: PathBuf,
        what: &'static str,
    },
}

/// The flag of the SSH trust file.
pub const ALLOWED_SIGNERS_FLAG: &str = "--allowed-signers";
/// The flag of the OpenPGP trust file.
pub const TRUSTED_KEYS_FLAG: &str = "--trusted-keys";

/// Which keys may sign the commits `run` applies. Loaded once, at start.
#[derive(Debug, Clone, Default)]
pub struct SignaturePolicy {
    ssh: Option<(PathBuf, Vec<AllowedSigner>)>,
    openpgp: Option<(PathBuf, Vec<TrustedCert>)>,
}

impl SignaturePolicy {
    /// Reads and parses the trust files given (at least one should be).
    pub fn load(
        allowed_signers: Option<&Path>,
        trusted_keys: Option<&Path>,
    ) -> Result<SignaturePolicy, SignaturePolicyError> {
        let read = |flag, path: &Path| {
            std::fs::read_to_string(path).map_err(|source| SignaturePolicyError::Read {
                flag,
                path: path.to_path_buf(),
                source,
            })
        };
        let parse_error = |flag, path: &Path, e: LineError| SignaturePolicyError::Parse {
            flag,
            path: path.to_path_buf(),
            line: e.line,
            reason: e.reason,
        };
        let mut policy = SignaturePolicy::default();
        if let Some(path) = allowed_signers {
            let flag = ALLOWED_SIGNERS_FLAG;
            let signers = allowed_signers::parse(&read(flag, path)?)
                .map_err(|e| parse_error(flag, path, e))?;
            if signers.is_empty() {
                return Err(SignaturePolicyError::Empty {
                    flag,
                    path: path.to_path_buf(),
                    what: "signer",
                });
            }
            policy.ssh = Some((path.to_path_buf(), signers));
        }
        if let Some(path) = trusted_keys {
            let flag = TRUSTED_KEYS_FLAG;
            let certs =
                openpgp::parse(&read(flag, path)?).map_err(|e| parse_error(flag, path, e))?;
            policy.openpgp = Some((path.to_path_buf(), certs));
        }
        Ok(policy)
    }

    /// How many keys each file lists: (ssh signers, OpenPGP certificates), for the start
    /// log.
    pub fn counts(&self) -> (usize, usize) {
        (
            self.ssh.as_ref().map_or(0, |(_, s)| s.len()),
            self.openpgp.as_ref().map_or(0, |(_, c)| c.len()),
        )
    }
}

/// Whether `commit`'s signature is accepted by `policy`: the signer, or why not. Pure.
pub fn verify(
    policy: &SignaturePolicy,
    commit: &CommitSignature,
) -> Result<Signer, SignatureRefusal> {
    let Some(raw) = &commit.signature else {
        return Err(SignatureRefusal::Unsigned);
    };
    let text = String::from_utf8_lossy(raw);
    let armor = text.trim_start();
    if armor.starts_with("-----BEGIN SSH SIGNATURE-----") {
        let Some((path, signers)) = &policy.ssh else {
            return Err(SignatureRefusal::FormatNotTrusted {
                format: SignatureFormat::Ssh,
                flag: ALLOWED_SIGNERS_FLAG,
            });
        };
        verify_ssh(path, signers, armor, commit)
    } else if armor.starts_with("-----BEGIN PGP SIGNATURE-----") {
        let Some((path, certs)) = &policy.openpgp else {
            return Err(SignatureRefusal::FormatNotTrusted {
                format: SignatureFormat::OpenPgp,
                flag: TRUSTED_KEYS_FLAG,
            });
        };
        verify_openpgp(path, certs, armor, commit)
    } else {
        let first = armor.lines().next().unwrap_or_default();
        Err(SignatureRefusal::Unsupported {
            what: if first.contains("SIGNED MESSAGE") {
                "x509".to_string()
            } else {
                format!("{:?}", first.chars().take(40).collect::<String>())
            },
        })
    }
}

fn verify_ssh(
    path: &Path,
    signers: &[AllowedSigner],
    armor: &str,
    commit: &CommitSignature,
) -> Result<Signer, SignatureRefusal> {
    let format = SignatureFormat::Ssh;
    let sig = SshSig::from_pem(armor.trim_end()).map_err(|e| SignatureRefusal::Malformed {
        format,
        reason: e.to_string(),
    })?;
    let fingerprint = sig.public_key().fingerprint(HashAlg::Sha256).to_string();
    let listed: Vec<&AllowedSigner> = signers
        .iter()
        .filter(|s| s.key.key_data() == sig.public_key())
        .collect();
    let Some(first) = listed.first() else {
        return Err(SignatureRefusal::UnknownKey {
            format,
            fingerprint,
            file: path.to_path_buf(),
        });
    };
    let at = |s: &AllowedSigner| format!("{}:{}", path.display(), s.line);
    if sig.namespace() != GIT_NAMESPACE {
        return Err(SignatureRefusal::BadSignature {
            format,
            fingerprint,
            identity: first.principals.clone(),
            reason: format!(
                "made for namespace {:?}, not {GIT_NAMESPACE:?}",
                sig.namespace()
            ),
        });
    }
    PublicKey::new(sig.public_key().clone(), "")
        .verify(GIT_NAMESPACE, &commit.payload, &sig)
        .map_err(|e| SignatureRefusal::BadSignature {
            format,
            fingerprint: fingerprint.clone(),
            identity: first.principals.clone(),
            reason: format!("it does not verify over the commit ({e})"),
        })?;
    // The key is listed and signed these bytes: now whether a line allows it here.
    let mut refusal = None;
    for s in &listed {
        if let Some(ns) = &s.namespaces
            && !matches_pattern_list(GIT_NAMESPACE, ns)
        {
            refusal.get_or_insert(SignatureRefusal::NamespaceNotAllowed {
                fingerprint: fingerprint.clone(),
                identity: s.principals.clone(),
                namespaces: ns.clone(),
                listed_at: at(s),
            });
            continue;
        }
        let t = commit.committer_time;
        let window = match (s.valid_after, s.valid_before) {
            (Some(after), _) if t < after => Some(format!("valid-after {}", utc(after))),
            (_, Some(before)) if t > before => Some(format!("valid-before {}", utc(before))),
            _ => None,
        };
        if let Some(window) = window {
            refusal.get_or_insert(SignatureRefusal::OutsideValidity {
                fingerprint: fingerprint.clone(),
                identity: s.principals.clone(),
                committed: utc(t),
                window,
                listed_at: at(s),
            });
            continue;
        }
        return Ok(Signer {
            format,
            fingerprint,
            identity: s.principals.clone(),
            listed_at: at(s),
        });
    }
    Err(refusal.unwrap_or(SignatureRefusal::UnknownKey {
        format,
        fingerprint,
        file: path.to_path_buf(),
    }))
}

fn verify_openpgp(
    path: &Path,
    certs: &[TrustedCert],
    armor: &str,
    commit: &CommitSignature,
) -> Result<Signer, SignatureRefusal> {
    let format = SignatureFormat::OpenPgp;
    let malformed = |reason: String| SignatureRefusal::Malformed { format, reason };
    let (detached, _) =
        DetachedSignature::from_string(armor).map_err(|e| malformed(e.to_string()))?;
    let sig = &detached.signature;
    if !matches!(sig.typ(), Some(SignatureType::Binary | SignatureType::Text)) {
        return Err(malformed(format!(
            "a {:?} signature, not a signature of data",
            sig.typ()
        )));
    }
    let Some(key) = openpgp::find_signer(certs, sig) else {
        return Err(SignatureRefusal::UnknownKey {
            format,
            fingerprint: openpgp::issuer(sig),
            file: path.to_path_buf(),
        });
    };
    let listed_at = format!("{}:{}", path.display(), key.cert.line);
    key.verify(sig, &commit.payload)
        .map_err(|reason| SignatureRefusal::BadSignature {
            format,
            fingerprint: key.fingerprint.clone(),
            identity: key.cert.user.clone(),
            reason: format!("it does not verify over the commit ({reason})"),
        })?;
    if key.cert.revoked {
        return Err(SignatureRefusal::Revoked {
            fingerprint: key.fingerprint,
            identity: key.cert.user.clone(),
            listed_at,
        });
    }
    Ok(Signer {
        format,
        fingerprint: key.fingerprint,
        identity: key.cert.user.clone(),
        listed_at,
    })
}

/// Seconds since the epoch as `2024-01-31T12:00:00Z`.
fn utc(seconds: i64) -> String {
    let secs = u64::try_from(seconds).unwrap_or(0);
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .to_string()
}
