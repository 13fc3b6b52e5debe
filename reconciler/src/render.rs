//! Rendering a whole revision of a config repository: repo settings, the base
//! configuration and every pool, decoded strictly, merged, validated, and turned into the
//! exact bytes each pool's ConfigMap holds.
//!
//! The repository layout (docs/repo-format.md is the reference):
//!
//! ```text
//! <root>/kubelet-gitops.yaml   optional  RepoSettings: namespace, globs, rollout defaults, policy
//! <root>/base/kubelet.yaml     optional  partial KubeletConfiguration every pool starts from
//! <root>/pools/<name>.yaml               one NodePool per file, metadata.name == <name>
//! ```
//!
//! [`render_repo`] is pure: it reads through a [`FileSource`] (a git commit's tree, or
//! memory in tests) and never stops at the first problem: every error of every file is
//! returned, each with its file, line, column and field path, so that a commit that does
//! not validate applies nothing and says everything that is wrong with it at once.
//!
//! What a pool's config is: `{}`, then `base/kubelet.yaml`, then the pool's `spec.kubelet`,
//! each a JSON merge patch (maps merge, lists replace, `null` removes), then `apiVersion`
//! and `kind`. The kubelet's defaults are not baked in (the kubelet applies them, and a
//! kubelet upgrade may change them); validation runs on the defaulted config, as the
//! kubelet's does, and each problem is traced back to the file and line that set the field.

mod kubelet;
mod pool;
mod settings;
mod tree;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;

use kubelet_gitops_core::decode::{self, DecodeError, Position, SourceMap, join_key};
use kubelet_gitops_core::types::KubeletConfiguration;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::model::{PoolSpec, Rollout};
use crate::source::{EntryKind, FileSource};

pub use settings::{API_VERSION, DEFAULT_NAMESPACE, POOL_KIND, SETTINGS_KIND};

/// The file holding the repository settings, relative to the config root.
pub const SETTINGS_FILE: &str = "kubelet-gitops.yaml";
/// The base configuration, relative to the config root.
pub const BASE_FILE: &str = "base/kubelet.yaml";
/// The directory of pool files, relative to the config root.
pub const POOLS_DIR: &str = "pools";
/// How many ConfigMaps per pool garbage collection keeps by default.
pub const DEFAULT_KEEP_CONFIGMAPS: usize = 5;

/// What to render, besides the repository itself (command-line options).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderOptions {
    /// The directory of the repository holding the config tree, relative to the
    /// repository root (`clusters/prod`); `""` is the top of the repository.
    pub root: String,
    /// Globs (relative to `root`) of files to read, added to the settings' `include`.
    pub include: Vec<String>,
    /// Globs (relative to `root`) of files to ignore, added to the settings' `exclude`.
    pub exclude: Vec<String>,
}

impl RenderOptions {
    /// Checks the options alone (the root is a relative path inside the repository, the
    /// globs compile), so a caller can report them as usage errors before reading any
    /// revision. [`render_repo`] checks them too.
    pub fn check(&self) -> Result<(), Vec<RepoError>> {
        tree::normalize_root(&self.root).map_err(|e| vec![e])?;
        settings::Globs::default()
            .with_command_line(&self.include, &self.exclude)
            .compile()
            .map(|_| ())
    }
}

/// A revision of the repository, rendered and validated.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedRepo {
    /// `kubelet-gitops.yaml`, or its defaults.
    pub settings: RepoSettings,
    /// Every pool, sorted by name.
    pub pools: Vec<RenderedPool>,
}

impl RenderedRepo {
    /// The pool named `name`.
    pub fn pool(&self, name: &str) -> Option<&RenderedPool> {
        self.pools
            .binary_search_by(|p| p.spec.name.as_str().cmp(name))
            .ok()
            .and_then(|i| self.pools.get(i))
    }

    /// The pools' specs, for [`crate::model::assign`].
    pub fn specs(&self) -> Vec<PoolSpec> {
        self.pools.iter().map(|p| p.spec.clone()).collect()
    }
}

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

/// One pool, rendered.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedPool {
    /// Name, selector, priority and rollout (defaults applied).
    pub spec: PoolSpec,
    /// The exact YAML stored under key `kubelet` of the pool's ConfigMap: a complete
    /// `kubelet.config.k8s.io/v1beta1` `KubeletConfiguration`, `apiVersion` and `kind`
    /// first, without the kubelet's defaults. The same inputs always give the same bytes.
    pub rendered: String,
    /// `rendered`, decoded (not defaulted).
    pub config: KubeletConfiguration,
    /// `kubelet-<pool>-<hash>`: [`kubelet_gitops_core::protocol::configmap_name`] of
    /// `rendered`.
    pub configmap_name: String,
}

/// One problem with the repository: `file:line:col: field: message`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RepoError {
    /// The file, relative to the repository root (`pools/gpu.yaml`), or the command-line
    /// option (`--include`) or the source (`commit 1a2b3c4 of ...`) it concerns.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// The field path in the file (`spec.rollout.maxUnavailable`,
    /// `spec.kubelet.systemReserved.cpu`); empty when the error concerns the whole file.
    pub field: String,
    /// What is wrong, and how to fix it where that is not obvious.
    pub message: String,
}

impl RepoError {
    /// An error about `file` and `field` (empty: the whole file), with no position.
    pub fn new(
        file: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        RepoError {
            file: file.into(),
            line: None,
            column: None,
            field: field.into(),
            message: message.into(),
        }
    }

    /// Sets the line and column when `position` is known.
    pub fn at(mut self, position: Option<Position>) -> Self {
        if let Some(p) = position {
            self.line = Some(p.line);
            self.column = Some(p.column);
        }
        self
    }

    /// An error at `field` of a decoded file, positioned through `map` (the field's line,
    /// or its nearest ancestor's).
    fn at_field(
        file: &str,
        map: &SourceMap,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        let field = field.into();
        let position = map.position(&field);
        RepoError::new(file, field, message).at(position)
    }
}

impl From<DecodeError> for RepoError {
    fn from(e: DecodeError) -> Self {
        let message = match &e.suggestion {
            Some(s) => format!("{} (did you mean `{s}`?)", e.message),
            None => e.message,
        };
        RepoError {
            file: e.file,
            line: e.line,
            column: e.column,
            field: e.field.unwrap_or_default(),
            message,
        }
    }
}

impl fmt::Display for RepoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        f.write_str(": ")?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for RepoError {}

/// Renders and validates the revision `src` holds. Returns every pool's config, or every
/// problem found in every file (sorted by file, line and column).
pub fn render_repo(
    src: &dyn FileSource,
    opts: &RenderOptions,
) -> Result<RenderedRepo, Vec<RepoError>> {
    let mut errors = Vec::new();
    let root = tree::normalize_root(&opts.root).map_err(|e| vec![e])?;
    let entries = src
        .entries()
        .map_err(|e| vec![RepoError::new(src.describe(), "", e.to_string())])?;
    tree::check_root(&entries, &root, &src.describe()).map_err(|e| vec![e])?;

    // The settings come first: their globs decide which other files are read.
    let settings_path = tree::join(&root, SETTINGS_FILE);
    let mut settings = RepoSettings::default();
    let mut settings_globs = settings::Globs::default();
    match entries.iter().find(|e| e.path == settings_path) {
        Some(e) if e.kind != EntryKind::File => {
            errors.push(tree::not_a_file(&e.path, e.kind));
        }
        Some(_) => match read(src, &settings_path) {
            Ok(bytes) => {
                if let Some((s, g)) = settings::decode(&settings_path, &bytes, &mut errors) {
                    settings = s;
                    settings_globs = g;
                }
            }
            Err(e) => errors.push(e),
        },
        None => {}
    }

    let globs = settings_globs.with_command_line(&opts.include, &opts.exclude);
    settings.include = globs.include_patterns();
    settings.exclude = globs.exclude_patterns();
    let layout = match globs.compile() {
        Ok(matcher) => tree::layout(&entries, &root, &matcher, &mut errors),
        Err(mut e) => {
            // Without valid globs there is no telling which files count: report the globs.
            errors.append(&mut e);
            tree::Layout::default()
        }
    };

    let base = layout.base.as_ref().and_then(|path| match read(src, path) {
        Ok(bytes) => kubelet::decode_base(path, &bytes, &mut errors),
        Err(e) => {
            errors.push(e);
            None
        }
    });
    // A missing base is an empty one; a broken base leaves nothing to render pools over.
    let base_ok = layout.base.is_none() || base.is_some();
    let base = base.unwrap_or_default();

    let mut base_errors = kubelet::BaseErrors::default();
    let mut pools: BTreeMap<String, RenderedPool> = BTreeMap::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for path in &layout.pools {
        let bytes = match read(src, path) {
            Ok(b) => b,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let Some(doc) = pool::decode(path, &bytes, &settings, &mut errors) else {
            continue;
        };
        if let Some(first) = seen.get(&doc.spec.name) {
            errors.push(RepoError::at_field(
                path,
                &doc.map,
                "metadata.name",
                format!(
                    "pool {:?} is also defined in {first}: pool names must be unique",
                    doc.spec.name
                ),
            ));
            continue;
        }
        seen.insert(doc.spec.name.clone(), path.clone());
        if !base_ok {
            continue;
        }
        if let Some(rendered) = kubelet::render_pool(&doc, &base, &mut errors, &mut base_errors) {
            pools.insert(rendered.spec.name.clone(), rendered);
        }
    }

    errors.extend(base_errors.into_errors());
    if errors.is_empty() {
        tracing::debug!(
            source = %src.describe(),
            pools = pools.len(),
            "rendered repository"
        );
        Ok(RenderedRepo {
            settings,
            pools: pools.into_values().collect(),
        })
    } else {
        Err(finish_errors(errors))
    }
}

/// Sorted by file, line, column; exact duplicates dropped.
fn finish_errors(mut errors: Vec<RepoError>) -> Vec<RepoError> {
    errors.sort_by(|a, b| {
        (
            &a.file,
            a.line.unwrap_or(0),
            a.column.unwrap_or(0),
            &a.field,
            &a.message,
        )
            .cmp(&(
                &b.file,
                b.line.unwrap_or(0),
                b.column.unwrap_or(0),
                &b.field,
                &b.message,
            ))
    });
    errors.dedup();
    errors
}

/// Reads a regular file of the source.
fn read(src: &dyn FileSource, path: &str) -> Result<Vec<u8>, RepoError> {
    src.read(path)
        .map_err(|e| RepoError::new(path, "", format!("cannot read the file: {e}")))
}

/// Decodes the part of a decoded document found at `prefix` (`spec.rollout`) into `T`,
/// strictly; an error carries the field's full path and its position in the whole file.
fn decode_part<T: DeserializeOwned>(
    file: &str,
    value: &Value,
    map: &SourceMap,
    prefix: &str,
) -> Result<T, RepoError> {
    decode::from_value::<T>(file, value, &SourceMap::new()).map_err(|e| {
        let field = match e.field.as_deref() {
            Some(rel) if !rel.is_empty() => join_path(prefix, rel),
            _ => prefix.to_string(),
        };
        let position = map.position(&field);
        let message = match &e.suggestion {
            Some(s) => format!("{} (did you mean `{s}`?)", e.message),
            None => e.message,
        };
        RepoError::new(file, field, message).at(position)
    })
}

/// `prefix` followed by a relative field path (`[0].key` or `key.sub`).
fn join_path(prefix: &str, rel: &str) -> String {
    if prefix.is_empty() {
        rel.to_string()
    } else if rel.starts_with('[') {
        format!("{prefix}{rel}")
    } else {
        join_key(prefix, rel)
    }
}

/// Whether the field path `path` is `ancestor` or lies under it
/// (`featureGates.CPUManager` is within `featureGates`; `kubeReservedCgroup` is not
/// within `kubeReserved`).
pub fn is_within(path: &str, ancestor: &str) -> bool {
    path == ancestor
        || path
            .strip_prefix(ancestor)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// `value` without the object members that are `null` (in nested objects too, not in
/// lists): in a JSON merge patch they remove the field, so they are not values to check.
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        // Lists are replaced whole, not patched: a null inside one is a value.
        other => other.clone(),
    }
}
