//! The OpenPGP keyring of `--trusted-keys`: one or more ASCII-armored public key blocks
//! (`gpg --export --armor KEYID...`, concatenated), and the signing keys in them: each
//! certificate's primary key, and its subkeys whose binding (and, for a signing subkey,
//! the back-signature) verifies.
//!
//! A certificate with a revocation signature (made by its own primary key) stays in the
//! keyring so that a commit it signed is refused as revoked, not as unknown. Key expiry
//! is not evaluated: remove a key from the file to stop trusting it.

use pgp::composed::{Deserializable, SignedPublicKey};
use pgp::packet::Signature;
use pgp::types::{KeyDetails, KeyId, VerifyingKey};

use super::allowed_signers::LineError;

/// One certificate of the keyring.
#[derive(Debug, Clone)]
pub struct TrustedCert {
    /// 1-based line of the armor header of the block it came from.
    pub line: usize,
    /// Its first user ID (`Name <email>`), or its fingerprint when it has none.
    pub user: String,
    /// The primary key's fingerprint, upper-case hex as gpg shows it.
    pub fingerprint: String,
    /// Whether it carries a valid revocation signature.
    pub revoked: bool,
    cert: SignedPublicKey,
    /// The subkeys whose binding verifies (indices into `cert.public_subkeys`).
    bound_subkeys: Vec<usize>,
}

/// A key of the keyring that made a signature, found by the signature's issuer.
pub struct SigningKey<'a> {
    pub cert: &'a TrustedCert,
    /// The fingerprint of the key that signed (the primary's or a subkey's).
    pub fingerprint: String,
    key: &'a dyn VerifyingKeyRef,
}

/// Object-safe view of the two key kinds that can verify.
trait VerifyingKeyRef {
    fn verify(&self, signature: &Signature, payload: &[u8]) -> pgp::errors::Result<()>;
}

impl<K: VerifyingKey> VerifyingKeyRef for K {
    fn verify(&self, signature: &Signature, payload: &[u8]) -> pgp::errors::Result<()> {
        signature.verify(self, payload)
    }
}

impl SigningKey<'_> {
    /// Checks `signature` over `payload` with this key.
    pub fn verify(&self, signature: &Signature, payload: &[u8]) -> Result<(), String> {
        self.key
            .verify(signature, payload)
            .map_err(|e| e.to_string())
    }
}

const PUBLIC_BLOCK: &str = "-----BEGIN PGP PUBLIC KEY BLOCK-----";
const PRIVATE_BLOCK: &str = "-----BEGIN PGP PRIVATE KEY BLOCK-----";

/// Every certificate of the keyring's text; a block that does not parse is an error
/// naming its first line.
pub fn parse(text: &str) -> Result<Vec<TrustedCert>, LineError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if line == PRIVATE_BLOCK {
            return Err(LineError {
                line: i + 1,
                reason: "a private key block: give public keys only (gpg --export --armor KEYID)"
                    .to_string(),
            });
        }
        if line != PUBLIC_BLOCK {
            i += 1;
            continue;
        }
        let start = i;
        let end = lines[start..]
            .iter()
            .position(|l| l.trim().starts_with("-----END PGP PUBLIC KEY BLOCK-----"))
            .map(|p| start + p)
            .ok_or_else(|| LineError {
                line: start + 1,
                reason: "the public key block is not closed (no END line)".to_string(),
            })?;
        let block = lines[start..=end].join("\n");
        let bad = |reason: String| LineError {
            line: start + 1,
            reason,
        };
        let (certs, _) = SignedPublicKey::from_armor_many(block.as_bytes())
            .map_err(|e| bad(format!("the public key block does not parse: {e}")))?;
        let before = out.len();
        for cert in certs {
            let cert = cert.map_err(|e| bad(format!("a key in the block does not parse: {e}")))?;
            out.push(trusted(cert, start + 1));
        }
        if out.len() == before {
            return Err(bad("the public key block holds no key".to_string()));
        }
        i = end + 1;
    }
    if out.is_empty() {
        return Err(LineError {
            line: 1,
            reason: format!("no public key block ({PUBLIC_BLOCK})"),
        });
    }
    Ok(out)
}

fn trusted(cert: SignedPublicKey, line: usize) -> TrustedCert {
    let fingerprint = upper_hex(&cert.fingerprint());
    let user = cert
        .details
        .users
        .first()
        .map(|u| String::from_utf8_lossy(u.id.id()).into_owned())
        .unwrap_or_else(|| fingerprint.clone());
    let revoked = cert
        .details
        .revocation_signatures
        .iter()
        .any(|s| s.verify_key(&cert.primary_key).is_ok());
    let bound_subkeys = cert
        .public_subkeys
        .iter()
        .enumerate()
        .filter(|(_, s)| s.verify_bindings(&cert.primary_key).is_ok())
        .map(|(i, _)| i)
        .collect();
    TrustedCert {
        line,
        user,
        fingerprint,
        revoked,
        cert,
        bound_subkeys,
    }
}

/// A fingerprint in upper-case hex, as gpg prints it.
pub fn upper_hex(fingerprint: &pgp::types::Fingerprint) -> String {
    format!("{fingerprint:X}")
}

fn key_id_hex(id: &KeyId) -> String {
    id.to_string().to_uppercase()
}

/// The issuer a signature names, for messages: its fingerprint, else its key ID.
pub fn issuer(signature: &Signature) -> String {
    if let Some(fp) = signature.issuer_fingerprint().first() {
        return upper_hex(fp);
    }
    signature
        .issuer_key_id()
        .first()
        .map(|id| key_id_hex(id))
        .unwrap_or_else(|| "(no issuer)".to_string())
}

/// The key of `keyring` that `signature` names as its issuer (by fingerprint, else by
/// key ID), if any.
pub fn find_signer<'a>(
    keyring: &'a [TrustedCert],
    signature: &Signature,
) -> Option<SigningKey<'a>> {
    let fingerprints = signature.issuer_fingerprint();
    let ids = signature.issuer_key_id();
    let named = |fp: &pgp::types::Fingerprint, id: KeyId| {
        fingerprints.contains(&fp) || (fingerprints.is_empty() && ids.contains(&&id))
    };
    for cert in keyring {
        let primary = &cert.cert.primary_key;
        if named(&primary.fingerprint(), primary.legacy_key_id()) {
            return Some(SigningKey {
                cert,
                fingerprint: cert.fingerprint.clone(),
                key: primary,
            });
        }
        for &i in &cert.bound_subkeys {
            let sub = &cert.cert.public_subkeys[i].key;
            if named(&sub.fingerprint(), sub.legacy_key_id()) {
                return Some(SigningKey {
                    cert,
                    fingerprint: upper_hex(&sub.fingerprint()),
                    key: sub,
                });
            }
        }
    }
    None
}
