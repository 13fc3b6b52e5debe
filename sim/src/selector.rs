//! Label and field selectors with upstream's grammar, semantics and error texts
//! (k8s.io/apimachinery/pkg/labels/selector.go, k8s.io/apimachinery/pkg/fields/selector.go).

use serde_json::Value;

use crate::resources::ResourceType;
use crate::rules;

/// A label selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `key in (a,b)`
    In,
    /// `key notin (a,b)`
    NotIn,
    /// `key=a`
    Equals,
    /// `key==a`
    DoubleEquals,
    /// `key!=a`
    NotEquals,
    /// `key`
    Exists,
    /// `!key`
    DoesNotExist,
    /// `key>1`
    GreaterThan,
    /// `key<1`
    LessThan,
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// Label key.
    pub key: String,
    /// Operator.
    pub op: Op,
    /// Values, sorted and de-duplicated as upstream's `sets.String.List()`.
    pub values: Vec<String>,
}

impl Requirement {
    /// Whether `labels` (a `metadata.labels` object, or None) satisfy this requirement.
    pub fn matches(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        let val = labels
            .and_then(|l| l.get(&self.key))
            .and_then(Value::as_str);
        match self.op {
            Op::In | Op::Equals | Op::DoubleEquals => {
                val.is_some_and(|v| self.values.iter().any(|x| x == v))
            }
            Op::NotIn | Op::NotEquals => val.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            Op::Exists => val.is_some(),
            Op::DoesNotExist => val.is_none(),
            Op::GreaterThan | Op::LessThan => {
                let Some(v) = val.and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                let Some(r) = self.values.first().and_then(|r| r.parse::<i64>().ok()) else {
                    return false;
                };
                if self.op == Op::GreaterThan {
                    v > r
                } else {
                    v < r
                }
            }
        }
    }
}

/// A parsed label selector: the AND of its requirements (empty matches everything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// Requirements, sorted by key as upstream does.
    pub requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Error,
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn literal_token(s: &str) -> Option<Tok> {
    Some(match s {
        ")" => Tok::ClosedPar,
        "," => Tok::Comma,
        "!" => Tok::DoesNotExist,
        "==" => Tok::DoubleEquals,
        "=" => Tok::Equals,
        ">" => Tok::GreaterThan,
        "in" => Tok::In,
        "<" => Tok::LessThan,
        "!=" => Tok::NotEquals,
        "notin" => Tok::NotIn,
        "(" => Tok::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn lex(&mut self) -> (Tok, String) {
        while self.peek().is_some_and(is_whitespace) {
            self.pos += 1;
        }
        match self.peek() {
            None => (Tok::End, String::new()),
            Some(c) if is_special(c) => self.scan_special(),
            Some(_) => self.scan_id(),
        }
    }

    fn scan_id(&mut self) -> (Tok, String) {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| !is_special(c) && !is_whitespace(c))
        {
            self.pos += 1;
        }
        let s = String::from_utf8_lossy(&self.s[start..self.pos]).into_owned();
        match literal_token(&s) {
            Some(t) => (t, s),
            None => (Tok::Identifier, s),
        }
    }

    fn scan_special(&mut self) -> (Tok, String) {
        let mut buf = String::new();
        let mut last: Option<(Tok, String)> = None;
        while let Some(c) = self.peek() {
            if !is_special(c) {
                break;
            }
            buf.push(c as char);
            if let Some(t) = literal_token(&buf) {
                last = Some((t, buf.clone()));
                self.pos += 1;
            } else if last.is_some() {
                break;
            } else {
                self.pos += 1;
            }
        }
        match last {
            Some(l) => l,
            None => (Tok::Error, format!("error expected: keyword found '{buf}'")),
        }
    }
}

struct Parser {
    items: Vec<(Tok, String)>,
    pos: usize,
}

fn in_values(t: Tok, values: bool) -> Tok {
    if values && matches!(t, Tok::In | Tok::NotIn) {
        Tok::Identifier
    } else {
        t
    }
}

impl Parser {
    fn lookahead(&self, values: bool) -> (Tok, &str) {
        let (t, l) = self
            .items
            .get(self.pos)
            .map(|(t, l)| (*t, l.as_str()))
            .unwrap_or((Tok::End, ""));
        (in_values(t, values), l)
    }

    fn consume(&mut self, values: bool) -> (Tok, String) {
        let (t, l) = self
            .items
            .get(self.pos)
            .cloned()
            .unwrap_or((Tok::End, String::new()));
        if self.pos < self.items.len() {
            self.pos += 1;
        }
        (in_values(t, values), l)
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(true);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(r);
                    let (t, l) = self.consume(true);
                    match t {
                        Tok::End => return Ok(reqs),
                        Tok::Comma => {
                            let (t2, l2) = self.lookahead(true);
                            if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!("found '{l}', expected: ',' or 'end of string'"));
                        }
                    }
                }
                Tok::End => return Ok(reqs),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        if let Some(op @ (Op::Exists | Op::DoesNotExist)) = op {
            return new_requirement(key, op, Vec::new());
        }
        let op = self.parse_operator()?;
        let values = match op {
            Op::In | Op::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        new_requirement(key, op, values)
    }

    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Op>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(true);
        if tok == Tok::DoesNotExist {
            op = Some(Op::DoesNotExist);
            (tok, lit) = self.consume(true);
        }
        if tok != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let errs = rules::label_key_errors(&lit);
        if !errs.is_empty() {
            return Err(format!(
                "<nil>: Invalid value: {}: {}",
                rules::go_quote(&lit),
                errs.join("; ")
            ));
        }
        let (t, _) = self.lookahead(true);
        if (t == Tok::End || t == Tok::Comma) && op != Some(Op::DoesNotExist) {
            op = Some(Op::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<Op, String> {
        let (tok, lit) = self.consume(false);
        Ok(match tok {
            Tok::In => Op::In,
            Tok::Equals => Op::Equals,
            Tok::DoubleEquals => Op::DoubleEquals,
            Tok::GreaterThan => Op::GreaterThan,
            Tok::LessThan => Op::LessThan,
            Tok::NotIn => Op::NotIn,
            Tok::NotEquals => Op::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(true);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(true);
        let lit = lit.to_string();
        match tok {
            Tok::Identifier | Tok::Comma => {
                let s = self.parse_identifiers_list()?;
                let (t, _) = self.consume(true);
                if t != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(s)
            }
            Tok::ClosedPar => {
                self.consume(true);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut s: Vec<String> = Vec::new();
        loop {
            let (tok, lit) = self.consume(true);
            match tok {
                Tok::Identifier => {
                    s.push(lit);
                    let (t2, l2) = self.lookahead(true);
                    match t2 {
                        Tok::Comma => continue,
                        Tok::ClosedPar => return Ok(s),
                        _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if s.is_empty() {
                        s.push(String::new());
                    }
                    let (t2, _) = self.lookahead(true);
                    if t2 == Tok::ClosedPar {
                        s.push(String::new());
                        return Ok(s);
                    }
                    if t2 == Tok::Comma {
                        s.push(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(true);
        if tok == Tok::End || tok == Tok::Comma {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(true);
        if tok == Tok::Identifier {
            Ok(vec![lit])
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

fn new_requirement(key: String, op: Op, mut values: Vec<String>) -> Result<Requirement, String> {
    values.sort();
    values.dedup();
    let mut errs: Vec<String> = Vec::new();
    let kerrs = rules::label_key_errors(&key);
    if !kerrs.is_empty() {
        errs.push(format!(
            "key: Invalid value: {}: {}",
            rules::go_quote(&key),
            kerrs.join("; ")
        ));
    }
    let vals_go = || {
        format!(
            "[]string{{{}}}",
            values
                .iter()
                .map(|v| rules::go_quote(v))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    match op {
        Op::In | Op::NotIn if values.is_empty() => errs.push(format!(
            "values: Invalid value: {}: for 'in', 'notin' operators, values set can't be empty",
            vals_go()
        )),
        Op::Equals | Op::DoubleEquals | Op::NotEquals if values.len() != 1 => errs.push(format!(
            "values: Invalid value: {}: exact-match compatibility requires one single value",
            vals_go()
        )),
        Op::GreaterThan | Op::LessThan => {
            if values.len() != 1 {
                errs.push(format!(
                    "values: Invalid value: {}: for 'Gt', 'Lt' operators, exactly one value is required",
                    vals_go()
                ));
            }
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(format!(
                        "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                        rules::go_quote(v)
                    ));
                }
            }
        }
        _ => {}
    }
    for (i, v) in values.iter().enumerate() {
        let verrs = rules::label_value_errors(v);
        if !verrs.is_empty() {
            errs.push(format!(
                "values[{i}][{key}]: Invalid value: {}: {}",
                rules::go_quote(v),
                verrs.join("; ")
            ));
        }
    }
    match errs.len() {
        0 => Ok(Requirement { key, op, values }),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

impl LabelSelector {
    /// Parse a selector in upstream's syntax; the error text is upstream's.
    pub fn parse(s: &str) -> Result<LabelSelector, String> {
        let mut lexer = Lexer {
            s: s.as_bytes(),
            pos: 0,
        };
        let mut items = Vec::new();
        loop {
            let (t, l) = lexer.lex();
            let end = t == Tok::End || t == Tok::Error;
            items.push((t, l));
            if end {
                if t == Tok::Error {
                    items.push((Tok::End, String::new()));
                }
                break;
            }
        }
        let mut p = Parser { items, pos: 0 };
        let mut requirements = p.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether the object's `metadata.labels` satisfy every requirement.
    pub fn matches_object(&self, obj: &Value) -> bool {
        if self.is_empty() {
            return true;
        }
        self.matches(obj.pointer("/metadata/labels").and_then(Value::as_object))
    }
}

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// Field label (`metadata.name`).
    pub field: String,
    /// `true` for `!=`.
    pub negated: bool,
    /// Unescaped value.
    pub value: String,
}

/// A parsed field selector: the AND of its terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// Terms, sorted as upstream sorts the raw terms.
    pub requirements: Vec<FieldRequirement>,
}

fn split_terms(s: &str) -> Vec<String> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut cur = String::new();
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            cur.push(c);
            escaped = false;
        } else if c == '\\' {
            cur.push(c);
            escaped = true;
        } else if c == ',' {
            terms.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    terms.push(cur);
    terms
}

fn split_term(term: &str) -> Option<(String, bool, String)> {
    let bytes = term.as_bytes();
    let mut escaped = false;
    for i in 0..bytes.len() {
        if escaped {
            escaped = false;
            continue;
        }
        if bytes[i] == b'\\' {
            escaped = true;
            continue;
        }
        let rest = &term[i..];
        for (op, neg) in [("!=", true), ("==", false), ("=", false)] {
            if let Some(rhs) = rest.strip_prefix(op) {
                return Some((term[..i].to_string(), neg, rhs.to_string()));
            }
        }
    }
    None
}

fn unescape_value(s: &str) -> Result<String, String> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_string());
    }
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n @ ('\\' | ',' | '=')) => out.push(n),
                Some(n) => {
                    return Err(format!(
                        "invalid field selector: invalid escape sequence: \\{n}"
                    ));
                }
                None => {
                    return Err("invalid field selector: invalid escape sequence: \\".to_string());
                }
            },
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {c}"
                ));
            }
            _ => out.push(c),
        }
    }
    Ok(out)
}

impl FieldSelector {
    /// Parse a field selector (`a=b,c!=d`); the error text is upstream's.
    pub fn parse(s: &str) -> Result<FieldSelector, String> {
        let mut parts = split_terms(s);
        parts.sort();
        let mut requirements = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((field, negated, rhs)) = split_term(&part) else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            let value = unescape_value(&rhs)?;
            requirements.push(FieldRequirement {
                field,
                negated,
                value,
            });
        }
        Ok(FieldSelector { requirements })
    }

    /// Parse and check every field label is supported for `rt`
    /// (`field label not supported: x` otherwise).
    pub fn parse_for(rt: &ResourceType, s: &str) -> Result<FieldSelector, String> {
        let fs = Self::parse(s)?;
        for r in &fs.requirements {
            if !supported_fields(rt).contains(&r.field.as_str()) {
                return Err(format!("field label not supported: {}", r.field));
            }
        }
        Ok(fs)
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `obj` satisfies every term.
    pub fn matches_object(&self, obj: &Value) -> bool {
        self.requirements.iter().all(|r| {
            let v = field_value(obj, &r.field);
            (v == r.value) != r.negated
        })
    }

    /// Whether every term is on `metadata.name` or `metadata.namespace` (what an
    /// object's key says, without reading the object).
    pub fn only_names(&self) -> bool {
        self.requirements
            .iter()
            .all(|r| matches!(r.field.as_str(), "metadata.name" | "metadata.namespace"))
    }

    /// The value a term `metadata.name=x` requires, if any (for fast lookups).
    pub fn exact_name(&self) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == "metadata.name" && !r.negated)
            .map(|r| r.value.as_str())
    }
}

/// Field labels the real server accepts in field selectors for `rt`.
pub fn supported_fields(rt: &ResourceType) -> &'static [&'static str] {
    match (rt.group, rt.plural) {
        ("", "nodes") => &["metadata.name", "metadata.namespace", "spec.unschedulable"],
        ("", "namespaces") => &["metadata.name", "metadata.namespace", "status.phase"],
        ("", "secrets") => &["metadata.name", "metadata.namespace", "type"],
        ("", "pods") => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "events") => &[
            "metadata.name",
            "metadata.namespace",
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        _ => &["metadata.name", "metadata.namespace"],
    }
}

/// The string value of a selectable field of `obj`, as upstream's `ToSelectableFields`
/// renders it (missing fields are `""`; booleans `true`/`false`).
pub fn field_value(obj: &Value, field: &str) -> String {
    let ptr = match field {
        "source" => "/source/component".to_string(),
        "spec.unschedulable" | "spec.hostNetwork" => {
            let p = format!("/{}", field.replace('.', "/"));
            return match obj.pointer(&p) {
                Some(Value::Bool(b)) => b.to_string(),
                _ => "false".to_string(),
            };
        }
        "type" if obj.get("kind").and_then(Value::as_str) == Some("Secret") => {
            return obj
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("Opaque")
                .to_string();
        }
        f => format!("/{}", f.replace('.', "/")),
    };
    match obj.pointer(&ptr) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::kinds;
    use serde_json::json;

    fn labels(v: Value) -> Value {
        json!({ "metadata": { "labels": v } })
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).expect(s)
    }

    #[test]
    fn equality_operators() {
        let o = labels(json!({"a": "1", "b": "2"}));
        assert!(sel("a=1").matches_object(&o));
        assert!(sel("a==1").matches_object(&o));
        assert!(!sel("a=2").matches_object(&o));
        assert!(sel("a!=2").matches_object(&o));
        assert!(!sel("a!=1").matches_object(&o));
        assert!(sel("c!=1").matches_object(&o), "!= matches a missing key");
        assert!(sel("a=1,b=2").matches_object(&o));
        assert!(!sel("a=1,b=3").matches_object(&o), "comma is AND");
        assert!(sel(" a = 1 , b == 2 ").matches_object(&o));
        assert!(sel("").matches_object(&o));
        assert!(sel("").is_empty());
    }

    #[test]
    fn set_operators() {
        let o = labels(json!({"env": "prod", "tier": "web"}));
        assert!(sel("env in (prod,dev)").matches_object(&o));
        assert!(!sel("env in (dev)").matches_object(&o));
        assert!(sel("env notin (dev)").matches_object(&o));
        assert!(!sel("env notin (prod)").matches_object(&o));
        assert!(sel("missing notin (x)").matches_object(&o));
        assert!(!sel("missing in (x)").matches_object(&o));
        assert!(sel("env").matches_object(&o));
        assert!(!sel("missing").matches_object(&o));
        assert!(sel("!missing").matches_object(&o));
        assert!(!sel("!env").matches_object(&o));
        assert!(sel("env,tier in (web),!x").matches_object(&o));
        // `in` and `notin` are values inside parentheses.
        let v = labels(json!({"k": "in"}));
        assert!(sel("k in (in,notin)").matches_object(&v));
        let r = &sel("x in (b,a,a)").requirements[0];
        assert_eq!(r.values, vec!["a", "b"]);
        assert_eq!(sel("x in ()").requirements[0].values, vec![""]);
        assert_eq!(sel("x=").requirements[0].values, vec![""]);
        assert!(sel("x=").matches_object(&labels(json!({"x": ""}))));
    }

    #[test]
    fn numeric_operators() {
        let o = labels(json!({"n": "5"}));
        assert!(sel("n>3").matches_object(&o));
        assert!(!sel("n>5").matches_object(&o));
        assert!(sel("n<6").matches_object(&o));
        assert!(!sel("m<6").matches_object(&o));
        assert_eq!(
            LabelSelector::parse("n>x").unwrap_err(),
            "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
    }

    #[test]
    fn requirements_sorted_by_key() {
        let s = sel("b=1,a=2");
        assert_eq!(s.requirements[0].key, "a");
    }

    #[test]
    fn parse_errors() {
        let e = |s: &str| LabelSelector::parse(s).unwrap_err();
        assert_eq!(
            e("a in"),
            "unable to parse requirement: found '' expected: '('"
        );
        assert_eq!(
            e("a in (b"),
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
        assert_eq!(e("a=b c"), "found 'c', expected: ',' or 'end of string'");
        assert_eq!(e("a=1,"), "found '', expected: identifier after ','");
        assert_eq!(
            e(",a"),
            "found ',', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            e("a b"),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            e("!"),
            "unable to parse requirement: found '', expected: identifier"
        );
        assert!(e("a=(").contains("found '(', expected: identifier"));
        assert_eq!(
            e("a=>"),
            "unable to parse requirement: found '>', expected: identifier"
        );
        assert!(e("a=!x").contains("found '!'"));
        let bad_key = e("-a=b");
        assert!(
            bad_key.starts_with("unable to parse requirement: <nil>: Invalid value: \"-a\": name part must consist of alphanumeric characters"),
            "{bad_key}"
        );
        let bad_val = e("a=b$");
        assert!(
            bad_val.starts_with("unable to parse requirement: values[0][a]: Invalid value: \"b$\": a valid label must be an empty string"),
            "{bad_val}"
        );
    }

    #[test]
    fn field_selector_parse_and_match() {
        let fs = FieldSelector::parse("metadata.name=a,metadata.namespace!=kube-system").unwrap();
        assert_eq!(fs.requirements.len(), 2);
        let o = json!({"metadata": {"name": "a", "namespace": "default"}});
        assert!(fs.matches_object(&o));
        let o2 = json!({"metadata": {"name": "a", "namespace": "kube-system"}});
        assert!(!fs.matches_object(&o2));
        assert!(
            FieldSelector::parse("metadata.name==a")
                .unwrap()
                .matches_object(&o)
        );
        assert_eq!(fs.exact_name(), Some("a"));
        assert_eq!(
            FieldSelector::parse("metadata.name").unwrap_err(),
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'"
        );
        let esc = FieldSelector::parse(r"metadata.name=a\,b").unwrap();
        assert_eq!(esc.requirements[0].value, "a,b");
        assert!(FieldSelector::parse("").unwrap().is_empty());
    }

    #[test]
    fn field_selector_supported_labels() {
        assert_eq!(
            FieldSelector::parse_for(kinds::configmaps(), "spec.nodeName=x").unwrap_err(),
            "field label not supported: spec.nodeName"
        );
        let fs =
            FieldSelector::parse_for(kinds::pods(), "spec.nodeName=n1,status.phase!=Succeeded")
                .unwrap();
        let pod =
            json!({"kind": "Pod", "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        assert!(fs.matches_object(&pod));
        let other =
            json!({"kind": "Pod", "spec": {"nodeName": "n2"}, "status": {"phase": "Running"}});
        assert!(!fs.matches_object(&other));
        let fs = FieldSelector::parse_for(kinds::nodes(), "spec.unschedulable=false").unwrap();
        assert!(fs.matches_object(&json!({"spec": {}})));
        assert!(!fs.matches_object(&json!({"spec": {"unschedulable": true}})));
    }
}
