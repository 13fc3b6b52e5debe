use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::json;

use super::*;

#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Config {
    api_version: Option<String>,
    kind: Option<String>,
    max_pods: Option<i32>,
    enable_server: Option<bool>,
    cgroup_driver: Option<String>,
    system_reserved: Option<BTreeMap<String, String>>,
    eviction_hard: Option<BTreeMap<String, String>>,
    authentication: Option<Authentication>,
    tls_cipher_suites: Option<Vec<String>>,
    register_with_taints: Option<Vec<Taint>>,
    cpu_manager_policy: Option<Policy>,
    pod_pids_limit: Option<i64>,
    container_log_max_size: Option<String>,
    image_gc_high_threshold_percent: Option<u8>,
}

#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Authentication {
    webhook: Option<Webhook>,
    anonymous: Option<Anonymous>,
}

#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Webhook {
    enabled: Option<bool>,
    #[serde(rename = "cacheTTL")]
    cache_ttl: Option<String>,
}

#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Anonymous {
    enabled: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Taint {
    key: String,
    value: Option<String>,
    effect: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
enum Policy {
    #[serde(rename = "none")]
    None,
    #[serde(rename = "static")]
    Static,
}

const FILE: &str = "pools/gpu/kubelet.yaml";

const SAMPLE_YAML: &str = "\
# a pool's kubelet configuration
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
maxPods: 110
enableServer: yes
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
    cacheTTL: 2m0s
evictionHard:
  memory.available: \"100Mi\"
  nodefs.available: 10%
systemReserved: {cpu: 500m, memory: 1Gi}
tlsCipherSuites:
- TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
- TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
- 'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256'
registerWithTaints:
  - key: gpu
    effect: NoSchedule
  - key: dedicated
    value: ml
    effect: NoExecute
cpuManagerPolicy: static
podPidsLimit: 0x1000
";

const SAMPLE_JSON: &str = "{\n\
\t\"apiVersion\": \"kubelet.config.k8s.io/v1beta1\",\n\
\t\"kind\": \"KubeletConfiguration\",\n\
\t\"maxPods\": 110,\n\
\t\"enableServer\": true,\n\
\t\"authentication\": {\n\
\t\t\"anonymous\": {\"enabled\": false},\n\
\t\t\"webhook\": {\n\
\t\t\t\"enabled\": true,\n\
\t\t\t\"cacheTTL\": \"2m0s\"\n\
\t\t}\n\
\t},\n\
\t\"evictionHard\": {\"memory.available\": \"100Mi\", \"nodefs.available\": \"10%\"},\n\
\t\"systemReserved\": {\"cpu\": \"500m\", \"memory\": \"1Gi\"},\n\
\t\"tlsCipherSuites\": [\n\
\t\t\"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\",\n\
\t\t\"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384\",\n\
\t\t\"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\"\n\
\t],\n\
\t\"registerWithTaints\": [\n\
\t\t{\"key\": \"gpu\", \"effect\": \"NoSchedule\"},\n\
\t\t{\"key\": \"dedicated\", \"value\": \"ml\", \"effect\": \"NoExecute\"}\n\
\t],\n\
\t\"cpuManagerPolicy\": \"static\",\n\
\t\"podPidsLimit\": 4096\n\
}\n";

fn yaml_err(text: &str) -> DecodeError {
    match decode_strict::<Config>(FILE, text.as_bytes()) {
        Ok((config, _)) => panic!("expected an error for {text:?}, decoded {config:?}"),
        Err(e) => e,
    }
}

fn value_err(text: &str) -> DecodeError {
    match decode_value(FILE, text.as_bytes()) {
        Ok((value, _)) => panic!("expected an error for {text:?}, decoded {value}"),
        Err(e) => e,
    }
}

fn decode(text: &str) -> (Config, SourceMap) {
    match decode_strict::<Config>(FILE, text.as_bytes()) {
        Ok(decoded) => decoded,
        Err(e) => panic!("decoding {text:?} failed: {e}"),
    }
}

fn expected_sample() -> Config {
    Config {
        api_version: Some("kubelet.config.k8s.io/v1beta1".into()),
        kind: Some("KubeletConfiguration".into()),
        max_pods: Some(110),
        enable_server: Some(true),
        authentication: Some(Authentication {
            webhook: Some(Webhook {
                enabled: Some(true),
                cache_ttl: Some("2m0s".into()),
            }),
            anonymous: Some(Anonymous {
                enabled: Some(false),
            }),
        }),
        eviction_hard: Some(BTreeMap::from([
            ("memory.available".into(), "100Mi".into()),
            ("nodefs.available".into(), "10%".into()),
        ])),
        system_reserved: Some(BTreeMap::from([
            ("cpu".into(), "500m".into()),
            ("memory".into(), "1Gi".into()),
        ])),
        tls_cipher_suites: Some(vec![
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into(),
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384".into(),
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".into(),
        ]),
        register_with_taints: Some(vec![
            Taint {
                key: "gpu".into(),
                value: None,
                effect: "NoSchedule".into(),
            },
            Taint {
                key: "dedicated".into(),
                value: Some("ml".into()),
                effect: "NoExecute".into(),
            },
        ]),
        cpu_manager_policy: Some(Policy::Static),
        pod_pids_limit: Some(4096),
        ..Config::default()
    }
}

// ---- decoding what is valid ----

#[test]
fn yaml_decodes_into_nested_types() {
    let (config, _) = decode(SAMPLE_YAML);
    assert_eq!(config, expected_sample());
}

#[test]
fn json_decodes_to_the_same_config() {
    let (config, _) = decode(SAMPLE_JSON);
    assert_eq!(config, expected_sample());
}

#[test]
fn yaml_source_map_points_at_nested_keys_and_list_items() {
    let (_, map) = decode(SAMPLE_YAML);
    let at = |path: &str| map.get(path).map(|p| (p.line, p.column));
    assert_eq!(at("maxPods"), Some((4, 1)));
    assert_eq!(at("authentication"), Some((6, 1)));
    assert_eq!(at("authentication.webhook"), Some((9, 3)));
    assert_eq!(at("authentication.webhook.cacheTTL"), Some((11, 5)));
    assert_eq!(at("evictionHard.memory.available"), Some((13, 3)));
    assert_eq!(at("systemReserved.memory"), Some((15, 29)));
    assert_eq!(at("tlsCipherSuites[0]"), Some((17, 3)));
    assert_eq!(at("tlsCipherSuites[2]"), Some((19, 3)));
    assert_eq!(at("registerWithTaints[1]"), Some((23, 5)));
    assert_eq!(at("registerWithTaints[1].effect"), Some((25, 5)));
    assert_eq!(at("podPidsLimit"), Some((27, 1)));
    assert_eq!(at(""), Some((2, 1)));
}

#[test]
fn json_source_map_points_at_keys_and_items() {
    let (_, map) = decode(SAMPLE_JSON);
    let at = |path: &str| map.get(path).map(|p| (p.line, p.column));
    // The 1-based column of `needle` on 1-based `line` of the sample (all ASCII).
    let col = |line: usize, needle: &str| {
        let text = SAMPLE_JSON.lines().nth(line - 1).unwrap();
        (line, text.find(needle).unwrap() + 1)
    };
    assert_eq!(at("maxPods"), Some(col(4, "\"maxPods")));
    assert_eq!(at("maxPods"), Some((4, 2)));
    assert_eq!(
        at("authentication.webhook.cacheTTL"),
        Some(col(10, "\"cacheTTL"))
    );
    assert_eq!(
        at("authentication.anonymous.enabled"),
        Some(col(7, "\"enabled"))
    );
    assert_eq!(
        at("evictionHard.nodefs.available"),
        Some(col(13, "\"nodefs"))
    );
    assert_eq!(at("tlsCipherSuites[2]"), Some(col(18, "\"TLS")));
    assert_eq!(
        at("registerWithTaints[1].effect"),
        Some(col(22, "\"effect"))
    );
    assert_eq!(at(""), Some((1, 1)));
}

#[test]
fn line_of_falls_back_to_the_nearest_ancestor() {
    let (_, map) = decode(SAMPLE_YAML);
    assert_eq!(map.line_of("evictionHard.memory.available"), Some(13));
    // Absent sub-key: the map that should hold it.
    assert_eq!(map.line_of("evictionHard.imagefs.available"), Some(12));
    assert_eq!(
        map.line_of("authentication.webhook.cacheUnauthorizedTTL"),
        Some(9)
    );
    assert_eq!(map.line_of("tlsCipherSuites[7]"), Some(16));
    assert_eq!(map.line_of("registerWithTaints[0].value"), Some(21));
    // An absent top-level field has no line; the root is not a fallback.
    assert_eq!(map.line_of("shutdownGracePeriod"), None);
}

#[test]
fn join_helpers_build_source_map_paths() {
    assert_eq!(join_key("", "evictionHard"), "evictionHard");
    assert_eq!(
        join_key("evictionHard", "memory.available"),
        "evictionHard.memory.available"
    );
    assert_eq!(join_index("tlsCipherSuites", 2), "tlsCipherSuites[2]");
    assert_eq!(
        join_key(&join_index("registerWithTaints", 1), "effect"),
        "registerWithTaints[1].effect"
    );
}

#[test]
fn yaml_1_1_scalars_become_what_the_kubelet_sees() {
    let (value, _) = decode_value(
        FILE,
        b"a: yes\nb: off\nc: 0755\nd: 1_000\ne: 110.0\nf: ~\ng: '0755'\nh: 1e3\ni: 10.0.0.1\n",
    )
    .unwrap();
    assert_eq!(
        value,
        json!({"a": true, "b": false, "c": 493, "d": 1000, "e": 110, "f": null,
               "g": "0755", "h": 1000, "i": "10.0.0.1"})
    );
    // An integral float is an integer for the kubelet, as after Go's json.Marshal.
    let (config, _) = decode("maxPods: 110.0\n");
    assert_eq!(config.max_pods, Some(110));
}

#[test]
fn non_string_keys_become_strings() {
    let (value, _) = decode_value(FILE, b"m:\n  1: a\n  0x10: b\n  on: c\n  1.5: d\n").unwrap();
    assert_eq!(
        value,
        json!({"m": {"1": "a", "16": "b", "true": "c", "1.5": "d"}})
    );
    let e = value_err("m:\n  ~: a\n");
    assert!(e.message.contains("null"), "{e}");
}

#[test]
fn anchors_aliases_and_merge_keys() {
    let text = "\
base: &base
  cpu: 100m
  memory: 1Gi
other: &other {pid: '100'}
systemReserved:
  <<: [*base, *other]
  memory: 2Gi
kubeReserved: *base
";
    let (value, map) = decode_value(FILE, text.as_bytes()).unwrap();
    assert_eq!(
        value["systemReserved"],
        json!({"memory": "2Gi", "cpu": "100m", "pid": "100"})
    );
    assert_eq!(
        value["kubeReserved"],
        json!({"cpu": "100m", "memory": "1Gi"})
    );
    assert_eq!(map.line_of("systemReserved.memory"), Some(7));
    // Merged keys point at the merge.
    assert_eq!(map.line_of("systemReserved.cpu"), Some(6));
    assert_eq!(map.line_of("kubeReserved.cpu"), Some(8));
}

#[test]
fn a_merge_value_must_be_a_mapping() {
    let e = value_err("a:\n  <<: 5\n");
    assert!(e.message.contains("merge key"), "{e}");
    assert_eq!(e.line, Some(2));
}

#[test]
fn utf8_bom_and_trailing_document_markers_are_accepted() {
    let (config, _) = decode("\u{feff}maxPods: 5\n");
    assert_eq!(config.max_pods, Some(5));
    let (config, _) = decode("---\nmaxPods: 5\n...\n");
    assert_eq!(config.max_pods, Some(5));
    let (config, _) = decode("maxPods: 5\n---\n");
    assert_eq!(config.max_pods, Some(5));
}

#[test]
fn core_tags_are_honoured_and_others_rejected() {
    let (value, _) = decode_value(FILE, b"a: !!str 1\nb: !!int '7'\nc: ! yes\n").unwrap();
    assert_eq!(value, json!({"a": "1", "b": 7, "c": "yes"}));
    let e = value_err("a: !secret x\n");
    assert!(e.message.contains("!secret"), "{e}");
    assert_eq!((e.line, e.field.as_deref()), (Some(1), Some("a")));
    let e = value_err("a: !!int abc\n");
    assert!(e.message.contains("!!int"), "{e}");
}

// ---- what is rejected ----

#[test]
fn misspelled_field_suggests_the_known_one() {
    let e = yaml_err("maxPods: 10\nsytemReserved:\n  cpu: 100m\n");
    assert_eq!(e.field.as_deref(), Some("sytemReserved"));
    assert_eq!(e.suggestion.as_deref(), Some("systemReserved"));
    assert_eq!((e.line, e.column), (Some(2), Some(1)));
    assert_eq!(
        e.to_string(),
        "pools/gpu/kubelet.yaml:2:1: sytemReserved: unknown field \"sytemReserved\" \
         (did you mean `systemReserved`?)"
    );
}

#[test]
fn misspelled_nested_field_has_its_path_and_line() {
    let e = yaml_err(
        "authentication:\n  anonymous:\n    enabled: false\n  webhok:\n    enabled: true\n",
    );
    assert_eq!(e.field.as_deref(), Some("authentication.webhok"));
    assert_eq!(e.suggestion.as_deref(), Some("webhook"));
    assert_eq!((e.line, e.column), (Some(4), Some(3)));

    let e = yaml_err(
        "{\n  \"authentication\": {\n    \"webhook\": {\n      \"cacheTtl\": \"1m\"\n    }\n  }\n}\n",
    );
    assert_eq!(e.field.as_deref(), Some("authentication.webhook.cacheTtl"));
    assert_eq!(e.suggestion.as_deref(), Some("cacheTTL"));
    assert_eq!((e.line, e.column), (Some(4), Some(7)));
}

#[test]
fn flag_spelling_suggests_the_config_field() {
    let e = yaml_err("max-pods: 10\n");
    assert_eq!(e.suggestion.as_deref(), Some("maxPods"));
}

#[test]
fn unrelated_unknown_field_gets_no_suggestion() {
    let e = yaml_err("maxPods: 10\nfoo: bar\n");
    assert_eq!(e.field.as_deref(), Some("foo"));
    assert_eq!(e.suggestion, None);
    assert_eq!(
        e.to_string(),
        "pools/gpu/kubelet.yaml:2:1: foo: unknown field \"foo\""
    );
}

#[test]
fn unknown_enum_value_lists_the_values_and_suggests() {
    let e = yaml_err("cpuManagerPolicy: statc\n");
    assert_eq!(e.field.as_deref(), Some("cpuManagerPolicy"));
    assert!(e.message.contains("none, static"), "{e}");
    assert_eq!(e.suggestion.as_deref(), Some("static"));
    assert_eq!(e.line, Some(1));
}

#[test]
fn duplicate_keys_are_rejected_at_every_level() {
    let e = value_err("maxPods: 10\nkind: x\nmaxPods: 20\n");
    assert_eq!((e.line, e.column), (Some(3), Some(1)));
    assert_eq!(e.field.as_deref(), Some("maxPods"));
    assert!(e.message.contains("duplicate key \"maxPods\""), "{e}");
    assert!(e.message.contains("line 1"), "{e}");

    let e = value_err("evictionHard:\n  memory.available: 1Gi\n  memory.available: 2Gi\n");
    assert_eq!(e.field.as_deref(), Some("evictionHard.memory.available"));
    assert_eq!(e.line, Some(3));

    let e = value_err("registerWithTaints:\n- key: a\n  key: b\n");
    assert_eq!(e.field.as_deref(), Some("registerWithTaints[0].key"));
    assert_eq!(e.line, Some(3));

    // Keys that differ in YAML but not in JSON (`on` and `true` are both "true").
    let e = value_err("m:\n  on: a\n  true: b\n");
    assert!(e.message.contains("duplicate"), "{e}");

    // JSON too.
    let e = value_err("{\"a\": {\"b\": 1,\n \"b\": 2}}");
    assert_eq!(e.field.as_deref(), Some("a.b"));
    assert_eq!(e.line, Some(2));
    assert!(
        e.message
            .contains("duplicate key \"b\" (first set at line 1)"),
        "{e}"
    );
}

#[test]
fn wrong_types_say_what_was_expected() {
    let e = yaml_err("maxPods: \"110\"\n");
    assert_eq!(e.field.as_deref(), Some("maxPods"));
    assert_eq!(e.line, Some(1));
    assert!(e.message.contains("expected an integer (int32)"), "{e}");
    assert!(e.message.contains("string \"110\""), "{e}");
    assert!(e.message.contains("remove the quotes"), "{e}");

    // The kubelet rejects `cpu: 1` in a map of strings: YAML gives a number.
    let e = yaml_err("systemReserved:\n  cpu: 1\n");
    assert_eq!(e.field.as_deref(), Some("systemReserved.cpu"));
    assert_eq!((e.line, e.column), (Some(2), Some(3)));
    assert!(
        e.message.contains("expected a string, got integer 1"),
        "{e}"
    );
    assert!(e.message.contains("quote"), "{e}");

    let e = yaml_err("enableServer: \"true\"\n");
    assert!(
        e.message.contains("remove the quotes to make it a boolean"),
        "{e}"
    );
    let e = yaml_err("enableServer: \"maybe\"\n");
    assert!(!e.message.contains("remove the quotes"), "{e}");
    let e = yaml_err("maxPods: \"many\"\n");
    assert!(!e.message.contains("remove the quotes"), "{e}");

    let e = yaml_err("cgroupDriver: yes\n");
    assert!(e.message.contains("got boolean true"), "{e}");
    assert!(e.message.contains("booleans"), "{e}");

    let e = yaml_err("tlsCipherSuites: TLS_AES_128_GCM_SHA256\n");
    assert!(e.message.contains("expected a list"), "{e}");

    let e = yaml_err("authentication: []\n");
    assert!(e.message.contains("expected a mapping"), "{e}");
    // serde's derived structs would take a list of their fields in order; Go does not.
    let e = yaml_err("authentication: [{}, {}]\n");
    assert_eq!(e.message, "wrong type: expected a mapping, got a list");

    let e = yaml_err("imageGcHighThresholdPercent: 300\n");
    assert_eq!(e.field.as_deref(), Some("imageGcHighThresholdPercent"));
    assert!(e.message.contains("uint8"), "{e}");

    let e = yaml_err("registerWithTaints:\n- key: a\n");
    assert_eq!(e.field.as_deref(), Some("registerWithTaints[0]"));
    assert!(
        e.message.contains("missing required field \"effect\""),
        "{e}"
    );
    assert_eq!(e.line, Some(2));

    // In a JSON file an integral float stays a float, as for Go's encoding/json.
    let e = yaml_err("{\"maxPods\": 110.0}");
    assert!(e.message.contains("int32"), "{e}");
}

#[test]
fn empty_files_are_rejected() {
    for text in [
        "",
        "   \n\t\n",
        "# only a comment\n\n# another\n",
        "---\n",
        "--- # c\n...\n",
        "~\n",
    ] {
        let e = value_err(text);
        assert!(e.message.contains("empty"), "{text:?}: {e}");
        assert_eq!(e.file, FILE);
    }
}

#[test]
fn binary_files_are_rejected() {
    let e = value_err("maxPods: 1\nfoo\0bar\n");
    assert!(e.message.contains("binary"), "{e}");
    assert_eq!((e.line, e.column), (Some(2), Some(4)));

    let mut bytes = b"maxPods: 1\nname: caf".to_vec();
    bytes.extend_from_slice(&[0xC3, 0x28]);
    let e = decode_value(FILE, &bytes).unwrap_err();
    assert!(e.message.contains("UTF-8"), "{e}");
    assert_eq!((e.line, e.column), (Some(2), Some(10)));

    // UTF-16 has NUL bytes.
    let utf16: Vec<u8> = "maxPods: 1\n"
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    assert!(decode_value(FILE, &utf16).is_err());
}

#[test]
fn oversized_files_are_rejected_naming_the_file_and_limit() {
    let mut text = String::from("systemReserved:\n");
    while text.len() <= 2 * 1024 * 1024 {
        text.push_str("  k0000000000000000000: v\n");
    }
    let e = decode_strict::<Config>(FILE, text.as_bytes()).unwrap_err();
    let shown = e.to_string();
    assert!(shown.starts_with("pools/gpu/kubelet.yaml: "), "{shown}");
    assert!(shown.contains("1048576"), "{shown}");
    assert!(shown.contains(&text.len().to_string()), "{shown}");
    // Exactly at the limit is still read.
    let at_limit = format!("{}\n", "#".repeat(MAX_FILE_BYTES - 1));
    assert!(value_err(&at_limit).message.contains("empty"));
}

#[test]
fn multiple_documents_are_rejected() {
    let e = value_err("maxPods: 1\n---\nmaxPods: 2\n");
    assert_eq!(e.line, Some(2));
    assert!(e.message.contains("second YAML document"), "{e}");
    let e = value_err("maxPods: 1\n--- {}\n");
    assert!(e.message.contains("second YAML document"), "{e}");
    let e = value_err("maxPods: 1\n---\n---\nkind: x\n");
    assert_eq!(e.line, Some(3));
    // JSON: one object per file.
    let e = value_err("{\"maxPods\": 1}\n{\"maxPods\": 2}\n");
    assert!(e.message.contains("trailing"), "{e}");
    assert_eq!(e.line, Some(2));
}

#[test]
fn top_level_must_be_a_mapping() {
    for (text, found) in [
        ("- a\n- b\n", "a list"),
        ("just words\n", "a string"),
        ("[1, 2]\n", "a list"),
        ("42\n", "a number"),
    ] {
        let e = value_err(text);
        assert!(e.message.contains("top level must be a mapping"), "{e}");
        assert!(e.message.contains(found), "{text:?}: {e}");
        assert_eq!(e.line, Some(1));
    }
}

#[test]
fn syntax_errors_have_positions() {
    let e = value_err("maxPods: 1\nauthentication:\n\twebhook: {}\n");
    assert!(e.message.starts_with("invalid YAML"), "{e}");
    assert_eq!(e.line, Some(3));

    let e = value_err("a: [1, 2\nb: 3\n");
    assert!(e.message.starts_with("invalid YAML"), "{e}");

    let e = value_err("{\n  \"maxPods\": 1\n  \"kind\": \"x\"\n}\n");
    assert!(e.message.starts_with("invalid JSON"), "{e}");
    assert_eq!(e.line, Some(3));

    // YAML flow syntax in a file that starts with `{` is not JSON: the kubelet's JSON
    // decoder rejects it, so do we.
    let e = value_err("{maxPods: 1}\n");
    assert!(e.message.starts_with("invalid JSON"), "{e}");
}

#[test]
fn non_finite_numbers_are_rejected() {
    let e = value_err("a:\n  b: .nan\n");
    assert_eq!(e.field.as_deref(), Some("a.b"));
    assert_eq!(e.line, Some(2));
    assert!(e.message.contains("NaN"), "{e}");
}

#[test]
fn json_strings_numbers_and_whitespace() {
    let text = "{\"a\":\t\"x\\/y\\u00e9\\ud83d\\ude00\\n\",\r\n\"b\": 18446744073709551615, \"c\": -5, \"d\": 1e400000}";
    let e = value_err(text);
    assert!(e.message.contains("invalid JSON"), "{e}");
    let text = "{\"a\":\t\"x\\/y\\u00e9\\ud83d\\ude00\\n\",\r\n\"b\": 18446744073709551615, \"c\": -5, \"d\": 123456789012345678901234567890}";
    let (value, map) = decode_value(FILE, text.as_bytes()).unwrap();
    assert_eq!(value["a"], json!("x/y\u{e9}\u{1F600}\n"));
    assert_eq!(value["b"], json!(18_446_744_073_709_551_615_u64));
    assert_eq!(value["c"], json!(-5));
    assert!(value["d"].is_f64());
    assert_eq!(map.get("b").map(|p| p.line), Some(2));
    // An escaped key is found under its decoded name.
    let (_, map) = decode_value(FILE, b"{\"m\": {\n\"a\\u002eb\": 1}}").unwrap();
    assert_eq!(map.line_of("m.a.b"), Some(2));
}

#[test]
fn deep_nesting_is_rejected_without_overflowing_the_stack() {
    for text in [
        "[".repeat(10_000),
        format!("a: {}", "[".repeat(10_000)),
        "{".repeat(10_000),
        format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000)),
        format!("{{\"a\": {}", "[".repeat(10_000)),
        "{\"a\":".repeat(10_000),
        "- ".repeat(10_000),
        (0..500).map(|i| format!("{}k:\n", " ".repeat(i))).collect(),
    ] {
        let e = value_err(&text);
        assert!(e.line.is_some(), "{e}");
        assert!(
            e.message.contains("nested deeper") || e.message.starts_with("invalid"),
            "{e}"
        );
    }
}

#[test]
fn nesting_limit_is_exact() {
    // MAX_DEPTH nested mappings decode; one more does not.
    let nested = |depth: usize| -> String {
        (0..depth)
            .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
            .collect::<String>()
            + &"  ".repeat(depth)
            + "leaf: 1\n"
    };
    assert!(decode_value(FILE, nested(MAX_DEPTH - 1).as_bytes()).is_ok());
    let e = value_err(&nested(MAX_DEPTH));
    assert!(e.message.contains("nested deeper than 64"), "{e}");
    assert_eq!(e.line, Some(MAX_DEPTH + 1));

    let json_nested = |depth: usize| "{\"a\":".repeat(depth) + "1" + &"}".repeat(depth);
    assert!(decode_value(FILE, json_nested(MAX_DEPTH).as_bytes()).is_ok());
    let e = value_err(&json_nested(MAX_DEPTH + 1));
    assert!(e.message.contains("nested deeper than 64"), "{e}");
}

#[test]
fn aliases_cannot_nest_deeper_than_the_limit() {
    let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    // Each part is shallow enough; the alias puts one inside the other.
    let text = format!(
        "a: &x {}\nb: {}*x{}\n",
        deep(40),
        "[".repeat(30),
        "]".repeat(30)
    );
    let e = value_err(&text);
    assert!(e.message.contains("through aliases"), "{e}");
    assert_eq!(e.line, Some(2));
    // The same alias one level up fits.
    let text = format!(
        "a: &x {}\nb: {}*x{}\n",
        deep(40),
        "[".repeat(20),
        "]".repeat(20)
    );
    assert!(decode_value(FILE, text.as_bytes()).is_ok());
}

#[test]
fn alias_bombs_are_stopped_by_the_budget() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        text.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    let e = value_err(&text);
    assert!(e.message.contains("expands to more than"), "{e}");
    assert!(e.line.is_some());
}

// ---- apiVersion and kind ----

const API: &str = "kubelet.config.k8s.io/v1beta1";
const KIND: &str = "KubeletConfiguration";

fn document_err(text: &str) -> DecodeError {
    decode_document::<Config>(FILE, text.as_bytes(), API, KIND).unwrap_err()
}

#[test]
fn type_meta_is_checked_for_documents() {
    let (config, _) = decode_document::<Config>(FILE, SAMPLE_YAML.as_bytes(), API, KIND).unwrap();
    assert_eq!(config, expected_sample());

    let e = document_err(
        "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n",
    );
    assert_eq!(
        e.to_string(),
        "pools/gpu/kubelet.yaml:2:1: kind: kind is \"KubeProxyConfiguration\", expected \"KubeletConfiguration\""
    );

    let e =
        document_err("apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n");
    assert_eq!(e.field.as_deref(), Some("apiVersion"));
    assert_eq!(e.line, Some(1));
    assert_eq!(
        e.message,
        "apiVersion \"kubelet.config.k8s.io/v1alpha1\" is not supported, expected \"kubelet.config.k8s.io/v1beta1\""
    );

    let e = document_err("maxPods: 10\n");
    assert!(e.message.starts_with("kind is missing"), "{e}");
    assert_eq!(e.line, None);

    let e = document_err("kind: KubeletConfiguration\nmaxPods: 10\n");
    assert!(e.message.starts_with("apiVersion is missing"), "{e}");

    let e = document_err("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfigration\n");
    assert_eq!(e.suggestion.as_deref(), Some(KIND));
    let e = document_err("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n");
    assert_eq!(e.suggestion, None);

    let e = document_err("apiVersion: 1\nkind: KubeletConfiguration\n");
    assert!(e.message.contains("must be a string"), "{e}");
}

#[test]
fn fragments_decode_without_type_meta() {
    let (config, _) = decode("maxPods: 250\nevictionHard:\n  memory.available: 500Mi\n");
    assert_eq!(config.max_pods, Some(250));
    let (value, map) = decode_value(FILE, b"maxPods: 250\n").unwrap();
    assert!(check_type_meta(FILE, &value, &map, API, KIND).is_err());
}

#[test]
fn from_value_decodes_a_merged_tree() {
    let (mut base, map) = decode_value(FILE, SAMPLE_YAML.as_bytes()).unwrap();
    base["maxPods"] = json!(250);
    let config: Config = from_value(FILE, &base, &map).unwrap();
    assert_eq!(config.max_pods, Some(250));
}

// ---- error display ----

#[test]
fn display_leaves_out_unknown_parts() {
    let e = DecodeError::new("f.yaml", "boom");
    assert_eq!(e.to_string(), "f.yaml: boom");
    let e = e.with_field("a.b");
    assert_eq!(e.to_string(), "f.yaml: a.b: boom");
    let e = e.at(Position { line: 3, column: 7 }).with_suggestion("ab");
    assert_eq!(e.to_string(), "f.yaml:3:7: a.b: boom (did you mean `ab`?)");
    let e = DecodeError {
        column: None,
        field: None,
        ..e
    };
    assert_eq!(e.to_string(), "f.yaml:3: boom (did you mean `ab`?)");
}

#[test]
fn closest_is_only_offered_when_close() {
    let fields = [
        "systemReserved",
        "kubeReserved",
        "maxPods",
        "cgroupsPerQOS",
        "podPidsLimit",
    ];
    assert_eq!(closest("sytemReserved", &fields), Some("systemReserved"));
    assert_eq!(closest("kubeReserve", &fields), Some("kubeReserved"));
    assert_eq!(closest("cgroupsPerQos", &fields), Some("cgroupsPerQOS"));
    assert_eq!(closest("max_pods", &fields), Some("maxPods"));
    assert_eq!(closest("pods", &fields), None);
    assert_eq!(closest("x", &fields), None);
    assert_eq!(closest("reserved", &fields), None);
}

// ---- robustness ----

/// A small deterministic generator, so failures reproduce.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

/// The fast YAML path either gives up or agrees with the full parser exactly. Returns
/// whether it took the input.
fn fast_path_agrees(text: &str) -> bool {
    match fast_yaml::parse(FILE, text) {
        None => false,
        Some(fast) => {
            let full = yaml::parse(FILE, text);
            assert_eq!(Ok(fast), full, "the fast path differs on {text:?}");
            true
        }
    }
}

fn never_panics(bytes: &[u8]) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        fast_path_agrees(text);
    }
    let typed = decode_strict::<Config>(FILE, bytes);
    let untyped = decode_value(FILE, bytes);
    if let Err(e) = &typed {
        assert_eq!(e.file, FILE);
        assert!(!e.message.is_empty());
        let _ = e.to_string();
    }
    if let Err(e) = &untyped {
        assert_eq!(e.file, FILE);
    }
    let _ = decode_document::<Config>(FILE, bytes, API, KIND);
}

#[test]
fn garbage_and_truncated_input_never_panics() {
    let seeds: Vec<Vec<u8>> = vec![
        SAMPLE_YAML.as_bytes().to_vec(),
        SAMPLE_JSON.as_bytes().to_vec(),
        b"a: &x [*x]\n".to_vec(),
        b"? [a, b]\n: c\n".to_vec(),
        b"{\"a\": \"\\ud800\"}".to_vec(),
        b"a: !!binary aGVsbG8=\n".to_vec(),
        b"%YAML 1.2\n---\na: 1\n".to_vec(),
        b"a: |\n  text\n b: 1\n".to_vec(),
        b"&a a: *a\n".to_vec(),
        b"<<: {a: 1}\n<<: {b: 2}\n".to_vec(),
        b"a: *nope\n".to_vec(),
        b"\"\\".to_vec(),
        b"{\"a\": [1, {\"b\": }]}".to_vec(),
    ];
    let mut rng = Lcg(0x5eed);
    for seed in &seeds {
        for end in 0..=seed.len() {
            never_panics(&seed[..end]);
        }
        for _ in 0..600 {
            let mut mutated = seed.clone();
            for _ in 0..1 + rng.next() % 4 {
                if mutated.is_empty() {
                    break;
                }
                let at = (rng.next() as usize) % mutated.len();
                let pool = b"{}[]:,-&*!|>'\"#\n \t\\?%@`0a\x00\xff";
                let byte = pool[(rng.next() as usize) % pool.len()];
                match rng.next() % 4 {
                    0 => mutated[at] = byte,
                    1 => mutated.insert(at, byte),
                    2 => {
                        let chars = [
                            "\u{e9}",
                            "\u{85}",
                            "\u{2028}",
                            "\u{feff}",
                            "\u{a0}",
                            "\u{1F600}",
                            "\u{7f}",
                        ];
                        let c = chars[(rng.next() as usize) % chars.len()].as_bytes();
                        for (k, b) in c.iter().enumerate() {
                            mutated.insert(at + k, *b);
                        }
                    }
                    _ => {
                        mutated.remove(at);
                    }
                }
            }
            never_panics(&mutated);
        }
    }
    for _ in 0..500 {
        let len = (rng.next() % 64) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        never_panics(&bytes);
    }
}

#[test]
fn fast_path_takes_ordinary_configs_and_agrees_with_the_full_parser() {
    assert!(fast_path_agrees(SAMPLE_YAML));
    for text in [
        "a: 1\n",
        "---\na: 1\n",
        "--- # comment\na: 1\n",
        "  a: 1\n  b: 2\n",
        "a:\n- x\n- y\nb: 1\n",
        "a:\n  - x\n  -   y\nb:\n",
        "list:\n- name: a\n  args:\n  - x\n  - y\n  sub:\n    k: v\n- name: b\n",
        "a: 'it''s'\nb: \"tab\\there \\u00e9 \\x41\"\nc: \"\"\nd: ''\n",
        "\"quoted key\": 1\n'single key': 2\n",
        "a: [x, 'y', \"z\", [1, 2], {k: v}]\nb: {}\nc: []\nd: {a: [1], \"b\": c}\n",
        "a: [x, y,]\n",
        "url: unix:///run/containerd/containerd.sock\nb: a:b\nc: x#y\n",
        "a: b # comment: with colon\nc: [1, 2] # trailing\n",
        "a: yes\nb: 0755\nc: 1_000\nd: 110.0\ne: ~\nf: -1\ng: 10%\nh: 1e3\n",
        "on: 1\n1: 2\n0x10: 3\n",
        "café: ünïcode\nb: [é, ü]\n",
        "a:\n\n  # comment between\n  b: 1\n\n\nc: 2\n",
        "a: 1\n...\n",
        "a:\n  b:\n    c:\n      d: 1\n",
        "a: \"x: y\"\n",
        "a: -\n",
        "k: a b c\n",
    ] {
        let taken = fast_path_agrees(text);
        // Most of these are the fast path's to take; it may give up only on a few.
        let must_take = !text.contains("...") && !text.contains("a: -\n");
        assert!(taken || !must_take, "the fast path gave up on {text:?}");
    }
}

#[test]
fn fast_path_gives_up_on_what_it_does_not_handle() {
    for text in [
        "a: &x 1\nb: *x\n",
        "a: !!str 1\n",
        "a: |\n  text\n",
        "a: >\n  text\n",
        "a: b\n  continued\n",
        "a: [1,\n  2]\n",
        "a: 'multi\n  line'\n",
        "<<: {a: 1}\n",
        "a:\tb\n",
        "a: 1\r\nb: 2\r\n",
        "%YAML 1.2\n---\na: 1\n",
        "a: 1\n---\nb: 2\n",
        "? a\n: b\n",
        "- a\n- b\n",
        "a: 1\na: 2\n",
        "a: b: c\n",
        "a: .nan\n",
        "",
        "# only a comment\n",
        "a: \"\\ud83d\\ude00\"\n",
    ] {
        assert!(
            fast_yaml::parse(FILE, text).is_none(),
            "the fast path took {text:?}"
        );
        // And the full path still decides it as before.
        let _ = yaml::parse(FILE, text);
    }
}

/// Random configuration-like YAML: nested block mappings and sequences, flow collections,
/// quoted and plain scalars with the characters that make YAML tricky.
fn random_yaml(rng: &mut Lcg) -> String {
    fn pick<'a>(rng: &mut Lcg, items: &[&'a str]) -> &'a str {
        items[(rng.next() as usize) % items.len()]
    }
    fn scalar(rng: &mut Lcg) -> String {
        let atoms = [
            "a",
            "b c",
            "100Mi",
            "10%",
            "0755",
            "1_000",
            "yes",
            "off",
            "~",
            "null",
            "1e3",
            "-1",
            ".5",
            "x:y",
            "x#y",
            "http://h:1/p",
            "-x",
            "?x",
            ":x",
            "a: b",
            "a #c",
            "[x]",
            "{y}",
            "x,y",
            "'q'",
            "\"d\"",
            "it's",
            "tab\\t",
            "é",
            "",
            " ",
            "@x",
            "`x",
            "%x",
            "&a",
            "*a",
            "!t",
            "|",
            ">",
            "#",
            "-",
            "- x",
            "x:",
            "1:2",
            "0x1F",
            "true",
            ".inf",
            "2024-01-02",
        ];
        let body = pick(rng, &atoms).to_string();
        match rng.next() % 4 {
            0 => format!("\"{}\"", body.replace('\\', "\\\\").replace('"', "\\\"")),
            1 => format!("'{}'", body.replace('\'', "''")),
            _ => body,
        }
    }
    fn flow(rng: &mut Lcg, depth: usize) -> String {
        let n = rng.next() % 4;
        let items: Vec<String> = (0..n)
            .map(|_| {
                if depth < 2 && rng.next().is_multiple_of(4) {
                    flow(rng, depth + 1)
                } else {
                    scalar(rng)
                }
            })
            .collect();
        if rng.next().is_multiple_of(2) {
            format!("[{}]", items.join(pick(rng, &[", ", ",", " , "])))
        } else {
            let pairs: Vec<String> = items
                .iter()
                .enumerate()
                .map(|(i, v)| format!("k{i}{}{v}", pick(rng, &[": ", ":", " : "])))
                .collect();
            format!("{{{}}}", pairs.join(", "))
        }
    }
    fn block(rng: &mut Lcg, out: &mut String, indent: usize, depth: usize, seq: bool) {
        let n = 1 + rng.next() % 4;
        let pad = " ".repeat(indent);
        for i in 0..n {
            if rng.next().is_multiple_of(8) {
                out.push_str(pick(
                    rng,
                    &["\n", "# comment\n", "  # indented comment\n", " \n"],
                ));
            }
            let key = if seq {
                "- ".to_string()
            } else {
                let key = match rng.next() % 10 {
                    0 => scalar(rng),
                    1 => "<<".to_string(),
                    _ => format!("key{}", i + (rng.next() % 2) * 7),
                };
                format!("{key}:")
            };
            out.push_str(&pad);
            out.push_str(&key);
            match rng.next() % 6 {
                0 | 1 if depth < 4 => {
                    let nested_seq = rng.next().is_multiple_of(2);
                    if seq {
                        // A compact mapping in the item, or a nested block on the next line.
                        if rng.next().is_multiple_of(2) {
                            out.push_str(&format!("k: {}\n", scalar(rng)));
                            block(rng, out, indent + 2, depth + 1, false);
                        } else {
                            out.push('\n');
                            block(rng, out, indent + 2, depth + 1, nested_seq);
                        }
                    } else {
                        out.push_str(pick(rng, &["\n", " # c\n", "  \n"]));
                        let step = if nested_seq && rng.next().is_multiple_of(2) {
                            0
                        } else {
                            2
                        };
                        block(rng, out, indent + step, depth + 1, nested_seq);
                    }
                }
                2 => {
                    out.push(' ');
                    out.push_str(&flow(rng, 0));
                    out.push_str(pick(rng, &["\n", " # c\n", "\n  continued\n"]));
                }
                3 if !seq => out.push('\n'),
                _ => {
                    out.push(' ');
                    out.push_str(&scalar(rng));
                    out.push_str(pick(rng, &["\n", " # c\n", "#c\n", "\n", "\n"]));
                }
            }
        }
    }
    let mut out = String::new();
    if rng.next().is_multiple_of(4) {
        out.push_str(pick(rng, &["---\n", "--- # c\n", "# header\n"]));
    }
    block(rng, &mut out, 0, 0, false);
    if rng.next().is_multiple_of(8) {
        out.push_str(pick(rng, &["...\n", "---\n", "---\nx: 1\n"]));
    }
    out
}

#[test]
fn fast_path_agrees_with_the_full_parser_on_random_documents() {
    let mut rng = Lcg(42);
    let mut taken = 0;
    let total = 5000;
    for _ in 0..total {
        let text = random_yaml(&mut rng);
        if fast_path_agrees(&text) {
            taken += 1;
        }
    }
    // The generator is mostly ordinary YAML: the comparison must have had work to do.
    assert!(
        taken > total / 10,
        "the fast path took only {taken} of {total}"
    );
}
