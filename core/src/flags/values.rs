//! Each flag type's `Set`, as upstream writes it: what a value parses to, and the error
//! text when it does not.

use std::collections::BTreeMap;

use super::table::ValueKind;
use crate::duration::Duration;
use crate::go::{parse_bool, quote};
use crate::names::{self, Wording};
use crate::quantity::Quantity;

/// A taint from `--register-with-taints` (`v1.Taint` without `timeAdded`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaintSpec {
    pub key: String,
    pub value: String,
    pub effect: String,
}

/// One NUMA node's reservation from `--reserved-memory`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NumaReservation {
    pub numa_node: i32,
    pub limits: BTreeMap<String, Quantity>,
}

/// One occurrence's value, parsed by the flag's own `Set`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ParsedValue {
    Bool(bool),
    Int(i64),
    Str(String),
    /// An empty value where `Set("")` is special: `IPVar` and `ReservedMemoryVar` detach
    /// from the config, `RegisterWithTaintsVar` clears the list.
    Empty,
    Duration(Duration),
    Quantity(Quantity),
    List(Vec<String>),
    Pairs(Vec<(String, String)>),
    BoolPairs(Vec<(String, bool)>),
    VModule(Vec<(String, u32)>),
    Taints(Vec<TaintSpec>),
    ReservedMemory(Vec<NumaReservation>),
}

/// Parses one occurrence's `value` as a flag of `kind` would; the error is the text the
/// flag's `Set` returns (pflag wraps it into "invalid argument ...").
pub(crate) fn parse_value(kind: ValueKind, value: &str) -> Result<ParsedValue, String> {
    match kind {
        ValueKind::Bool => parse_bool(value).map(ParsedValue::Bool),
        ValueKind::Int32 => parse_int(value, 32).map(ParsedValue::Int),
        ValueKind::Int64 | ValueKind::Int => parse_int(value, 64).map(ParsedValue::Int),
        ValueKind::Verbosity => parse_uint31(value).map(|v| ParsedValue::Int(i64::from(v))),
        ValueKind::String => Ok(ParsedValue::Str(value.to_string())),
        ValueKind::Ip => parse_ip(value),
        ValueKind::Duration => Duration::parse(value)
            .map(ParsedValue::Duration)
            .map_err(|e| e.to_string()),
        ValueKind::Quantity => Quantity::parse(value)
            .map(ParsedValue::Quantity)
            .map_err(|e| e.to_string()),
        ValueKind::StringSlice => parse_csv(value).map(ParsedValue::List),
        ValueKind::MapStringString => {
            split_pairs(value, '=', "string=string").map(ParsedValue::Pairs)
        }
        ValueKind::MapStringStringNoSplit => match value.split_once('=') {
            Some((k, v)) => Ok(ParsedValue::Pairs(vec![(
                k.trim().to_string(),
                v.trim().to_string(),
            )])),
            None => Err("malformed pair, expect string=string".to_string()),
        },
        ValueKind::LangleMap => split_pairs(value, '<', "string<string").map(ParsedValue::Pairs),
        ValueKind::ColonMultimap => {
            split_pairs(value, ':', "string:string").map(ParsedValue::Pairs)
        }
        ValueKind::MapStringBool => parse_bool_pairs(value).map(ParsedValue::BoolPairs),
        ValueKind::LabelMap => Ok(ParsedValue::Pairs(parse_label_map(value))),
        ValueKind::Taints => parse_taints(value),
        ValueKind::ReservedMemory => parse_reserved_memory(value),
        ValueKind::VModule => parse_vmodule(value).map(ParsedValue::VModule),
        ValueKind::Version => parse_version(value).map(ParsedValue::Str),
    }
}

enum NumError {
    Syntax,
    Range,
}

/// Go's `strconv.ParseUint(s, 0, 64)` on an unsigned body: base prefixes, a leading `0`
/// for octal, `_` separators where Go allows them.
fn parse_uint_base0(s: &str) -> Result<u64, NumError> {
    if s.is_empty() {
        return Err(NumError::Syntax);
    }
    let bytes = s.as_bytes();
    let (base, digits): (u32, &str) = if bytes[0] == b'0' {
        match bytes.get(1).map(u8::to_ascii_lowercase) {
            Some(b'b') if s.len() >= 3 => (2, &s[2..]),
            Some(b'o') if s.len() >= 3 => (8, &s[2..]),
            Some(b'x') if s.len() >= 3 => (16, &s[2..]),
            _ => (8, &s[1..]),
        }
    } else {
        (10, s)
    };
    let mut n: u64 = 0;
    let mut underscores = false;
    for c in digits.chars() {
        if c == '_' {
            underscores = true;
            continue;
        }
        let d = c.to_digit(16).ok_or(NumError::Syntax)?;
        if d >= base {
            return Err(NumError::Syntax);
        }
        n = n
            .checked_mul(u64::from(base))
            .and_then(|n| n.checked_add(u64::from(d)))
            .ok_or(NumError::Range)?;
    }
    if underscores && !underscore_ok(s) {
        return Err(NumError::Syntax);
    }
    Ok(n)
}

/// Go's `underscoreOK`: underscores only between digits (a base prefix counts as one).
fn underscore_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let mut saw = b'^';
    let mut i = 0;
    let mut hex = false;
    if b.len() >= 2 && b[0] == b'0' && matches!(b[1].to_ascii_lowercase(), b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = b[1].eq_ignore_ascii_case(&b'x');
    }
    while i < b.len() {
        let c = b[i];
        i += 1;
        if c.is_ascii_digit() || (hex && c.to_ascii_lowercase().is_ascii_hexdigit()) {
            saw = b'0';
            continue;
        }
        if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
            continue;
        }
        if saw == b'_' {
            return false;
        }
        saw = b'!';
    }
    saw != b'_'
}

/// Go's `strconv.ParseInt(s, 0, bits)`, as pflag's `Int32Var` and `Int64Var` call it.
pub(crate) fn parse_int(s: &str, bits: u32) -> Result<i64, String> {
    let syntax = || format!("strconv.ParseInt: parsing {}: invalid syntax", quote(s));
    let range = || format!("strconv.ParseInt: parsing {}: value out of range", quote(s));
    let (negative, body) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let magnitude = match parse_uint_base0(body) {
        Ok(n) => n,
        Err(NumError::Syntax) => return Err(syntax()),
        Err(NumError::Range) => return Err(range()),
    };
    let limit: u64 = 1u64 << (bits - 1);
    if negative {
        if magnitude > limit {
            return Err(range());
        }
        Ok((magnitude as i128).wrapping_neg() as i64)
    } else if magnitude >= limit {
        Err(range())
    } else {
        Ok(magnitude as i64)
    }
}

/// Go's `strconv.ParseUint(s, 10, 31)`, klog's verbosity.
fn parse_uint31(s: &str) -> Result<u32, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "strconv.ParseUint: parsing {}: invalid syntax",
            quote(s)
        ));
    }
    match s.parse::<u64>() {
        Ok(v) if v < (1 << 31) => Ok(v as u32),
        _ => Err(format!(
            "strconv.ParseUint: parsing {}: value out of range",
            quote(s)
        )),
    }
}

/// `IPVar.Set`: an IP as Go's `netutils.ParseIPSloppy` reads it (IPv4 parts may have
/// leading zeros); empty detaches.
fn parse_ip(s: &str) -> Result<ParsedValue, String> {
    if s.is_empty() {
        return Ok(ParsedValue::Empty);
    }
    if s.parse::<std::net::IpAddr>().is_ok() || is_sloppy_ipv4(s) {
        Ok(ParsedValue::Str(s.to_string()))
    } else {
        Err(format!("{} is not a valid IP address", quote(s)))
    }
}

fn is_sloppy_ipv4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u32>().is_ok_and(|v| v <= 255)
        })
}

/// pflag's `readAsCSV`: one record of Go's `encoding/csv` (comma-separated, `"` quoting
/// with `""` for a quote, no trimming).
pub(crate) fn parse_csv(s: &str) -> Result<Vec<String>, String> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    let err = |col: usize, what: &str| format!("parse error on line 1, column {col}: {what}");
    let chars: Vec<char> = s.chars().collect();
    let mut fields = Vec::new();
    let mut i = 0;
    loop {
        let mut field = String::new();
        if chars.get(i) == Some(&'"') {
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(err(i + 1, "extraneous or missing \" in quoted-field")),
                    Some('"') => match chars.get(i + 1) {
                        Some('"') => {
                            field.push('"');
                            i += 2;
                        }
                        Some(',') => {
                            i += 2;
                            fields.push(field);
                            break;
                        }
                        None | Some('\n') => {
                            fields.push(field);
                            return Ok(fields);
                        }
                        Some('\r') if chars.get(i + 2).is_none_or(|c| *c == '\n') => {
                            fields.push(field);
                            return Ok(fields);
                        }
                        Some(_) => {
                            return Err(err(i + 2, "extraneous or missing \" in quoted-field"));
                        }
                    },
                    Some(c) => {
                        field.push(*c);
                        i += 1;
                    }
                }
            }
        } else {
            loop {
                match chars.get(i) {
                    None | Some('\n') => {
                        if field.ends_with('\r') {
                            field.pop();
                        }
                        fields.push(field);
                        return Ok(fields);
                    }
                    Some(',') => {
                        i += 1;
                        fields.push(field);
                        break;
                    }
                    Some('"') => return Err(err(i + 1, "bare \" in non-quoted-field")),
                    Some(c) => {
                        field.push(*c);
                        i += 1;
                    }
                }
            }
        }
    }
}

/// `MapStringString.Set` (and the langle and colon variants): comma-separated pairs,
/// empty items skipped, key and value trimmed.
fn split_pairs(s: &str, sep: char, expect: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for item in s.split(',') {
        if item.is_empty() {
            continue;
        }
        let Some((k, v)) = item.split_once(sep) else {
            return Err(format!("malformed pair, expect {expect}"));
        };
        out.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(out)
}

/// `MapStringBool.Set`.
fn parse_bool_pairs(s: &str) -> Result<Vec<(String, bool)>, String> {
    let mut out = Vec::new();
    for item in s.split(',') {
        if item.is_empty() {
            continue;
        }
        let Some((k, v)) = item.split_once('=') else {
            return Err("malformed pair, expect string=bool".to_string());
        };
        let (k, v) = (k.trim(), v.trim());
        let b = parse_bool(v).map_err(|e| format!("invalid value of {k}: {v}, err: {e}"))?;
        out.push((k.to_string(), b));
    }
    Ok(out)
}

/// `ConfigurationMap.Set` (`--node-labels`): a bare key gets an empty value.
fn parse_label_map(s: &str) -> Vec<(String, String)> {
    s.split(',')
        .filter(|item| !item.is_empty())
        .map(|item| match item.split_once('=') {
            Some((k, v)) => (k.trim().to_string(), v.trim().to_string()),
            None => (item.trim().to_string(), String::new()),
        })
        .collect()
}

/// `vmoduleConfigurationPFlag.Set`.
fn parse_vmodule(s: &str) -> Result<Vec<(String, u32)>, String> {
    let mut out = Vec::new();
    for pat in s.split(',') {
        if pat.is_empty() {
            continue;
        }
        let parts: Vec<&str> = pat.split('=').collect();
        if parts.len() != 2 || parts[0].is_empty() || parts[1].is_empty() {
            return Err(format!("{} does not have the pattern=N format", quote(pat)));
        }
        let level = parse_uint31(parts[1])
            .map_err(|e| format!("parsing verbosity in {}: {e}", quote(pat)))?;
        out.push((parts[0].to_string(), level));
    }
    Ok(out)
}

/// verflag's `versionValue.Set`: `raw`, a boolean, or a version to report (`v1.36.0`).
fn parse_version(s: &str) -> Result<String, String> {
    if s == "raw" || s.starts_with('v') {
        return Ok(s.to_string());
    }
    parse_bool(s).map(|_| s.to_string())
}

/// `pkg/util/taints.parseTaint`: `key=value:Effect`, `key:Effect` or `key`.
fn parse_taint(spec: &str) -> Result<TaintSpec, String> {
    let invalid = |errs: &[String]| {
        if errs.is_empty() {
            format!("invalid taint spec: {spec}")
        } else {
            format!("invalid taint spec: {spec}, {}", errs.join("; "))
        }
    };
    let parts: Vec<&str> = spec.split(':').collect();
    let (key, value, effect) = match parts.as_slice() {
        [key] => (*key, "", ""),
        [kv, effect] => {
            if !matches!(*effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
                return Err(format!(
                    "invalid taint effect: {effect}, unsupported taint effect"
                ));
            }
            let kv: Vec<&str> = kv.split('=').collect();
            match kv.as_slice() {
                [key] => (*key, "", *effect),
                [key, value] => {
                    let errs = names::label_value_errors(value, Wording::Validation);
                    if !errs.is_empty() {
                        return Err(invalid(&errs));
                    }
                    (*key, *value, *effect)
                }
                _ => return Err(invalid(&[])),
            }
        }
        _ => return Err(invalid(&[])),
    };
    let errs = names::label_key_errors(key, Wording::Validation);
    if !errs.is_empty() {
        return Err(invalid(&errs));
    }
    Ok(TaintSpec {
        key: key.to_string(),
        value: value.to_string(),
        effect: effect.to_string(),
    })
}

/// `RegisterWithTaintsVar.Set` over `taints.ParseTaints`: removals (`key-`) are parsed
/// and dropped, additions need an effect, `(key, effect)` must be unique.
fn parse_taints(s: &str) -> Result<ParsedValue, String> {
    if s.is_empty() {
        return Ok(ParsedValue::Empty);
    }
    let mut taints: Vec<TaintSpec> = Vec::new();
    for spec in s.split(',') {
        if let Some(removal) = spec.strip_suffix('-') {
            parse_taint(removal)?;
            continue;
        }
        let taint = parse_taint(spec)?;
        if taint.effect.is_empty() {
            return Err(format!("invalid taint spec: {spec}"));
        }
        if taints
            .iter()
            .any(|t| t.key == taint.key && t.effect == taint.effect)
        {
            return Err(format!(
                "duplicated taints with the same key and effect: {{{} {} {} <nil>}}",
                taint.key, taint.value, taint.effect
            ));
        }
        taints.push(taint);
    }
    Ok(ParsedValue::Taints(taints))
}

/// Go's `strconv.Atoi`.
fn atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

/// `ReservedMemoryVar.Set`: `numa:type=quantity[,type=quantity...]`, several NUMA nodes
/// separated by `;`.
fn parse_reserved_memory(s: &str) -> Result<ParsedValue, String> {
    if s.is_empty() {
        return Ok(ParsedValue::Empty);
    }
    let mut out = Vec::new();
    for reservation in s.split(';') {
        let parts: Vec<&str> = reservation.split(':').collect();
        let [numa, types] = parts.as_slice() else {
            return Err(format!(
                "the reserved memory has incorrect format, expected numaNodeID:type=quantity[,type=quantity...], got {reservation}"
            ));
        };
        let numa_node = atoi(numa).ok_or_else(|| {
            format!("failed to convert the NUMA node ID, exptected integer, got {numa}")
        })?;
        let mut limits = BTreeMap::new();
        for item in types.split(',') {
            let kv: Vec<&str> = item.split('=').collect();
            let [name, quantity] = kv.as_slice() else {
                return Err(format!(
                    "the reserved limit has incorrect value, expected type=quantatity, got {item}"
                ));
            };
            if *name != "memory" && !name.starts_with("hugepages-") {
                return Err(format!(
                    "memory type conversion error, unknown type: {}",
                    quote(name)
                ));
            }
            let q = Quantity::parse(quantity).map_err(|_| {
                format!("failed to parse the quantatity, expected quantatity, got {quantity}")
            })?;
            limits.insert((*name).to_string(), q);
        }
        out.push(NumaReservation {
            // Go's int32(int) conversion wraps.
            numa_node: numa_node as i32,
            limits,
        });
    }
    Ok(ParsedValue::ReservedMemory(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_follow_go_parse_int_base_zero() {
        assert_eq!(parse_int("110", 32), Ok(110));
        assert_eq!(parse_int("-999", 32), Ok(-999));
        assert_eq!(parse_int("0x10", 32), Ok(16));
        assert_eq!(parse_int("010", 32), Ok(8));
        assert_eq!(parse_int("0o17", 32), Ok(15));
        assert_eq!(parse_int("1_000", 32), Ok(1000));
        assert_eq!(parse_int("-2147483648", 32), Ok(i64::from(i32::MIN)));
        assert_eq!(parse_int("0", 32), Ok(0));
        assert_eq!(
            parse_int("2147483648", 32),
            Err("strconv.ParseInt: parsing \"2147483648\": value out of range".to_string())
        );
        assert_eq!(
            parse_int("x", 32),
            Err("strconv.ParseInt: parsing \"x\": invalid syntax".to_string())
        );
        for bad in ["", "1_", "_1", "1__0", "08", "0x", "1.5", " 1"] {
            assert!(parse_int(bad, 32).is_err(), "{bad:?}");
        }
        assert_eq!(parse_int("9223372036854775807", 64), Ok(i64::MAX));
        assert!(parse_int("9223372036854775808", 64).is_err());
    }

    #[test]
    fn bools_follow_go_parse_bool() {
        for t in ["1", "t", "T", "true", "TRUE", "True"] {
            assert_eq!(parse_bool(t), Ok(true));
        }
        for f in ["0", "f", "F", "false", "FALSE", "False"] {
            assert_eq!(parse_bool(f), Ok(false));
        }
        assert!(parse_bool("yes").is_err());
        assert!(parse_bool("tRUE").is_err());
    }

    #[test]
    fn verbosity_is_an_unsigned_31_bit_decimal() {
        assert_eq!(parse_uint31("4"), Ok(4));
        assert!(parse_uint31("-1").is_err());
        assert!(parse_uint31("+1").is_err());
        assert!(parse_uint31("0x1").is_err());
        assert!(parse_uint31("2147483648").is_err());
        assert_eq!(parse_uint31("2147483647"), Ok(2_147_483_647));
    }

    #[test]
    fn csv_lists_as_pflag_string_slices() {
        assert_eq!(parse_csv("a,b"), Ok(vec!["a".into(), "b".into()]));
        assert_eq!(parse_csv(""), Ok(vec![]));
        assert_eq!(parse_csv("a, b"), Ok(vec!["a".into(), " b".into()]));
        assert_eq!(parse_csv("\"a,b\",c"), Ok(vec!["a,b".into(), "c".into()]));
        assert_eq!(
            parse_csv("\"say \"\"hi\"\"\""),
            Ok(vec!["say \"hi\"".into()])
        );
        assert_eq!(parse_csv("a,"), Ok(vec!["a".into(), String::new()]));
        assert!(parse_csv("a\"b").is_err_and(|e| e.contains("bare \" in non-quoted-field")));
        assert!(parse_csv("\"ab").is_err());
        assert!(parse_csv("\"a\"b").is_err());
    }

    #[test]
    fn taints_parse_and_validate_like_register_with_taints() {
        let ParsedValue::Taints(t) =
            parse_taints("dedicated=gpu:NoSchedule,example.com/spot:PreferNoSchedule").unwrap()
        else {
            panic!("not taints")
        };
        assert_eq!(
            t,
            vec![
                TaintSpec {
                    key: "dedicated".into(),
                    value: "gpu".into(),
                    effect: "NoSchedule".into()
                },
                TaintSpec {
                    key: "example.com/spot".into(),
                    value: String::new(),
                    effect: "PreferNoSchedule".into()
                },
            ]
        );
        assert_eq!(parse_taints(""), Ok(ParsedValue::Empty));
        assert!(parse_taints("a=b:Sometimes").is_err_and(|e| e.contains("invalid taint effect")));
        // Without an effect `a=b` is read as a key, which `=` makes invalid.
        assert!(
            parse_taints("a=b").is_err_and(|e| e.starts_with("invalid taint spec: a=b, name part"))
        );
        // A valid key without an effect cannot be added.
        assert!(parse_taints("a").is_err_and(|e| e == "invalid taint spec: a"));
        assert!(parse_taints("a=b=c:NoSchedule").is_err());
        assert!(parse_taints("-bad:NoSchedule").is_err());
        assert!(
            parse_taints("a=b:NoSchedule,a=c:NoSchedule").is_err_and(|e| e.contains("duplicated"))
        );
        // A removal is accepted and dropped.
        assert_eq!(
            parse_taints("a:NoSchedule-,b=c:NoExecute").map(|v| match v {
                ParsedValue::Taints(t) => t.len(),
                _ => 0,
            }),
            Ok(1)
        );
    }

    #[test]
    fn reserved_memory_parses_numa_reservations() {
        let ParsedValue::ReservedMemory(r) =
            parse_reserved_memory("0:memory=1Gi,hugepages-1Gi=2Gi;1:memory=512Mi").unwrap()
        else {
            panic!("not reserved memory")
        };
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].numa_node, 0);
        assert_eq!(r[0].limits["hugepages-1Gi"].as_str(), "2Gi");
        assert_eq!(r[1].limits["memory"].as_str(), "512Mi");
        assert!(parse_reserved_memory("memory=1Gi").is_err_and(|e| e.contains("incorrect format")));
        assert!(parse_reserved_memory("x:memory=1Gi").is_err_and(|e| e.contains("NUMA node ID")));
        assert!(parse_reserved_memory("0:cpu=1").is_err_and(|e| e.contains("unknown type")));
        assert!(parse_reserved_memory("0:memory=lots").is_err_and(|e| e.contains("quantatity")));
    }

    #[test]
    fn vmodule_items_need_pattern_and_level() {
        assert_eq!(
            parse_vmodule("server*=4,,kubelet=2"),
            Ok(vec![("server*".into(), 4), ("kubelet".into(), 2)])
        );
        assert!(parse_vmodule("x").is_err_and(|e| e.contains("pattern=N")));
        assert!(parse_vmodule("x=y").is_err_and(|e| e.contains("parsing verbosity")));
        assert!(parse_vmodule("=1").is_err());
    }

    #[test]
    fn ips_accept_what_parse_ip_sloppy_accepts() {
        assert_eq!(
            parse_ip("10.0.0.5"),
            Ok(ParsedValue::Str("10.0.0.5".into()))
        );
        assert_eq!(parse_ip("::"), Ok(ParsedValue::Str("::".into())));
        assert_eq!(
            parse_ip("010.000.000.001"),
            Ok(ParsedValue::Str("010.000.000.001".into()))
        );
        assert_eq!(parse_ip(""), Ok(ParsedValue::Empty));
        assert_eq!(
            parse_ip("10.0.0.256"),
            Err("\"10.0.0.256\" is not a valid IP address".to_string())
        );
    }

    #[test]
    fn map_pairs_trim_and_reject_malformed() {
        assert_eq!(
            split_pairs("cpu=1, memory = 2Gi,", '=', "string=string"),
            Ok(vec![
                ("cpu".into(), "1".into()),
                ("memory".into(), "2Gi".into())
            ])
        );
        assert_eq!(
            split_pairs("cpu", '=', "string=string"),
            Err("malformed pair, expect string=string".into())
        );
        assert_eq!(
            parse_value(
                ValueKind::MapStringStringNoSplit,
                "full-pcpus-only=true,x=y"
            ),
            Ok(ParsedValue::Pairs(vec![(
                "full-pcpus-only".into(),
                "true,x=y".into()
            )]))
        );
        assert_eq!(
            parse_label_map("a=b,c"),
            vec![("a".into(), "b".into()), ("c".into(), String::new())]
        );
    }

    #[test]
    fn versions_are_raw_bool_or_v_prefixed() {
        assert!(parse_version("raw").is_ok());
        assert!(parse_version("false").is_ok());
        assert!(parse_version("v1.36.0").is_ok());
        assert!(parse_version("1.36").is_err());
    }
}
