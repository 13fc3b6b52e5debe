//! [`Pki`]: the real cluster's certificates, as kubeadm lays them out: one CA that signs
//! the API server's serving certificate, every client certificate (admin in
//! `system:masters`, the controller-manager, the scheduler, each kubelet as
//! `system:node:<name>` in `system:nodes`, the API server as a client of the kubelets) and
//! each kubelet's serving certificate; and the service-account signing key pair.
//!
//! Keys are ECDSA P-256 (rcgen's default; the API server signs service-account tokens
//! with ES256 from such a key). Everything is written PEM, keys mode 0600.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use crate::E2eError;

/// A certificate and its key, written as `<name>.crt` and `<name>.key`.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// The private key (PEM, PKCS#8).
    pub key: PathBuf,
}

/// The cluster CA, able to sign more certificates (one per kubelet as nodes join).
pub struct Pki {
    dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate (`ca.crt`).
    pub ca: PathBuf,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki").field("dir", &self.dir).finish()
    }
}

fn pki_error(what: impl Into<String>) -> impl FnOnce(rcgen::Error) -> E2eError {
    let what = what.into();
    move |e| E2eError::Unexpected {
        what,
        message: e.to_string(),
    }
}

/// Writes `data` to `path`, readable by its owner only when `secret`.
pub(crate) fn write_file(path: &Path, data: &[u8], secret: bool) -> Result<(), E2eError> {
    use std::os::unix::fs::PermissionsExt as _;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(E2eError::io(format!("creating {}", parent.display())))?;
    }
    std::fs::write(path, data).map_err(E2eError::io(format!("writing {}", path.display())))?;
    if secret {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(E2eError::io(format!("restricting {}", path.display())))?;
    }
    Ok(())
}

/// What a leaf certificate is for.
pub enum Usage<'a> {
    /// A TLS client: `CN=<user>`, an `O=` per group.
    Client {
        /// The user name.
        user: &'a str,
        /// The groups.
        groups: &'a [&'a str],
    },
    /// A TLS server for these DNS names and IP addresses.
    Server {
        /// The common name.
        name: &'a str,
        /// DNS names and IP addresses (parsed as IPs when they are).
        sans: &'a [&'a str],
    },
}

impl Pki {
    /// A new CA (`CN=kubernetes`, as kubeadm names it) in `dir` (`ca.crt`, `ca.key`).
    pub fn create(dir: &Path) -> Result<Pki, E2eError> {
        let key = KeyPair::generate().map_err(pki_error("generating the CA key"))?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "kubernetes");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params
            .self_signed(&key)
            .map_err(pki_error("signing the CA"))?;
        let ca = dir.join("ca.crt");
        write_file(&ca, cert.pem().as_bytes(), false)?;
        write_file(&dir.join("ca.key"), key.serialize_pem().as_bytes(), true)?;
        Ok(Pki {
            dir: dir.to_path_buf(),
            issuer: Issuer::new(params, key),
            ca,
        })
    }

    /// The CA certificate (PEM).
    pub fn ca_pem(&self) -> Result<String, E2eError> {
        std::fs::read_to_string(&self.ca)
            .map_err(E2eError::io(format!("reading {}", self.ca.display())))
    }

    /// Signs a new key pair for `usage`, written as `<dir>/<name>.crt` and `.key`
    /// (`dir` defaults to the CA's directory).
    pub fn issue(
        &self,
        dir: Option<&Path>,
        name: &str,
        usage: Usage<'_>,
    ) -> Result<CertFiles, E2eError> {
        let key = KeyPair::generate().map_err(pki_error(format!("generating the {name} key")))?;
        let mut params = CertificateParams::default();
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        match usage {
            Usage::Client { user, groups } => {
                params.distinguished_name.push(DnType::CommonName, user);
                for g in groups {
                    params.distinguished_name.push(DnType::OrganizationName, *g);
                }
                params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            }
            Usage::Server { name, sans } => {
                params.distinguished_name.push(DnType::CommonName, name);
                params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
                for san in sans {
                    params.subject_alt_names.push(match san.parse::<IpAddr>() {
                        Ok(ip) => SanType::IpAddress(ip),
                        Err(_) => SanType::DnsName(
                            (*san)
                                .try_into()
                                .map_err(pki_error(format!("the name {san}")))?,
                        ),
                    });
                }
            }
        }
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(pki_error(format!("signing the {name} certificate")))?;
        let dir = dir.unwrap_or(&self.dir);
        let files = CertFiles {
            cert: dir.join(format!("{name}.crt")),
            key: dir.join(format!("{name}.key")),
        };
        write_file(&files.cert, cert.pem().as_bytes(), false)?;
        write_file(&files.key, key.serialize_pem().as_bytes(), true)?;
        Ok(files)
    }

    /// The service-account signing key pair (`sa.key`, `sa.pub`), as kubeadm names it.
    pub fn service_account_keys(&self) -> Result<CertFiles, E2eError> {
        let key = KeyPair::generate().map_err(pki_error("generating the service-account key"))?;
        let files = CertFiles {
            cert: self.dir.join("sa.pub"),
            key: self.dir.join("sa.key"),
        };
        write_file(&files.cert, key.public_key_pem().as_bytes(), false)?;
        write_file(&files.key, key.serialize_pem().as_bytes(), true)?;
        Ok(files)
    }
}

/// The loopback address every component binds.
pub const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
