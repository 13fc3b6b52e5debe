//! YAML scalar resolution as the kubelet does it.
//!
//! The kubelet reads YAML through sigs.k8s.io/yaml: go-yaml v2 (YAML 1.1 rules) turns the
//! document into Go values, which are marshalled to JSON and decoded strictly. This module
//! reproduces go-yaml v2's `resolve` for plain scalars (`yes`/`on`/`y` are booleans, `0755`
//! is octal, `1_000` is an integer, `1e3` is a float) and the JSON conversion that follows
//! (an integral float such as `110.0` becomes the JSON number `110`; NaN and infinities
//! cannot be marshalled), and sigs.k8s.io/yaml's conversion of non-string map keys.

use std::borrow::Cow;

use serde_json::Number;

use super::node::Node;

/// What go-yaml v2 makes of a scalar.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Resolved {
    Null,
    Bool(bool),
    Int(i64),
    /// Above `i64::MAX`.
    Uint(u64),
    /// Above `u64::MAX` (go-yaml returns a `*big.Int`); kept as its nearest `f64`.
    BigInt(f64),
    Float(f64),
    Str,
}

/// Resolves a plain (unquoted, untagged) scalar, like go-yaml v2's `resolve("", s)`.
pub(super) fn resolve_plain(s: &str) -> Resolved {
    let hint = match s.as_bytes().first() {
        None => b'N',
        Some(b'+' | b'-') => b'S',
        Some(b'0'..=b'9') => b'D',
        Some(b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~') => b'M',
        Some(b'.') => b'.',
        Some(_) => return Resolved::Str,
    };
    if let Some(known) = lookup(s) {
        return known;
    }
    match hint {
        b'.' => {
            if let Some(f) = parse_finite_float(s) {
                return Resolved::Float(f);
            }
        }
        b'D' | b'S' => {
            let plain: Cow<'_, str> = if s.contains('_') {
                Cow::Owned(s.replace('_', ""))
            } else {
                Cow::Borrowed(s)
            };
            if let Ok(i) = parse_int(&plain) {
                return Resolved::Int(i);
            }
            let uint_error = match parse_uint(&plain) {
                Ok(u) => return Resolved::Uint(u),
                Err(e) => e,
            };
            if is_yaml_style_float(&plain)
                && let Some(f) = parse_finite_float(&plain)
            {
                return Resolved::Float(f);
            }
            if uint_error == IntError::Range
                && let Some(f) = parse_big_int(&plain)
            {
                return Resolved::BigInt(f);
            }
        }
        _ => {}
    }
    Resolved::Str
}

/// The fixed spellings of go-yaml v2's resolve table.
fn lookup(s: &str) -> Option<Resolved> {
    Some(match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Resolved::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Resolved::Bool(false)
        }
        "" | "~" | "null" | "Null" | "NULL" => Resolved::Null,
        ".nan" | ".NaN" | ".NAN" => Resolved::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Resolved::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => Resolved::Float(f64::NEG_INFINITY),
        _ => return None,
    })
}

/// A YAML core-schema tag that can be applied to a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ScalarTag {
    Str,
    Int,
    Float,
    Bool,
    Null,
}

impl ScalarTag {
    fn name(self) -> &'static str {
        match self {
            ScalarTag::Str => "!!str",
            ScalarTag::Int => "!!int",
            ScalarTag::Float => "!!float",
            ScalarTag::Bool => "!!bool",
            ScalarTag::Null => "!!null",
        }
    }
}

/// Resolves an explicitly tagged scalar (`!!int "5"`), like go-yaml v2's `resolve(tag, s)`.
/// The error says what the scalar is and what the tag wants.
pub(super) fn resolve_tagged(s: &str, tag: ScalarTag) -> Result<Resolved, String> {
    if tag == ScalarTag::Str {
        return Ok(Resolved::Str);
    }
    let resolved = resolve_plain(s);
    let ok = match (&resolved, tag) {
        (Resolved::Int(_) | Resolved::Uint(_) | Resolved::BigInt(_), ScalarTag::Int) => true,
        (Resolved::Float(_), ScalarTag::Float) => true,
        (Resolved::Bool(_), ScalarTag::Bool) => true,
        (Resolved::Null, ScalarTag::Null) => true,
        (Resolved::Int(i), ScalarTag::Float) => return Ok(Resolved::Float(*i as f64)),
        (Resolved::Uint(u), ScalarTag::Float) => return Ok(Resolved::Float(*u as f64)),
        _ => false,
    };
    if ok {
        Ok(resolved)
    } else {
        Err(format!("cannot decode {s:?} as a {}", tag.name()))
    }
}

/// Why a resolved scalar has no JSON form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ToJsonError {
    NonFinite,
}

/// The JSON value sigs.k8s.io/yaml's `json.Marshal` step produces for a resolved scalar.
/// `original` is the scalar's text, used for strings.
pub(super) fn to_node(resolved: Resolved, original: Cow<'_, str>) -> Result<Node<'_>, ToJsonError> {
    Ok(match resolved {
        Resolved::Null => Node::Null,
        Resolved::Bool(b) => Node::Bool(b),
        Resolved::Int(i) => Node::Number(i.into()),
        Resolved::Uint(u) => Node::Number(u.into()),
        Resolved::BigInt(f) | Resolved::Float(f) => Node::Number(float_number(f)?),
        Resolved::Str => Node::String(original),
    })
}

/// Go's `json.Marshal` writes an integral float below 1e21 without a fraction or exponent
/// (`110.0` becomes `110`), so it then decodes into an integer field. Mirror that.
fn float_number(f: f64) -> Result<Number, ToJsonError> {
    if !f.is_finite() {
        return Err(ToJsonError::NonFinite);
    }
    if f.fract() == 0.0 && f.abs() < 1e21 {
        // Casts saturate; the round trip tells whether the value fits.
        let i = f as i64;
        if i as f64 == f && i != i64::MAX {
            return Ok(i.into());
        }
        let u = f as u64;
        if u as f64 == f && u != u64::MAX {
            return Ok(u.into());
        }
    }
    Number::from_f64(f).ok_or(ToJsonError::NonFinite)
}

/// Why a mapping key has no JSON object key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum KeyError {
    Null,
    Unsupported(&'static str),
}

/// The JSON object key sigs.k8s.io/yaml makes of a resolved scalar key: strings as they
/// are, integers in decimal (`0x10` becomes `"16"`), booleans `"true"`/`"false"`
/// (so `yes:` and `on:` are both `"true"`), floats in Go's `%g` at float32 precision.
pub(super) fn key_string(
    resolved: Resolved,
    original: Cow<'_, str>,
) -> Result<Cow<'_, str>, KeyError> {
    match resolved {
        Resolved::Str => Ok(original),
        Resolved::Int(i) => Ok(Cow::Owned(i.to_string())),
        Resolved::Bool(b) => Ok(Cow::Borrowed(if b { "true" } else { "false" })),
        Resolved::Float(f) => Ok(Cow::Owned(go_format_float32_g(f))),
        Resolved::Null => Err(KeyError::Null),
        Resolved::Uint(_) => Err(KeyError::Unsupported("uint64")),
        Resolved::BigInt(_) => Err(KeyError::Unsupported("big integer")),
    }
}

/// `strconv.FormatFloat(f, 'g', -1, 32)` with go-yaml's spellings of infinities and NaN.
fn go_format_float32_g(f: f64) -> String {
    if f.is_nan() {
        return ".nan".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.to_string();
    }
    // `{:e}` gives the shortest round-trip digits of the f32: "-1.2345e-7".
    let formatted = format!("{:e}", f as f32);
    let (mantissa, exponent) = formatted.split_once('e').unwrap_or((&formatted, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if !(-4..6).contains(&exponent) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        let magnitude = exponent.unsigned_abs();
        if magnitude < 10 {
            out.push('0');
        }
        out.push_str(&magnitude.to_string());
    } else if exponent < 0 {
        out.push_str("0.");
        for _ in 0..(-exponent - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let point = exponent as usize + 1;
        if digits.len() <= point {
            out.push_str(&digits);
            for _ in digits.len()..point {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IntError {
    Syntax,
    Range,
}

/// Go's `strconv.ParseUint(s, 0, 64)`: prefixes `0x`, `0o`, `0b`, and a leading `0` for
/// octal. Like Go, an overflow is reported as soon as it happens.
fn parse_uint(s: &str) -> Result<u64, IntError> {
    let (base, digits) = split_base(s).ok_or(IntError::Syntax)?;
    let mut n: u64 = 0;
    for c in digits.bytes() {
        let d = digit_value(c).ok_or(IntError::Syntax)?;
        if d >= base {
            return Err(IntError::Syntax);
        }
        n = n
            .checked_mul(u64::from(base))
            .and_then(|n| n.checked_add(u64::from(d)))
            .ok_or(IntError::Range)?;
    }
    Ok(n)
}

/// Go's `strconv.ParseInt(s, 0, 64)`.
fn parse_int(s: &str) -> Result<i64, IntError> {
    let (negative, rest) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let magnitude = parse_uint(rest)?;
    if negative {
        if magnitude > 1u64 << 63 {
            return Err(IntError::Range);
        }
        Ok((magnitude as i64).wrapping_neg())
    } else {
        i64::try_from(magnitude).map_err(|_| IntError::Range)
    }
}

/// Base and digits of an unsigned integer literal, as Go's base-0 parsing splits them.
fn split_base(s: &str) -> Option<(u8, &str)> {
    if s.is_empty() {
        return None;
    }
    let bytes = s.as_bytes();
    if bytes[0] == b'0' {
        if bytes.len() >= 3 {
            match bytes[1].to_ascii_lowercase() {
                b'b' => return Some((2, &s[2..])),
                b'o' => return Some((8, &s[2..])),
                b'x' => return Some((16, &s[2..])),
                _ => {}
            }
        }
        return Some((8, &s[1..]));
    }
    Some((10, s))
}

fn digit_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'z' => Some(c - b'a' + 10),
        b'A'..=b'Z' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Go's `big.Int.SetString(s, 0)`, approximated to the nearest `f64`.
fn parse_big_int(s: &str) -> Option<f64> {
    let (negative, rest) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let (base, digits) = split_base(rest)?;
    if digits.is_empty() && base != 8 {
        return None;
    }
    let mut value = 0.0_f64;
    for c in digits.bytes() {
        let d = digit_value(c)?;
        if d >= base {
            return None;
        }
        value = value * f64::from(base) + f64::from(d);
    }
    Some(if negative { -value } else { value })
}

/// go-yaml's `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            digits(&mut i);
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Go's `strconv.ParseFloat(s, 64)` for decimal text; Go reports an overflow to infinity as
/// an error, which go-yaml treats as "not a float".
fn parse_finite_float(s: &str) -> Option<f64> {
    // Rust also accepts "inf", "nan" and "infinity", which go-yaml never passes here
    // unprefixed; reject anything that is not digits, sign, point or exponent.
    if !s
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'+' | b'-' | b'.' | b'e' | b'E'))
    {
        return None;
    }
    s.parse::<f64>().ok().filter(|f| f.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_1_1_booleans_and_nulls() {
        for s in ["y", "Yes", "ON", "true", "True"] {
            assert_eq!(resolve_plain(s), Resolved::Bool(true), "{s}");
        }
        for s in ["n", "NO", "off", "False"] {
            assert_eq!(resolve_plain(s), Resolved::Bool(false), "{s}");
        }
        for s in ["", "~", "null", "NULL"] {
            assert_eq!(resolve_plain(s), Resolved::Null, "{s}");
        }
        for s in ["yES", "nul", "tru", "On1", "<<", "ok"] {
            assert_eq!(resolve_plain(s), Resolved::Str, "{s}");
        }
    }

    #[test]
    fn go_integer_syntax() {
        assert_eq!(resolve_plain("110"), Resolved::Int(110));
        assert_eq!(resolve_plain("+5"), Resolved::Int(5));
        assert_eq!(resolve_plain("-5"), Resolved::Int(-5));
        assert_eq!(resolve_plain("0755"), Resolved::Int(0o755));
        assert_eq!(resolve_plain("0o17"), Resolved::Int(15));
        assert_eq!(resolve_plain("0x1F"), Resolved::Int(31));
        assert_eq!(resolve_plain("0b101"), Resolved::Int(5));
        assert_eq!(resolve_plain("-0b101"), Resolved::Int(-5));
        assert_eq!(resolve_plain("1_000"), Resolved::Int(1000));
        assert_eq!(
            resolve_plain("-9223372036854775808"),
            Resolved::Int(i64::MIN)
        );
        assert_eq!(
            resolve_plain("9223372036854775808"),
            Resolved::Uint(9_223_372_036_854_775_808)
        );
        assert_eq!(resolve_plain("0x8000000000000000"), Resolved::Uint(1 << 63));
        // Too big for 64 bits: decimal digits are still a YAML-style float; other bases
        // become go-yaml's big.Int.
        assert_eq!(
            resolve_plain("123456789012345678901234"),
            Resolved::Float(123_456_789_012_345_678_901_234.0)
        );
        assert_eq!(
            resolve_plain("0x1_0000_0000_0000_0000"),
            Resolved::BigInt(18_446_744_073_709_551_616.0)
        );
        // Negative, not decimal and too big: ParseUint rejects the sign, so a string.
        assert_eq!(resolve_plain("-0x10000000000000000"), Resolved::Str);
        // "08" is not octal, but it is a YAML-style float.
        assert_eq!(resolve_plain("08"), Resolved::Float(8.0));
        for s in [
            "0x",
            "1a",
            "12:30",
            "2024-01-02",
            "+",
            "-",
            "1.2.3",
            "10.0.0.1",
        ] {
            assert_eq!(resolve_plain(s), Resolved::Str, "{s}");
        }
    }

    #[test]
    fn go_float_syntax() {
        assert_eq!(resolve_plain("1.5"), Resolved::Float(1.5));
        assert_eq!(resolve_plain("1e3"), Resolved::Float(1000.0));
        assert_eq!(resolve_plain(".5"), Resolved::Float(0.5));
        assert_eq!(resolve_plain("-.5"), Resolved::Float(-0.5));
        assert_eq!(resolve_plain("1."), Resolved::Float(1.0));
        assert!(matches!(resolve_plain(".nan"), Resolved::Float(f) if f.is_nan()));
        assert_eq!(resolve_plain("-.inf"), Resolved::Float(f64::NEG_INFINITY));
        // Overflow is an error for Go's ParseFloat, so go-yaml keeps the text.
        assert_eq!(resolve_plain("1e400"), Resolved::Str);
        assert_eq!(resolve_plain(".e5"), Resolved::Str);
        assert_eq!(resolve_plain("1e"), Resolved::Str);
    }

    #[test]
    fn json_conversion_matches_go_marshal() {
        use serde_json::Value;
        let conv = |s: &str| to_node(resolve_plain(s), Cow::Borrowed(s)).map(Node::into_value);
        assert_eq!(conv("110.0"), Ok(Value::from(110)));
        assert_eq!(conv("1e3"), Ok(Value::from(1000)));
        assert_eq!(conv("1.5"), Ok(Value::from(1.5)));
        assert_eq!(
            conv("1e20"),
            Ok(Value::from(100_000_000_000_000_000_000_u128 as f64))
        );
        assert_eq!(conv(".nan"), Err(ToJsonError::NonFinite));
        assert_eq!(conv(".inf"), Err(ToJsonError::NonFinite));
        assert_eq!(conv("yes"), Ok(Value::Bool(true)));
        assert_eq!(conv("~"), Ok(Value::Null));
        assert_eq!(conv("100Mi"), Ok(Value::from("100Mi")));
    }

    #[test]
    fn tagged_scalars() {
        assert_eq!(resolve_tagged("123", ScalarTag::Str), Ok(Resolved::Str));
        assert_eq!(
            resolve_tagged("0x10", ScalarTag::Int),
            Ok(Resolved::Int(16))
        );
        assert_eq!(
            resolve_tagged("3", ScalarTag::Float),
            Ok(Resolved::Float(3.0))
        );
        assert_eq!(
            resolve_tagged("on", ScalarTag::Bool),
            Ok(Resolved::Bool(true))
        );
        assert!(
            resolve_tagged("abc", ScalarTag::Int)
                .unwrap_err()
                .contains("!!int")
        );
        assert!(resolve_tagged("1", ScalarTag::Bool).is_err());
    }

    #[test]
    fn keys_become_json_strings_like_sigs_yaml() {
        let key = |s: &str| key_string(resolve_plain(s), Cow::Borrowed(s)).map(Cow::into_owned);
        assert_eq!(key("name"), Ok("name".to_string()));
        assert_eq!(key("0x10"), Ok("16".to_string()));
        assert_eq!(key("yes"), Ok("true".to_string()));
        assert_eq!(key("off"), Ok("false".to_string()));
        assert_eq!(key("1.5"), Ok("1.5".to_string()));
        assert_eq!(key("1e6"), Ok("1e+06".to_string()));
        assert_eq!(key("123456.5"), Ok("123456.5".to_string()));
        assert_eq!(key("0.00001"), Ok("1e-05".to_string()));
        assert_eq!(key("0.0001"), Ok("0.0001".to_string()));
        assert_eq!(key("1000.0"), Ok("1000".to_string()));
        assert_eq!(key(".inf"), Ok(".inf".to_string()));
        assert_eq!(key("~"), Err(KeyError::Null));
        assert!(matches!(
            key("18446744073709551615"),
            Err(KeyError::Unsupported(_))
        ));
    }
}
