//! Kubeconfig files for the real cluster's identities.

use std::path::Path;

use crate::E2eError;
use crate::real::pki::{CertFiles, write_file};

/// How an identity proves itself to the API server.
pub enum Credentials {
    /// A client certificate (admin, the controllers, a kubelet).
    Cert(CertFiles),
    /// A bearer token (a service account's, from the TokenRequest API).
    Token(String),
}

/// Writes a kubeconfig for `user` at `server`, trusting `ca`; mode 0600.
pub fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca: &Path,
    user: &str,
    credentials: &Credentials,
) -> Result<(), E2eError> {
    let auth = match credentials {
        Credentials::Cert(files) => format!(
            "    client-certificate: {}\n    client-key: {}\n",
            files.cert.display(),
            files.key.display()
        ),
        Credentials::Token(token) => format!("    token: {token}\n"),
    };
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: {user:?}
  user:
{auth}contexts:
- name: e2e
  context:
    cluster: e2e
    user: {user:?}
current-context: e2e
",
        ca = ca.display(),
    );
    write_file(path, text.as_bytes(), true)
}
