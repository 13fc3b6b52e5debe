//! Durations as Kubernetes writes them (`metav1.Duration`): Go's `time.ParseDuration`
//! syntax on input (`"1m"`, `"1h30m"`, `"1.5s"`, `"300ms"`) and Go's `Duration.String()`
//! on output (`"1m0s"`, `"1h30m0s"`, `"1.5s"`, `"300ms"`).
//!
//! A [`Duration`] is a signed count of nanoseconds, like Go's `time.Duration`; negative
//! values are representable because the kubelet's validation must be able to reject them.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A Go `time.Duration`: signed nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(i64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("time: invalid duration {0:?}")]
    Invalid(String),
    #[error("time: missing unit in duration {0:?}")]
    MissingUnit(String),
    #[error("time: unknown unit {unit:?} in duration {text:?}")]
    UnknownUnit { unit: String, text: String },
}

pub const NANOSECOND: i64 = 1;
pub const MICROSECOND: i64 = 1_000;
pub const MILLISECOND: i64 = 1_000_000;
pub const SECOND: i64 = 1_000_000_000;
pub const MINUTE: i64 = 60 * SECOND;
pub const HOUR: i64 = 60 * MINUTE;

impl Duration {
    pub const ZERO: Duration = Duration(0);

    pub const fn from_nanos(n: i64) -> Self {
        Duration(n)
    }
    pub const fn from_secs(s: i64) -> Self {
        Duration(s * SECOND)
    }
    pub const fn from_millis(ms: i64) -> Self {
        Duration(ms * MILLISECOND)
    }
    pub const fn from_mins(m: i64) -> Self {
        Duration(m * MINUTE)
    }
    pub const fn from_hours(h: i64) -> Self {
        Duration(h * HOUR)
    }
    pub const fn as_nanos(self) -> i64 {
        self.0
    }
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
    pub fn is_negative(self) -> bool {
        self.0 < 0
    }
    /// As a `std::time::Duration`; `None` when negative.
    pub fn to_std(self) -> Option<std::time::Duration> {
        u64::try_from(self.0)
            .ok()
            .map(std::time::Duration::from_nanos)
    }

    /// Parses Go's duration syntax: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or `0`.
    /// Units: `ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`.
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        let invalid = || DurationError::Invalid(text.to_string());
        let mut s = text;
        let mut negative = false;
        if let Some(rest) = s.strip_prefix('-') {
            negative = true;
            s = rest;
        } else if let Some(rest) = s.strip_prefix('+') {
            s = rest;
        }
        if s == "0" {
            return Ok(Duration(0));
        }
        if s.is_empty() {
            return Err(invalid());
        }
        let mut total: u64 = 0;
        while !s.is_empty() {
            // The next number: integer part, optional fraction.
            let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
            let int_part = &s[..int_len];
            s = &s[int_len..];
            let mut frac_part = "";
            let had_dot = s.starts_with('.');
            if had_dot {
                s = &s[1..];
                let frac_len = s.bytes().take_while(u8::is_ascii_digit).count();
                frac_part = &s[..frac_len];
                s = &s[frac_len..];
            }
            if int_part.is_empty() && frac_part.is_empty() {
                return Err(invalid());
            }
            let unit_len = s
                .char_indices()
                .find(|(_, c)| *c == '.' || c.is_ascii_digit())
                .map_or(s.len(), |(i, _)| i);
            if unit_len == 0 {
                return Err(DurationError::MissingUnit(text.to_string()));
            }
            let unit = &s[..unit_len];
            s = &s[unit_len..];
            let scale: u64 = match unit {
                "ns" => 1,
                "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60_000_000_000,
                "h" => 3_600_000_000_000,
                _ => {
                    return Err(DurationError::UnknownUnit {
                        unit: unit.to_string(),
                        text: text.to_string(),
                    });
                }
            };
            let mut v: u64 = 0;
            for b in int_part.bytes() {
                v = v
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(u64::from(b - b'0')))
                    .ok_or_else(invalid)?;
            }
            v = v.checked_mul(scale).ok_or_else(invalid)?;
            // Fraction: accumulate with as much precision as u64 allows, then scale.
            if !frac_part.is_empty() {
                let mut f: u64 = 0;
                let mut fscale: f64 = 1.0;
                let mut overflow = false;
                for b in frac_part.bytes() {
                    if overflow {
                        continue;
                    }
                    match f
                        .checked_mul(10)
                        .and_then(|f| f.checked_add(u64::from(b - b'0')))
                    {
                        Some(nf) if nf < (1 << 53) => {
                            f = nf;
                            fscale *= 10.0;
                        }
                        _ => overflow = true,
                    }
                }
                v = v
                    .checked_add((f as f64 * (scale as f64 / fscale)) as u64)
                    .ok_or_else(invalid)?;
            }
            total = total.checked_add(v).ok_or_else(invalid)?;
            if total > 1u64 << 63 {
                return Err(invalid());
            }
        }
        if negative {
            Ok(Duration((total as i128).wrapping_neg() as i64))
        } else if total > i64::MAX as u64 {
            Err(invalid())
        } else {
            Ok(Duration(total as i64))
        }
    }
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        Duration(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }
}

/// Go's `time.Duration.String()`.
impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d == 0 {
            return f.write_str("0s");
        }
        let neg = d < 0;
        let u = d.unsigned_abs();
        let sign = if neg { "-" } else { "" };
        if u < SECOND as u64 {
            let (unit, div) = if u < MICROSECOND as u64 {
                ("ns", 1u64)
            } else if u < MILLISECOND as u64 {
                ("µs", 1_000)
            } else {
                ("ms", 1_000_000)
            };
            return write!(f, "{sign}{}{unit}", frac(u, div));
        }
        let secs_nanos = u % 60_000_000_000;
        let total_min = u / 60_000_000_000;
        let mut out = String::new();
        if total_min > 0 {
            let hours = total_min / 60;
            let mins = total_min % 60;
            if hours > 0 {
                out.push_str(&format!("{hours}h"));
            }
            out.push_str(&format!("{mins}m"));
        }
        out.push_str(&frac(secs_nanos, 1_000_000_000));
        out.push('s');
        write!(f, "{sign}{out}")
    }
}

/// `v / div` with the fraction printed without trailing zeros (Go's `fmtFrac`).
fn frac(v: u64, div: u64) -> String {
    let whole = v / div;
    let rem = v % div;
    if rem == 0 {
        return whole.to_string();
    }
    let width = div.ilog10() as usize;
    let digits = format!("{rem:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    /// `metav1.Duration.UnmarshalJSON` accepts only a string.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration string such as \"1m0s\", \"30s\" or \"1h\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Duration, E> {
                Duration::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Duration {
        Duration::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_go_syntax() {
        assert_eq!(d("1m"), Duration::from_mins(1));
        assert_eq!(d("1h30m"), Duration::from_mins(90));
        assert_eq!(d("1.5s"), Duration::from_millis(1500));
        assert_eq!(d("300ms"), Duration::from_millis(300));
        assert_eq!(d("0"), Duration::ZERO);
        assert_eq!(d("-5s"), Duration::from_secs(-5));
        assert_eq!(d("+5s"), Duration::from_secs(5));
        assert_eq!(d("10us"), Duration::from_nanos(10_000));
        assert_eq!(d("10µs"), Duration::from_nanos(10_000));
        assert_eq!(
            d("1h1m1s1ms1us1ns"),
            Duration::from_nanos(3_661_001_001_001)
        );
        assert_eq!(d(".5s"), Duration::from_millis(500));
        assert_eq!(d("2562047h47m16.854775807s").as_nanos(), i64::MAX);
        assert_eq!(d("-2562047h47m16.854775808s").as_nanos(), i64::MIN);
    }

    #[test]
    fn rejects_what_go_rejects() {
        for bad in [
            "",
            "1",
            "-",
            "s",
            "1x",
            "1.s.",
            "1 m",
            "1m ",
            "9999999999h",
            "1e3s",
            ".",
        ] {
            assert!(Duration::parse(bad).is_err(), "{bad:?} should be rejected");
        }
        assert_eq!(
            Duration::parse("10").unwrap_err().to_string(),
            "time: missing unit in duration \"10\""
        );
        assert_eq!(
            Duration::parse("10d").unwrap_err().to_string(),
            "time: unknown unit \"d\" in duration \"10d\""
        );
    }

    #[test]
    fn prints_like_go() {
        let cases = [
            ("1m", "1m0s"),
            ("0s", "0s"),
            ("2h", "2h0m0s"),
            ("1h30m", "1h30m0s"),
            ("1.5s", "1.5s"),
            ("300ms", "300ms"),
            ("1500us", "1.5ms"),
            ("20ns", "20ns"),
            ("-1m", "-1m0s"),
            ("61s", "1m1s"),
            ("100ms", "100ms"),
        ];
        for (input, want) in cases {
            assert_eq!(d(input).to_string(), want, "{input}");
        }
    }

    #[test]
    fn serde_round_trip_and_strings_only() {
        let v: Duration = serde_json::from_str("\"4h\"").unwrap();
        assert_eq!(serde_json::to_string(&v).unwrap(), "\"4h0m0s\"");
        assert!(serde_json::from_str::<Duration>("60").is_err());
    }
}
