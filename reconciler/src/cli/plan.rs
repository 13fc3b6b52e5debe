//! `kubelet-gitops plan`: what merging a revision would do, as Markdown, offline.

use std::path::{Path, PathBuf};

use clap::Args;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::message::{OneLine, cap_per_file, markdown_code};
use kubelet_gitops_core::protocol::NODE_SETUP;

use super::inputs::Failure;
use crate::git::{self, CommitSource};
use crate::model::NodeInfo;
use crate::plan;
use crate::render::{self, RenderOptions, RenderedRepo, RepoError};

/// Arguments of `kubelet-gitops plan`.
#[derive(Debug, Args)]
pub(super) struct PlanArgs {
    /// The config repository: a work tree, its .git directory or a bare repository. Only
    /// committed content is read (blobs straight from each revision's tree); the work
    /// tree, uncommitted changes and the index are ignored.
    #[arg(
        long,
        value_name = "PATH",
        env = "KUBELET_GITOPS_REPO",
        default_value = "."
    )]
    repo: PathBuf,
    /// The revision the change is compared with: what runs now, usually the target
    /// branch (`origin/main`) or the merge base. Any git revision: branch, tag, commit
    /// id, `HEAD~1`. Without it there is nothing to compare with: every pool is new and
    /// every node comes from its local config.
    #[arg(long, value_name = "REV", env = "KUBELET_GITOPS_BASE")]
    base: Option<String>,
    /// The revision to plan: the pull request's head commit or branch.
    #[arg(
        long,
        value_name = "REV",
        env = "KUBELET_GITOPS_HEAD",
        default_value = "HEAD"
    )]
    head: String,
    /// A node inventory file (YAML: `nodes:` with name, labels, capacity and the optional
    /// kubeletFlags, kubeletDropIns, runtimeCgroupDriver, cgroupVersion, agentMode and
    /// kubeletConfig, see docs/repo-format.md). Lists which nodes would change, the config
    /// fields their flags override, and checks each pool's config against each distinct
    /// kubelet set-up of the nodes it reaches as the node agent does: a node that would
    /// refuse it is an error (exit 1).
    #[arg(
        long,
        value_name = "FILE",
        env = "KUBELET_GITOPS_NODES",
        conflicts_with = "kubeconfig"
    )]
    nodes: Option<PathBuf>,
    /// Read the nodes (names, labels and annotations) from the cluster this kubeconfig
    /// file points at (its current context) instead of an inventory. Needs `list` on
    /// nodes. Each node's kubelet set-up comes from its agent's
    /// kubelet-gitops.io/node-setup annotation; nodes without one are not checked (a note
    /// says so).
    #[arg(long, value_name = "FILE", env = "KUBELET_GITOPS_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// The directory of the repository that holds the config tree
    /// (kubelet-gitops.yaml, base/, pools/), relative to the repository root. Default:
    /// the top of the repository.
    #[arg(
        long,
        value_name = "DIR",
        env = "KUBELET_GITOPS_ROOT",
        default_value = ""
    )]
    root: String,
    /// Read only the files under the root that match GLOB (relative to the root; `*`
    /// stays within a directory, `**` crosses directories), in addition to the
    /// settings' `include`. Repeatable; a comma outside `{}` and `[]` separates globs, in
    /// the flag and in the variable (`a,b` is two globs, `{a,b}` one), as for `run`.
    #[arg(long, value_name = "GLOB", env = "KUBELET_GITOPS_INCLUDE")]
    include: Vec<String>,
    /// Ignore the files under the root that match GLOB, in addition to the settings'
    /// `exclude`. Repeatable; a comma outside `{}` and `[]` separates globs, in the flag
    /// and in the variable (`a,b` is two globs, `{a,b}` one), as for `run`.
    #[arg(long, value_name = "GLOB", env = "KUBELET_GITOPS_EXCLUDE")]
    exclude: Vec<String>,
}

pub(super) fn run(args: PlanArgs) -> Result<(), Failure> {
    let PlanArgs {
        repo,
        base,
        head,
        nodes,
        kubeconfig,
        root,
        include,
        exclude,
    } = args;
    let opts = RenderOptions {
        root,
        include: crate::args::split_globs(&include),
        exclude: crate::args::split_globs(&exclude),
    };

    if let Err(errors) = opts.check() {
        let lines: Vec<String> = errors.iter().map(RepoError::to_string).collect();
        return Err(Failure::Usage(lines.join("\n")));
    }
    // Every input is read before the head is rendered: a usage or I/O error exits 2
    // whether the head validates or not.
    let head_src = open(&repo, &head)?;
    let head_id = head_src.info().short_id.clone();
    let base_src = base.as_deref().map(|rev| open(&repo, rev)).transpose()?;
    let node_list = match (&nodes, &kubeconfig) {
        (Some(path), _) => inventory_nodes(path)?,
        (None, Some(path)) => cluster_nodes(path)?,
        (None, None) => Vec::new(),
    };
    let head_repo = match render::render_repo(&head_src, &opts) {
        Ok(r) => r,
        Err(errors) => {
            for e in cap_per_file(&errors, |e| &e.file) {
                eprintln!("{e}");
            }
            eprintln!(
                "the head revision {} ({head_id}) does not validate: {}",
                OneLine(&head),
                count(errors.len(), "error")
            );
            print!("{}", plan::markdown::invalid_markdown(&head_id, &errors));
            return Err(Failure::Invalid);
        }
    };

    let mut notes = Vec::new();
    let (base_repo, base_id) = match (&base, &base_src) {
        (Some(rev), Some(src)) => {
            let id = src.info().short_id.clone();
            (render_base(src, rev, &id, &opts, &mut notes), Some(id))
        }
        _ => (None, None),
    };

    let mut p = plan::plan(base_repo.as_ref(), &head_repo, &node_list);
    p.notes.splice(0..0, notes);
    p.base_revision = base_id;
    p.head_revision = Some(head_id);
    print!("{}", plan::markdown::to_markdown(&p));
    if p.has_errors() {
        for o in &p.overlaps {
            eprintln!("error: {}", OneLine(&o.to_string()));
        }
        for r in &p.refusals {
            eprintln!("error: {}", OneLine(&format!("{}: {r}", r.source_path)));
        }
        return Err(Failure::Invalid);
    }
    Ok(())
}

fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

fn open(repo: &Path, rev: &str) -> Result<CommitSource, Failure> {
    git::open_revision(repo, rev).map_err(|e| Failure::Usage(e.to_string()))
}

/// The base, rendered; a base that does not validate is compared as "nothing" with a
/// note, since the change under review may be what fixes it.
fn render_base(
    src: &CommitSource,
    rev: &str,
    id: &str,
    opts: &RenderOptions,
    notes: &mut Vec<String>,
) -> Option<RenderedRepo> {
    match render::render_repo(src, opts) {
        Ok(r) => Some(r),
        Err(errors) => {
            let first = errors.first().map(RepoError::to_string).unwrap_or_default();
            // A note is Markdown: what the repository says goes in code spans.
            notes.push(format!(
                "The base revision {} ({id}) does not validate ({}; the first: {}): \
                 every pool is compared with nothing.",
                markdown_code(rev),
                count(errors.len(), "error"),
                markdown_code(&first)
            ));
            None
        }
    }
}

/// The nodes of an inventory file, with the labels their kubelets register (the
/// inventory's, `--node-labels`, and the well-known ones) and their flags.
fn inventory_nodes(path: &Path) -> Result<Vec<NodeInfo>, Failure> {
    let inventory = Inventory::load(path).map_err(|e| Failure::Usage(e.to_string()))?;
    Ok(inventory
        .nodes
        .iter()
        .map(|n| NodeInfo {
            name: n.name.clone(),
            labels: n.registered_labels().into(),
            setup: Some(n.setup().to_annotation().into()),
            ..NodeInfo::default()
        })
        .collect())
}

/// The nodes of the cluster (metadata only, paged), on a current-thread runtime.
fn cluster_nodes(kubeconfig: &Path) -> Result<Vec<NodeInfo>, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Usage(format!("cannot start the async runtime: {e}")))?;
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        Failure::Usage(format!(
            "cannot list the nodes with {}: {what}: {e}",
            kubeconfig.display()
        ))
    };
    runtime.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig)
            .map_err(|e| failed("reading the kubeconfig", &e))?;
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(|e| failed("loading the kubeconfig", &e))?;
        let client = kube::Client::try_from(config).map_err(|e| failed("building a client", &e))?;
        let api: Api<Node> = Api::all(client);
        let mut out = Vec::new();
        let mut params = ListParams::default().limit(500);
        loop {
            let page = api
                .list_metadata(&params)
                .await
                .map_err(|e| failed("listing nodes", &e))?;
            for n in page.items {
                let m = n.metadata;
                let setup = m
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(NODE_SETUP))
                    .map(|s| s.as_str().into());
                out.push(NodeInfo {
                    name: m.name.unwrap_or_default(),
                    labels: m.labels.unwrap_or_default().into_iter().collect(),
                    annotations: m.annotations.unwrap_or_default().into_iter().collect(),
                    created: m.creation_timestamp.map(|t| t.0.to_string()),
                    resource_version: m.resource_version,
                    setup,
                });
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => break,
            }
        }
        Ok(out)
    })
}
