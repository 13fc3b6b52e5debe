//! Rendering a whole revision of a config repository: repo settings, the base
//! configuration and every pool, decoded strictly, merged, validated, and turned into the
//! exact bytes each pool's ConfigMap holds.
//!
//! The repository layout (docs/repo-format.md is the reference):
//!
//! ```text
//! <root>/kubelet-gitops.yaml   optional  RepoSettings: namespace, globs, rollout defaults, policy,
//!                                        disruption classes
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

mod disruption;
mod error;
mod fields;
mod kubelet;
mod pool;
mod settings;
mod tree;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};

use sha2::{Digest, Sha256};

use crate::model::PoolSpec;
use crate::source::{EntryKind, FileSource};

pub use error::RepoError;
pub use fields::is_within;
pub use kubelet::RenderedPool;
pub use settings::{
    API_VERSION, DEFAULT_KEEP_CONFIGMAPS, DEFAULT_NAMESPACE, MAX_GLOB_BYTES, MAX_GLOBS, POOL_KIND,
    Policy, RepoSettings, SETTINGS_FILE, SETTINGS_KIND,
};
pub use tree::{BASE_FILE, POOLS_DIR};

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

/// The pools of the last revision that rendered, by their inputs, so that the next
/// revision renders only the pools whose inputs changed ([`render_repo_cached`]).
///
/// A pool's inputs are its file (path and bytes), the settings file, the base file and
/// the command line's root and globs: the same inputs always render the same pool, so a
/// pool whose inputs are all unchanged is taken from here, its decoding, merging and
/// validation skipped. Only the last revision that rendered without an error is kept.
#[derive(Debug, Default)]
pub struct RenderCache {
    pools: HashMap<[u8; 32], RenderedPool>,
    /// Of the last render: pools rendered, pools reused.
    last: (usize, usize),
}

impl RenderCache {
    /// Of the last render: (pools rendered, pools reused from the cache).
    pub fn last_render(&self) -> (usize, usize) {
        self.last
    }
}

/// Renders and validates the revision `src` holds. Returns every pool's config, or every
/// problem found in every file (sorted by file, line and column).
pub fn render_repo(
    src: &dyn FileSource,
    opts: &RenderOptions,
) -> Result<RenderedRepo, Vec<RepoError>> {
    render_repo_cached(src, opts, &mut RenderCache::default())
}

/// [`render_repo`], reusing the pools of `cache` whose inputs did not change, and keeping
/// this revision's pools there when it renders.
pub fn render_repo_cached(
    src: &dyn FileSource,
    opts: &RenderOptions,
    cache: &mut RenderCache,
) -> Result<RenderedRepo, Vec<RepoError>> {
    let mut errors = Vec::new();
    // What every pool's rendering depends on besides its own file.
    let mut context = Sha256::new();
    hash_part(&mut context, opts.root.as_bytes());
    for g in opts.include.iter().chain(&opts.exclude) {
        hash_part(&mut context, g.as_bytes());
    }
    hash_part(&mut context, b"--");
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
                hash_part(&mut context, &bytes);
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

    hash_part(&mut context, b"--");
    let base = layout.base.as_ref().and_then(|path| match read(src, path) {
        Ok(bytes) => {
            hash_part(&mut context, &bytes);
            kubelet::decode_base(path, &bytes, &mut errors)
        }
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
    let context = context.finalize();
    let mut used: HashMap<[u8; 32], RenderedPool> = HashMap::new();
    let mut reused = 0;
    for path in &layout.pools {
        let bytes = match read(src, path) {
            Ok(b) => b,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let mut key = Sha256::new();
        key.update(context);
        hash_part(&mut key, path.as_bytes());
        hash_part(&mut key, &bytes);
        let key: [u8; 32] = key.finalize().into();
        // Rendered before from the same inputs: only the name's uniqueness is new (a
        // duplicate is decoded again below, for its error's line).
        if let Some(done) = cache
            .pools
            .get(&key)
            .filter(|p| base_ok && !seen.contains_key(&p.spec.name))
        {
            seen.insert(done.spec.name.clone(), path.clone());
            pools.insert(done.spec.name.clone(), done.clone());
            used.insert(key, done.clone());
            reused += 1;
            continue;
        }
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
        if let Some(rendered) = kubelet::render_pool(doc, &base, &mut errors, &mut base_errors) {
            used.insert(key, rendered.clone());
            pools.insert(rendered.spec.name.clone(), rendered);
        }
    }

    errors.extend(base_errors.into_errors());
    if errors.is_empty() {
        cache.last = (used.len() - reused, reused);
        cache.pools = used;
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

/// Sorted by file, line, column (then field and message); exact duplicates dropped.
/// Each file is ranked once, so that sorting compares numbers and reads an error's
/// strings only to break a tie (a commit of one large file can hold 100,000 errors).
fn finish_errors(errors: Vec<RepoError>) -> Vec<RepoError> {
    let mut ranks: BTreeMap<&str, u32> = errors.iter().map(|e| (e.file.as_str(), 0)).collect();
    for (rank, r) in (0u32..).zip(ranks.values_mut()) {
        *r = rank;
    }
    let mut order: Vec<_> = errors
        .iter()
        .map(|e| {
            let rank = ranks.get(e.file.as_str()).copied();
            (rank, e.line.unwrap_or(0), e.column.unwrap_or(0))
        })
        .zip(0..)
        .collect();
    order.sort_unstable_by(|(key_a, a), (key_b, b)| {
        key_a
            .cmp(key_b)
            .then_with(|| match (errors.get(*a), errors.get(*b)) {
                (Some(a), Some(b)) => (&a.field, &a.message).cmp(&(&b.field, &b.message)),
                _ => std::cmp::Ordering::Equal,
            })
    });
    let mut slots: Vec<Option<RepoError>> = errors.into_iter().map(Some).collect();
    let mut sorted: Vec<RepoError> = order
        .into_iter()
        .filter_map(|(_, i)| slots.get_mut(i).and_then(Option::take))
        .collect();
    sorted.dedup();
    sorted
}

/// Reads a regular file of the source.
/// Feeds `bytes` to `h`, length first (so that parts cannot run into each other).
fn hash_part(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

fn read(src: &dyn FileSource, path: &str) -> Result<Vec<u8>, RepoError> {
    src.read(path)
        .map_err(|e| RepoError::new(path, "", format!("cannot read the file: {e}")))
}
