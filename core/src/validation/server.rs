//! The kubelet's server, as it starts: the address it binds, its TLS settings and its
//! authorization mode.

use std::collections::HashSet;

use crate::go;
use crate::types::KubeletConfiguration;

use super::{ValidationError, err};

pub(super) fn check(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    check_address(c, out);
    check_tls(c, out);
    check_authorization_mode(c, out);
}

/// The server binds `address` (as `netutils.ParseIPSloppy` reads it) when it serves at
/// all; an address that is not an IP makes the listener, and so the kubelet, exit.
fn check_address(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    let serves = c.enable_server.unwrap_or(false) || c.read_only_port.unwrap_or(0) > 0;
    let address = c.address.as_deref().unwrap_or("");
    if serves && !is_ip_sloppy(address) {
        out.push(err(
            "address",
            format!(
                "invalid configuration: address {} is not a valid IP address",
                go::quote(address)
            ),
        ));
    }
}

/// `netutils.ParseIPSloppy(s) != nil`: Go's `net.ParseIP`, which also accepts IPv4
/// octets with leading zeros.
fn is_ip_sloppy(s: &str) -> bool {
    if s.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    let mut n = 0;
    for part in s.split('.') {
        n += 1;
        if part.is_empty() || part.len() > 10 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        if part.parse::<u32>().map_or(true, |v| v > 255) {
            return false;
        }
    }
    n == 4
}

/// Go crypto/tls cipher suite names `cliflag.TLSCipherSuites` accepts: `tls.CipherSuites()`,
/// `tls.InsecureCipherSuites()` and two legacy names.
const TLS_CIPHER_SUITES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// `tls.CurveID` values Go 1.26 names: P-256, P-384, P-521, X25519 and the three hybrid
/// ML-KEM groups.
const TLS_CURVES: &[i32] = &[23, 24, 25, 29, 4587, 4588, 4589];

/// `InitializeTLS`: `cliflag.TLSCipherSuites`, `cliflag.TLSVersion`,
/// `cliflag.TLSCurvePreferences`.
fn check_tls(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    for (i, name) in c.tls_cipher_suites.iter().flatten().enumerate() {
        if !TLS_CIPHER_SUITES.contains(&name.as_str()) {
            out.push(err(
                format!("tlsCipherSuites[{i}]"),
                format!("Cipher suite {name} not supported or doesn't exist"),
            ));
        }
    }
    let version = c.tls_min_version.as_deref().unwrap_or("");
    if !matches!(
        version,
        "" | "VersionTLS10" | "VersionTLS11" | "VersionTLS12" | "VersionTLS13"
    ) {
        out.push(err(
            "tlsMinVersion",
            format!("unknown tls version {}", go::quote(version)),
        ));
    }
    let curves = c.tls_curve_preferences.as_deref().unwrap_or(&[]);
    let mut seen = HashSet::with_capacity(curves.len());
    for (i, &id) in curves.iter().enumerate() {
        let field = || format!("tlsCurvePreferences[{i}]");
        if id <= 0 || id > i32::from(u16::MAX) {
            out.push(err(
                field(),
                format!("curve preference {id} is out of range (must be 1-65535)"),
            ));
        } else if !seen.insert(id) {
            out.push(err(field(), format!("duplicate curve preference {id}")));
        } else if !TLS_CURVES.contains(&id) {
            out.push(err(
                field(),
                format!("curve preference {id} is not supported by the current Go version"),
            ));
        }
    }
}

/// cmd/kubelet/app/auth.go BuildAuthz: the kubelet refuses to start with another mode
/// (only when the server is enabled does it build the authorizer).
fn check_authorization_mode(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    if c.enable_server == Some(false) {
        return;
    }
    match c
        .authorization
        .as_ref()
        .and_then(|a| a.mode.as_deref())
        .unwrap_or("")
    {
        "AlwaysAllow" | "Webhook" => {}
        "" => out.push(err("authorization.mode", "no authorization mode specified")),
        other => out.push(err(
            "authorization.mode",
            format!("unknown authorization mode {other}"),
        )),
    }
}
