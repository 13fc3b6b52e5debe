//! `kubeletConfigFlagPrecedence`: the flags explicitly set on the command line, re-parsed
//! over the config the file and drop-ins produced, on the JSON form of the config.

use serde_json::{Map, Value};

use super::parse::KubeletFlags;
use super::table::{FlagInfo, ValueKind};
use super::values::ParsedValue;
use crate::duration::Duration;
use crate::quantity::Quantity;

/// A config field whose value a command-line flag changes.
#[derive(Debug, Clone, PartialEq)]
pub struct FlagOverride {
    /// The flag as written: `--max-pods`, `-v`.
    pub flag: String,
    /// The dotted JSON path of the field: `maxPods`, `authentication.webhook.cacheTTL`.
    pub field: String,
    /// What the config had before the flags (`None`: the file did not set it).
    pub file_value: Option<Value>,
    /// What the flag leaves there (`Null`: the flag cleared the field).
    pub flag_value: Value,
}

/// Every config flag on the command line with the field it writes, once each, in
/// command-line order: `("--max-pods", "maxPods")`. Unlike [`apply_flags`] this lists a
/// flag even when it sets the value the file already has.
pub fn config_flags_set(flags: &KubeletFlags) -> Vec<(String, String)> {
    distinct_config_flags(flags)
        .into_iter()
        .filter_map(|f| f.field.map(|field| (f.display_name(), field.to_string())))
        .collect()
}

/// The config flags in order of first appearance.
fn distinct_config_flags(flags: &KubeletFlags) -> Vec<&'static FlagInfo> {
    let mut out: Vec<&'static FlagInfo> = Vec::new();
    for o in flags.applied_occurrences() {
        if o.flag.is_config() && !out.iter().any(|f| f.name == o.flag.name) {
            out.push(o.flag);
        }
    }
    out
}

/// Writes every explicitly set config flag into `config` (the JSON form of a
/// `KubeletConfiguration`, upstream v1beta1 field names) as the kubelet's re-parse does,
/// and reports each field whose value that changes.
///
/// Values are written in the shape the typed decoder reads: durations as Go duration
/// strings (`1m0s`), quantities as upstream prints them (`1e3` kept, `1.5` as `1500m`),
/// maps as objects, lists as arrays, taints as `{key, value, effect}` objects. The
/// occurrences are those the kubelet applies ([`KubeletFlags::applied_occurrences`]: with
/// `--config` or `--config-dir`, its second parse's). Semantics per flag type: scalars, last
/// occurrence wins; map flags, the first occurrence replaces the file's map and later ones
/// merge; `--feature-gates` merges over the file's gates; list flags replace then append;
/// `--vmodule` appends to the file's list; `--register-with-taints` replaces (empty
/// clears); an empty `--address` leaves the field alone.
pub fn apply_flags(config: &mut Value, flags: &KubeletFlags) -> Vec<FlagOverride> {
    let mut overrides = Vec::new();
    for info in distinct_config_flags(flags) {
        let Some(field) = info.field else { continue };
        let values: Vec<&ParsedValue> = flags
            .applied_occurrences()
            .iter()
            .filter(|o| o.flag.name == info.name)
            .map(|o| &o.parsed)
            .collect();
        let old = get_path(config, field).filter(|v| !v.is_null()).cloned();
        let new = match fold(info.kind, old.as_ref(), &values) {
            Outcome::Keep => continue,
            Outcome::Set(v) => Some(v),
            Outcome::Clear => None,
        };
        let changed = !same_value(info.kind, old.as_ref(), new.as_ref());
        match &new {
            Some(v) => set_path(config, field, v.clone()),
            None => remove_path(config, field),
        }
        if changed {
            overrides.push(FlagOverride {
                flag: info.display_name(),
                field: field.to_string(),
                file_value: old,
                flag_value: new.unwrap_or(Value::Null),
            });
        }
    }
    overrides
}

/// What a flag's occurrences do to its field.
enum Outcome {
    /// Nothing (an empty `--address`).
    Keep,
    Set(Value),
    /// The field becomes unset (`--register-with-taints=`).
    Clear,
}

/// The JSON a scalar occurrence writes.
fn scalar_json(v: &ParsedValue) -> Option<Value> {
    match v {
        ParsedValue::Bool(b) => Some(Value::Bool(*b)),
        ParsedValue::Int(i) => Some(Value::from(*i)),
        ParsedValue::Str(s) => Some(Value::String(s.clone())),
        ParsedValue::Duration(d) => Some(Value::String(d.to_string())),
        ParsedValue::Quantity(q) => Some(Value::String(q.go_string())),
        _ => None,
    }
}

/// Replays the occurrences' `Set` calls over the file's value.
fn fold(kind: ValueKind, old: Option<&Value>, values: &[&ParsedValue]) -> Outcome {
    match kind {
        ValueKind::Bool
        | ValueKind::Int32
        | ValueKind::Int64
        | ValueKind::Int
        | ValueKind::Verbosity
        | ValueKind::String
        | ValueKind::Duration
        | ValueKind::Quantity
        | ValueKind::Version => match values.last().and_then(|v| scalar_json(v)) {
            Some(v) => Outcome::Set(v),
            None => Outcome::Keep,
        },
        ValueKind::Ip => {
            // Values after an empty one were refused at parse time.
            match values.iter().rev().find_map(|v| scalar_json(v)) {
                Some(v) => Outcome::Set(v),
                None => Outcome::Keep,
            }
        }
        ValueKind::StringSlice => {
            let items: Vec<Value> = values
                .iter()
                .filter_map(|v| match v {
                    ParsedValue::List(items) => Some(items),
                    _ => None,
                })
                .flatten()
                .map(|s| Value::String(s.clone()))
                .collect();
            Outcome::Set(Value::Array(items))
        }
        ValueKind::MapStringString
        | ValueKind::MapStringStringNoSplit
        | ValueKind::LangleMap
        | ValueKind::LabelMap => {
            let mut map = Map::new();
            for (k, v) in pairs(values) {
                map.insert(k.clone(), Value::String(v.clone()));
            }
            Outcome::Set(Value::Object(map))
        }
        ValueKind::ColonMultimap => {
            let mut map = Map::new();
            for (k, v) in pairs(values) {
                let entry = map
                    .entry(k.clone())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(list) = entry {
                    list.push(Value::String(v.clone()));
                }
            }
            Outcome::Set(Value::Object(map))
        }
        ValueKind::MapStringBool => {
            // The first Set clears the map, then kubeletConfigFlagPrecedence adds back
            // the file's gates the flags did not name: a merge over the file.
            let mut map = match old {
                Some(Value::Object(m)) => m.clone(),
                _ => Map::new(),
            };
            for v in values {
                if let ParsedValue::BoolPairs(pairs) = v {
                    for (k, b) in pairs {
                        map.insert(k.clone(), Value::Bool(*b));
                    }
                }
            }
            Outcome::Set(Value::Object(map))
        }
        ValueKind::VModule => {
            let mut list = match old {
                Some(Value::Array(items)) => items.clone(),
                _ => Vec::new(),
            };
            for v in values {
                if let ParsedValue::VModule(items) = v {
                    for (pattern, level) in items {
                        let mut item = Map::new();
                        item.insert("filePattern".into(), Value::String(pattern.clone()));
                        item.insert("verbosity".into(), Value::from(*level));
                        list.push(Value::Object(item));
                    }
                }
            }
            Outcome::Set(Value::Array(list))
        }
        ValueKind::Taints => match values.last() {
            Some(ParsedValue::Taints(taints)) => Outcome::Set(Value::Array(
                taints
                    .iter()
                    .map(|t| {
                        let mut item = Map::new();
                        item.insert("key".into(), Value::String(t.key.clone()));
                        if !t.value.is_empty() {
                            item.insert("value".into(), Value::String(t.value.clone()));
                        }
                        item.insert("effect".into(), Value::String(t.effect.clone()));
                        Value::Object(item)
                    })
                    .collect(),
            )),
            Some(ParsedValue::Empty) => Outcome::Clear,
            _ => Outcome::Keep,
        },
        ValueKind::ReservedMemory => {
            let mut list: Option<Vec<Value>> = None;
            for v in values {
                match v {
                    ParsedValue::ReservedMemory(reservations) => {
                        let list = list.get_or_insert_with(Vec::new);
                        for r in reservations {
                            let limits: Map<String, Value> = r
                                .limits
                                .iter()
                                .map(|(k, q)| (k.clone(), Value::String(q.go_string())))
                                .collect();
                            let mut item = Map::new();
                            item.insert("numaNode".into(), Value::from(r.numa_node));
                            item.insert("limits".into(), Value::Object(limits));
                            list.push(Value::Object(item));
                        }
                    }
                    // Set("") detaches the flag from the config: nothing after it lands.
                    _ => break,
                }
            }
            match list {
                Some(list) => Outcome::Set(Value::Array(list)),
                None => Outcome::Keep,
            }
        }
    }
}

fn pairs<'a>(values: &[&'a ParsedValue]) -> impl Iterator<Item = &'a (String, String)> {
    values
        .iter()
        .filter_map(|v| match v {
            ParsedValue::Pairs(p) => Some(p),
            _ => None,
        })
        .flatten()
}

/// Whether two values of a field mean the same thing (`1m` and `60s`, `1Gi` and
/// `1024Mi`, `110` and `110.0`, maps in any order).
fn same_value(kind: ValueKind, a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => same_json(kind, a, b),
        _ => false,
    }
}

fn same_json(kind: ValueKind, a: &Value, b: &Value) -> bool {
    if a == b {
        return true;
    }
    match kind {
        ValueKind::Duration => as_duration(a).is_some_and(|x| as_duration(b) == Some(x)),
        ValueKind::Quantity => as_quantity(a).is_some_and(|x| as_quantity(b) == Some(x)),
        ValueKind::Int32 | ValueKind::Int64 | ValueKind::Int | ValueKind::Verbosity => {
            a.as_f64().is_some_and(|x| b.as_f64() == Some(x))
        }
        ValueKind::Taints => normalized_taints(a) == normalized_taints(b),
        ValueKind::ReservedMemory => normalized_reservations(a) == normalized_reservations(b),
        ValueKind::VModule => normalized_vmodule(a) == normalized_vmodule(b),
        _ => false,
    }
}

/// A duration as the file may hold it: a Go duration string, or integer nanoseconds
/// (`TimeOrMetaDuration` in the logging section).
fn as_duration(v: &Value) -> Option<Duration> {
    match v {
        Value::String(s) => Duration::parse(s).ok(),
        Value::Number(n) => n.as_i64().map(Duration::from_nanos),
        _ => None,
    }
}

fn as_quantity(v: &Value) -> Option<Quantity> {
    match v {
        Value::String(s) => Quantity::parse(s).ok(),
        Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
        _ => None,
    }
}

fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Taints as `(key, value, effect, timeAdded)`, a missing value read as `""`.
fn normalized_taints(v: &Value) -> Option<Vec<(String, String, String, String)>> {
    v.as_array().map(|items| {
        items
            .iter()
            .map(|t| {
                (
                    str_field(t, "key").to_string(),
                    str_field(t, "value").to_string(),
                    str_field(t, "effect").to_string(),
                    str_field(t, "timeAdded").to_string(),
                )
            })
            .collect()
    })
}

/// Reservations as `(numaNode, [(resource, nanos)])`.
type Reservation = (i64, Vec<(String, Option<i128>)>);

fn normalized_reservations(v: &Value) -> Option<Vec<Reservation>> {
    v.as_array().map(|items| {
        items
            .iter()
            .map(|r| {
                let numa = r.get("numaNode").and_then(Value::as_i64).unwrap_or(0);
                let mut limits: Vec<(String, Option<i128>)> = r
                    .get("limits")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .map(|(k, q)| (k.clone(), as_quantity(q).map(|q| q.nanos())))
                            .collect()
                    })
                    .unwrap_or_default();
                limits.sort();
                (numa, limits)
            })
            .collect()
    })
}

fn normalized_vmodule(v: &Value) -> Option<Vec<(String, Option<f64>)>> {
    v.as_array().map(|items| {
        items
            .iter()
            .map(|i| {
                (
                    str_field(i, "filePattern").to_string(),
                    i.get("verbosity").and_then(Value::as_f64),
                )
            })
            .collect()
    })
}

fn get_path<'a>(config: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(config, |v, key| v.get(key))
}

/// Sets `path`, creating (or replacing non-object) intermediate objects.
fn set_path(config: &mut Value, path: &str, value: Value) {
    let mut cur = config;
    let mut keys = path.split('.').peekable();
    while let Some(key) = keys.next() {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Value::Object(map) = cur else { return };
        if keys.peek().is_none() {
            map.insert(key.to_string(), value);
            return;
        }
        cur = map
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

fn remove_path(config: &mut Value, path: &str) {
    let (parent, last) = match path.rsplit_once('.') {
        Some((parent, last)) => (
            parent
                .split('.')
                .try_fold(&mut *config, |v, key| v.get_mut(key)),
            last,
        ),
        None => (Some(config), path),
    };
    if let Some(Value::Object(map)) = parent {
        map.remove(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flags(args: &[&str]) -> KubeletFlags {
        match KubeletFlags::parse(args) {
            Ok(f) => f,
            Err(e) => panic!("{args:?}: {e}"),
        }
    }

    fn apply(mut config: Value, args: &[&str]) -> (Value, Vec<FlagOverride>) {
        let overrides = apply_flags(&mut config, &flags(args));
        (config, overrides)
    }

    #[test]
    fn quantities_are_written_as_upstream_prints_them() {
        for (flag, printed) in [
            ("1e3", "1e3"),
            ("1.5", "1500m"),
            ("Ki", "0"),
            ("2048Ki", "2Mi"),
        ] {
            let arg = format!("--log-text-info-buffer-size={flag}");
            let (config, _) = apply(json!({}), &[&arg]);
            assert_eq!(
                config["logging"]["options"]["text"]["infoBufferSize"],
                json!(printed),
                "{flag}"
            );
        }
        let (config, _) = apply(
            json!({}),
            &["--reserved-memory=0:memory=1.5Gi,hugepages-2Mi=1e3"],
        );
        assert_eq!(
            config["reservedMemory"][0]["limits"],
            json!({"memory": "1536Mi", "hugepages-2Mi": "1e3"})
        );
    }

    #[test]
    fn with_a_file_the_second_parse_decides() {
        // --enable-load-reader is a NoOp in the kubelet's second parse: it takes
        // --fail-swap-on=false as its value, and the file's failSwapOn stays.
        let args = [
            "--config=/k.yaml",
            "--enable-load-reader",
            "--fail-swap-on=false",
        ];
        let (config, overrides) = apply(json!({"failSwapOn": true}), &args);
        assert_eq!(config["failSwapOn"], json!(true));
        assert!(overrides.is_empty());
        assert!(config_flags_set(&flags(&args)).is_empty());
        // Without a file the first parse is the one applied.
        let (config, _) = apply(json!({"failSwapOn": true}), &args[1..]);
        assert_eq!(config["failSwapOn"], json!(false));
    }

    #[test]
    fn override_report_carries_old_and_new_values() {
        let (config, overrides) = apply(
            json!({"maxPods": 110, "syncFrequency": "1m"}),
            &[
                "--max-pods=64",
                "--sync-frequency=90s",
                "--cgroup-driver=systemd",
            ],
        );
        assert_eq!(config["maxPods"], json!(64));
        assert_eq!(config["syncFrequency"], json!("1m30s"));
        assert_eq!(config["cgroupDriver"], json!("systemd"));
        assert_eq!(
            overrides,
            vec![
                FlagOverride {
                    flag: "--max-pods".into(),
                    field: "maxPods".into(),
                    file_value: Some(json!(110)),
                    flag_value: json!(64),
                },
                FlagOverride {
                    flag: "--sync-frequency".into(),
                    field: "syncFrequency".into(),
                    file_value: Some(json!("1m")),
                    flag_value: json!("1m30s"),
                },
                FlagOverride {
                    flag: "--cgroup-driver".into(),
                    field: "cgroupDriver".into(),
                    file_value: None,
                    flag_value: json!("systemd"),
                },
            ]
        );
    }

    #[test]
    fn equal_values_are_set_but_not_reported() {
        let f = flags(&[
            "--max-pods=110",
            "--sync-frequency=60s",
            "--fail-swap-on=false",
        ]);
        let mut config = json!({"maxPods": 110, "syncFrequency": "1m", "failSwapOn": false});
        assert!(apply_flags(&mut config, &f).is_empty());
        assert_eq!(config["syncFrequency"], json!("1m0s"));
        assert_eq!(
            config_flags_set(&f),
            vec![
                ("--max-pods".to_string(), "maxPods".to_string()),
                ("--sync-frequency".to_string(), "syncFrequency".to_string()),
                ("--fail-swap-on".to_string(), "failSwapOn".to_string()),
            ]
        );
    }

    #[test]
    fn non_config_flags_do_not_touch_the_config() {
        let original = json!({"maxPods": 110});
        let f = flags(&[
            "--node-ip=10.0.0.5",
            "--hostname-override=n1",
            "--kubeconfig=/k",
            "--config=/c",
            "--node-labels=a=b",
            "--seccomp-default",
            "--maximum-dead-containers=3",
        ]);
        let mut config = original.clone();
        assert!(apply_flags(&mut config, &f).is_empty());
        assert_eq!(config, original);
        assert!(config_flags_set(&f).is_empty());
    }

    #[test]
    fn map_flag_first_occurrence_replaces_then_merges() {
        let (config, overrides) = apply(
            json!({"systemReserved": {"cpu": "1", "memory": "2Gi"}}),
            &[
                "--system-reserved=cpu=500m",
                "--system-reserved=pid=1000,cpu=250m",
            ],
        );
        // The file's memory reservation is gone: the first occurrence replaced the map.
        assert_eq!(
            config["systemReserved"],
            json!({"cpu": "250m", "pid": "1000"})
        );
        assert_eq!(overrides.len(), 1);
        assert_eq!(
            overrides[0].file_value,
            Some(json!({"cpu": "1", "memory": "2Gi"}))
        );
        assert_eq!(
            overrides[0].flag_value,
            json!({"cpu": "250m", "pid": "1000"})
        );

        // An empty value clears the map.
        let (config, _) = apply(json!({"kubeReserved": {"cpu": "1"}}), &["--kube-reserved="]);
        assert_eq!(config["kubeReserved"], json!({}));
    }

    #[test]
    fn eviction_thresholds_parse_langle_pairs() {
        let (config, overrides) = apply(
            json!({"evictionHard": {"memory.available": "100Mi", "nodefs.available": "10%"}}),
            &["--eviction-hard=memory.available<500Mi, imagefs.available<15%"],
        );
        assert_eq!(
            config["evictionHard"],
            json!({"memory.available": "500Mi", "imagefs.available": "15%"})
        );
        assert_eq!(overrides[0].field, "evictionHard");
        assert!(
            KubeletFlags::parse(&["--eviction-hard=memory.available=1Gi"]).is_err_and(|e| e
                .to_string()
                .ends_with("malformed pair, expect string<string"))
        );
    }

    #[test]
    fn same_map_in_another_order_is_not_an_override() {
        let (_, overrides) = apply(
            json!({"evictionHard": {"nodefs.available": "10%", "memory.available": "100Mi"}}),
            &["--eviction-hard=memory.available<100Mi,nodefs.available<10%"],
        );
        assert!(overrides.is_empty(), "{overrides:?}");
    }

    #[test]
    fn feature_gates_merge_over_the_files_gates() {
        let (config, overrides) = apply(
            json!({"featureGates": {"A": true, "B": false}}),
            &["--feature-gates=B=true,C=false", "--feature-gates=D=1"],
        );
        assert_eq!(
            config["featureGates"],
            json!({"A": true, "B": true, "C": false, "D": true})
        );
        assert_eq!(
            overrides[0].file_value,
            Some(json!({"A": true, "B": false}))
        );
        assert!(
            KubeletFlags::parse(&["--feature-gates=A=maybe"]).is_err_and(|e| e
                .to_string()
                .contains("invalid value of A: maybe, err: strconv.ParseBool"))
        );
    }

    #[test]
    fn string_lists_replace_then_append() {
        let (config, _) = apply(
            json!({"clusterDNS": ["10.96.0.10"]}),
            &[
                "--cluster-dns=10.0.0.10,10.0.0.11",
                "--cluster-dns=10.0.0.12",
            ],
        );
        assert_eq!(
            config["clusterDNS"],
            json!(["10.0.0.10", "10.0.0.11", "10.0.0.12"])
        );
    }

    #[test]
    fn nested_fields_are_created() {
        let (config, overrides) = apply(
            json!({}),
            &[
                "--authentication-token-webhook",
                "--authentication-token-webhook-cache-ttl=5m",
                "--anonymous-auth=false",
            ],
        );
        assert_eq!(
            config["authentication"],
            json!({"webhook": {"enabled": true, "cacheTTL": "5m0s"}, "anonymous": {"enabled": false}})
        );
        assert_eq!(overrides.len(), 3);
        assert_eq!(overrides[1].field, "authentication.webhook.cacheTTL");
    }

    #[test]
    fn logging_flags_write_the_logging_section() {
        let (config, overrides) = apply(
            json!({"logging": {"format": "text", "flushFrequency": 5_000_000_000u64, "vmodule": [{"filePattern": "a", "verbosity": 1}]}}),
            &[
                "-v=4",
                "--vmodule=b=2",
                "--log-flush-frequency=5s",
                "--log-text-info-buffer-size=1024Ki",
            ],
        );
        assert_eq!(config["logging"]["verbosity"], json!(4));
        assert_eq!(
            config["logging"]["vmodule"],
            json!([{"filePattern": "a", "verbosity": 1}, {"filePattern": "b", "verbosity": 2}])
        );
        assert_eq!(
            config["logging"]["options"]["text"]["infoBufferSize"],
            json!("1Mi")
        );
        // 5s equals the file's 5e9 nanoseconds: set, not reported.
        let fields: Vec<&str> = overrides.iter().map(|o| o.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "logging.verbosity",
                "logging.vmodule",
                "logging.options.text.infoBufferSize"
            ]
        );
        assert_eq!(overrides[0].flag, "-v");
    }

    #[test]
    fn taints_replace_and_empty_clears() {
        let (config, overrides) = apply(
            json!({"registerWithTaints": [{"key": "old", "effect": "NoSchedule"}]}),
            &["--register-with-taints=dedicated=gpu:NoSchedule,spot:NoExecute"],
        );
        assert_eq!(
            config["registerWithTaints"],
            json!([
                {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                {"key": "spot", "effect": "NoExecute"}
            ])
        );
        assert_eq!(overrides.len(), 1);

        let (config, overrides) = apply(
            json!({"registerWithTaints": [{"key": "old", "effect": "NoSchedule"}]}),
            &["--register-with-taints="],
        );
        assert!(config.get("registerWithTaints").is_none());
        assert_eq!(overrides[0].flag_value, Value::Null);

        // The same taint with an explicit empty value is no change.
        let (_, overrides) = apply(
            json!({"registerWithTaints": [{"key": "a", "value": "", "effect": "NoSchedule"}]}),
            &["--register-with-taints=a:NoSchedule"],
        );
        assert!(overrides.is_empty());
    }

    #[test]
    fn reserved_memory_replaces_then_appends() {
        let (config, _) = apply(
            json!({"reservedMemory": [{"numaNode": 3, "limits": {"memory": "1Gi"}}]}),
            &[
                "--reserved-memory=0:memory=1Gi",
                "--reserved-memory=1:memory=2Gi,hugepages-2Mi=64Mi",
            ],
        );
        assert_eq!(
            config["reservedMemory"],
            json!([
                {"numaNode": 0, "limits": {"memory": "1Gi"}},
                {"numaNode": 1, "limits": {"hugepages-2Mi": "64Mi", "memory": "2Gi"}}
            ])
        );
    }

    #[test]
    fn empty_address_leaves_the_field_alone() {
        let (config, overrides) = apply(json!({"address": "0.0.0.0"}), &["--address="]);
        assert_eq!(config["address"], json!("0.0.0.0"));
        assert!(overrides.is_empty());
        let (config, overrides) = apply(json!({"address": "0.0.0.0"}), &["--address=::"]);
        assert_eq!(config["address"], json!("::"));
        assert_eq!(overrides.len(), 1);
    }

    #[test]
    fn colon_multimap_and_no_split_maps() {
        let (config, _) = apply(
            json!({}),
            &[
                "--manifest-url-header=a:hello,b:again",
                "--manifest-url-header=b:beautiful",
                "--cpu-manager-policy-options=full-pcpus-only=true",
                "--cpu-manager-policy-options=distribute-cpus-across-numa=true",
            ],
        );
        assert_eq!(
            config["staticPodURLHeader"],
            json!({"a": ["hello"], "b": ["again", "beautiful"]})
        );
        assert_eq!(
            config["cpuManagerPolicyOptions"],
            json!({"full-pcpus-only": "true", "distribute-cpus-across-numa": "true"})
        );
    }

    #[test]
    fn durations_and_quantities_compare_by_value() {
        assert!(same_value(
            ValueKind::Duration,
            Some(&json!("1m")),
            Some(&json!("60s"))
        ));
        assert!(!same_value(
            ValueKind::Duration,
            Some(&json!("1m")),
            Some(&json!("61s"))
        ));
        assert!(same_value(
            ValueKind::Quantity,
            Some(&json!("1Gi")),
            Some(&json!("1024Mi"))
        ));
        assert!(same_value(
            ValueKind::Int32,
            Some(&json!(110)),
            Some(&json!(110.0))
        ));
        assert!(!same_value(ValueKind::Int32, None, Some(&json!(0))));
    }

    #[test]
    fn a_non_object_config_becomes_an_object() {
        let (config, overrides) = apply(Value::Null, &["--max-pods=5"]);
        assert_eq!(config, json!({"maxPods": 5}));
        assert_eq!(overrides[0].file_value, None);
    }
}
