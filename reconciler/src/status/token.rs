//! Forge tokens, read from a file at each request (a rotated Secret is picked up without
//! a restart) and never logged.

use std::fmt;
use std::path::{Path, PathBuf};

use super::error::StatusError;

/// A secret read from a file. `Debug` prints `Secret(<redacted>)`; there is no
/// `Display`, so it cannot end up in a log line or an error message by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Reads the secret in `path`, without trailing whitespace (a newline from `echo`).
    pub fn from_file(path: &Path, forge: &'static str) -> Result<Secret, StatusError> {
        let text = std::fs::read_to_string(path).map_err(|source| StatusError::TokenFile {
            forge,
            path: path.to_path_buf(),
            source,
        })?;
        let token = text.trim_end();
        if token.is_empty() {
            return Err(StatusError::EmptyToken {
                forge,
                path: path.to_path_buf(),
            });
        }
        Ok(Secret(token.to_string()))
    }

    /// The secret itself, for building a request header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The credentials of an `Authorization: Basic` header, base64-encoded: the secret
    /// as it is when it holds a `user:password` pair, else `user` and the secret as the
    /// password (Azure DevOps takes a personal access token with any user, even none).
    pub(crate) fn basic(&self, user: &str) -> Secret {
        use base64::Engine;
        let pair = if self.0.contains(':') {
            self.0.clone()
        } else {
            format!("{user}:{}", self.0)
        };
        Secret(base64::engine::general_purpose::STANDARD.encode(pair))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Where a forge token lives. The file is read at each request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenFile(pub PathBuf);

impl TokenFile {
    /// Reads the token now.
    pub fn read(&self, forge: &'static str) -> Result<Secret, StatusError> {
        Secret::from_file(&self.0, forge)
    }

    /// A hash of the token the file holds now (`None`: it cannot be read or is empty),
    /// to tell whether the file changed since the forge refused a token. Never logged;
    /// it identifies the token only within this process.
    pub fn fingerprint(&self) -> Option<u64> {
        let secret = self.read("token").ok()?;
        let mut hasher = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(secret.expose(), &mut hasher);
        Some(std::hash::Hasher::finish(&hasher))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "ghp_supersecret\n").unwrap();
        let secret = Secret::from_file(&path, "GitHub").unwrap();
        assert_eq!(secret.expose(), "ghp_supersecret");
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
        std::fs::write(&path, "  \n").unwrap();
        let err = Secret::from_file(&path, "GitHub").unwrap_err();
        assert!(err.to_string().contains("empty"), "{err}");
        let missing = Secret::from_file(&dir.path().join("nope"), "GitHub").unwrap_err();
        assert!(missing.to_string().contains("nope"), "{missing}");
    }

    #[test]
    fn basic_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "jdoe:app-pa55\n").unwrap();
        let pair = Secret::from_file(&path, "Bitbucket").unwrap();
        // base64("jdoe:app-pa55")
        assert_eq!(pair.basic("").expose(), "amRvZTphcHAtcGE1NQ==");
        std::fs::write(&path, "pat\n").unwrap();
        let pat = Secret::from_file(&path, "Azure DevOps").unwrap();
        // base64(":pat")
        assert_eq!(pat.basic("").expose(), "OnBhdA==");
        assert_eq!(format!("{:?}", pat.basic("")), "Secret(<redacted>)");
    }

    #[test]
    fn fingerprints_tell_a_changed_token_apart() {
        let dir = tempfile::tempdir().unwrap();
        let file = TokenFile(dir.path().join("token"));
        assert_eq!(file.fingerprint(), None);
        std::fs::write(&file.0, "one\n").unwrap();
        let one = file.fingerprint().unwrap();
        std::fs::write(&file.0, "one").unwrap();
        assert_eq!(
            file.fingerprint(),
            Some(one),
            "trailing white space is not the token"
        );
        std::fs::write(&file.0, "two\n").unwrap();
        assert_ne!(file.fingerprint(), Some(one));
    }
}
