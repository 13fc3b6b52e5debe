//! Kubernetes names and labels, checked as apimachinery checks them, with its messages
//! (`k8s.io/apimachinery/pkg/util/validation` and `pkg/api/validate/content`).
//!
//! Each `*_errors` function returns every problem, one message each, in upstream's order;
//! empty means valid. Label keys and values come in two upstream wordings of the same rules
//! ([`Wording`]).

/// Which upstream package's words a label key or value error uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wording {
    /// `util/validation` (`IsQualifiedName`, `IsValidLabelValue`) as it was before it
    /// delegated to `content`: lengths in characters, a bad key is "a qualified name".
    Validation,
    /// `api/validate/content` (`IsLabelKey`, `IsLabelValue`), the API server's: lengths in
    /// bytes, a bad key is "a valid label key".
    Content,
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const LABEL_KEY_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_KEY_NAME_EXAMPLES: &[&str] = &["MyName", "my.name", "123-abc"];
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_MAP_KEY_MSG: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";

/// `IsDNS1123Label` finds nothing wrong with `value`.
pub fn is_dns1123_label(value: &str) -> bool {
    value.len() <= 63 && is_label_shape(value)
}

/// `IsDNS1123Subdomain` finds nothing wrong with `value`.
pub fn is_dns1123_subdomain(value: &str) -> bool {
    value.len() <= 253 && is_subdomain_shape(value)
}

/// `IsDNS1123Label`: a namespace's name, for one.
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63, Wording::Validation));
    }
    if !is_label_shape(value) {
        if is_subdomain_shape(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_MSG,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `IsDNS1123Subdomain`: the name of most objects (a Node, a ConfigMap ...).
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    subdomain_errors(value, Wording::Validation)
}

/// `IsQualifiedName` ([`Wording::Validation`]) or `IsLabelKey` ([`Wording::Content`]):
/// an optional DNS subdomain prefix and `/`, then a name of at most 63 characters.
pub fn label_key_errors(value: &str, wording: Wording) -> Vec<String> {
    let mut errs = Vec::new();
    let name = match value.split_once('/') {
        None => value,
        Some((prefix, name)) if !name.contains('/') => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    subdomain_errors(prefix, wording)
                        .into_iter()
                        .map(|e| format!("prefix part {e}")),
                );
            }
            name
        }
        Some(_) => {
            let what = match wording {
                Wording::Validation => "a qualified name",
                Wording::Content => "a valid label key",
            };
            errs.push(format!(
                "{what} {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_NAME_MSG, LABEL_KEY_NAME_FMT, LABEL_KEY_NAME_EXAMPLES)
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63, wording)));
    }
    if !is_label_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_NAME_MSG,
                LABEL_KEY_NAME_FMT,
                LABEL_KEY_NAME_EXAMPLES
            )
        ));
    }
    errs
}

/// `IsValidLabelValue` ([`Wording::Validation`]) or `IsLabelValue` ([`Wording::Content`]):
/// empty, or at most 63 characters shaped like a label key's name.
pub fn label_value_errors(value: &str, wording: Wording) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63, wording));
    }
    if !value.is_empty() && !is_label_name(value) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `IsConfigMapKey`: a key of a ConfigMap's or Secret's data.
pub fn config_map_key_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253, Wording::Validation));
    }
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if !ok {
        errs.push(regex_error(
            CONFIG_MAP_KEY_MSG,
            CONFIG_MAP_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    if value == "." {
        errs.push("must not be '.'".to_string());
    } else if value == ".." {
        errs.push("must not be '..'".to_string());
    } else if value.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

/// The messages of one check as one, joined with `, `; `None` when there are none.
pub fn joined(errors: Vec<String>) -> Option<String> {
    (!errors.is_empty()).then(|| errors.join(", "))
}

fn subdomain_errors(value: &str, wording: Wording) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253, wording));
    }
    if !is_subdomain_shape(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `MaxLenError` of the package the wording comes from.
fn max_len_error(n: usize, wording: Wording) -> String {
    match wording {
        Wording::Validation => format!("must be no more than {n} characters"),
        Wording::Content => format!("must be no more than {n} bytes"),
    }
}

/// `RegexError`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = msg.to_string();
    s.push_str(" (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push('\'');
        s.push_str(e);
        s.push_str("', ");
    }
    s.push_str("regex used for validation is '");
    s.push_str(fmt);
    s.push_str("')");
    s
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// [`DNS1123_LABEL_FMT`], any length.
fn is_label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_lower_alnum(b[0])
        && is_lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
}

/// [`DNS1123_SUBDOMAIN_FMT`], any length.
fn is_subdomain_shape(s: &str) -> bool {
    s.split('.').all(is_label_shape)
}

/// [`LABEL_KEY_NAME_FMT`], any length.
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUBDOMAIN_REGEX: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const NAME_REGEX: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

    #[test]
    fn dns1123_labels() {
        for ok in ["a", "ab-1", "0", &"a".repeat(63)] {
            assert!(dns1123_label_errors(ok).is_empty(), "{ok}");
            assert!(is_dns1123_label(ok), "{ok}");
        }
        assert_eq!(dns1123_label_errors("a.b"), ["must not contain dots"]);
        assert_eq!(
            dns1123_label_errors("-a"),
            [
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert_eq!(
            dns1123_label_errors(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert_eq!(dns1123_label_errors("").len(), 1);
    }

    #[test]
    fn dns1123_subdomains() {
        for ok in ["a", "a.b-c", "0.1", &"a".repeat(253)] {
            assert!(dns1123_subdomain_errors(ok).is_empty(), "{ok}");
            assert!(is_dns1123_subdomain(ok), "{ok}");
        }
        for bad in ["", "Abc", "a..b", "a.-b", "a_b", "a."] {
            assert_eq!(dns1123_subdomain_errors(bad), [SUBDOMAIN_REGEX], "{bad}");
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
        assert_eq!(
            dns1123_subdomain_errors(&"a".repeat(254)),
            ["must be no more than 253 characters"]
        );
        assert_eq!(
            dns1123_subdomain_errors(&"A".repeat(254)),
            ["must be no more than 253 characters", SUBDOMAIN_REGEX]
        );
    }

    #[test]
    fn label_keys_in_both_wordings() {
        for wording in [Wording::Validation, Wording::Content] {
            for ok in ["a", "example.com/my-key_1.x", "K8s.io", &"a".repeat(63)] {
                assert!(label_key_errors(ok, wording).is_empty(), "{ok}");
            }
            assert_eq!(
                label_key_errors("/a", wording),
                ["prefix part must be non-empty"]
            );
            assert_eq!(
                label_key_errors("a/", wording),
                [
                    "name part must be non-empty".to_string(),
                    format!("name part {NAME_REGEX}")
                ]
            );
            assert_eq!(
                label_key_errors("Bad_Prefix/-x", wording),
                [
                    format!("prefix part {SUBDOMAIN_REGEX}"),
                    format!("name part {NAME_REGEX}")
                ]
            );
        }
        assert_eq!(
            label_key_errors("a/b/c", Wording::Validation),
            [format!(
                "a qualified name {NAME_REGEX} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )]
        );
        assert_eq!(
            label_key_errors("a/b/c", Wording::Content),
            [format!(
                "a valid label key {NAME_REGEX} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )]
        );
        let long = "a".repeat(64);
        assert_eq!(
            label_key_errors(&long, Wording::Validation),
            ["name part must be no more than 63 characters"]
        );
        assert_eq!(
            label_key_errors(&long, Wording::Content),
            ["name part must be no more than 63 bytes"]
        );
        let long_prefix = format!("{}/a", "a".repeat(254));
        assert_eq!(
            label_key_errors(&long_prefix, Wording::Validation),
            ["prefix part must be no more than 253 characters"]
        );
        assert_eq!(
            label_key_errors(&long_prefix, Wording::Content),
            ["prefix part must be no more than 253 bytes"]
        );
    }

    #[test]
    fn label_values_in_both_wordings() {
        for wording in [Wording::Validation, Wording::Content] {
            for ok in ["", "v1.2_x", "A", &"a".repeat(63)] {
                assert!(label_value_errors(ok, wording).is_empty(), "{ok}");
            }
            assert_eq!(
                label_value_errors("-x", wording),
                [
                    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
                ]
            );
        }
        assert_eq!(
            label_value_errors(&"a".repeat(64), Wording::Validation),
            ["must be no more than 63 characters"]
        );
        assert_eq!(
            label_value_errors(&"a".repeat(64), Wording::Content),
            ["must be no more than 63 bytes"]
        );
    }

    #[test]
    fn config_map_keys() {
        assert!(config_map_key_errors("kubelet.yaml").is_empty());
        assert_eq!(config_map_key_errors("..x"), ["must not start with '..'"]);
        assert_eq!(config_map_key_errors(".."), ["must not be '..'"]);
        assert!(config_map_key_errors("a/b")[0].starts_with("a valid config key"));
        assert_eq!(
            config_map_key_errors(&"a".repeat(254)),
            ["must be no more than 253 characters"]
        );
    }

    #[test]
    fn one_message_per_check() {
        assert_eq!(joined(dns1123_subdomain_errors("a")), None);
        assert_eq!(
            joined(dns1123_subdomain_errors(&"A".repeat(254))),
            Some(format!(
                "must be no more than 253 characters, {SUBDOMAIN_REGEX}"
            ))
        );
    }
}
