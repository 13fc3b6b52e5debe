//! Image pull credential verification (`imagePullCredentialsVerificationPolicy`,
//! `preloadedImagesVerificationAllowlist`), with the allowlist's image patterns read as
//! docker's reference grammar reads them.

use std::borrow::Cow;

use crate::go;
use crate::types::KubeletConfiguration;

use super::{ValidationError, err, is_lower_alnum};

pub(super) fn check_pull_credentials(
    c: &KubeletConfiguration,
    on: &dyn Fn(&str) -> bool,
    out: &mut Vec<ValidationError>,
) {
    const POLICY: &str = "imagePullCredentialsVerificationPolicy";
    const ALLOWLIST: &str = "preloadedImagesVerificationAllowlist";
    let policy = c
        .image_pull_credentials_verification_policy
        .as_deref()
        .unwrap_or("");
    let allowlist = c
        .preloaded_images_verification_allowlist
        .as_deref()
        .unwrap_or(&[]);
    if on("KubeletEnsureSecretPulledImages") {
        if !matches!(
            policy,
            "NeverVerify"
                | "NeverVerifyPreloadedImages"
                | "NeverVerifyAllowlistedImages"
                | "AlwaysVerify"
        ) {
            out.push(err(
                POLICY,
                format!(
                    "invalid configuration: option {} specified for imagePullCredentialsVerificationPolicy. Valid options are \"NeverVerify\", \"NeverVerifyPreloadedImages\", \"NeverVerifyAllowlistedImages\" or \"AlwaysVerify\"",
                    go::quote(policy)
                ),
            ));
        }
        if !allowlist.is_empty() && policy != "NeverVerifyAllowlistedImages" {
            out.push(err(
                ALLOWLIST,
                "invalid configuration: can't set `preloadedImagesVerificationAllowlist` if `imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\"",
            ));
        } else {
            for (i, pattern) in allowlist.iter().enumerate() {
                if let Some(e) = image_pattern_error(pattern) {
                    out.push(err(
                        format!("{ALLOWLIST}[{i}]"),
                        format!("invalid configuration: invalid image pattern in `preloadedImagesVerificationAllowlist`: {e}"),
                    ));
                }
            }
        }
    } else {
        if !policy.is_empty() {
            out.push(err(
                POLICY,
                "invalid configuration: `imagePullCredentialsVerificationPolicy` must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled",
            ));
        }
        if !allowlist.is_empty() {
            out.push(err(
                ALLOWLIST,
                "invalid configuration: `preloadedImagesVerificationAllowlist` must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled",
            ));
        }
    }
}

/// `imagepullmanager.ValidateAllowlistImagesPatterns` for one pattern: an image name with
/// its registry and without tag or digest, or such a prefix followed by `/*`.
fn image_pattern_error(pattern: &str) -> Option<String> {
    if pattern != pattern.trim() {
        return Some(format!(
            "leading/trailing spaces are not allowed: {pattern}"
        ));
    }
    let (trimmed, wildcard) = match pattern.strip_suffix("/*") {
        Some(prefix) => (&pattern[..prefix.len() + 1], true),
        None => (pattern, false),
    };
    if trimmed.is_empty() {
        return Some(format!("the supplied pattern is too short: {pattern}"));
    }
    if trimmed.contains('*') {
        return Some(format!(
            "not a valid wildcard pattern, only patterns ending with '/*' are allowed: {pattern}"
        ));
    }
    if wildcard {
        if trimmed.len() == 1 {
            return Some("at least registry hostname is required".to_string());
        }
        return None;
    }
    match normalized_image_name(trimmed) {
        Err(e) => Some(format!("failed to parse as an image name: {e}")),
        Ok(name) if name != trimmed => Some(format!(
            "neither tag nor digest is accepted in an image reference: {pattern}"
        )),
        Ok(_) => None,
    }
}

/// The repository name (`registry/path`, without tag or digest) that docker's
/// `reference.ParseNormalizedNamed` gives `s`, adding `docker.io` (and `library/`) when
/// the first component is not a registry host.
fn normalized_image_name(s: &str) -> Result<Cow<'_, str>, String> {
    const INVALID: &str = "invalid reference format";
    let (domain, remainder) = match s.find('/') {
        Some(i)
            if s[..i].contains(['.', ':'])
                || &s[..i] == "localhost"
                || s[..i].bytes().any(|b| b.is_ascii_uppercase()) =>
        {
            (Some(&s[..i]), &s[i + 1..])
        }
        _ => (None, s),
    };
    if remainder.bytes().any(|b| b.is_ascii_uppercase()) {
        let path = remainder.split(['@', ':']).next().unwrap_or(remainder);
        return Err(format!(
            "{INVALID}: repository name ({path}) must be lowercase"
        ));
    }
    // Split off a digest, then a tag (a ':' after the last '/').
    let (named, digest) = match remainder.split_once('@') {
        Some((n, dg)) => (n, Some(dg)),
        None => (remainder, None),
    };
    let (path, tag) = match named.rfind(':') {
        Some(i) if !named[i..].contains('/') => (&named[..i], Some(&named[i + 1..])),
        _ => (named, None),
    };
    let domain_ok = domain.is_none_or(valid_registry_host);
    let path_ok = !path.is_empty() && path.split('/').all(valid_path_component);
    let tag_ok = tag.is_none_or(|t| {
        let b = t.as_bytes();
        !b.is_empty()
            && b.len() <= 128
            && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
    });
    let digest_ok = digest.is_none_or(|dg| {
        dg.split_once(':').is_some_and(|(alg, hex)| {
            !alg.is_empty()
                && alg
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'.' | b'_' | b'-'))
                && hex.len() >= 32
                && hex.bytes().all(|c| c.is_ascii_hexdigit())
        })
    });
    if !(domain_ok && path_ok && tag_ok && digest_ok) {
        return Err(INVALID.to_string());
    }
    Ok(match domain {
        Some(dom) => Cow::Borrowed(&s[..dom.len() + 1 + path.len()]),
        None if path.contains('/') => Cow::Owned(format!("docker.io/{path}")),
        None => Cow::Owned(format!("docker.io/library/{path}")),
    })
}

/// A registry host as the docker reference grammar has it: DNS-ish components joined by
/// dots or a bracketed IPv6 address, with an optional numeric port.
fn valid_registry_host(h: &str) -> bool {
    let (host, port) = if let Some(rest) = h.strip_prefix('[') {
        match rest.split_once(']') {
            Some((ip, after)) => {
                if ip.parse::<std::net::Ipv6Addr>().is_err() {
                    return false;
                }
                match after {
                    "" => return true,
                    p => match p.strip_prefix(':') {
                        Some(port) => ("", Some(port)),
                        None => return false,
                    },
                }
            }
            None => return false,
        }
    } else {
        match h.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (h, None),
        }
    };
    if port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    if h.starts_with('[') {
        return true;
    }
    !host.is_empty()
        && host.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        })
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
fn valid_path_component(p: &str) -> bool {
    let b = p.as_bytes();
    if b.is_empty() || !is_lower_alnum(b[0]) || !is_lower_alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if is_lower_alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !is_lower_alnum(b[i]) {
            i += 1;
        }
        let sep = &p[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|c| c == b'-');
        if !ok {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_normalize_as_docker_does() {
        assert_eq!(
            normalized_image_name("nginx").unwrap(),
            "docker.io/library/nginx"
        );
        assert_eq!(
            normalized_image_name("team/app:1").unwrap(),
            "docker.io/team/app"
        );
        assert_eq!(
            normalized_image_name("registry.k8s.io/pause:3.10").unwrap(),
            "registry.k8s.io/pause"
        );
        assert_eq!(
            normalized_image_name("localhost/app").unwrap(),
            "localhost/app"
        );
        assert_eq!(
            normalized_image_name("[::1]:5000/app").unwrap(),
            "[::1]:5000/app"
        );
        assert!(
            normalized_image_name("Nginx")
                .unwrap_err()
                .contains("must be lowercase")
        );
        assert_eq!(
            normalized_image_name("reg.io/a..b").unwrap_err(),
            "invalid reference format"
        );
        assert!(
            image_pattern_error("nginx")
                .unwrap()
                .contains("neither tag nor digest")
        );
        assert_eq!(
            image_pattern_error(" reg.io/a").unwrap(),
            "leading/trailing spaces are not allowed:  reg.io/a"
        );
        assert_eq!(
            image_pattern_error("/*").unwrap(),
            "at least registry hostname is required"
        );
        assert!(
            image_pattern_error("reg.io/*/x")
                .unwrap()
                .contains("only patterns ending with '/*'")
        );
    }
}
