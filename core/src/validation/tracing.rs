//! `tracing`: component-base `tracing/api/v1` `ValidateTracingConfiguration`.
//!
//! The endpoint is parsed as Go's `net/url.Parse` parses it (after `dns://` is put in
//! front of an endpoint without `//`), so that the errors and the scheme check match the
//! kubelet's: an emulation of the parts of `net/url` that can fail, not a URL library.

use crate::go;
use crate::types::TracingConfiguration;

use super::{ValidationError, err};

const MAX_SAMPLING_RATE_PER_MILLION: i32 = 1_000_000;

/// Validates a `tracing` block that is present.
pub(super) fn validate(t: &TracingConfiguration, out: &mut Vec<ValidationError>) {
    if let Some(rate) = t.sampling_rate_per_million {
        if rate < 0 {
            out.push(err(
                "tracing.samplingRatePerMillion",
                format!("tracing.samplingRatePerMillion: Invalid value: {rate}: sampling rate must be positive"),
            ));
        }
        if rate > MAX_SAMPLING_RATE_PER_MILLION {
            out.push(err(
                "tracing.samplingRatePerMillion",
                format!("tracing.samplingRatePerMillion: Invalid value: {rate}: sampling rate per million must be less than or equal to one million"),
            ));
        }
    }
    if let Some(message) = t.endpoint.as_deref().and_then(endpoint_error) {
        // A field.Error: its path, then its detail.
        out.push(err(
            "tracing.endpoint",
            format!("tracing.endpoint: {message}"),
        ));
    }
}

/// `validateEndpoint`.
fn endpoint_error(endpoint: &str) -> Option<String> {
    let prefixed;
    let endpoint = if endpoint.contains("//") {
        endpoint
    } else {
        prefixed = format!("dns://{endpoint}");
        &prefixed
    };
    match url_scheme(endpoint) {
        Err(e) => Some(format!("Invalid value: {}: {e}", go::quote(endpoint))),
        Ok(scheme) if matches!(scheme.as_str(), "dns" | "unix" | "unix-abstract") => None,
        Ok(scheme) => Some(format!(
            "Invalid value: {}: unsupported scheme: {scheme}.  Options are none, dns, unix, or unix-abstract.  See https://github.com/grpc/grpc/blob/master/doc/naming.md",
            go::quote(endpoint)
        )),
    }
}

/// The lower-cased scheme `url.Parse(raw)` finds, or its error (`parse "...": ...`).
fn url_scheme(raw: &str) -> Result<String, String> {
    let (u, fragment) = match raw.split_once('#') {
        Some((u, f)) => (u, Some(f)),
        None => (raw, None),
    };
    let scheme = parse(u).map_err(|e| format!("parse {}: {e}", go::quote(u)))?;
    if let Some(f) = fragment {
        unescape(f, Mode::Fragment).map_err(|e| format!("parse {}: {e}", go::quote(raw)))?;
    }
    Ok(scheme)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    Fragment,
}

/// `url.parse(rawURL, viaRequest=false)`, keeping only what can fail and the scheme.
fn parse(raw: &str) -> Result<String, String> {
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("net/url: invalid control character in URL".to_string());
    }
    if raw == "*" {
        return Ok(String::new());
    }
    let (scheme, rest) = get_scheme(raw)?;
    let scheme = scheme.to_ascii_lowercase();
    let rest = if rest.ends_with('?') && rest.matches('?').count() == 1 {
        &rest[..rest.len() - 1]
    } else {
        rest.split('?').next().unwrap_or(rest)
    };
    if !rest.starts_with('/') {
        if !scheme.is_empty() {
            // An opaque URL such as "dns:host".
            return Ok(scheme);
        }
        let segment = rest.split('/').next().unwrap_or(rest);
        if segment.contains(':') {
            return Err("first path segment in URL cannot contain colon".to_string());
        }
    }
    let mut path = rest;
    if (!scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
        let after = &rest[2..];
        let (authority, p) = match after.find('/') {
            Some(i) => (&after[..i], &after[i..]),
            None => (after, ""),
        };
        parse_authority(authority)?;
        path = p;
    }
    unescape(path, Mode::Path)?;
    Ok(scheme)
}

/// `getScheme`: a scheme is `[A-Za-z][A-Za-z0-9+.-]*` before the first colon.
fn get_scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, b) in raw.bytes().enumerate() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' => {
                if i == 0 {
                    return Ok(("", raw));
                }
            }
            b':' => {
                if i == 0 {
                    return Err("missing protocol scheme".to_string());
                }
                return Ok((&raw[..i], &raw[i + 1..]));
            }
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// `parseAuthority`: `[userinfo@]host`.
fn parse_authority(authority: &str) -> Result<(), String> {
    let at = authority.rfind('@');
    let host = match at {
        Some(i) => &authority[i + 1..],
        None => authority,
    };
    parse_host(host)?;
    if let Some(i) = at {
        let userinfo = &authority[..i];
        if !valid_userinfo(userinfo) {
            return Err("net/url: invalid userinfo".to_string());
        }
        match userinfo.split_once(':') {
            Some((user, password)) => {
                unescape(user, Mode::UserPassword)?;
                unescape(password, Mode::UserPassword)?;
            }
            None => unescape(userinfo, Mode::UserPassword)?,
        }
    }
    Ok(())
}

/// `parseHost`: a bracketed IP literal with an optional zone and port, or a host with an
/// optional numeric port.
fn parse_host(host: &str) -> Result<(), String> {
    if host.starts_with('[') {
        let Some(i) = host.rfind(']') else {
            return Err("missing ']' in host".to_string());
        };
        let colon_port = &host[i + 1..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {} after host", go::quote(colon_port)));
        }
        if let Some(zone) = host[..i].find("%25") {
            unescape(&host[..zone], Mode::Host)?;
            unescape(&host[zone..i], Mode::Zone)?;
            unescape(&host[i..], Mode::Host)?;
            return Ok(());
        }
    } else if let Some(i) = host.rfind(':') {
        let colon_port = &host[i..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {} after host", go::quote(colon_port)));
        }
    }
    unescape(host, Mode::Host)
}

fn valid_optional_port(port: &str) -> bool {
    match port.strip_prefix(':') {
        None => port.is_empty(),
        Some(digits) => digits.bytes().all(|b| b.is_ascii_digit()),
    }
}

fn valid_userinfo(s: &str) -> bool {
    s.bytes().all(|b| {
        b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b':'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b'%'
                    | b'@'
            )
    })
}

/// `url.unescape`, for its errors only.
fn unescape(s: &str, mode: Mode) -> Result<(), String> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let bad = || {
                format!(
                    "invalid URL escape {}",
                    go::quote(&s[i..(i + 3).min(s.len())])
                )
            };
            if i + 2 >= b.len() || !b[i + 1].is_ascii_hexdigit() || !b[i + 2].is_ascii_hexdigit() {
                return Err(bad());
            }
            let escape = &s[i..i + 3];
            let hi = hex(b[i + 1]);
            let v = hi << 4 | hex(b[i + 2]);
            if mode == Mode::Host && hi < 8 && escape != "%25" {
                return Err(bad());
            }
            if mode == Mode::Zone && escape != "%25" && v != b' ' && should_escape_host(v) {
                return Err(bad());
            }
            i += 3;
            continue;
        }
        if matches!(mode, Mode::Host | Mode::Zone) && b[i] < 0x80 && should_escape_host(b[i]) {
            return Err(format!(
                "invalid character {} in host name",
                go::quote(&s[i..i + 1])
            ));
        }
        i += 1;
    }
    Ok(())
}

fn hex(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        b'A'..=b'F' => b - b'A' + 10,
        _ => 0,
    }
}

/// `shouldEscape(c, encodeHost)`.
fn should_escape_host(c: u8) -> bool {
    !(c.is_ascii_alphanumeric()
        || matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
                | b'-'
                | b'_'
                | b'.'
                | b'~'
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(endpoint: Option<&str>, rate: Option<i32>) -> Vec<ValidationError> {
        let t = TracingConfiguration {
            endpoint: endpoint.map(str::to_string),
            sampling_rate_per_million: rate,
        };
        let mut out = Vec::new();
        validate(&t, &mut out);
        out
    }

    fn one(errs: &[ValidationError], field: &str, message: &str) {
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, field);
        assert_eq!(errs[0].message, message);
    }

    #[test]
    fn valid_endpoints_and_rates_pass() {
        for ep in [
            "localhost:4317",
            "otel-collector.monitoring.svc:4317",
            "dns:///collector:4317",
            "unix:///var/run/otel.sock",
            "unix-abstract:///otel",
            "[::1]:4317",
            "10.0.0.1:4317",
        ] {
            assert_eq!(run(Some(ep), None), vec![], "{ep}");
        }
        for rate in [0, 1, 1_000_000] {
            assert_eq!(run(None, Some(rate)), vec![], "{rate}");
        }
        assert_eq!(run(None, None), vec![]);
        // Without "//" an endpoint is a dns one, as upstream reads it.
        assert_eq!(run(Some("unix-abstract:otel"), None).len(), 1);
    }

    #[test]
    fn sampling_rate_bounds() {
        one(
            &run(None, Some(-1)),
            "tracing.samplingRatePerMillion",
            "tracing.samplingRatePerMillion: Invalid value: -1: sampling rate must be positive",
        );
        one(
            &run(None, Some(1_000_001)),
            "tracing.samplingRatePerMillion",
            "tracing.samplingRatePerMillion: Invalid value: 1000001: sampling rate per million must be less than or equal to one million",
        );
    }

    #[test]
    fn endpoint_parse_errors_match_go() {
        // Upstream's own test case.
        one(
            &run(Some("dn%2s://localhost:4317"), None),
            "tracing.endpoint",
            "tracing.endpoint: Invalid value: \"dn%2s://localhost:4317\": parse \"dn%2s://localhost:4317\": first path segment in URL cannot contain colon",
        );
        one(
            &run(Some("localhost:43a7"), None),
            "tracing.endpoint",
            "tracing.endpoint: Invalid value: \"dns://localhost:43a7\": parse \"dns://localhost:43a7\": invalid port \":43a7\" after host",
        );
        one(
            &run(Some("bad host:4317"), None),
            "tracing.endpoint",
            "tracing.endpoint: Invalid value: \"dns://bad host:4317\": parse \"dns://bad host:4317\": invalid character \" \" in host name",
        );
        one(
            &run(Some("://x"), None),
            "tracing.endpoint",
            "tracing.endpoint: Invalid value: \"://x\": parse \"://x\": missing protocol scheme",
        );
        one(
            &run(Some("[::1:4317"), None),
            "tracing.endpoint",
            "tracing.endpoint: Invalid value: \"dns://[::1:4317\": parse \"dns://[::1:4317\": missing ']' in host",
        );
        one(
            &run(Some("unix:///a%zz"), None),
            "tracing.endpoint",
            "tracing.endpoint: Invalid value: \"unix:///a%zz\": parse \"unix:///a%zz\": invalid URL escape \"%zz\"",
        );
    }

    #[test]
    fn endpoint_scheme_must_be_grpc_resolvable() {
        one(
            &run(Some("http://collector:4317"), None),
            "tracing.endpoint",
            "tracing.endpoint: Invalid value: \"http://collector:4317\": unsupported scheme: http.  Options are none, dns, unix, or unix-abstract.  See https://github.com/grpc/grpc/blob/master/doc/naming.md",
        );
        assert_eq!(
            run(Some("DNS://collector:4317"), None),
            vec![],
            "schemes are case-insensitive"
        );
    }
}
