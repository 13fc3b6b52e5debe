//! Kubernetes resource quantities (`"100Mi"`, `"1.5"`, `"250m"`, `"1e3"`), as
//! `k8s.io/apimachinery/pkg/api/resource.Quantity` parses them.
//!
//! A [`Quantity`] keeps the text it was written with, so a config serialized back is
//! byte-for-byte what the user wrote, and carries its exact value in nano-units for
//! arithmetic. Upstream rounds anything finer than a nano-unit up; so do we. Upstream
//! accepts arbitrarily large values through `inf.Dec`; we accept any value whose
//! nano-unit count fits an `i128` (about ±1.7e29 units, far beyond any node), and
//! reject larger ones with a clear error.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

const NANO: i128 = 1_000_000_000;

/// How a quantity is written, which decides how a computed quantity is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `Ki`, `Mi`, `Gi` ... (powers of 1024)
    BinarySI,
    /// `m`, `k`, `M`, `G` ... (powers of 1000), or no suffix
    DecimalSI,
    /// `1e3`, `5E-3`
    DecimalExponent,
}

/// A parsed Kubernetes quantity.
#[derive(Debug, Clone)]
pub struct Quantity {
    text: String,
    nanos: i128,
    format: Format,
    /// Whether upstream's `ParseQuantity` keeps the text as the quantity's `String()`
    /// (it does for text already in a canonical form: `100Mi`, `1e3`, `+1`).
    keeps_text: bool,
}

/// Why a string is not a quantity. The messages follow upstream's
/// `quantities must match the regular expression ...`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    /// `ErrNumeric`.
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// `ErrSuffix`.
    #[error("unable to parse quantity's suffix")]
    Suffix,
    #[error("quantity {0:?} is too large")]
    TooLarge(String),
}

impl Quantity {
    /// Parses a quantity string exactly as upstream's `ParseQuantity` does.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let (nanos, format, keeps_text) = parse_nanos(text)?;
        Ok(Quantity {
            text: text.to_string(),
            nanos,
            format,
            keeps_text,
        })
    }

    /// A quantity computed from arithmetic, printed canonically in `format`.
    pub fn from_nanos(nanos: i128, format: Format) -> Self {
        Quantity {
            text: canonical(nanos, format),
            nanos,
            format,
            keeps_text: true,
        }
    }

    /// A whole number of units (bytes, cores, pids), printed in `format`.
    pub fn from_units(units: i128, format: Format) -> Self {
        Self::from_nanos(units.saturating_mul(NANO), format)
    }

    /// The text as written (or the canonical form of a computed quantity).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The exact value in nano-units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// The value rounded up to a whole unit, as upstream's `Quantity.Value()`.
    pub fn value(&self) -> i128 {
        ceil_div(self.nanos, NANO)
    }

    /// The value in milli-units rounded up, as upstream's `Quantity.MilliValue()`.
    pub fn milli_value(&self) -> i128 {
        ceil_div(self.nanos, 1_000_000)
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// The canonical text upstream would print for this value (`1.5` -> `1500m`).
    pub fn canonical(&self) -> String {
        canonical(self.nanos, self.format)
    }

    /// What upstream's `Quantity.String()` (and so its JSON) gives for this quantity as
    /// parsed: the text when `ParseQuantity` keeps it (`1e3`, `100Mi`, `+1`), else the
    /// canonical form (`1.5` -> `1500m`, `1024Mi` -> `1Gi`, `Ki` -> `0`).
    pub fn go_string(&self) -> String {
        if self.keeps_text {
            self.text.clone()
        } else {
            self.canonical()
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    /// Upstream's `UnmarshalJSON` takes a JSON string or a bare number.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a quantity such as \"100Mi\", \"1.5\" or \"250m\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Quantity, E> {
                Quantity::parse(v.trim()).map_err(|e| E::custom(format!("{v:?}: {e}")))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Quantity, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Quantity, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Quantity, E> {
                if !v.is_finite() {
                    return Err(E::custom("a quantity must be a finite number"));
                }
                self.visit_str(&v.to_string())
            }
        }
        d.deserialize_any(V)
    }
}

fn ceil_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && a > 0 { q + 1 } else { q }
}

/// What `parseQuantityString` splits a quantity into.
struct Parts<'a> {
    positive: bool,
    /// The number as written, sign included (`-01.50`): what the slow path reads.
    value: &'a str,
    /// The integer digits without leading zeros (`"0"` when there are none).
    num: &'a str,
    /// The fraction digits.
    denom: &'a str,
    suffix: &'a str,
}

/// Upstream's `parseQuantityString`: an optional sign, digits, an optional `.` and
/// digits, then suffix letters (`eEinumkKMGTP`), an optional sign and digits. Either
/// number part may be empty (`Ki`, `.`, `-` parse, as zero).
fn split(text: &str) -> Result<Parts<'_>, QuantityError> {
    let b = text.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    if let Some(c @ (b'-' | b'+')) = b.first() {
        positive = *c == b'+';
        pos = 1;
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    let zero = Parts {
        positive,
        value: "0",
        num: "0",
        denom: "",
        suffix: "",
    };
    if pos == end {
        return Ok(zero);
    }
    let num_start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = if pos == num_start {
        "0"
    } else {
        &text[num_start..pos]
    };
    if pos == end {
        return Ok(Parts {
            value: text,
            num,
            ..zero
        });
    }
    let mut denom = "";
    if b[pos] == b'.' {
        pos += 1;
        let denom_start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &text[denom_start..pos];
        if pos == end {
            return Ok(Parts {
                value: text,
                num,
                denom,
                ..zero
            });
        }
    }
    let value = &text[..pos];
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && matches!(b[pos], b'-' | b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::Format);
    }
    Ok(Parts {
        positive,
        value,
        num,
        denom,
        suffix: &text[suffix_start..],
    })
}

/// Upstream's `quantitySuffixer.interpret`: (base, exponent, format).
fn interpret(suffix: &str) -> Option<(i128, i32, Format)> {
    let decimal = |exp| Some((10, exp, Format::DecimalSI));
    let binary = |exp| Some((2, exp, Format::BinarySI));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        s if s.len() > 1 && s.starts_with(['e', 'E']) => {
            // strconv.ParseInt(s[1:], 10, 64) (what Rust's i64 parse accepts), then
            // int32(...).
            let e: i64 = s[1..].parse().ok()?;
            Some((10, e as i32, Format::DecimalExponent))
        }
        _ => None,
    }
}

/// Upstream's `ParseQuantity`: (nanos, format, whether it keeps the text as its
/// `String()`).
fn parse_nanos(text: &str) -> Result<(i128, Format, bool), QuantityError> {
    if text.is_empty() {
        return Err(QuantityError::Format);
    }
    if text == "0" {
        return Ok((0, Format::DecimalSI, true));
    }
    let p = split(text)?;
    let (base, exponent, format) = interpret(p.suffix).ok_or(QuantityError::Suffix)?;
    let too_large = || QuantityError::TooLarge(text.to_string());

    // The fast path: an int64 mantissa and a decimal scale no finer than nano.
    let digits = (p.num.len() + p.denom.len()) as i32;
    let (precision, mut scale, mantissa): (i32, i32, i64) = match format {
        Format::DecimalSI | Format::DecimalExponent => (18 - digits, exponent, 1),
        Format::BinarySI if exponent >= 0 && p.denom.is_empty() => (
            15 - p.num.len() as i32 - (exponent as f32 * 3.0 / 10.0) as i32 - 1,
            0,
            1i64 << exponent,
        ),
        Format::BinarySI => (-1, 0, 1),
    };
    if precision >= 0 {
        scale -= p.denom.len() as i32;
        if scale >= -9 {
            let shifted = format!("{}{}", p.num, p.denom);
            let value: i64 = shifted.parse().map_err(|_| QuantityError::Numeric)?;
            if let Some(mut result) = value.checked_mul(mantissa) {
                if !p.positive {
                    result = -result;
                }
                let keeps = match format {
                    Format::BinarySI => exponent % 10 == 0 && value & 0x07 != 0,
                    _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
                };
                let nanos = 10i128
                    .checked_pow((scale + 9) as u32)
                    .and_then(|p| p.checked_mul(i128::from(result)))
                    .ok_or_else(too_large)?;
                return Ok((nanos, format, keeps));
            }
        }
    }

    // The slow path (inf.Dec): the number as written, which needs a digit.
    let number = p.value.trim_start_matches(['+', '-']);
    let (int_digits, frac_digits) = number.split_once('.').unwrap_or((number, ""));
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(QuantityError::Numeric);
    }
    let mut units: i128 = 0; // the digits as an integer, times 10^-frac_digits.len()
    for d in int_digits.bytes().chain(frac_digits.bytes()) {
        units = units
            .checked_mul(10)
            .and_then(|u| u.checked_add(i128::from(d - b'0')))
            .ok_or_else(too_large)?;
    }
    // nanos = units * base^exponent * 10^(9 - frac), rounded up (away from zero).
    let mut num = units;
    if base == 2 {
        num = u32::try_from(exponent)
            .ok()
            .and_then(|e| num.checked_mul(1i128.checked_shl(e)?))
            .filter(|_| exponent < 127)
            .ok_or_else(too_large)?;
    }
    let shift = 9 - frac_digits.len() as i64 + if base == 10 { i64::from(exponent) } else { 0 };
    let mut nanos = if shift >= 0 {
        u32::try_from(shift)
            .ok()
            .and_then(|s| 10i128.checked_pow(s))
            .and_then(|m| num.checked_mul(m))
            .ok_or_else(too_large)?
    } else if shift < -38 {
        i128::from(num != 0)
    } else {
        ceil_div(num, 10i128.pow((-shift) as u32))
    };
    let mut format = format;
    if format == Format::BinarySI {
        // Capped at the largest int64 number of units.
        nanos = nanos.min(i128::from(i64::MAX) * NANO);
        if nanos > 0 && nanos < NANO {
            format = Format::DecimalSI;
        }
    }
    if !p.positive {
        nanos = -nanos;
    }
    Ok((nanos, format, false))
}

/// Upstream's `Quantity.String()` of a quantity without its text
/// (`CanonicalizeBytes`): binary quantities of at least 1024 whole units in powers of
/// 1024 (`1536Ki`, or the bare number), others as the largest multiple-of-three
/// exponent that is exact (`1500m`, `1k`), written with an SI suffix or, for quantities
/// written with an exponent, as `e<n>` (`1e6`).
fn canonical(nanos: i128, format: Format) -> String {
    if nanos == 0 {
        return "0".to_string();
    }
    let mut format = format;
    if format == Format::BinarySI
        && (nanos.unsigned_abs() < 1024 * NANO as u128 || nanos % NANO != 0)
    {
        format = Format::DecimalSI;
    }
    if format == Format::BinarySI {
        let mut units = nanos / NANO;
        let mut exp = 0;
        while units % 1024 == 0 {
            units /= 1024;
            exp += 1;
        }
        let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
            .get(exp)
            .copied()
            .unwrap_or("");
        return format!("{units}{suffix}");
    }
    let mut mantissa = nanos;
    let mut exp: i32 = -9;
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exp += 1;
    }
    while exp.rem_euclid(3) != 0 {
        mantissa *= 10;
        exp -= 1;
    }
    let suffix = match format {
        Format::DecimalExponent if exp == 0 => String::new(),
        Format::DecimalExponent => format!("e{exp}"),
        _ => match exp {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            18 => "E",
            // 0, and (upstream prints no suffix it has no name for) beyond E.
            _ => "",
        }
        .to_string(),
    };
    format!("{mantissa}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_the_suffixes() {
        assert_eq!(q("100Mi").value(), 100 * 1024 * 1024);
        assert_eq!(q("1Gi").value(), 1 << 30);
        assert_eq!(q("1.5").milli_value(), 1500);
        assert_eq!(q("250m").milli_value(), 250);
        assert_eq!(q("250m").value(), 1, "Value() rounds up");
        assert_eq!(q("1k").value(), 1000);
        assert_eq!(q("1e3").value(), 1000);
        assert_eq!(q("5E-3").milli_value(), 5);
        assert_eq!(q("-1Ki").value(), -1024);
        assert_eq!(q(".5").milli_value(), 500);
        assert_eq!(q("1.").value(), 1);
        assert_eq!(q("+3").value(), 3);
        assert_eq!(q("1n").nanos(), 1);
        assert_eq!(q("0.1n").nanos(), 1, "finer than nano rounds up");
        assert_eq!(q("7Ei").value(), 7 * (1i128 << 60));
        assert_eq!(
            q("8Ei").value(),
            i128::from(i64::MAX),
            "capped as upstream caps it"
        );
        assert_eq!(q("010").value(), 10);
    }

    #[test]
    fn rejects_what_upstream_rejects() {
        for bad in [
            "", "1MB", "1 Gi", "1Gi ", "abc", "1.2.3", "--1", "1e", "1e+", "0x10", "1i", "Ei",
            "e-12", "Pi", "1KiB",
        ] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} should be rejected");
        }
        assert_eq!(
            Quantity::parse("1i").unwrap_err().to_string(),
            "unable to parse quantity's suffix"
        );
        assert_eq!(
            Quantity::parse("Ei").unwrap_err().to_string(),
            "unable to parse numeric part of quantity"
        );
        assert!(matches!(
            Quantity::parse("1e99"),
            Err(QuantityError::TooLarge(_))
        ));
        assert!(matches!(
            Quantity::parse("99999999999999999999999999999999999999999"),
            Err(QuantityError::TooLarge(_))
        ));
    }

    #[test]
    fn accepts_what_upstream_accepts_without_digits() {
        // parseQuantityString lets either number part be empty: these are zero.
        for zero in ["Mi", "Ki", "M", ".", "-", "+", "e3", ".e-3", "-.k", "00"] {
            assert!(q(zero).is_zero(), "{zero:?}");
            assert_eq!(q(zero).go_string(), "0", "{zero:?}");
        }
    }

    #[test]
    fn prints_what_upstream_string_prints() {
        // Text in a canonical form is kept (ParseQuantity's fast path).
        for kept in [
            "1e3", "1E3", "100Mi", "+1", "01", "5.", "1e-3", "12e3", "1200e3", "1k",
        ] {
            assert_eq!(q(kept).go_string(), kept);
        }
        for (text, printed) in [
            ("1.5", "1500m"),
            ("0.1", "100m"),
            (".5", "500m"),
            ("1.0", "1"),
            ("1000", "1k"),
            ("1000k", "1M"),
            ("1000e3", "1e6"),
            ("5e-1", "500e-3"),
            ("1024Mi", "1Gi"),
            ("2048Ki", "2Mi"),
            ("1.5Ki", "1536"),
            ("1.953125Ki", "2000"),
            ("0.5Ki", "512"),
            // Binary quantities are capped at the largest int64.
            ("16Ei", "9223372036854775807"),
            ("1000000u", "1"),
        ] {
            assert_eq!(q(text).go_string(), printed, "{text:?}");
        }
    }

    #[test]
    fn keeps_the_text_and_compares_by_value() {
        assert_eq!(q("1024Mi").as_str(), "1024Mi");
        assert_eq!(q("1024Mi"), q("1Gi"));
        assert!(q("1.5") > q("1"));
    }

    #[test]
    fn canonical_forms() {
        assert_eq!(q("1024Mi").canonical(), "1Gi");
        assert_eq!(q("1.5").canonical(), "1500m");
        assert_eq!(q("1000").canonical(), "1k");
        assert_eq!(
            Quantity::from_units(3 << 30, Format::BinarySI).as_str(),
            "3Gi"
        );
        assert_eq!(Quantity::from_units(1000, Format::BinarySI).as_str(), "1k");
        assert_eq!(Quantity::from_units(100, Format::BinarySI).as_str(), "100");
        assert_eq!(
            Quantity::from_units(1536, Format::BinarySI).as_str(),
            "1536"
        );
        assert_eq!(
            Quantity::from_nanos(-500_000_000, Format::DecimalSI).as_str(),
            "-500m"
        );
    }

    #[test]
    fn deserializes_strings_and_numbers() {
        let v: Quantity = serde_json::from_str("\"2Gi\"").unwrap();
        assert_eq!(v.value(), 2 << 30);
        let v: Quantity = serde_json::from_str("4").unwrap();
        assert_eq!(v.value(), 4);
        let v: Quantity = serde_json::from_str("0.5").unwrap();
        assert_eq!(v.milli_value(), 500);
        assert!(serde_json::from_str::<Quantity>("\"lots\"").is_err());
        assert!(serde_json::from_str::<Quantity>("true").is_err());
    }
}
