//! Reading what the commands check: config files, drop-in directories and the kubelet's
//! flags (inline or from kubeadm/package env files), printing problems with their
//! location, and what went wrong, by exit code ([`Failure`]).

use std::io::Read;
use std::path::{Path, PathBuf};

use clap::Args;
use kubelet_gitops_core::decode::MAX_FILE_BYTES;
use kubelet_gitops_core::effective::{self, Effective, EffectiveError, Source};
use kubelet_gitops_core::flags::{self, KubeletFlags};
use kubelet_gitops_core::message::{Capped, OneLine, cap_per_file, more_errors};
use kubelet_gitops_core::node_setup;
use kubelet_gitops_core::validation::ValidationError;

/// Where the kubelet's command line comes from, and its drop-in directory.
#[derive(Debug, Args, Clone, Default)]
pub struct NodeArgs {
    /// The kubelet's command-line flags, as one shell-quoted string
    /// (e.g. '--max-pods=110 --node-ip=10.0.0.5'). Applied after every --flags-file.
    #[arg(
        long,
        value_name = "ARGS",
        env = "KUBELET_GITOPS_FLAGS",
        allow_hyphen_values = true
    )]
    flags: Option<String>,
    /// A file holding the kubelet's flags: kubeadm's kubeadm-flags.env
    /// (KUBELET_KUBEADM_ARGS="..."), a package's /etc/default/kubelet or
    /// /etc/sysconfig/kubelet (KUBELET_EXTRA_ARGS=...), or a plain command line.
    /// Repeatable or comma-separated (in the variable too); later files win, as in
    /// kubeadm's systemd drop-in.
    #[arg(
        long,
        value_name = "FILE",
        env = "KUBELET_GITOPS_FLAGS_FILE",
        value_delimiter = ','
    )]
    flags_file: Vec<PathBuf>,
    /// The kubelet's --config-dir: every `*.conf` file in it (lexical order) is merged over
    /// FILE before the flags are applied. Defaults to the --config-dir in the flags, if any.
    #[arg(long, value_name = "DIR", env = "KUBELET_GITOPS_CONFIG_DIR")]
    config_dir: Option<PathBuf>,
}

/// What went wrong, classified by exit code.
#[derive(Debug)]
pub(super) enum Failure {
    /// The input is invalid: problems already printed. Exit 1.
    Invalid,
    /// Usage or I/O error. Exit 2.
    Usage(String),
}

/// `path` for a message, on one line (a file named by a glob over a repository's checkout
/// may hold a newline or a terminal escape).
pub(super) fn shown(path: &Path) -> String {
    OneLine(&path.display().to_string()).to_string()
}

/// Reads a file, at most one byte past the ConfigMap limit (the decoder reports the size
/// error; this keeps `/dev/zero` from filling memory).
pub(super) fn read_file(path: &Path) -> Result<Vec<u8>, Failure> {
    let file = std::fs::File::open(path)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", shown(path))))?;
    let mut buf = Vec::new();
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", shown(path))))?;
    Ok(buf)
}

/// The node side of the effective config: its flags and drop-in files.
#[derive(Debug, Default)]
pub(super) struct Node {
    pub flags: Option<KubeletFlags>,
    pub drop_ins: Vec<(String, Vec<u8>)>,
}

impl Node {
    pub fn load(args: &NodeArgs) -> Result<Node, Failure> {
        let mut words: Vec<String> = Vec::new();
        for path in &args.flags_file {
            let bytes = read_file(path)?;
            let text = String::from_utf8(bytes).map_err(|_| {
                Failure::Usage(format!("{}: a flags file must be UTF-8 text", shown(path)))
            })?;
            words.extend(
                flag_words(&text).map_err(|e| Failure::Usage(format!("{}: {e}", shown(path))))?,
            );
        }
        if let Some(inline) = &args.flags {
            words.extend(
                flags::split_command_line(inline)
                    .map_err(|e| Failure::Usage(format!("--flags: {e}")))?,
            );
        }
        let flags = if words.is_empty() && args.flags.is_none() && args.flags_file.is_empty() {
            None
        } else {
            Some(
                KubeletFlags::parse(&words)
                    .map_err(|e| Failure::Usage(format!("the kubelet's flags: {e}")))?,
            )
        };
        let dir = args.config_dir.clone().or_else(|| {
            flags
                .as_ref()
                .and_then(|f| f.config_dir())
                .map(PathBuf::from)
        });
        let drop_ins = match dir {
            Some(dir) => read_drop_ins(&dir)?,
            None => Vec::new(),
        };
        Ok(Node { flags, drop_ins })
    }

    /// The effective config of `file` on this node.
    pub fn effective(&self, name: &str, bytes: &[u8]) -> Result<Effective, EffectiveError> {
        let drop_ins: Vec<Source<'_>> = self
            .drop_ins
            .iter()
            .map(|(n, b)| Source::new(n, b))
            .collect();
        effective::effective(
            Some(Source::new(name, bytes)),
            &drop_ins,
            self.flags.as_ref(),
        )
    }
}

/// The words of a flags file: kubeadm's `KUBELET_KUBEADM_ARGS`, then a package's
/// `KUBELET_EXTRA_ARGS`, as kubeadm's systemd drop-in orders them; a file with neither
/// variable is a plain command line.
fn flag_words(text: &str) -> Result<Vec<String>, flags::FlagError> {
    let env = flags::parse_env_file(text);
    let has = |key: &str| flags::env_lookup(&env, key).is_some();
    if !has("KUBELET_KUBEADM_ARGS") && !has("KUBELET_EXTRA_ARGS") {
        return flags::split_command_line(text.trim());
    }
    let mut words = flags::kubeadm_args(text)?;
    words.extend(flags::extra_args(text)?);
    Ok(words)
}

/// Every `*.conf` file under `dir`, in the kubelet's order.
fn read_drop_ins(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, Failure> {
    let mut paths = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| {
            Failure::Usage(format!("cannot read drop-in directory {}: {e}", shown(&d)))
        })?;
        for entry in entries {
            let entry = entry.map_err(|e| {
                Failure::Usage(format!("cannot read drop-in directory {}: {e}", shown(&d)))
            })?;
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                paths.push(path.to_string_lossy().into_owned());
            }
        }
    }
    effective::drop_in_order(paths)
        .into_iter()
        .map(|p| read_file(Path::new(&p)).map(|b| (p, b)))
        .collect()
}

/// Prints validation problems as `file:line: field.path: message`, one line each
/// (control characters of the path, the field or a value shown escaped), sorted by line,
/// at most [`MAX_ERRORS_SHOWN`](kubelet_gitops_core::message::MAX_ERRORS_SHOWN) of them
/// and then how many more there are; the line is the
/// field's (or its nearest ancestor's) in the config file, else the first line.
pub(super) fn print_validation_errors(file: &str, eff: &Effective, errors: &[ValidationError]) {
    let located = eff.errors_by_line(errors);
    for item in cap_per_file(&located, |_| file) {
        let &(line, err) = match item {
            Capped::Shown(shown) => shown,
            Capped::More { file, hidden } => {
                eprintln!("{}", OneLine(&more_errors(file, hidden)));
                continue;
            }
        };
        let by_flag = eff
            .flag_of(&err.field)
            .map(node_setup::flag_hint)
            .unwrap_or_default();
        let text = format!("{file}:{line}: {}: {}{by_flag}", err.field, err.detail());
        eprintln!("{}", OneLine(&text));
    }
}

/// The multi-threaded runtime of the long-running commands; on failure the message is
/// printed and the exit code (2) returned.
pub(super) fn runtime() -> Result<tokio::runtime::Runtime, std::process::ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::ExitCode::from(2)
        })
}
