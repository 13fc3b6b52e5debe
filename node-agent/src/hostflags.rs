//! Where the kubelet's command line comes from, read from the host (every path under a
//! host-root prefix, so the agent can run in a container with the host's `/` mounted, and
//! tests can run against a temp dir).
//!
//! - [`FlagSource::Proc`]: the running kubelet's `/proc/<pid>/cmdline` (the process whose
//!   program is named `kubelet`). The truth about what runs now, but only while a kubelet
//!   runs; needs the host's `/proc` (hostPID, or a hostPath mount of `/proc`).
//! - [`FlagSource::Files`]: kubeadm's layout: the environment files (`kubeadm-flags.env`
//!   with `KUBELET_KUBEADM_ARGS`, `/etc/default/kubelet` or `/etc/sysconfig/kubelet` with
//!   `KUBELET_EXTRA_ARGS`) composed as kubeadm's `10-kubeadm.conf` drop-in composes them
//!   ([`kubelet_gitops_core::flags::KUBEADM_DROPIN`]): its `--kubeconfig`, `--config`
//!   arguments, then `$KUBELET_KUBEADM_ARGS`, then `$KUBELET_EXTRA_ARGS`. Files are read
//!   in the order given (a later file's assignment wins, like `EnvironmentFile=`); a
//!   missing file counts as empty, as the drop-in's `EnvironmentFile=-` does.
//! - [`FlagSource::SystemdUnit`]: a unit file and its drop-ins, as systemd composes them:
//!   `<unit>.d/*.conf` from `/etc/systemd/system`, `/run/systemd/system`,
//!   `/usr/local/lib/systemd/system`, `/usr/lib/systemd/system`, `/lib/systemd/system`
//!   and the unit's own directory, applied in file-name order whatever the directory, a
//!   file in a higher-priority directory masking one of the same name lower down; then
//!   `ExecStart=` expanded with `Environment=` and `EnvironmentFile=` (read on the host).
//!   Type-level drop-ins (`service.d/`) are not read.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use kubelet_gitops_core::flags::{
    DEFAULT_KUBELET_ENV, EnvironmentFile, KUBEADM_DROPIN, KUBEADM_FLAGS_ENV, KubeletFlags,
    SYSCONFIG_KUBELET_ENV, SystemdService, parse_systemd_service, split_proc_cmdline,
};
use tracing::debug;

use crate::error::HostError;

/// The directories systemd reads system units and their drop-ins from, highest priority
/// first.
pub const SYSTEMD_UNIT_DIRS: &[&str] = &[
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
];

/// Where the kubelet's command line is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlagSource {
    /// The running kubelet's `/proc/<pid>/cmdline`.
    Proc,
    /// kubeadm's environment files (see the module documentation), host paths.
    Files(Vec<PathBuf>),
    /// A systemd unit file (host path), with its drop-ins.
    SystemdUnit(PathBuf),
}

impl FlagSource {
    /// kubeadm's layout with both package flavours' extra-args files:
    /// `/var/lib/kubelet/kubeadm-flags.env`, `/etc/default/kubelet`, `/etc/sysconfig/kubelet`.
    pub fn kubeadm_files() -> FlagSource {
        FlagSource::Files(
            [
                KUBEADM_FLAGS_ENV,
                DEFAULT_KUBELET_ENV,
                SYSCONFIG_KUBELET_ENV,
            ]
            .iter()
            .map(PathBuf::from)
            .collect(),
        )
    }
}

impl fmt::Display for FlagSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlagSource::Proc => f.write_str("the running kubelet's /proc/<pid>/cmdline"),
            FlagSource::Files(files) => {
                f.write_str("kubeadm environment files ")?;
                let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
                f.write_str(&names.join(", "))
            }
            FlagSource::SystemdUnit(unit) => write!(f, "systemd unit {}", unit.display()),
        }
    }
}

pub use kubelet_gitops_core::hostpath::host_path;

/// Reads a host file; `None` when it does not exist.
fn read_optional(host_root: &Path, path: &str) -> Result<Option<String>, HostError> {
    let full = host_path(host_root, path);
    match std::fs::read(&full) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(HostError::Read { path: full, source }),
    }
}

/// The kubelet's arguments (without the program name) from `src`.
pub fn read_args(src: &FlagSource, host_root: &Path) -> Result<Vec<String>, HostError> {
    match src {
        FlagSource::Proc => proc_args(host_root),
        FlagSource::Files(files) => {
            let mut service = parse_systemd_service(&[KUBEADM_DROPIN]);
            service.environment_files = files
                .iter()
                .map(|p| EnvironmentFile {
                    path: p.display().to_string(),
                    optional: true,
                })
                .collect();
            expand(&service, host_root, &src.to_string())
        }
        FlagSource::SystemdUnit(unit) => {
            let texts = unit_texts(unit, host_root)?;
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let service = parse_systemd_service(&refs);
            expand(&service, host_root, &src.to_string())
        }
    }
}

/// The kubelet's flags from `src`, parsed as the kubelet parses them.
pub fn read_flags(src: &FlagSource, host_root: &Path) -> Result<KubeletFlags, HostError> {
    let args = read_args(src, host_root)?;
    let flags = KubeletFlags::parse(&args).map_err(|source| HostError::Flags {
        from: src.to_string(),
        source,
    })?;
    debug!(source = %src, args = args.len(), "read the kubelet's flags");
    Ok(flags)
}

/// `ExecStart=` of `service` expanded, its environment files read on the host.
fn expand(
    service: &SystemdService,
    host_root: &Path,
    from: &str,
) -> Result<Vec<String>, HostError> {
    let mut files: BTreeMap<String, Option<String>> = BTreeMap::new();
    for file in &service.environment_files {
        if !files.contains_key(&file.path) {
            files.insert(file.path.clone(), read_optional(host_root, &file.path)?);
        }
    }
    service
        .kubelet_args(|path| files.get(path).cloned().flatten())
        .map_err(|source| HostError::Flags {
            from: from.to_string(),
            source,
        })
}

/// The unit file's text, then its drop-ins' texts in the order systemd applies them.
fn unit_texts(unit: &Path, host_root: &Path) -> Result<Vec<String>, HostError> {
    let unit_file = host_path(host_root, unit);
    let text = std::fs::read(&unit_file).map_err(|source| HostError::Read {
        path: unit_file.clone(),
        source,
    })?;
    let mut texts = vec![String::from_utf8_lossy(&text).into_owned()];
    let Some(name) = unit.file_name() else {
        return Ok(texts);
    };
    let dropin_dir = format!("{}.d", name.to_string_lossy());
    let mut dirs: Vec<PathBuf> = SYSTEMD_UNIT_DIRS.iter().map(PathBuf::from).collect();
    if let Some(own) = unit.parent()
        && !dirs.iter().any(|d| d == own)
    {
        dirs.push(own.to_path_buf());
    }
    // File name -> the path that wins (first seen = highest priority).
    let mut chosen: BTreeMap<String, PathBuf> = BTreeMap::new();
    for dir in dirs {
        let dir = host_path(host_root, dir.join(&dropin_dir));
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(source) => return Err(HostError::Read { path: dir, source }),
        };
        for entry in entries {
            let entry = entry.map_err(|source| HostError::Read {
                path: dir.clone(),
                source,
            })?;
            let file_name = entry.file_name().to_string_lossy().into_owned();
            if file_name.ends_with(".conf") {
                chosen.entry(file_name).or_insert_with(|| entry.path());
            }
        }
    }
    for path in chosen.values() {
        let text = std::fs::read(path).map_err(|source| HostError::Read {
            path: path.clone(),
            source,
        })?;
        texts.push(String::from_utf8_lossy(&text).into_owned());
    }
    Ok(texts)
}

/// The arguments of the one process under `<host_root>/proc` whose program is `kubelet`.
fn proc_args(host_root: &Path) -> Result<Vec<String>, HostError> {
    let proc_dir = host_path(host_root, "/proc");
    let entries = std::fs::read_dir(&proc_dir).map_err(|source| HostError::Read {
        path: proc_dir.clone(),
        source,
    })?;
    let mut found: Vec<(u32, Vec<String>)> = Vec::new();
    for entry in entries {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        // A process may exit while we look; its cmdline is then unreadable or empty
        // (kernel threads have none either).
        let Ok(data) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let argv = split_proc_cmdline(&data);
        let Some(program) = argv.first() else {
            continue;
        };
        let base = program.rsplit('/').next().unwrap_or(program);
        if base == "kubelet" {
            found.push((pid, argv[1..].to_vec()));
        }
    }
    found.sort_by_key(|(pid, _)| *pid);
    match found.len() {
        0 => Err(HostError::NoKubeletProcess { proc_dir }),
        1 => Ok(found.remove(0).1),
        _ => Err(HostError::SeveralKubelets {
            proc_dir,
            pids: found.into_iter().map(|(pid, _)| pid).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_display_for_messages() {
        assert!(
            FlagSource::kubeadm_files()
                .to_string()
                .contains("kubeadm-flags.env")
        );
        assert_eq!(
            FlagSource::SystemdUnit("/etc/systemd/system/kubelet.service".into()).to_string(),
            "systemd unit /etc/systemd/system/kubelet.service"
        );
    }
}
