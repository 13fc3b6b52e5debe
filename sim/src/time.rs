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
}
