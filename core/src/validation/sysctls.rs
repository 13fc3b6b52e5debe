//! `allowedUnsafeSysctls` (`sysctl.NewAllowlist`): each entry a sysctl name or a
//! `*`-terminated prefix, of a namespaced sysctl.

use std::borrow::Cow;

use crate::go;
use crate::types::KubeletConfiguration;

use super::{ValidationError, err, is_lower_alnum};

pub(super) fn check(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    for (i, s) in c.allowed_unsafe_sysctls.iter().flatten().enumerate() {
        if let Some(e) = sysctl_pattern_error(s) {
            out.push(err(format!("allowedUnsafeSysctls[{i}]"), e));
        }
    }
}

/// Why the kubelet rejects `s` as an entry of `allowedUnsafeSysctls`, if it does.
fn sysctl_pattern_error(s: &str) -> Option<String> {
    if !is_valid_sysctl_pattern(s) {
        return Some(format!(
            "sysctl {} must have at most 253 characters and match regex ([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]",
            go::quote(s)
        ));
    }
    // utilsysctl.GetNamespace: the name, or the prefix before its `*`.
    let s = sysctl_to_dots(s);
    let name_or_prefix = match s.find('*') {
        Some(i) => &s[..i],
        None => &s,
    };
    if !sysctl_namespaced(name_or_prefix) {
        return Some(format!(
            "the sysctls {} are not known to be namespaced",
            go::quote(name_or_prefix)
        ));
    }
    None
}

/// `policyvalidation.IsValidSysctlPattern`: at most 253 characters and
/// `([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]`.
fn is_valid_sysctl_pattern(s: &str) -> bool {
    if s.len() > 253 || s.is_empty() {
        return false;
    }
    let segs: Vec<&str> = s.split(['.', '/']).collect();
    let Some((last, init)) = segs.split_last() else {
        return false;
    };
    let seg_ok = |seg: &str| {
        let b = seg.as_bytes();
        !b.is_empty()
            && is_lower_alnum(b[0])
            && is_lower_alnum(b[b.len() - 1])
            && b.iter()
                .all(|c| is_lower_alnum(*c) || matches!(c, b'-' | b'_'))
    };
    let last_ok = {
        let b = last.as_bytes();
        match b.split_last() {
            None => false,
            Some((end, rest)) => {
                (is_lower_alnum(*end) || *end == b'*')
                    && (rest.is_empty()
                        || (is_lower_alnum(rest[0])
                            && rest
                                .iter()
                                .all(|c| is_lower_alnum(*c) || matches!(c, b'-' | b'_'))))
            }
        }
    };
    last_ok && init.iter().all(|seg| seg_ok(seg))
}

/// `ConvertSysctlVariableToDotsSeparator`: `net/ipv4/conf/eth0.100/x` becomes
/// `net.ipv4.conf.eth0/100.x` when the first separator is a slash.
fn sysctl_to_dots(s: &str) -> Cow<'_, str> {
    match s.find(['.', '/']) {
        Some(i) if s.as_bytes()[i] == b'/' => Cow::Owned(
            s.chars()
                .map(|ch| match ch {
                    '.' => '/',
                    '/' => '.',
                    other => other,
                })
                .collect(),
        ),
        _ => Cow::Borrowed(s),
    }
}

/// `utilsysctl.NamespacedBy(s) != UnknownNamespace`.
fn sysctl_namespaced(s: &str) -> bool {
    // component-helpers' nameToNamespace, then prefixToNamespace.
    const NAMES: &[&str] = &[
        "kernel.sem",
        "kernel.shmall",
        "kernel.shmmax",
        "kernel.shmmni",
        "kernel.shm_rmid_forced",
        "kernel.shm",
        "kernel.msgmax",
        "kernel.msgmnb",
        "kernel.msgmni",
        "kernel.msg",
    ];
    NAMES.contains(&s) || s.starts_with("net.") || s.starts_with("fs.mqueue.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysctl_patterns_match_upstream_regex() {
        for ok in [
            "net.ipv4.tcp_syncookies",
            "net.*",
            "net.ipv4-*",
            "kernel.shm_rmid_forced",
            "a",
            "*",
            "net/ipv4/ip_forward",
        ] {
            assert!(is_valid_sysctl_pattern(ok), "{ok}");
        }
        let long = "a".repeat(254);
        for bad in [
            "",
            "net..a",
            "net.*.a",
            "-net",
            "net-.a",
            "Net",
            "net.a*b",
            long.as_str(),
        ] {
            assert!(!is_valid_sysctl_pattern(bad), "{bad}");
        }
        assert_eq!(
            sysctl_to_dots("net/ipv4/conf/eth0.100/forwarding"),
            "net.ipv4.conf.eth0/100.forwarding"
        );
        assert_eq!(
            sysctl_to_dots("net.ipv4.conf.eth0/100.forwarding"),
            "net.ipv4.conf.eth0/100.forwarding"
        );
    }
}
