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
}

/// Why a string is not a quantity. The messages follow upstream's
/// `quantities must match the regular expression ...`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    #[error("quantity {0:?} is too large")]
    TooLarge(String),
}

impl Quantity {
    /// Parses a quantity string exactly as upstream's `ParseQuantity` does.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let (nanos, format) = parse_nanos(text)?;
        Ok(Quantity {
            text: text.to_string(),
            nanos,
            format,
        })
    }

    /// A quantity computed from arithmetic, printed canonically in `format`.
    pub fn from_nanos(nanos: i128, format: Format) -> Self {
        Quantity {
            text: canonical(nanos, format),
            nanos,
            format,
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

/// Parses into nano-units. Grammar (upstream `resource.ParseQuantity`):
/// `[+-]? (digits | digits. | digits.digits | .digits) (suffix)` where suffix is one of
/// `Ki Mi Gi Ti Pi Ei`, `n u m "" k M G T P E`, or `e|E [+-]? digits`.
fn parse_nanos(text: &str) -> Result<(i128, Format), QuantityError> {
    if text.is_empty() {
        return Err(QuantityError::Format);
    }
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut negative = false;
    if bytes[0] == b'+' || bytes[0] == b'-' {
        negative = bytes[0] == b'-';
        i = 1;
    }
    let int_start = i;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = &text[int_start..i];
    let mut frac_digits = "";
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = &text[frac_start..i];
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(QuantityError::Format);
    }
    let suffix = &text[i..];
    // (base, exponent, format): value = number * base^exponent
    let (base, exp, format): (i128, i32, Format) = match suffix {
        "" => (10, 0, Format::DecimalSI),
        "n" => (10, -9, Format::DecimalSI),
        "u" => (10, -6, Format::DecimalSI),
        "m" => (10, -3, Format::DecimalSI),
        "k" => (10, 3, Format::DecimalSI),
        "M" => (10, 6, Format::DecimalSI),
        "G" => (10, 9, Format::DecimalSI),
        "T" => (10, 12, Format::DecimalSI),
        "P" => (10, 15, Format::DecimalSI),
        "E" => (10, 18, Format::DecimalSI),
        "Ki" => (2, 10, Format::BinarySI),
        "Mi" => (2, 20, Format::BinarySI),
        "Gi" => (2, 30, Format::BinarySI),
        "Ti" => (2, 40, Format::BinarySI),
        "Pi" => (2, 50, Format::BinarySI),
        "Ei" => (2, 60, Format::BinarySI),
        s if s.starts_with(['e', 'E']) => {
            let e = &s[1..];
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(QuantityError::Format);
            }
            let exp: i32 = e
                .parse()
                .map_err(|_| QuantityError::TooLarge(text.to_string()))?;
            (10, exp, Format::DecimalExponent)
        }
        _ => return Err(QuantityError::Format),
    };
    let too_large = || QuantityError::TooLarge(text.to_string());
    // Digits as an integer mantissa with a decimal scale.
    let mut mantissa: i128 = 0;
    let mut scale: i32 = 0; // mantissa * 10^-scale
    for b in int_digits.bytes().chain(frac_digits.bytes()) {
        if mantissa == 0 && b == b'0' {
            continue;
        }
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(b - b'0')))
            .ok_or_else(too_large)?;
    }
    scale += frac_digits.len() as i32;
    // nanos = mantissa * base^exp * 10^(9 - scale), rounded up (away from zero) to a nano.
    let mut num = mantissa;
    let mut den: i128 = 1;
    let dec_shift = 9 - scale;
    if base == 2 {
        num = num
            .checked_shl(exp as u32)
            .filter(|v| v >> exp == mantissa)
            .ok_or_else(too_large)?;
    }
    let total_dec = dec_shift + if base == 10 { exp } else { 0 };
    if total_dec >= 0 {
        let p = 10i128.checked_pow(total_dec as u32).ok_or_else(too_large)?;
        num = num.checked_mul(p).ok_or_else(too_large)?;
    } else if -total_dec > 38 {
        // Far below a nano-unit: rounds up to one nano (or zero for zero).
        den = 0;
    } else {
        den = 10i128.pow((-total_dec) as u32);
    }
    let mut nanos = if den == 0 {
        i128::from(num != 0)
    } else {
        ceil_div(num, den)
    };
    if negative {
        nanos = -nanos;
    }
    Ok((nanos, format))
}

/// Upstream-style canonical text: the largest suffix that represents the value exactly.
fn canonical(nanos: i128, format: Format) -> String {
    if nanos == 0 {
        return "0".to_string();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let abs = nanos.unsigned_abs();
    if format == Format::BinarySI && abs.is_multiple_of(NANO as u128) {
        let units = abs / NANO as u128;
        // Upstream prints binary quantities in (-1024, 1024) as decimal ("1k", not "1000").
        if units >= 1024 {
            for (suffix, shift) in [
                ("Ei", 60),
                ("Pi", 50),
                ("Ti", 40),
                ("Gi", 30),
                ("Mi", 20),
                ("Ki", 10),
            ] {
                if units.is_multiple_of(1u128 << shift) {
                    return format!("{sign}{}{suffix}", units >> shift);
                }
            }
        }
    }
    for (suffix, exp) in [
        ("E", 27u32),
        ("P", 24),
        ("T", 21),
        ("G", 18),
        ("M", 15),
        ("k", 12),
        ("", 9),
        ("m", 6),
        ("u", 3),
        ("n", 0),
    ] {
        let div = 10u128.pow(exp);
        if abs.is_multiple_of(div) {
            return format!("{sign}{}{suffix}", abs / div);
        }
    }
    unreachable!("every integer is divisible by 10^0")
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
        assert_eq!(q("8Ei").value(), 8 * (1i128 << 60));
        assert_eq!(q("010").value(), 10);
    }

    #[test]
    fn rejects_what_upstream_rejects() {
        for bad in [
            "", "Mi", "1MB", "1 Gi", "1Gi ", "abc", "1.2.3", "--1", "1e", "1e+", "0x10", "1i", ".",
        ] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} should be rejected");
        }
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
