//! The effective configuration: what a kubelet actually runs with.
//!
//! The kubelet builds it in this order (cmd/kubelet/app/server.go):
//! 1. the config file (`--config`), decoded strictly and defaulted, its relative paths
//!    resolved against its directory (when its name is an absolute path: the node's
//!    `--config`; see [`resolve_relative_paths`]); without a file, the defaulted empty
//!    config;
//! 2. the drop-in files of `--config-dir` (`*.conf`, walked in lexical order, each a JSON
//!    merge patch over the result so far: maps merge, lists are replaced);
//! 3. the command-line flags that are explicitly set (`kubeletConfigFlagPrecedence`).
//!
//! [`effective`] reproduces that and reports every field a flag overrides, with the value
//! the files gave and the value the flag gives. Validation of the result is separate
//! ([`crate::validation::validate`]), as in the kubelet.

use serde_json::Value;

use crate::decode::{self, DecodeError, SourceMap};
use crate::defaults;
use crate::flags::{self, FlagOverride, KubeletFlags};
use crate::go;
use crate::types::KubeletConfiguration;

/// One input file: a name for messages and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub name: &'a str,
    pub bytes: &'a [u8],
}

impl<'a> Source<'a> {
    pub fn new(name: &'a str, bytes: &'a [u8]) -> Self {
        Source { name, bytes }
    }
}

/// The effective config and how it came about.
#[derive(Debug, Clone)]
pub struct Effective {
    /// Defaults, then the file, then drop-ins, then flags.
    pub config: KubeletConfiguration,
    /// Where each field of the config file is (for `file:line:` messages).
    pub file_map: Option<SourceMap>,
    /// Every config field a flag sets, with the file's value and the flag's value.
    /// Only fields whose value the flag changes.
    pub overrides: Vec<FlagOverride>,
    /// Every config field set by an explicit flag, changed or not: `(flag, field)`.
    pub flag_fields: Vec<(String, String)>,
}

impl Effective {
    /// The kubelet flag that set `field` (a dotted JSON path, `evictionHard.memory.available`)
    /// or one of its ancestors: `--eviction-hard`.
    pub fn flag_of(&self, field: &str) -> Option<&str> {
        self.flag_fields
            .iter()
            .find(|(_, f)| {
                field == f.as_str()
                    || field
                        .strip_prefix(f.as_str())
                        .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
            })
            .map(|(flag, _)| flag.as_str())
    }

    /// `errors` with the line of the config file each is about (its field's, or its nearest
    /// ancestor's; else 1), sorted by line. Each error is located once, and the sort is
    /// stable: the kubelet's order within a line is kept. What `validate` prints, in order.
    pub fn errors_by_line<'e>(
        &self,
        errors: &'e [crate::validation::ValidationError],
    ) -> Vec<(usize, &'e crate::validation::ValidationError)> {
        let line_of = |field: &str| {
            self.file_map
                .as_ref()
                .and_then(|m| m.line_of(field))
                .unwrap_or(1)
        };
        let mut located: Vec<_> = errors.iter().map(|e| (line_of(&e.field), e)).collect();
        located.sort_by_key(|(line, _)| *line);
        located
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EffectiveError {
    /// The config file or a drop-in does not decode.
    #[error(transparent)]
    Decode(Box<DecodeError>),
    /// Flags and drop-ins produced something the model does not accept.
    #[error("failed to build the effective config from {what}: {message}")]
    Merge { what: String, message: String },
}

impl From<DecodeError> for EffectiveError {
    fn from(e: DecodeError) -> Self {
        EffectiveError::Decode(Box::new(e))
    }
}

/// How [`effective_with`] builds the config.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Apply the kubelet's defaults (the kubelet always does; `false` shows only what the
    /// files and flags set).
    pub apply_defaults: bool,
}

/// Builds the effective config, as the kubelet does. `drop_ins` must already be in the
/// kubelet's order (see [`drop_in_order`]).
pub fn effective(
    file: Option<Source<'_>>,
    drop_ins: &[Source<'_>],
    flags: Option<&KubeletFlags>,
) -> Result<Effective, EffectiveError> {
    effective_with(
        file,
        drop_ins,
        flags,
        Options {
            apply_defaults: true,
        },
    )
}

/// [`effective`], with the choice of leaving the defaults out.
pub fn effective_with(
    file: Option<Source<'_>>,
    drop_ins: &[Source<'_>],
    flags: Option<&KubeletFlags>,
    opts: Options,
) -> Result<Effective, EffectiveError> {
    let (base, file_map) = match file {
        Some(src) => {
            let (mut cfg, map) = decode::decode_kubelet_configuration(src.name, src.bytes)?;
            if opts.apply_defaults {
                defaults::set_defaults(&mut cfg);
            }
            if src.name.starts_with('/') {
                resolve_relative_paths(&mut cfg, &go::dir_path(src.name));
            }
            (cfg, Some(map))
        }
        None if opts.apply_defaults => (legacy_defaults(), None),
        None => (KubeletConfiguration::default(), None),
    };
    // The file's own gates, as its loading sets them (a crash there is final).
    let file_gates = file
        .and(base.feature_gates.as_ref())
        .map(crate::features::validate_gates)
        .unwrap_or_default();
    let mut config = base;
    // With --config-dir the kubelet merges even when the directory holds no drop-in.
    let config_dir = flags.is_some_and(|f| f.config_dir().is_some());
    if !drop_ins.is_empty() || config_dir {
        let mut value = to_value(&config, "the config file")?;
        // The kubelet merges over `json.Marshal` of the v1beta1 config, whose lists are
        // all `omitempty`: an empty list the file set is gone before the first drop-in,
        // and defaulting then fills it again (`enforceNodeAllocatable: []` comes back as
        // `["pods"]`).
        prune(
            &mut value,
            &|v| matches!(v, Value::Array(a) if a.is_empty()),
        );
        for src in drop_ins {
            // Each drop-in must itself be a valid (partial) KubeletConfiguration, but for
            // its nulls: a JSON merge patch's removals, which the kubelet (that merges a
            // drop-in as JSON and never decodes it alone) honours anywhere.
            let (patch, map) = decode::decode_value(src.name, src.bytes)?;
            let mut typed = patch.clone();
            prune(&mut typed, &Value::is_null);
            decode::check_type_meta(
                src.name,
                &typed,
                &map,
                crate::types::API_VERSION,
                crate::types::KIND,
            )?;
            decode::from_value::<KubeletConfiguration>(src.name, &typed, &map)?;
            check_drop_in_gates(src.name, &patch)?;
            merge_patch(&mut value, &patch);
        }
        config = from_value(value, "the drop-ins")?;
        if opts.apply_defaults {
            // The kubelet defaults the merged object again (not the eviction step, which
            // belongs to loading the main file).
            defaults::set_object_defaults(&mut config);
        }
    }
    if file.is_some() || !drop_ins.is_empty() || config_dir {
        forget_split_streams(&mut config);
    }
    let (overrides, flag_fields) = match flags {
        Some(f) => {
            // The kubelet's second parse of its command line over the files fails where
            // the first did not (a bare global flag at the end): it exits.
            if let Some(e) = f.precedence_error() {
                return Err(EffectiveError::Merge {
                    what: "the kubelet's flags".into(),
                    message: format!("failed to precedence kubeletConfigFlag: {e}"),
                });
            }
            let mut value = to_value(&config, "the merged config")?;
            let overrides = flags::apply_flags(&mut value, f);
            config = from_value(value, "the kubelet's flags")?;
            (overrides, flags::config_flags_set(f))
        }
        None => (Vec::new(), Vec::new()),
    };
    // Loading the file defaults it, and defaulting sets a copy of the process's gates
    // from the file's featureGates: a bad gate there crashes the kubelet before drop-ins
    // or flags could change it. Validation reports it (with its line) when the final
    // gates still have it; when drop-ins or flags took it away, it is reported here.
    if let (false, Some(src)) = (file_gates.is_empty(), file) {
        let still = config
            .feature_gates
            .as_ref()
            .map(crate::features::validate_gates)
            .unwrap_or_default();
        if still.is_empty() {
            let detail = crate::go::aggregate(&file_gates);
            return Err(EffectiveError::Merge {
                what: src.name.to_string(),
                message: format!(
                    "the kubelet would crash loading this file, before its drop-ins and flags change featureGates: failed to merge global and in-flight KubeletConfiguration while setting defaults, error: {detail}"
                ),
            });
        }
    }
    Ok(Effective {
        config,
        file_map,
        overrides,
        flag_fields,
    })
}

/// What the kubelet's second parse of its command line over the files
/// (`kubeletConfigFlagPrecedence`, which runs whenever it has `--config` or
/// `--config-dir`) does to `logging.options.{text,json}.splitStream`: component-base
/// registers `--log-text-split-stream` and `--log-json-split-stream` with
/// `BoolVar(&field, name, false, ...)`, and registering a flag writes its default into the
/// field, so the files' `true` is lost (and with it the `LoggingAlphaOptions` check a
/// `true` would meet); only the flags can set them.
fn forget_split_streams(config: &mut KubeletConfiguration) {
    let options = config.logging.as_mut().and_then(|l| l.options.as_mut());
    if let Some(options) = options {
        for routing in [options.text.as_mut(), options.json.as_mut()]
            .into_iter()
            .flatten()
        {
            if routing.split_stream == Some(true) {
                routing.split_stream = Some(false);
            }
        }
    }
}

/// The kubelet decodes each drop-in on its own too (`LoadIntoJSON`, into the typed,
/// defaulted v1beta1), and defaulting sets a copy of the process's feature gates from the
/// drop-in's `featureGates` (a null read as `false`): a gate it does not know, a locked
/// gate set otherwise, or a gate whose dependencies are off makes it panic at start,
/// whatever the other files say.
fn check_drop_in_gates(name: &str, patch: &Value) -> Result<(), EffectiveError> {
    let Some(Value::Object(gates)) = patch.get("featureGates") else {
        return Ok(());
    };
    let gates: std::collections::BTreeMap<String, bool> = gates
        .iter()
        .filter_map(|(k, v)| match v {
            Value::Bool(b) => Some((k.clone(), *b)),
            Value::Null => Some((k.clone(), false)),
            _ => None,
        })
        .collect();
    let problems = crate::features::validate_gates(&gates);
    if problems.is_empty() {
        return Ok(());
    }
    let detail = crate::go::aggregate(&problems);
    Err(EffectiveError::Merge {
        what: name.to_string(),
        message: format!(
            "the kubelet would crash defaulting this drop-in on its own (its featureGates, a null read as false): failed to merge global and in-flight KubeletConfiguration while setting defaults, error: {detail}"
        ),
    })
}

/// Removes, at any depth, every object member whose value `drop` picks: Go's `omitempty`
/// on a slice (empty lists), or a merge patch's removals (nulls).
fn prune(value: &mut Value, drop: &dyn Fn(&Value) -> bool) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !drop(v));
            map.values_mut().for_each(|v| prune(v, drop));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| prune(v, drop)),
        _ => {}
    }
}

/// The config file's loader (`configfiles.fsLoader.Load`): each path field of
/// `KubeletConfigurationPathRefs` that is set and relative becomes `filepath.Join(dir,
/// path)` (cleaned). Only the `--config` file's, not the drop-ins' or the flags'. Core does
/// it when it knows where the file is (a source named by an absolute path: the node's
/// `--config`); a file without a place (a pool's file in the repository) keeps its
/// relative paths, and validation then judges them as written.
pub fn resolve_relative_paths(cfg: &mut KubeletConfiguration, dir: &str) {
    let x509 = cfg
        .authentication
        .as_mut()
        .and_then(|a| a.x509.as_mut())
        .map(|x| &mut x.client_ca_file);
    let paths = [
        Some(&mut cfg.static_pod_path),
        x509,
        Some(&mut cfg.tls_cert_file),
        Some(&mut cfg.tls_private_key_file),
        Some(&mut cfg.resolv_conf),
        Some(&mut cfg.volume_plugin_dir),
        Some(&mut cfg.pod_logs_dir),
    ];
    for path in paths.into_iter().flatten() {
        if let Some(p) = path.as_mut()
            && !p.is_empty()
            && !p.starts_with('/')
        {
            *p = go::join_path(dir, p);
        }
    }
}

/// The kubelet's drop-in order: files ending in `.conf`, by path in lexical order
/// (`filepath.WalkDir` walks each directory in lexical order, depth first).
pub fn drop_in_order(mut paths: Vec<String>) -> Vec<String> {
    paths.retain(|p| p.ends_with(".conf"));
    paths.sort_by(|a, b| {
        // WalkDir visits a directory's entries sorted by name; comparing path components
        // reproduces the depth-first lexical walk.
        a.split('/').cmp(b.split('/'))
    });
    paths
}

/// What the kubelet runs with when it has no config file: the defaults, then
/// `applyLegacyDefaults` (cmd/kubelet/app/options/options.go), which keeps the old flag
/// defaults: anonymous auth on, webhook authentication off, AlwaysAllow authorization and
/// the read-only port 10255.
pub fn legacy_defaults() -> KubeletConfiguration {
    let mut cfg = defaults::defaults();
    let authn = cfg.authentication.get_or_insert_with(Default::default);
    authn.anonymous.get_or_insert_with(Default::default).enabled = Some(true);
    authn.webhook.get_or_insert_with(Default::default).enabled = Some(false);
    cfg.authorization.get_or_insert_with(Default::default).mode = Some("AlwaysAllow".into());
    cfg.read_only_port = Some(10255);
    cfg
}

fn from_value(value: Value, what: &str) -> Result<KubeletConfiguration, EffectiveError> {
    serde_json::from_value(value).map_err(|e| EffectiveError::Merge {
        what: what.to_string(),
        message: e.to_string(),
    })
}

fn to_value(cfg: &KubeletConfiguration, what: &str) -> Result<Value, EffectiveError> {
    serde_json::to_value(cfg).map_err(|e| EffectiveError::Merge {
        what: what.to_string(),
        message: e.to_string(),
    })
}

/// RFC 7386 JSON merge patch, as `jsonpatch.MergePatch` applies it: objects merge
/// recursively, `null` removes a key, everything else (lists included) replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let Value::Object(target_map) = target else {
        return;
    };
    for (key, pv) in patch_map {
        if pv.is_null() {
            target_map.remove(key);
        } else {
            let slot = target_map.entry(key.clone()).or_insert(Value::Null);
            merge_patch(slot, pv);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FILE: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 64\nsystemReserved:\n  cpu: 500m\n  memory: 1Gi\nclusterDNS: [10.0.0.10]\n";

    #[test]
    fn merge_patch_follows_rfc7386() {
        let mut t = json!({"a": {"b": 1, "c": 2}, "l": [1, 2], "x": 1});
        merge_patch(
            &mut t,
            &json!({"a": {"b": 9, "c": null}, "l": [3], "y": {"z": 1}}),
        );
        assert_eq!(t, json!({"a": {"b": 9}, "l": [3], "x": 1, "y": {"z": 1}}));
    }

    #[test]
    fn relative_paths_resolve_against_the_config_files_directory() {
        const HEAD: &str =
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
        let file = format!(
            "{HEAD}staticPodPath: manifests\npodLogsDir: ../logs/./pods\nresolvConf: /etc/resolv.conf\nvolumePluginDir: \"\"\nauthentication:\n  x509:\n    clientCAFile: pki/ca.crt\n"
        );
        let drop_in = format!("{HEAD}tlsCertFile: certs/kubelet.crt\n");
        let eff = effective(
            Some(Source::new("/etc/kubernetes/kubelet.yaml", file.as_bytes())),
            &[Source::new(
                "/etc/kubernetes/kubelet.conf.d/10.conf",
                drop_in.as_bytes(),
            )],
            None,
        )
        .unwrap();
        let c = &eff.config;
        assert_eq!(
            c.static_pod_path.as_deref(),
            Some("/etc/kubernetes/manifests")
        );
        assert_eq!(c.pod_logs_dir.as_deref(), Some("/etc/logs/pods"));
        assert_eq!(c.resolv_conf.as_deref(), Some("/etc/resolv.conf"));
        let ca = c.authentication.as_ref().and_then(|a| a.x509.as_ref());
        assert_eq!(
            ca.and_then(|x| x.client_ca_file.as_deref()),
            Some("/etc/kubernetes/pki/ca.crt")
        );
        // A drop-in's paths are not resolved, as the kubelet's merge does not.
        assert_eq!(c.tls_cert_file.as_deref(), Some("certs/kubelet.crt"));
        // A file without a place keeps its paths as written.
        let eff = effective(
            Some(Source::new("pools/a.yaml", file.as_bytes())),
            &[],
            None,
        )
        .unwrap();
        assert_eq!(eff.config.static_pod_path.as_deref(), Some("manifests"));
    }

    #[test]
    fn an_empty_list_of_the_file_is_lost_in_the_drop_in_merge() {
        const HEAD: &str =
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
        let file = format!("{HEAD}enforceNodeAllocatable: []\n");
        let alone = effective(Some(Source::new("k.yaml", file.as_bytes())), &[], None).unwrap();
        assert_eq!(alone.config.enforce_node_allocatable, Some(vec![]));
        let drop_in = format!("{HEAD}maxPods: 50\n");
        let merged = effective(
            Some(Source::new("k.yaml", file.as_bytes())),
            &[Source::new("d/10.conf", drop_in.as_bytes())],
            None,
        )
        .unwrap();
        assert_eq!(
            merged.config.enforce_node_allocatable,
            Some(vec!["pods".to_string()])
        );
        // A drop-in's own empty list stays.
        let drop_in = format!("{HEAD}enforceNodeAllocatable: []\n");
        let merged =
            effective(None, &[Source::new("d/10.conf", drop_in.as_bytes())], None).unwrap();
        assert_eq!(merged.config.enforce_node_allocatable, Some(vec![]));
    }

    #[test]
    fn a_drop_ins_nulls_remove_what_the_file_set() {
        const HEAD: &str =
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
        let file = format!(
            "{HEAD}evictionHard: {{memory.available: 1Gi, nodefs.available: 5%}}\nmaxPods: 50\n"
        );
        let drop_in = format!("{HEAD}evictionHard: {{memory.available: null}}\nmaxPods: null\n");
        let eff = effective(
            Some(Source::new("k.yaml", file.as_bytes())),
            &[Source::new("d/10.conf", drop_in.as_bytes())],
            None,
        )
        .unwrap();
        let hard = eff.config.eviction_hard.unwrap();
        assert_eq!(hard.get("memory.available"), None);
        assert_eq!(hard["nodefs.available"], "5%");
        // Removed, then defaulted again.
        assert_eq!(eff.config.max_pods, Some(110));
        // A null gate is false to the kubelet's own decoding of the drop-in: a locked gate
        // so set crashes it.
        let locked = format!("{HEAD}featureGates: {{KubeletTracing: null}}\n");
        let err =
            effective(None, &[Source::new("d/30.conf", locked.as_bytes())], None).unwrap_err();
        assert!(
            err.to_string()
                .contains("cannot set feature gate KubeletTracing to false"),
            "{err}"
        );
        // A wrong type is still an error, named with its line.
        let bad = format!("{HEAD}maxPods: \"ten\"\n");
        let err = effective(None, &[Source::new("d/20.conf", bad.as_bytes())], None).unwrap_err();
        assert!(err.to_string().contains("d/20.conf:3"), "{err}");
    }

    #[test]
    fn a_bad_gate_of_the_file_crashes_even_when_a_drop_in_removes_it() {
        const HEAD: &str =
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
        let file = format!("{HEAD}featureGates: {{NoSuchGate: true}}\n");
        let drop_in = format!("{HEAD}featureGates: null\n");
        let err = effective(
            Some(Source::new("/etc/k.yaml", file.as_bytes())),
            &[Source::new("/etc/k.d/10.conf", drop_in.as_bytes())],
            None,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("unrecognized feature gate: NoSuchGate"),
            "{err}"
        );
        // Alone, the file builds, and validation reports the gate with its line.
        let alone = effective(Some(Source::new("/etc/k.yaml", file.as_bytes())), &[], None);
        assert!(alone.is_ok());
    }

    #[test]
    fn an_empty_config_dir_still_goes_through_the_merge() {
        const HEAD: &str =
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
        let file = format!("{HEAD}enforceNodeAllocatable: []\n");
        let flags = KubeletFlags::parse(&["--config-dir=/etc/kubernetes/kubelet.conf.d"]).unwrap();
        let eff = effective(
            Some(Source::new("k.yaml", file.as_bytes())),
            &[],
            Some(&flags),
        )
        .unwrap();
        assert_eq!(
            eff.config.enforce_node_allocatable,
            Some(vec!["pods".to_string()])
        );
    }

    #[test]
    fn drop_ins_sorted_like_walkdir() {
        let got = drop_in_order(vec![
            "d/20-b.conf".into(),
            "d/10-a.conf".into(),
            "d/99.yaml".into(),
            "d/10-a/x.conf".into(),
            "d/05.conf".into(),
        ]);
        // WalkDir sorts a directory's entries by name: "10-a" < "10-a.conf", and it
        // descends into "10-a" before visiting "10-a.conf".
        assert_eq!(
            got,
            ["d/05.conf", "d/10-a/x.conf", "d/10-a.conf", "d/20-b.conf"]
        );
    }

    #[test]
    fn defaults_then_file_then_dropins_then_flags() {
        let drop = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 80\nsystemReserved:\n  memory: 2Gi\nclusterDNS: [10.0.0.53]\n";
        let args: Vec<String> = ["--max-pods=100", "--kube-api-qps=20"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let flags = KubeletFlags::parse(&args).unwrap();
        let eff = effective(
            Some(Source::new("kubelet.yaml", FILE.as_bytes())),
            &[Source::new("10.conf", drop.as_bytes())],
            Some(&flags),
        )
        .unwrap();
        let c = &eff.config;
        assert_eq!(c.max_pods, Some(100), "flag wins");
        assert_eq!(c.kube_api_qps, Some(20));
        let sr = c.system_reserved.as_ref().unwrap();
        assert_eq!(
            sr.get("cpu").map(String::as_str),
            Some("500m"),
            "maps merge"
        );
        assert_eq!(
            sr.get("memory").map(String::as_str),
            Some("2Gi"),
            "drop-in wins"
        );
        assert_eq!(
            c.cluster_dns.as_deref(),
            Some(&["10.0.0.53".to_string()][..]),
            "lists replace"
        );
        assert_eq!(c.port, Some(10250), "defaults fill the rest");
        let o: Vec<_> = eff
            .overrides
            .iter()
            .map(|o| (o.field.as_str(), o.file_value.clone(), o.flag_value.clone()))
            .collect();
        assert!(
            o.contains(&("maxPods", Some(json!(80)), json!(100))),
            "{o:?}"
        );
        assert!(
            o.contains(&("kubeAPIQPS", Some(json!(50)), json!(20))),
            "{o:?}"
        );
    }

    #[test]
    fn no_file_means_defaults_and_flags() {
        let args = vec!["--max-pods=10".to_string()];
        let flags = KubeletFlags::parse(&args).unwrap();
        let eff = effective(None, &[], Some(&flags)).unwrap();
        assert_eq!(eff.config.max_pods, Some(10));
        assert_eq!(eff.config.cgroup_driver.as_deref(), Some("cgroupfs"));
        assert_eq!(
            eff.config.read_only_port,
            Some(10255),
            "legacy defaults without --config"
        );
        assert_eq!(
            eff.config
                .authorization
                .as_ref()
                .and_then(|a| a.mode.as_deref()),
            Some("AlwaysAllow")
        );
    }

    #[test]
    fn a_flag_setting_zero_is_not_defaulted_away() {
        let args = vec!["--port=0".to_string()];
        let flags = KubeletFlags::parse(&args).unwrap();
        let eff = effective(
            Some(Source::new("k.yaml", FILE.as_bytes())),
            &[],
            Some(&flags),
        )
        .unwrap();
        assert_eq!(eff.config.port, Some(0));
    }

    #[test]
    fn bad_drop_in_names_the_file() {
        let err = effective(
            Some(Source::new("kubelet.yaml", FILE.as_bytes())),
            &[Source::new("/etc/kubernetes/kubelet.conf.d/20.conf", b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPod: 3\n")],
            None,
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("20.conf") && msg.contains("maxPod"), "{msg}");
    }
}
