//! [`Proc`]: one child process of a scenario, its output in a log file, killed when
//! dropped; and [`Binaries`]: where the workspace's binaries are.

use std::ffi::OsString;
use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use tokio::process::{Child, Command};

use crate::E2eError;

/// The workspace binaries a scenario runs.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// `kubelet-gitops` (the reconciler).
    pub reconciler: PathBuf,
    /// `kubelet-gitops-agent`.
    pub agent: PathBuf,
    /// `kubelet-gitops-sim`.
    pub sim: PathBuf,
}

/// Overrides the directory the binaries are taken from.
pub const BIN_DIR_ENV: &str = "KUBELET_GITOPS_E2E_BIN_DIR";

impl Binaries {
    /// The binaries next to the running test executable: cargo puts test executables
    /// in `target/<profile>/deps/` and binaries in `target/<profile>/`.
    /// [`BIN_DIR_ENV`] overrides the directory.
    pub fn locate() -> Result<Binaries, E2eError> {
        let dir = match std::env::var_os(BIN_DIR_ENV) {
            Some(d) => PathBuf::from(d),
            None => {
                let exe = std::env::current_exe()
                    .map_err(E2eError::io("locating the test executable"))?;
                exe.parent()
                    .and_then(Path::parent)
                    .map(Path::to_path_buf)
                    .ok_or_else(|| E2eError::Unexpected {
                        what: "locating the target directory".into(),
                        message: format!("{} has no grandparent", exe.display()),
                    })?
            }
        };
        let bin = |name: &str| dir.join(name);
        let found = Binaries {
            reconciler: bin("kubelet-gitops"),
            agent: bin("kubelet-gitops-agent"),
            sim: bin("kubelet-gitops-sim"),
        };
        let missing = missing_files(&[&found.reconciler, &found.agent, &found.sim]);
        if missing.is_empty() {
            Ok(found)
        } else {
            Err(E2eError::MissingBinaries { dir, missing })
        }
    }
}

/// The file names of `paths` that are not files.
pub(crate) fn missing_files(paths: &[&PathBuf]) -> Vec<String> {
    paths
        .iter()
        .filter(|p| !p.is_file())
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect()
}

/// A child process whose stdout and stderr go to a log file. It is SIGKILLed when
/// dropped, so a failing scenario leaves nothing running.
#[derive(Debug)]
pub struct Proc {
    name: String,
    program: PathBuf,
    args: Vec<OsString>,
    log: PathBuf,
    child: Option<Child>,
    starts: u32,
}

impl Proc {
    /// Starts `program args...`, appending its output to `log`.
    pub fn spawn(
        name: impl Into<String>,
        program: &Path,
        args: Vec<OsString>,
        log: PathBuf,
    ) -> Result<Proc, E2eError> {
        let mut p = Proc {
            name: name.into(),
            program: program.to_path_buf(),
            args,
            log,
            child: None,
            starts: 0,
        };
        p.start()?;
        Ok(p)
    }

    /// The process's name in messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Its pid while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// Starts it (again) with the same arguments; a restart is marked in the log.
    pub fn start(&mut self) -> Result<(), E2eError> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(E2eError::io(format!("opening {}", self.log.display())))?;
        self.starts += 1;
        if self.starts > 1 {
            let _ = writeln!(file, "===== e2e: {} started again =====", self.name);
        }
        let err = file
            .try_clone()
            .map_err(E2eError::io(format!("opening {}", self.log.display())))?;
        // In an empty directory of its own beside its log, never the test's (the package's
        // directory): a process that writes or removes relative paths stays in the
        // scenario (a real kubelet once removed the files of its working directory).
        let mut cmd = Command::new(&self.program);
        if let Some(dir) = self.log.parent() {
            let cwd = dir.join(format!("cwd-{}", self.name));
            if std::fs::create_dir_all(&cwd).is_ok() {
                cmd.current_dir(&cwd);
            }
        }
        let child = cmd
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(file))
            .stderr(Stdio::from(err))
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| E2eError::Spawn {
                program: self.program.display().to_string(),
                source,
            })?;
        self.child = Some(child);
        Ok(())
    }

    /// SIGKILLs it and reaps it (a crash, as far as it can tell).
    pub async fn kill(&mut self) -> Result<(), E2eError> {
        if let Some(mut child) = self.child.take() {
            let what = format!("killing {}", self.name);
            child.start_kill().map_err(E2eError::io(what.clone()))?;
            child.wait().await.map_err(E2eError::io(what))?;
        }
        Ok(())
    }

    /// The exit status if it exited on its own (it is then reaped), `None` while it runs
    /// or after [`Proc::kill`].
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => {
                self.child = None;
                Some(status)
            }
            _ => None,
        }
    }

    /// An error if the process is expected to run but has exited.
    pub fn check_running(&mut self) -> Result<(), E2eError> {
        match self.exited() {
            Some(status) => Err(E2eError::Exited {
                name: self.name.clone(),
                status: status.to_string(),
                log: self.log.clone(),
            }),
            None => Ok(()),
        }
    }
}

/// The last `n` lines of `path` (empty if it cannot be read).
pub fn tail(path: &Path, n: usize) -> Vec<String> {
    let Ok(file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let lines: Vec<String> = std::io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

/// Runs a helper command to completion; its stderr is the error.
pub async fn run(program: &str, args: &[&str], cwd: Option<&Path>) -> Result<String, E2eError> {
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null()).kill_on_drop(true);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    // Hermetic git: no user or system configuration.
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0");
    let command = format!("{program} {}", args.join(" "));
    let out = cmd.output().await.map_err(|source| E2eError::Spawn {
        program: program.to_string(),
        source,
    })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(E2eError::Command {
            command,
            detail: format!(
                "{}: {}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim(),
                String::from_utf8_lossy(&out.stdout).trim()
            ),
        })
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (for processes that must be
/// told their port up front). The scenarios run concurrently, and every process binding
/// port 0 meanwhile gets one from the kernel's ephemeral range: so the port comes from
/// below that range, where only such hand-outs go, and none is handed out twice by this
/// process. Where the ephemeral range leaves no room below it, the kernel picks.
pub fn free_port() -> Result<u16, E2eError> {
    use std::sync::atomic::{AtomicU16, Ordering};
    // Below the default ephemeral range (32768-60999), above the well-known services.
    const LOW: u16 = 20_000;
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    if ephemeral_low > LOW + 1_000 {
        let span = ephemeral_low - LOW;
        // Processes of other test binaries start elsewhere in the span.
        let _ = NEXT.compare_exchange(
            0,
            (std::process::id() % u32::from(span)) as u16,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        for _ in 0..span {
            let port = LOW + NEXT.fetch_add(1, Ordering::Relaxed) % span;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    let l =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(E2eError::io("finding a free port"))?;
    let port = l
        .local_addr()
        .map_err(E2eError::io("finding a free port"))?
        .port();
    Ok(port)
}

/// `word` in single quotes for a POSIX shell (and for the agent's command-line split).
pub fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@,+".contains(&b))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
