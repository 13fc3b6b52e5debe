//! Time as the API server and the kubelet write it: RFC 3339 in UTC (`metav1.Time` to the
//! second, `metav1.MicroTime` to the microsecond), klog's `MMDD hh:mm:ss.uuuuuu`, and
//! timestamps read back for ages. Hand-written rather than humantime's, which formats
//! neither times before the epoch (protobuf can carry them) nor parses numeric offsets.

use std::time::{SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 to (year, month, day), Howard Hinnant's `civil_from_days`.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month, day) to days since 1970-01-01, Howard Hinnant's `days_from_civil`.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix seconds (before the epoch too) as `2006-01-02T15:04:05Z`.
pub fn rfc3339_secs(secs: i64) -> String {
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `t` as `2006-01-02T15:04:05Z`, or `2006-01-02T15:04:05.000000Z` with `micros`.
pub fn rfc3339(t: SystemTime, micros: bool) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = rfc3339_secs(i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    if micros {
        format!("{}.{:06}Z", &secs[..secs.len() - 1], d.subsec_micros())
    } else {
        secs
    }
}

/// `t` as klog prints it, `MMDD hh:mm:ss.uuuuuu`.
pub fn klog_time(t: SystemTime) -> String {
    let full = rfc3339(t, true);
    // 2006-01-02T15:04:05.000000Z -> 0102 15:04:05.000000
    format!(
        "{}{} {}",
        &full[5..7],
        &full[8..10],
        &full[11..full.len() - 1]
    )
}

/// Now in Unix seconds.
pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Seconds since the Unix epoch of an RFC 3339 timestamp (`2026-01-02T03:04:05Z`,
/// fractional seconds and a numeric offset allowed).
pub fn parse_timestamp(ts: &str) -> Option<i64> {
    let b = ts.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> { ts.get(r)?.parse::<i64>().ok() };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &ts[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first() {
                Some(b'+') => 1,
                Some(b'-') => -1,
                _ => return None,
            };
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            sign * (oh * 3600 + om * 60)
        }
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - offset)
}

/// Go's `time.RFC3339`, the layout `metav1.Time` parses.
pub const RFC3339_LAYOUT: &str = "2006-01-02T15:04:05Z07:00";
/// `metav1.RFC3339Micro`, the layout `metav1.MicroTime` parses.
pub const RFC3339_MICRO_LAYOUT: &str = "2006-01-02T15:04:05.000000Z07:00";

/// An instant parsed from a Go layout: Unix seconds and nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instant {
    /// Seconds since the Unix epoch (UTC).
    pub secs: i64,
    /// Nanoseconds within the second.
    pub nanos: u32,
}

impl Instant {
    /// As `metav1.Time` encodes it: UTC, to the second.
    pub fn to_time(self) -> String {
        rfc3339_secs(self.secs)
    }

    /// As `metav1.MicroTime` encodes it: UTC, to the microsecond (truncated).
    pub fn to_micro_time(self) -> String {
        let s = rfc3339_secs(self.secs);
        format!("{}.{:06}Z", &s[..s.len() - 1], self.nanos / 1000)
    }
}

/// Parses `value` as Go's `time.Parse` does with [`RFC3339_LAYOUT`] (`micro` false) or
/// [`RFC3339_MICRO_LAYOUT`] (`micro` true), with Go's error text on failure
/// (`parsing time "x" as "2006-01-02T15:04:05Z07:00": cannot parse "x" as "2006"`): what
/// the API server answers for a time field it cannot decode.
pub fn parse_go(value: &str, micro: bool) -> Result<Instant, String> {
    let layout = if micro {
        RFC3339_MICRO_LAYOUT
    } else {
        RFC3339_LAYOUT
    };
    let q = kubelet_gitops_core::go::quote;
    let cannot = |val_elem: &str, layout_elem: &str| {
        format!(
            "parsing time {} as {}: cannot parse {} as {}",
            q(value),
            q(layout),
            q(val_elem),
            q(layout_elem)
        )
    };
    let out_of_range = |what: &str| format!("parsing time {}: {what} out of range", q(value));
    let digit = |s: &str, i: usize| s.as_bytes().get(i).is_some_and(u8::is_ascii_digit);
    // Go's getnum: one or two digits (exactly two when `fixed`).
    let getnum = |s: &str, fixed: bool| -> Option<(i64, usize)> {
        if !digit(s, 0) {
            return None;
        }
        if !digit(s, 1) {
            return if fixed {
                None
            } else {
                Some((i64::from(s.as_bytes()[0] - b'0'), 1))
            };
        }
        Some((s[..2].parse().ok()?, 2))
    };
    enum Elem {
        Lit(&'static str),
        Year,
        Month,
        Day,
        Hour,
        Minute,
        Second,
        Frac,
        Zone,
    }
    let mut elems = vec![
        Elem::Year,
        Elem::Lit("-"),
        Elem::Month,
        Elem::Lit("-"),
        Elem::Day,
        Elem::Lit("T"),
        Elem::Hour,
        Elem::Lit(":"),
        Elem::Minute,
        Elem::Lit(":"),
        Elem::Second,
    ];
    if micro {
        elems.push(Elem::Frac);
    }
    elems.push(Elem::Zone);
    let (mut year, mut month, mut day, mut hour, mut min, mut sec) = (0i64, 0, 0, 0, 0, 0);
    let (mut nanos, mut offset) = (0u32, 0i64);
    let mut rest = value;
    let frac = |s: &str, n: usize| -> Option<u32> {
        // Go's parseNanoseconds: a '.' or ',' then digits, scaled to nanoseconds.
        if !matches!(s.as_bytes().first(), Some(b'.' | b',')) {
            return None;
        }
        let digits = s.get(1..n.min(10))?;
        let mut ns: u32 = digits.parse().ok()?;
        for _ in digits.len()..9 {
            ns *= 10;
        }
        Some(ns)
    };
    for e in &elems {
        let hold = rest;
        match e {
            Elem::Lit(l) => match rest.strip_prefix(l) {
                Some(r) => rest = r,
                None => return Err(cannot(rest, l)),
            },
            Elem::Year => {
                if rest.len() < 4 || !digit(rest, 0) {
                    return Err(cannot(hold, "2006"));
                }
                year = rest
                    .get(..4)
                    .and_then(|y| y.parse().ok())
                    .ok_or_else(|| cannot(hold, "2006"))?;
                rest = &rest[4..];
            }
            Elem::Month => {
                let (n, used) = getnum(rest, true).ok_or_else(|| cannot(hold, "01"))?;
                rest = &rest[used..];
                if !(1..=12).contains(&n) {
                    return Err(out_of_range("month"));
                }
                month = n;
            }
            Elem::Day => {
                let (n, used) = getnum(rest, true).ok_or_else(|| cannot(hold, "02"))?;
                rest = &rest[used..];
                day = n;
            }
            Elem::Hour => {
                let (n, used) = getnum(rest, false).ok_or_else(|| cannot(hold, "15"))?;
                rest = &rest[used..];
                if n >= 24 {
                    return Err(out_of_range("hour"));
                }
                hour = n;
            }
            Elem::Minute => {
                let (n, used) = getnum(rest, true).ok_or_else(|| cannot(hold, "04"))?;
                rest = &rest[used..];
                if n >= 60 {
                    return Err(out_of_range("minute"));
                }
                min = n;
            }
            Elem::Second => {
                let (n, used) = getnum(rest, true).ok_or_else(|| cannot(hold, "05"))?;
                rest = &rest[used..];
                if n >= 60 {
                    return Err(out_of_range("second"));
                }
                sec = n;
                // A fraction the layout does not have is read anyway.
                if !micro
                    && rest.len() >= 2
                    && matches!(rest.as_bytes()[0], b'.' | b',')
                    && digit(rest, 1)
                {
                    let n = 1 + rest[1..].bytes().take_while(u8::is_ascii_digit).count();
                    nanos = frac(rest, n).ok_or_else(|| cannot(hold, "05"))?;
                    rest = &rest[n..];
                }
            }
            Elem::Frac => {
                if rest.len() < 7 {
                    return Err(cannot(hold, ".000000"));
                }
                nanos = frac(rest, 7).ok_or_else(|| cannot(hold, ".000000"))?;
                rest = rest.get(7..).ok_or_else(|| cannot(hold, ".000000"))?;
            }
            Elem::Zone => {
                if let Some(r) = rest.strip_prefix('Z') {
                    rest = r;
                    continue;
                }
                let b = rest.as_bytes();
                if b.len() < 6 || b[3] != b':' {
                    return Err(cannot(hold, "Z07:00"));
                }
                let hh = rest.get(1..3).and_then(|h| getnum(h, true)).map(|x| x.0);
                let mm = rest.get(4..6).and_then(|m| getnum(m, true)).map(|x| x.0);
                let (Some(hh), Some(mm)) = (hh, mm) else {
                    return Err(cannot(hold, "Z07:00"));
                };
                if hh > 24 {
                    return Err(out_of_range("time zone offset hour"));
                }
                if mm > 60 {
                    return Err(out_of_range("time zone offset minute"));
                }
                offset = match b[0] {
                    b'+' => hh * 3600 + mm * 60,
                    b'-' => -(hh * 3600 + mm * 60),
                    _ => return Err(cannot(hold, "Z07:00")),
                };
                rest = rest.get(6..).ok_or_else(|| cannot(hold, "Z07:00"))?;
            }
        }
    }
    if !rest.is_empty() {
        return Err(format!(
            "parsing time {}: extra text: {}",
            q(value),
            q(rest)
        ));
    }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days_in = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if day < 1 || day > days_in {
        return Err(out_of_range("day"));
    }
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + min * 60 + sec - offset;
    Ok(Instant { secs, nanos })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_and_parses_round_trip() {
        for secs in [
            0,
            951_782_400,
            951_872_400,
            1_700_000_000,
            -86_400,
            4_102_444_800,
        ] {
            assert_eq!(parse_timestamp(&rfc3339_secs(secs)), Some(secs), "{secs}");
        }
        assert_eq!(rfc3339_secs(-1), "1969-12-31T23:59:59Z");
        let t = UNIX_EPOCH + Duration::new(1_709_251_199, 123_456_789);
        assert_eq!(rfc3339(t, false), "2024-02-29T23:59:59Z");
        assert_eq!(rfc3339(t, true), "2024-02-29T23:59:59.123456Z");
        assert_eq!(klog_time(t), "0229 23:59:59.123456");
    }

    #[test]
    fn parses_as_go_does_with_its_errors() {
        // Answers of a v1.36 API server (tests/tests/api_parity.rs).
        let t = parse_go("2025-01-02T03:04:05.678+01:00", false).unwrap();
        assert_eq!(t.to_time(), "2025-01-02T02:04:05Z");
        let m = parse_go("2025-01-02T03:04:05.123456+02:00", true).unwrap();
        assert_eq!(m.to_micro_time(), "2025-01-02T01:04:05.123456Z");
        assert_eq!(
            parse_go("2025-01-02T03:04:05Z", true).unwrap_err(),
            r#"parsing time "2025-01-02T03:04:05Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000""#
        );
        assert_eq!(
            parse_go("2025-01-02T03:04:05.123456789Z", true).unwrap_err(),
            r#"parsing time "2025-01-02T03:04:05.123456789Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "789Z" as "Z07:00""#
        );
        assert_eq!(
            parse_go("yesterday", false).unwrap_err(),
            r#"parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006""#
        );
        assert_eq!(
            parse_go("2025-13-01T00:00:00Z", false).unwrap_err(),
            r#"parsing time "2025-13-01T00:00:00Z": month out of range"#
        );
        assert_eq!(
            parse_go("2025-02-30T00:00:00Z", false).unwrap_err(),
            r#"parsing time "2025-02-30T00:00:00Z": day out of range"#
        );
        assert_eq!(
            parse_go("2025-01-02 03:04:05Z", false).unwrap_err(),
            r#"parsing time "2025-01-02 03:04:05Z" as "2006-01-02T15:04:05Z07:00": cannot parse " 03:04:05Z" as "T""#
        );
    }
}
