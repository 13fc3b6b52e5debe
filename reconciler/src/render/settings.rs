//! `kubelet-gitops.yaml`: the repository settings (`kind: RepoSettings`), the rollout
//! fields shared by the settings' defaults and each pool's `spec.rollout`, and the
//! include/exclude globs.

use std::time::Duration;

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use kubelet_gitops_core::decode::{self, Position, SourceMap, join_index, join_key};
use kubelet_gitops_core::disruption::Overrides;
use kubelet_gitops_core::names;
use kubelet_gitops_core::types::KubeletConfiguration;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use super::error::{RepoError, decode_part};
use crate::model::{IntOrPercent, Rollout};
use crate::rollout::wave::Waves;
use crate::rollout::window::{self, AppliesTo, Maintenance, Window};

/// The file holding the repository settings, relative to the config root.
pub const SETTINGS_FILE: &str = "kubelet-gitops.yaml";
/// How many ConfigMaps per pool garbage collection keeps by default.
pub const DEFAULT_KEEP_CONFIGMAPS: usize = 5;
/// The most globs each of `spec.include` and `spec.exclude` of the settings file may
/// list, and the most each of `--include` and `--exclude` may give. Compiling a glob set
/// takes time that grows with its globs (1.1 to 1.5 s for 30,000 globs in 1 MiB, 0.2 s
/// for 1,000), so more is an error decided before anything is compiled; a few globs with
/// `*`, `**` or `{a,b}` select any set of files.
pub const MAX_GLOBS: usize = 256;
/// The longest glob, in bytes, for the same reason as [`MAX_GLOBS`].
pub const MAX_GLOB_BYTES: usize = 256;

/// The repository settings (`kubelet-gitops.yaml`, kind `RepoSettings`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoSettings {
    /// The settings file, relative to the repository root, when there is one.
    pub source_path: Option<String>,
    /// Where the ConfigMaps live. Default `kubelet-gitops`.
    pub namespace: String,
    /// ConfigMaps kept per pool by garbage collection (besides any a node names).
    /// Default 5.
    pub keep_configmaps: usize,
    /// The rollout every pool starts from; a pool's `spec.rollout` overrides it field by
    /// field.
    pub rollout_defaults: Rollout,
    /// The include globs in force (the settings', then the command line's; `**` when
    /// both are empty).
    pub include: Vec<String>,
    /// The exclude globs in force (the settings', then the command line's).
    pub exclude: Vec<String>,
    /// What pools may not do.
    pub policy: Policy,
    /// The disruption class of fields, over the built-in ones (`spec.disruption.classes`);
    /// a pool's own go over these.
    pub disruption: Overrides,
}

impl Default for RepoSettings {
    fn default() -> Self {
        RepoSettings {
            source_path: None,
            namespace: DEFAULT_NAMESPACE.to_string(),
            keep_configmaps: DEFAULT_KEEP_CONFIGMAPS,
            rollout_defaults: Rollout::default(),
            include: vec!["**".to_string()],
            exclude: Vec::new(),
            policy: Policy::default(),
            disruption: Overrides::default(),
        }
    }
}

/// Repository policy: rules the settings impose on every pool file, so that the owners of
/// `kubelet-gitops.yaml` and `base/` (CODEOWNERS, branch protection) keep control over
/// fields that pool owners must not change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// KubeletConfiguration field paths a pool's `spec.kubelet` may not set, in the
    /// config's JSON names. A path forbids its whole subtree: `authentication` forbids
    /// `authentication.webhook.enabled`; `featureGates.CPUManager` forbids one gate.
    pub forbidden_pool_fields: Vec<String>,
}

/// The API version of `RepoSettings` and `NodePool` documents.
pub const API_VERSION: &str = "kubelet-gitops.io/v1alpha1";
/// The kind of `kubelet-gitops.yaml`.
pub const SETTINGS_KIND: &str = "RepoSettings";
/// The kind of a pool file.
pub const POOL_KIND: &str = "NodePool";
/// The namespace of the ConfigMaps when the settings name none.
pub const DEFAULT_NAMESPACE: &str = "kubelet-gitops";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsDoc {
    // Checked by `check_type_meta` before this struct is decoded.
    #[serde(rename = "apiVersion")]
    _api_version: IgnoredAny,
    #[serde(rename = "kind")]
    _kind: IgnoredAny,
    #[serde(default)]
    spec: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SettingsSpec {
    namespace: Option<String>,
    include: Option<Vec<String>>,
    exclude: Option<Vec<String>>,
    keep_config_maps: Option<usize>,
    rollout: Option<Value>,
    policy: Option<PolicyDoc>,
    disruption: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PolicyDoc {
    forbidden_pool_fields: Option<Vec<String>>,
}

/// `rollout` as written (settings' `spec.rollout`, a pool's `spec.rollout`): every field
/// optional, checked by [`resolve_rollout`].
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RolloutDoc {
    max_unavailable: Option<Value>,
    canary: Option<u32>,
    paused: Option<bool>,
    health_timeout: Option<String>,
    lkg_grace: Option<String>,
    maintenance: Option<MaintenanceDoc>,
    waves: Option<WavesDoc>,
    drain: Option<String>,
    drain_timeout: Option<String>,
    drain_force: Option<bool>,
}

/// `rollout.maintenance` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct MaintenanceDoc {
    applies_to: Option<String>,
    windows: Option<Vec<WindowDoc>>,
}

/// One of `rollout.maintenance.windows`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct WindowDoc {
    days: Option<Vec<String>>,
    start: Option<String>,
    duration: Option<String>,
    time_zone: Option<String>,
}

/// `rollout.waves` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct WavesDoc {
    by: Option<String>,
    soak: Option<String>,
    jitter: Option<String>,
}

/// The longest `waves.jitter`.
pub const MAX_JITTER: Duration = Duration::from_secs(3600);

/// Decodes and checks the settings file. `None` when it does not decode at all (the
/// errors are in `errors`); otherwise the settings, with a default in place of each field
/// that is wrong (and reported).
pub(super) fn decode(
    path: &str,
    bytes: &[u8],
    errors: &mut Vec<RepoError>,
) -> Option<(RepoSettings, Globs)> {
    let (value, map) = match decode::decode_value(path, bytes) {
        Ok(v) => v,
        Err(e) => {
            errors.push(e.into());
            return None;
        }
    };
    if let Err(e) = decode::check_type_meta(path, &value, &map, API_VERSION, SETTINGS_KIND) {
        errors.push(e.into());
        return None;
    }
    let doc: SettingsDoc = match decode_part(path, &value, &map, "") {
        Ok(d) => d,
        Err(e) => {
            errors.push(e);
            return None;
        }
    };
    let spec: SettingsSpec = match &doc.spec {
        None | Some(Value::Null) => SettingsSpec::default(),
        Some(v) => match decode_part(path, v, &map, "spec") {
            Ok(s) => s,
            Err(e) => {
                errors.push(e);
                return None;
            }
        },
    };

    let mut settings = RepoSettings {
        source_path: Some(path.to_string()),
        ..RepoSettings::default()
    };
    if let Some(ns) = spec.namespace {
        match names::joined(names::dns1123_label_errors(&ns)) {
            None => settings.namespace = ns,
            Some(m) => errors.push(RepoError::at_field(
                path,
                &map,
                "spec.namespace",
                format!("invalid namespace {ns:?}: {m}"),
            )),
        }
    }
    match spec.keep_config_maps {
        Some(0) => errors.push(RepoError::at_field(
            path,
            &map,
            "spec.keepConfigMaps",
            "must be at least 1: the ConfigMap a pool rolls out must be kept even when no \
             node names it yet",
        )),
        Some(keep) => settings.keep_configmaps = keep,
        None => {}
    }
    if let Some(v) = spec.rollout.as_ref().filter(|v| !v.is_null()) {
        match decode_part::<RolloutDoc>(path, v, &map, "spec.rollout") {
            Ok(doc) => {
                settings.rollout_defaults = resolve_rollout(
                    path,
                    &map,
                    "spec.rollout",
                    &doc,
                    &Rollout::default(),
                    errors,
                );
            }
            Err(e) => errors.push(e),
        }
    }
    let forbidden = spec
        .policy
        .and_then(|p| p.forbidden_pool_fields)
        .unwrap_or_default();
    for (i, field) in forbidden.iter().enumerate() {
        let at = join_index("spec.policy.forbiddenPoolFields", i);
        match check_field_path(path, field) {
            Ok(()) => settings.policy.forbidden_pool_fields.push(field.clone()),
            Err(m) => errors.push(RepoError::at_field(path, &map, at, m)),
        }
    }

    if let Some(v) = &spec.disruption {
        settings.disruption = super::disruption::decode(path, &map, "spec.disruption", v, errors);
    }

    let mut problems = Vec::new();
    for (list, globs) in [("include", &spec.include), ("exclude", &spec.exclude)] {
        let count = globs.as_ref().map_or(0, Vec::len);
        if count > MAX_GLOBS {
            problems.push(RepoError::at_field(
                path,
                &map,
                join_key("spec", list),
                too_many_globs(count),
            ));
        }
    }
    let origin = |list: &str, i: usize| Origin {
        file: path.to_string(),
        field: join_index(&join_key("spec", list), i),
        position: map.get(&join_index(&join_key("spec", list), i)),
    };
    let globs = Globs {
        include: spec
            .include
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, p)| (p, origin("include", i)))
            .collect(),
        exclude: spec
            .exclude
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, p)| (p, origin("exclude", i)))
            .collect(),
        problems,
    };
    Some((settings, globs))
}

/// A KubeletConfiguration field path as the policy names it: non-empty, its first
/// segment a field of the config (misspellings get the closest field).
pub(super) fn check_field_path(file: &str, field: &str) -> Result<(), String> {
    let top = field.split(['.', '[']).next().unwrap_or_default();
    if top.is_empty() {
        return Err(format!(
            "invalid field path {field:?}: expected a KubeletConfiguration field such as \
             `cgroupDriver` or `featureGates.CPUManager`"
        ));
    }
    let probe = serde_json::json!({ top: null });
    decode::from_value::<KubeletConfiguration>(file, &probe, &SourceMap::new())
        .map(|_| ())
        .map_err(|e| {
            let hint = e
                .suggestion
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            format!("{top:?} is not a KubeletConfiguration field{hint}")
        })
}

/// The rollout `doc` sets over `base`, each bad value reported at `prefix.<field>` and
/// left at `base`'s value.
pub(super) fn resolve_rollout(
    file: &str,
    map: &SourceMap,
    prefix: &str,
    doc: &RolloutDoc,
    base: &Rollout,
    errors: &mut Vec<RepoError>,
) -> Rollout {
    let mut out = base.clone();
    let mut fail = |field: &str, message: String| {
        errors.push(RepoError::at_field(
            file,
            map,
            join_key(prefix, field),
            message,
        ));
    };
    if let Some(v) = &doc.max_unavailable {
        match parse_max_unavailable(v) {
            Ok(m) => out.max_unavailable = m,
            Err(m) => fail("maxUnavailable", m),
        }
    }
    if let Some(c) = doc.canary {
        out.canary = c;
    }
    if let Some(p) = doc.paused {
        out.paused = p;
    }
    if let Some(s) = &doc.health_timeout {
        match parse_duration(s) {
            Ok(d) => out.health_timeout = d,
            Err(m) => fail("healthTimeout", m),
        }
    }
    if let Some(s) = &doc.lkg_grace {
        match parse_duration(s) {
            Ok(d) => out.lkg_grace = d,
            Err(m) => fail("lkgGrace", m),
        }
    }
    if let Some(d) = &doc.drain {
        match crate::rollout::drain::DrainMode::parse(d) {
            Ok(m) => out.drain.mode = m,
            Err(m) => fail("drain", m),
        }
    }
    if let Some(s) = &doc.drain_timeout {
        match parse_duration(s) {
            Ok(d) => out.drain.timeout = d,
            Err(m) => fail("drainTimeout", m),
        }
    }
    if let Some(f) = doc.drain_force {
        out.drain.force = f;
    }
    if let Some(m) = &doc.maintenance {
        let at = join_key(prefix, "maintenance");
        if let Some(m) = resolve_maintenance(file, map, &at, m, errors) {
            out.maintenance = Some(m);
        }
    }
    if let Some(w) = &doc.waves {
        let at = join_key(prefix, "waves");
        if let Some(w) = resolve_waves(file, map, &at, w, errors) {
            out.waves = Some(w);
        }
    }
    out
}

/// `maintenance`, checked; `None` when anything is wrong (reported).
fn resolve_maintenance(
    file: &str,
    map: &SourceMap,
    prefix: &str,
    doc: &MaintenanceDoc,
    errors: &mut Vec<RepoError>,
) -> Option<Maintenance> {
    let before = errors.len();
    let mut fail = |field: String, message: String| {
        errors.push(RepoError::at_field(file, map, field, message));
    };
    let applies_to = match doc.applies_to.as_deref() {
        None | Some("drain") => AppliesTo::Drain,
        Some("all") => AppliesTo::All,
        Some(other) => {
            fail(
                join_key(prefix, "appliesTo"),
                format!(
                    "invalid value {other:?}: expected `drain` (only drain-class changes wait \
                     for a window) or `all` (every change does)"
                ),
            );
            AppliesTo::Drain
        }
    };
    let list = join_key(prefix, "windows");
    let docs = doc.windows.as_deref().unwrap_or_default();
    if docs.is_empty() {
        fail(
            list.clone(),
            "at least one window is required (days, start, duration, timeZone); remove \
             `maintenance` to roll out at any time"
                .to_string(),
        );
    }
    let mut windows = Vec::new();
    for (i, w) in docs.iter().enumerate() {
        let at = join_index(&list, i);
        let mut missing = |name: &str| {
            fail(
                join_key(&at, name),
                format!("{name} is required in a window"),
            )
        };
        let (Some(day_list), Some(start), Some(duration)) = (&w.days, &w.start, &w.duration) else {
            if w.days.is_none() {
                missing("days");
            }
            if w.start.is_none() {
                missing("start");
            }
            if w.duration.is_none() {
                missing("duration");
            }
            continue;
        };
        let mut days = [false; 7];
        if day_list.is_empty() {
            fail(
                join_key(&at, "days"),
                "no day: list at least one (Mon ... Sun, or a range such as Mon-Fri)".into(),
            );
        }
        for (j, d) in day_list.iter().enumerate() {
            match window::parse_days(std::slice::from_ref(d)) {
                Ok(one) => (0..7).for_each(|k| days[k] |= one[k]),
                Err(m) => fail(join_index(&join_key(&at, "days"), j), m),
            }
        }
        let start = window::parse_start(start)
            .map_err(|m| fail(join_key(&at, "start"), m))
            .ok();
        let duration = window::parse_duration(duration)
            .map_err(|m| fail(join_key(&at, "duration"), m))
            .ok();
        let zone_name = w.time_zone.clone().unwrap_or_else(|| "UTC".to_string());
        let zone = window::parse_zone(&zone_name)
            .map_err(|m| fail(join_key(&at, "timeZone"), m))
            .ok();
        if let (Some(start), Some(duration), Some(zone)) = (start, duration, zone) {
            windows.push(Window {
                days,
                start,
                duration,
                zone_name,
                zone,
            });
        }
    }
    (errors.len() == before).then_some(Maintenance {
        applies_to,
        windows,
    })
}

/// `waves`, checked; `None` when anything is wrong (reported).
fn resolve_waves(
    file: &str,
    map: &SourceMap,
    prefix: &str,
    doc: &WavesDoc,
    errors: &mut Vec<RepoError>,
) -> Option<Waves> {
    let before = errors.len();
    let mut fail = |field: &str, message: String| {
        errors.push(RepoError::at_field(
            file,
            map,
            join_key(prefix, field),
            message,
        ));
    };
    let mut out = Waves::default();
    if let Some(by) = &doc.by {
        let problems = names::label_key_errors(by, names::Wording::Validation);
        if problems.is_empty() {
            out.by = by.clone();
        } else {
            fail(
                "by",
                format!("invalid label key {by:?}: {}", problems.join("; ")),
            );
        }
    }
    let span = |s: &str| -> Result<Duration, String> {
        humantime::parse_duration(s.trim())
            .map_err(|e| format!("invalid duration {s:?}: {e} (write e.g. 30s, 10m or 1h)"))
    };
    if let Some(s) = &doc.soak {
        match span(s) {
            Ok(d) => out.soak = d,
            Err(m) => fail("soak", m),
        }
    }
    if let Some(s) = &doc.jitter {
        match span(s) {
            Ok(d) if d > MAX_JITTER => fail(
                "jitter",
                format!("invalid duration {s:?}: jitter is at most 1h (it spreads a wave's start)"),
            ),
            Ok(d) => out.jitter = d,
            Err(m) => fail("jitter", m),
        }
    }
    (errors.len() == before).then_some(out)
}

/// `maxUnavailable`: a count or a percentage, at least 1 (or 1%).
fn parse_max_unavailable(v: &Value) -> Result<IntOrPercent, String> {
    let parsed = match v {
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(IntOrPercent::Int)
            .ok_or_else(|| {
                format!("invalid value {n}: expected a count (3) or a percentage (\"25%\")")
            })?,
        Value::String(s) => s.parse::<IntOrPercent>()?,
        other => {
            return Err(format!(
                "invalid value {other}: expected a count (3) or a percentage (\"25%\")"
            ));
        }
    };
    match parsed {
        IntOrPercent::Int(0) | IntOrPercent::Percent(0) => Err(format!(
            "must be at least 1 (or 1%), got {parsed}: with 0 no node could ever apply the \
             config; set `paused: true` to stop a rollout"
        )),
        ok => Ok(ok),
    }
}

/// A positive humantime duration (`90s`, `2m`, `1h30m`).
fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("invalid duration {s:?}: {e} (write e.g. 90s, 2m or 1h30m)"))?;
    if d.is_zero() {
        return Err(format!("invalid duration {s:?}: must be more than zero"));
    }
    Ok(d)
}

/// Where a glob was written, for its error.
#[derive(Debug, Clone, Default)]
pub(super) struct Origin {
    file: String,
    field: String,
    position: Option<Position>,
}

/// The include and exclude globs, relative to the config root, with where each was
/// written.
#[derive(Debug, Clone, Default)]
pub(super) struct Globs {
    include: Vec<(String, Origin)>,
    exclude: Vec<(String, Origin)>,
    /// Lists of more than [`MAX_GLOBS`] globs, found before anything is compiled.
    problems: Vec<RepoError>,
}

/// The error for a list of `count` globs, more than [`MAX_GLOBS`].
fn too_many_globs(count: usize) -> String {
    format!(
        "{count} globs: at most {MAX_GLOBS} are allowed (a glob set takes time to compile \
         that grows with its size); combine them with `*`, `**` or `{{a,b}}`, e.g. \
         `pools/*.yaml`"
    )
}

/// Compiled globs: a path counts when an include glob matches and no exclude glob does.
#[derive(Debug, Clone)]
pub(super) struct Matcher {
    include: GlobSet,
    exclude: GlobSet,
}

impl Matcher {
    /// Whether `rel` (relative to the config root) is part of the config tree.
    pub(super) fn matches(&self, rel: &str) -> bool {
        self.include.is_match(rel) && !self.exclude.is_match(rel)
    }
}

impl Globs {
    /// These globs, then the command line's.
    pub(super) fn with_command_line(mut self, include: &[String], exclude: &[String]) -> Globs {
        let cli = |flag: &str| Origin {
            file: flag.to_string(),
            field: String::new(),
            position: None,
        };
        for (flag, globs) in [("--include", include), ("--exclude", exclude)] {
            if globs.len() > MAX_GLOBS {
                self.problems
                    .push(RepoError::new(flag, "", too_many_globs(globs.len())));
            }
        }
        self.include
            .extend(include.iter().map(|p| (p.clone(), cli("--include"))));
        self.exclude
            .extend(exclude.iter().map(|p| (p.clone(), cli("--exclude"))));
        self
    }

    /// The include patterns in force: `**` when none is given.
    pub(super) fn include_patterns(&self) -> Vec<String> {
        if self.include.is_empty() {
            vec!["**".to_string()]
        } else {
            self.include.iter().map(|(p, _)| p.clone()).collect()
        }
    }

    /// The exclude patterns in force.
    pub(super) fn exclude_patterns(&self) -> Vec<String> {
        self.exclude.iter().map(|(p, _)| p.clone()).collect()
    }

    /// Compiles the globs (`*` and `?` stop at `/`; `**` crosses directories), reporting
    /// every bad one where it was written; nothing when a list is longer than
    /// [`MAX_GLOBS`].
    pub(super) fn compile(&self) -> Result<Matcher, Vec<RepoError>> {
        if !self.problems.is_empty() {
            return Err(self.problems.clone());
        }
        let mut errors = Vec::new();
        let default = [("**".to_string(), Origin::default())];
        let include: &[(String, Origin)] = if self.include.is_empty() {
            &default
        } else {
            &self.include
        };
        let include = build_set(include, &mut errors);
        let exclude = build_set(&self.exclude, &mut errors);
        match (include, exclude) {
            (Some(include), Some(exclude)) if errors.is_empty() => Ok(Matcher { include, exclude }),
            _ => Err(errors),
        }
    }
}

fn build_set(globs: &[(String, Origin)], errors: &mut Vec<RepoError>) -> Option<GlobSet> {
    let mut builder = GlobSetBuilder::new();
    let before = errors.len();
    for (pattern, origin) in globs {
        match compile_glob(pattern) {
            Ok(g) => {
                builder.add(g);
            }
            Err(m) => {
                errors.push(RepoError::new(&origin.file, &origin.field, m).at(origin.position))
            }
        }
    }
    if errors.len() > before {
        return None;
    }
    match builder.build() {
        Ok(set) => Some(set),
        Err(e) => {
            errors.push(RepoError::new(
                "globs",
                "",
                format!("cannot compile the globs: {e}"),
            ));
            None
        }
    }
}

fn compile_glob(pattern: &str) -> Result<Glob, String> {
    if pattern.is_empty() {
        return Err("an empty glob matches nothing".to_string());
    }
    if pattern.len() > MAX_GLOB_BYTES {
        return Err(format!(
            "a glob of {} bytes: at most {MAX_GLOB_BYTES} are allowed (a glob takes time to \
             compile that grows with its length); shorten it with `*` or `**`",
            pattern.len()
        ));
    }
    if pattern.starts_with('/') || pattern.split('/').any(|c| c == "..") {
        return Err(format!(
            "invalid glob {pattern:?}: globs are relative to the config root and stay inside \
             it (write e.g. `pools/*.yaml`)"
        ));
    }
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| format!("invalid glob {pattern:?}: {}", e.kind()))
}
