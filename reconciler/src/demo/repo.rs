//! The demo's config repository: a copy of `examples-repo/` (embedded in the binary, so
//! the demo runs from anywhere) in a git repository of its own, the edits the demo
//! commits, and the commit statuses the reconciler leaves there as git notes.
//!
//! The edits are pure functions of the example files ([`demo_timings`],
//! [`raise_general_max_pods`], [`gpu_pod_logs_dir`], and for real kubelets
//! [`real_kubelet_base`]): each fails with
//! [`DemoError::ExampleChanged`] when the example no longer has what it edits, so a change
//! to `examples-repo/` that breaks the demo shows up in its tests, not in front of a user.

use std::path::{Path, PathBuf};

use git2::{IndexAddOption, Repository, RepositoryInitOptions, Signature};

use super::error::{DemoError, io};
use crate::git::open_revision;
use crate::render::{RenderOptions, RenderedRepo, render_repo};

/// The files of `examples-repo/`, as they were when this binary was built.
pub const EXAMPLE_FILES: &[(&str, &str)] = &[
    (
        ".github/workflows/kubelet-gitops-plan.yml",
        include_str!("../../../examples-repo/.github/workflows/kubelet-gitops-plan.yml"),
    ),
    (
        ".gitlab-ci.yml",
        include_str!("../../../examples-repo/.gitlab-ci.yml"),
    ),
    (
        "README.md",
        include_str!("../../../examples-repo/README.md"),
    ),
    (
        "base/kubelet.yaml",
        include_str!("../../../examples-repo/base/kubelet.yaml"),
    ),
    (
        "inventory.yaml",
        include_str!("../../../examples-repo/inventory.yaml"),
    ),
    (
        "kubelet-gitops.yaml",
        include_str!("../../../examples-repo/kubelet-gitops.yaml"),
    ),
    (
        "pools/general.yaml",
        include_str!("../../../examples-repo/pools/general.yaml"),
    ),
    (
        "pools/gpu.yaml",
        include_str!("../../../examples-repo/pools/gpu.yaml"),
    ),
    (
        "pools/high-memory.yaml",
        include_str!("../../../examples-repo/pools/high-memory.yaml"),
    ),
];

/// The example inventory: the demo's 12 nodes.
pub const INVENTORY: &str = include_str!("../../../examples-repo/inventory.yaml");

/// The branch the demo commits to and the reconciler follows.
pub const BRANCH: &str = "main";

/// The notes ref the reconciler writes commit statuses to.
pub const NOTES_REF: &str = crate::status::notes::NOTES_REF;

/// `general`'s maxPods in the example, and what the demo's second commit sets.
pub const GENERAL_MAX_PODS: (u32, u32) = (150, 200);

/// Where the demo's bad commit puts the gpu pool's pod logs (as a path on the node): the
/// gpu nodes' local NVMe disk. On the demo's gpu nodes something that is not a directory
/// stands there, so the kubelet cannot create it.
pub const GPU_POD_LOGS: &str = "/mnt/nvme/pod-logs";

/// Sets every `healthTimeout:` and `lkgGrace:` of a settings or pool file to the demo's
/// values (the examples' minutes and hours would make the demo last an hour), keeping the
/// indentation and noting the example's value in a comment. Returns the new text and
/// how many values were changed. Comment lines are left alone.
pub fn demo_timings(text: &str, health_timeout: &str, lkg_grace: &str) -> (String, usize) {
    let mut out = String::with_capacity(text.len() + 64);
    let mut changed = 0;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let indent = &body[..body.len() - body.trim_start().len()];
        let rest = body.trim_start();
        let replaced = [("healthTimeout:", health_timeout), ("lkgGrace:", lkg_grace)]
            .into_iter()
            .find_map(|(key, value)| {
                let old = rest.strip_prefix(key)?;
                let old = old.split('#').next().unwrap_or_default().trim();
                (!old.is_empty()).then(|| {
                    format!("{indent}{key} {value}   # demo timing; the example says {old}")
                })
            });
        match replaced {
            Some(new) => {
                out.push_str(&new);
                out.push_str(&line[body.len()..]);
                changed += 1;
            }
            None => out.push_str(line),
        }
    }
    (out, changed)
}

/// `pools/general.yaml` with maxPods raised from [`GENERAL_MAX_PODS`]`.0` to `.1`.
pub fn raise_general_max_pods(text: &str) -> Result<String, DemoError> {
    let (old, new) = GENERAL_MAX_PODS;
    let wanted = format!("maxPods: {old}");
    let mut found = 0;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        if body.trim() == wanted {
            found += 1;
            let indent = &body[..body.len() - body.trim_start().len()];
            out.push_str(&format!("{indent}maxPods: {new}"));
            out.push_str(&line[body.len()..]);
        } else {
            out.push_str(line);
        }
    }
    if found == 1 {
        Ok(out)
    } else {
        Err(DemoError::ExampleChanged(format!(
            "pools/general.yaml has {found} lines `{wanted}`, the demo raises exactly one"
        )))
    }
}

/// `pools/gpu.yaml` with `podLogsDir: <dir>` added at the top of `spec.kubelet`, with a
/// comment saying why someone would.
pub fn gpu_pod_logs_dir(text: &str, dir: &str) -> Result<String, DemoError> {
    let mut out = String::with_capacity(text.len() + 256);
    let mut found = 0;
    for line in text.split_inclusive('\n') {
        out.push_str(line);
        let body = line.trim_end_matches(['\n', '\r']);
        if body == "  kubelet:" {
            found += 1;
            if !line.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&format!(
                "    # Container logs on the local NVMe disk: training jobs log a lot, and the root\n    # disk of the gpu image is small.\n    podLogsDir: {dir}\n"
            ));
        }
    }
    if found == 1 {
        Ok(out)
    } else {
        Err(DemoError::ExampleChanged(format!(
            "pools/gpu.yaml has {found} `  kubelet:` lines, the demo edits exactly one"
        )))
    }
}

/// `pools/gpu.yaml` for kubelets on this machine: `reservedSystemCPUs: "0"` instead of the
/// example's `"0-1"`. The example's gpu nodes have 192 CPUs; a machine with two (CI's)
/// would have none left for pods, and the agent's pre-flight refuses such a config
/// ("the reservations leave no allocatable cpu"), which halts the pool at its canary.
pub fn real_gpu_pool(text: &str) -> Result<String, DemoError> {
    const EXAMPLE: &str = "reservedSystemCPUs: \"0-1\"";
    let lines = text.lines().filter(|l| l.trim() == EXAMPLE).count();
    if lines != 1 {
        return Err(DemoError::ExampleChanged(format!(
            "pools/gpu.yaml has {lines} lines `{EXAMPLE}`, the real demo replaces exactly one"
        )));
    }
    Ok(text.replace(
        EXAMPLE,
        "reservedSystemCPUs: \"0\"   # real kubelets on this machine (2 CPUs or more); the example says \"0-1\"",
    ))
}

/// Paths of the machine that real kubelets run on (`kubelet-gitops demo --cluster real`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealNodePaths {
    /// The cluster CA certificate (the kubelets' client CA).
    pub ca: PathBuf,
    /// The directory for the kubelets' pod logs and static pods (in the work directory:
    /// every kubelet runs on this machine).
    pub workdir: PathBuf,
}

/// `base/kubelet.yaml` for kubelets running on this machine rather than on the example's
/// nodes: what the example names that this machine does not have or cannot do, replaced
/// (each line keeps a comment with the example's value), and the settings every real
/// node of the demo needs appended. Fails when a line it replaces is not there exactly
/// once.
///
/// | example | here | why |
/// | --- | --- | --- |
/// | `cgroupDriver: systemd` | `cgroupfs` | no systemd on these machines; the kubelet's cgroup root is a cgroupfs path |
/// | `resolvConf: /run/systemd/resolve/resolv.conf` | `/etc/resolv.conf` | no systemd-resolved |
/// | `staticPodPath: /etc/kubernetes/manifests` | `<workdir>/etc/kubernetes/manifests` | the kubelets touch nothing outside the work directory |
/// | `clientCAFile: /etc/kubernetes/pki/ca.crt` | the demo cluster's CA | |
///
/// Appended: `failSwapOn: false` and `failCgroupV1: false` (these machines have swap and
/// cgroup v1) and `podLogsDir: <workdir>/var/log/pods`.
pub fn real_kubelet_base(text: &str, paths: &RealNodePaths) -> Result<String, DemoError> {
    let workdir = paths.workdir.display();
    let replacements = [
        ("cgroupDriver:", "cgroupfs".to_string()),
        ("resolvConf:", "/etc/resolv.conf".to_string()),
        (
            "staticPodPath:",
            format!("{workdir}/etc/kubernetes/manifests"),
        ),
        ("clientCAFile:", paths.ca.display().to_string()),
    ];
    let mut found = [0usize; 4];
    let mut out = String::with_capacity(text.len() + 512);
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let indent = &body[..body.len() - body.trim_start().len()];
        let rest = body.trim_start();
        let hit = replacements
            .iter()
            .enumerate()
            .find_map(|(i, (key, value))| Some((i, key, value, rest.strip_prefix(key)?)));
        match hit {
            Some((i, key, value, old)) => {
                found[i] += 1;
                let old = old.split('#').next().unwrap_or_default().trim();
                out.push_str(&format!(
                    "{indent}{key} {value}   # real kubelets on this machine; the example says {old}"
                ));
                out.push_str(&line[body.len()..]);
            }
            None => out.push_str(line),
        }
    }
    if let Some(i) = found.iter().position(|n| *n != 1) {
        return Err(DemoError::ExampleChanged(format!(
            "base/kubelet.yaml has {} lines `{}`, the real demo replaces exactly one",
            found[i], replacements[i].0
        )));
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!(
        "\n# --- Real kubelets on this machine (kubelet-gitops demo --cluster real) ---------------\n# It has swap and cgroup v1, which a kubelet refuses by default.\nfailSwapOn: false\nfailCgroupV1: false\n# Container logs stay in the demo's work directory.\npodLogsDir: {workdir}/var/log/pods\n"
    ));
    Ok(out)
}

/// The demo's repositories: a bare one standing in for the forge (`remote.git`), which
/// the reconciler follows and pushes its notes to, and a clone with a work tree (`repo`)
/// where the demo commits and pushes, as a person would.
pub struct DemoRepo {
    path: PathBuf,
    remote: PathBuf,
    repo: Repository,
}

impl DemoRepo {
    /// Creates the bare remote `remote` and the clone `path` with the example files, the
    /// demo timings applied, and the base made fit for kubelets on this machine when
    /// `real` is given ([`real_kubelet_base`]); nothing committed yet.
    pub fn create(
        path: &Path,
        remote: &Path,
        health_timeout: &str,
        lkg_grace: &str,
        real: Option<&RealNodePaths>,
    ) -> Result<Self, DemoError> {
        let git = |what: &'static str, at: &Path| {
            let at = at.to_path_buf();
            move |source| DemoError::Git {
                what,
                path: at,
                source,
            }
        };
        let mut opts = RepositoryInitOptions::new();
        opts.initial_head(BRANCH).bare(true);
        Repository::init_opts(remote, &opts).map_err(git("create the repository", remote))?;
        let mut opts = RepositoryInitOptions::new();
        opts.initial_head(BRANCH);
        let repo =
            Repository::init_opts(path, &opts).map_err(git("create the repository", path))?;
        repo.remote("origin", &format!("file://{}", remote.display()))
            .map_err(git("add the remote origin", path))?;
        let demo = DemoRepo {
            path: path.to_path_buf(),
            remote: remote.to_path_buf(),
            repo,
        };
        let mut timed = 0;
        for (rel, text) in EXAMPLE_FILES {
            let text = if rel.ends_with(".yaml") && !rel.starts_with('.') {
                let (t, n) = demo_timings(text, health_timeout, lkg_grace);
                timed += n;
                t
            } else {
                (*text).to_string()
            };
            let text = match real {
                Some(paths) if *rel == "base/kubelet.yaml" => real_kubelet_base(&text, paths)?,
                Some(_) if *rel == "pools/gpu.yaml" => real_gpu_pool(&text)?,
                _ => text,
            };
            demo.write(rel, &text)?;
        }
        if timed == 0 {
            return Err(DemoError::ExampleChanged(
                "no file sets healthTimeout or lkgGrace any more".into(),
            ));
        }
        Ok(demo)
    }

    /// The work tree.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `file://` URL of the remote (what the reconciler follows).
    pub fn url(&self) -> String {
        format!("file://{}", self.remote.display())
    }

    /// The content of `rel` in the work tree.
    pub fn read(&self, rel: &str) -> Result<String, DemoError> {
        let p = self.path.join(rel);
        std::fs::read_to_string(&p).map_err(io("read", p))
    }

    /// Writes `text` to `rel` in the work tree.
    pub fn write(&self, rel: &str, text: &str) -> Result<(), DemoError> {
        let p = self.path.join(rel);
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        }
        std::fs::write(&p, text).map_err(io("write", p))
    }

    fn git(&self, what: &'static str) -> impl FnOnce(git2::Error) -> DemoError + '_ {
        move |source| DemoError::Git {
            what,
            path: self.path.clone(),
            source,
        }
    }

    /// Commits the whole work tree on [`BRANCH`] and pushes it to the remote; returns the
    /// commit id.
    pub fn commit(&self, message: &str) -> Result<String, DemoError> {
        let mut index = self.repo.index().map_err(self.git("read the index"))?;
        index
            .add_all(["*"], IndexAddOption::DEFAULT, None)
            .map_err(self.git("stage the work tree"))?;
        index
            .update_all(["*"], None)
            .map_err(self.git("stage the work tree"))?;
        index.write().map_err(self.git("write the index"))?;
        let tree_id = index.write_tree().map_err(self.git("write the tree"))?;
        let tree = self
            .repo
            .find_tree(tree_id)
            .map_err(self.git("read the tree"))?;
        let sig = Signature::now("kubelet-gitops demo", "demo@kubelet-gitops.invalid")
            .map_err(self.git("make a signature"))?;
        let parent = self.repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        let id = self
            .repo
            .commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .map_err(self.git("commit"))?;
        let refspec = format!("refs/heads/{BRANCH}:refs/heads/{BRANCH}");
        self.repo
            .find_remote("origin")
            .and_then(|mut origin| origin.push(&[refspec.as_str()], None))
            .map_err(self.git("push to origin"))?;
        Ok(id.to_string())
    }

    /// Fetches the remote's notes ([`NOTES_REF`]), as
    /// `git fetch origin refs/notes/kubelet-gitops:refs/notes/kubelet-gitops` does. False
    /// when the remote has none yet.
    pub fn fetch_notes(&self) -> Result<bool, DemoError> {
        let remote = Repository::open_bare(&self.remote).map_err(self.git("open the remote"))?;
        if remote.find_reference(NOTES_REF).is_err() {
            return Ok(false);
        }
        let refspec = format!("+{NOTES_REF}:{NOTES_REF}");
        self.repo
            .find_remote("origin")
            .and_then(|mut origin| origin.fetch(&[refspec.as_str()], None, None))
            .map_err(self.git("fetch the notes"))?;
        Ok(true)
    }

    /// Renders and validates `commit` as the reconciler will (what `kubelet-gitops plan`
    /// checks before a merge).
    pub fn render(&self, commit: &str) -> Result<RenderedRepo, DemoError> {
        let src = open_revision(&self.path, commit).map_err(|e| DemoError::Invalid {
            commit: commit.to_string(),
            errors: e.to_string(),
        })?;
        render_repo(&src, &RenderOptions::default()).map_err(|errors| DemoError::Invalid {
            commit: commit.to_string(),
            errors: errors
                .iter()
                .map(|e| format!("  {e}"))
                .collect::<Vec<_>>()
                .join("\n"),
        })
    }

    /// The commits of [`BRANCH`], newest first, with their subject and their note on
    /// [`NOTES_REF`] (what `git log --notes=kubelet-gitops` shows).
    pub fn notes(&self) -> Result<Vec<CommitNote>, DemoError> {
        let mut walk = self.repo.revwalk().map_err(self.git("walk the history"))?;
        walk.push_head().map_err(self.git("walk the history"))?;
        let mut out = Vec::new();
        for id in walk {
            let id = id.map_err(self.git("walk the history"))?;
            let commit = self
                .repo
                .find_commit(id)
                .map_err(self.git("read a commit"))?;
            let note = match self.repo.find_note(Some(NOTES_REF), id) {
                Ok(n) => Some(String::from_utf8_lossy(n.message_bytes()).into_owned()),
                Err(e) if e.code() == git2::ErrorCode::NotFound => None,
                Err(source) => {
                    return Err(DemoError::Git {
                        what: "read the notes",
                        path: self.path.clone(),
                        source,
                    });
                }
            };
            out.push(CommitNote {
                commit: id.to_string(),
                subject: String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default())
                    .into_owned(),
                note,
            });
        }
        Ok(out)
    }
}

/// A commit and the statuses noted on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitNote {
    pub commit: String,
    pub subject: String,
    /// The note's text: one `context: state: description` line per status.
    pub note: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(rel: &str) -> &'static str {
        EXAMPLE_FILES
            .iter()
            .find(|(r, _)| *r == rel)
            .map(|(_, t)| *t)
            .unwrap()
    }

    #[test]
    fn the_embedded_files_are_the_whole_example_repository() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples-repo");
        let mut on_disk = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    let rel = path.strip_prefix(&root).unwrap();
                    on_disk.push(rel.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        on_disk.sort();
        let mut embedded: Vec<String> = EXAMPLE_FILES.iter().map(|(r, _)| r.to_string()).collect();
        embedded.sort();
        assert_eq!(
            embedded, on_disk,
            "examples-repo changed: update EXAMPLE_FILES"
        );
    }

    #[test]
    fn timings_change_values_not_comments() {
        let text = "  rollout:\n    # healthTimeout: 3m in a comment\n    healthTimeout: 5m\n    lkgGrace: 1h   # an hour\n";
        let (out, n) = demo_timings(text, "10s", "5s");
        assert_eq!(n, 2);
        assert_eq!(
            out,
            "  rollout:\n    # healthTimeout: 3m in a comment\n    healthTimeout: 10s   # demo timing; the example says 5m\n    lkgGrace: 5s   # demo timing; the example says 1h\n"
        );
    }

    #[test]
    fn every_example_pool_gets_the_demo_timings() {
        let (settings, n) = demo_timings(example("kubelet-gitops.yaml"), "10s", "5s");
        assert_eq!(n, 2, "{settings}");
        for pool in ["pools/gpu.yaml", "pools/high-memory.yaml"] {
            let (_, n) = demo_timings(example(pool), "10s", "5s");
            assert_eq!(n, 2, "{pool} overrides both timings");
        }
    }

    #[test]
    fn general_max_pods_is_raised_once() {
        let out = raise_general_max_pods(example("pools/general.yaml")).unwrap();
        assert!(out.contains("    maxPods: 200\n"), "{out}");
        assert!(!out.contains("maxPods: 150\n"));
        assert!(matches!(
            raise_general_max_pods("kubelet:\n  maxPods: 110\n"),
            Err(DemoError::ExampleChanged(_))
        ));
    }

    #[test]
    fn gpu_gets_a_pod_logs_dir() {
        let out = gpu_pod_logs_dir(example("pools/gpu.yaml"), GPU_POD_LOGS).unwrap();
        assert!(out.contains("  kubelet:\n    # Container logs"), "{out}");
        assert!(out.contains("    podLogsDir: /mnt/nvme/pod-logs\n"));
        assert!(matches!(
            gpu_pod_logs_dir("spec: {}\n", GPU_POD_LOGS),
            Err(DemoError::ExampleChanged(_))
        ));
    }

    #[test]
    fn the_real_gpu_pool_reserves_one_cpu() {
        let out = real_gpu_pool(example("pools/gpu.yaml")).unwrap();
        assert!(
            out.contains("    reservedSystemCPUs: \"0\"   # real kubelets"),
            "{out}"
        );
        assert!(!out.contains("reservedSystemCPUs: \"0-1\"\n"));
        assert!(matches!(
            real_gpu_pool("spec: {}\n"),
            Err(DemoError::ExampleChanged(_))
        ));
    }

    #[test]
    fn the_real_base_replaces_what_this_machine_lacks_and_keeps_the_rest() {
        let paths = RealNodePaths {
            ca: PathBuf::from("/w/ca.crt"),
            workdir: PathBuf::from("/w"),
        };
        let example = example("base/kubelet.yaml");
        let out = real_kubelet_base(example, &paths).unwrap();
        for line in [
            "cgroupDriver: cgroupfs   # real kubelets on this machine; the example says systemd\n",
            "resolvConf: /etc/resolv.conf   # real kubelets",
            "staticPodPath: /w/etc/kubernetes/manifests   #",
            "    clientCAFile: /w/ca.crt   #",
            "\nfailSwapOn: false\nfailCgroupV1: false\n",
            "podLogsDir: /w/var/log/pods\n",
        ] {
            assert!(out.contains(line), "{line:?} in:\n{out}");
        }
        // Everything else is the example's, line for line.
        let kept = |t: &str| {
            t.lines()
                .filter(|l| {
                    ![
                        "cgroupDriver:",
                        "resolvConf:",
                        "staticPodPath:",
                        "clientCAFile:",
                    ]
                    .iter()
                    .any(|k| l.trim_start().starts_with(k))
                })
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(kept(example), kept(&out)[..kept(example).len()]);
        assert!(matches!(
            real_kubelet_base("cgroupDriver: systemd\n", &paths),
            Err(DemoError::ExampleChanged(m)) if m.contains("resolvConf:")
        ));
    }

    #[test]
    fn the_real_repository_validates_with_this_machines_settings() {
        let dir = tempfile::tempdir().unwrap();
        let paths = RealNodePaths {
            ca: dir.path().join("ca.crt"),
            workdir: dir.path().to_path_buf(),
        };
        let repo = DemoRepo::create(
            &dir.path().join("repo"),
            &dir.path().join("remote.git"),
            "30s",
            "5s",
            Some(&paths),
        )
        .unwrap();
        let c1 = repo.commit("examples").unwrap();
        let rendered = repo.render(&c1).unwrap();
        assert_eq!(rendered.pools.len(), 3);
        for pool in &rendered.pools {
            let c = &pool.config;
            assert_eq!(
                c.cgroup_driver.as_deref(),
                Some("cgroupfs"),
                "{}",
                pool.spec.name
            );
            assert_eq!(c.server_tls_bootstrap, Some(true), "the example's");
            assert_eq!(c.fail_swap_on, Some(false));
            assert_eq!(
                c.pod_logs_dir.as_deref(),
                Some(dir.path().join("var/log/pods").to_str().unwrap())
            );
        }
        assert_eq!(
            rendered
                .pool("gpu")
                .unwrap()
                .config
                .reserved_system_cpus
                .as_deref(),
            Some("0")
        );
    }

    #[test]
    fn the_demo_commits_validate_and_change_what_they_say() {
        let dir = tempfile::tempdir().unwrap();
        let repo = DemoRepo::create(
            &dir.path().join("repo"),
            &dir.path().join("remote.git"),
            "10s",
            "5s",
            None,
        )
        .unwrap();
        let c1 = repo.commit("examples").unwrap();
        let r1 = repo.render(&c1).unwrap();
        assert_eq!(r1.pools.len(), 3);
        let gpu = r1.pool("gpu").unwrap();
        assert_eq!(gpu.spec.rollout.health_timeout.as_secs(), 10);

        let general = repo.read("pools/general.yaml").unwrap();
        repo.write(
            "pools/general.yaml",
            &raise_general_max_pods(&general).unwrap(),
        )
        .unwrap();
        let c2 = repo.commit("general").unwrap();
        let r2 = repo.render(&c2).unwrap();
        assert_ne!(
            r1.pool("general").unwrap().configmap_name,
            r2.pool("general").unwrap().configmap_name
        );
        assert_eq!(r2.pool("general").unwrap().config.max_pods, Some(200));
        assert_eq!(gpu.configmap_name, r2.pool("gpu").unwrap().configmap_name);

        let g = repo.read("pools/gpu.yaml").unwrap();
        repo.write(
            "pools/gpu.yaml",
            &gpu_pod_logs_dir(&g, GPU_POD_LOGS).unwrap(),
        )
        .unwrap();
        let c3 = repo.commit("gpu").unwrap();
        let r3 = repo.render(&c3).unwrap();
        assert_eq!(
            r3.pool("gpu").unwrap().config.pod_logs_dir.as_deref(),
            Some(GPU_POD_LOGS)
        );
        assert_eq!(
            r2.pool("general").unwrap().configmap_name,
            r3.pool("general").unwrap().configmap_name
        );

        assert!(!repo.fetch_notes().unwrap(), "nobody wrote notes");
        let notes = repo.notes().unwrap();
        assert_eq!(notes.len(), 3);
        let pushed = Repository::open_bare(dir.path().join("remote.git")).unwrap();
        assert_eq!(
            pushed
                .find_reference("refs/heads/main")
                .unwrap()
                .target()
                .unwrap()
                .to_string(),
            c3,
            "every commit is pushed"
        );
        assert_eq!(notes[0].subject, "gpu");
        assert!(notes.iter().all(|n| n.note.is_none()));
    }
}
