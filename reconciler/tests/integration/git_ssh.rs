//! The git source over SSH, end to end: a real OpenSSH server (`/usr/sbin/sshd`, started
//! per test on a free loopback port with its own host key and authorized_keys in a temp
//! dir) serves a bare repository, and [`GitRepo`] fetches it with a private key and a
//! known_hosts file, as the reconciler does with the Secret's files.
//!
//! Without sshd (or when it cannot start: not root, no privilege separation directory)
//! each test prints `SKIPPED: <reason>` and passes, unless `KUBELET_GITOPS_E2E_REQUIRE=1`
//! (CI sets it), when it fails.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reconciler::git::{GitAuth, GitConfig, GitError, GitRepo};
use reconciler::source::FileSource;

const SSHD: &str = "/usr/sbin/sshd";
const REQUIRE_ENV: &str = "KUBELET_GITOPS_E2E_REQUIRE";
/// How long sshd may take to listen before the test gives up on it (not an assertion on
/// speed: a bound so that a wedged sshd fails the test instead of hanging it).
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Skips the test (None) with a `SKIPPED` line, or fails it when CI requires the e2e tools.
fn skip<T>(test: &str, reason: &str) -> Option<T> {
    if std::env::var(REQUIRE_ENV).as_deref() == Ok("1") {
        panic!("{test}: {reason} ({REQUIRE_ENV}=1: .ci/run must install openssh-server)");
    }
    // Written to the stderr handle, not with eprintln!, so that libtest's output capture
    // does not hide the skip.
    let _ = writeln!(std::io::stderr(), "SKIPPED: {test}: {reason}");
    None
}

/// Runs git in `dir` with a fixed identity and no user or system configuration.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

/// `ssh-keygen` with `args`; Err with its output when it cannot run or fails.
fn ssh_keygen(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ssh-keygen")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run ssh-keygen: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ssh-keygen {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Makes an unencrypted ed25519 key pair at `path` (and `path.pub`); returns the public
/// key as `<type> <base64>`, without the comment.
fn new_key(path: &Path) -> Result<String, String> {
    ssh_keygen(&[
        "-q",
        "-t",
        "ed25519",
        "-N",
        "",
        "-C",
        "test",
        "-f",
        path_str(path),
    ])?;
    let public = std::fs::read_to_string(path.with_extension("pub"))
        .map_err(|e| format!("reading {}.pub: {e}", path.display()))?;
    let fields: Vec<&str> = public.split_whitespace().take(2).collect();
    Ok(fields.join(" "))
}

/// A port nobody listens on right now (sshd may still lose it to a race: see `Sshd`).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

/// An sshd child process, killed when dropped.
struct Sshd {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sshd {
    /// What sshd logged (`-e`), for failure messages.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Starts sshd in `dir` (host key, authorized_keys already there) for `user`. Err with
    /// the reason when it cannot run here.
    fn start(dir: &Path, user: &str) -> Result<Sshd, String> {
        if !Path::new(SSHD).is_file() {
            return Err(format!("{SSHD} not found (install openssh-server)"));
        }
        // sshd refuses to start without its privilege separation directory, which the
        // service manager creates at boot; containers without one lack it.
        let privsep = Path::new("/run/sshd");
        if !privsep.is_dir() {
            std::fs::create_dir_all(privsep)
                .map_err(|e| format!("cannot create {}: {e}", privsep.display()))?;
        }
        let config = dir.join("sshd_config");
        let log = dir.join("sshd.log");
        let mut last_failure = String::new();
        // A port found free can be taken by someone else before sshd binds it: try again
        // on another one.
        for _attempt in 0..5 {
            let port = free_port();
            let text = format!(
                "Port {port}\n\
                 ListenAddress 127.0.0.1\n\
                 HostKey {dir}/host_ed25519\n\
                 AuthorizedKeysFile {dir}/authorized_keys\n\
                 PidFile {dir}/sshd.pid\n\
                 PubkeyAuthentication yes\n\
                 PasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\n\
                 PermitRootLogin prohibit-password\n\
                 AllowUsers {user}\n\
                 StrictModes no\n\
                 UsePAM no\n\
                 LogLevel VERBOSE\n",
                dir = dir.display()
            );
            std::fs::write(&config, text).map_err(|e| format!("writing sshd_config: {e}"))?;
            let stderr = std::fs::File::create(&log).map_err(|e| format!("sshd log: {e}"))?;
            let child = Command::new(SSHD)
                .args(["-D", "-e", "-f", path_str(&config)])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(stderr)
                .spawn()
                .map_err(|e| format!("cannot run {SSHD}: {e}"))?;
            let mut sshd = Sshd {
                child,
                port,
                log: log.clone(),
            };
            match sshd.wait_listening() {
                Ok(()) => return Ok(sshd),
                Err(failure) => {
                    last_failure = failure;
                    if !last_failure.contains("Address already in use") {
                        break;
                    }
                }
            }
        }
        Err(format!("sshd did not start: {last_failure}"))
    }

    /// Waits until sshd answers with its banner on the port, or exits.
    fn wait_listening(&mut self) -> Result<(), String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("{SSHD} exited ({status}): {}", self.log()));
            }
            if let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut banner = [0u8; 8];
                if stream.read_exact(&mut banner).is_ok()
                    && &banner == b"SSH-2.0-"
                    && matches!(self.child.try_wait(), Ok(None))
                {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{SSHD} not listening on {addr} after {START_TIMEOUT:?}: {}",
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A bare repository with one commit, served by sshd, and the keys to reach it.
struct Fixture {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    sshd: Sshd,
    user: String,
    work: PathBuf,
    bare: PathBuf,
    user_key: PathBuf,
    /// The server's host key, `ssh-ed25519 <base64>`.
    host_key: String,
    /// The commit the bare repository's `main` holds at first.
    first: String,
}

impl Fixture {
    fn start(test: &str) -> Option<Fixture> {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let user = match Command::new("whoami").output() {
            Ok(out) if out.status.success() => {
                String::from_utf8_lossy(&out.stdout).trim().to_string()
            }
            Ok(out) => panic!("whoami: {}", String::from_utf8_lossy(&out.stderr)),
            Err(e) => panic!("whoami: {e}"),
        };
        let user_key = dir.join("id_ed25519");
        let keys = new_key(&user_key).and_then(|user_public| {
            std::fs::write(dir.join("authorized_keys"), format!("{user_public}\n"))
                .map_err(|e| format!("writing authorized_keys: {e}"))?;
            new_key(&dir.join("host_ed25519"))
        });
        let host_key = match keys {
            Ok(host_key) => host_key,
            Err(reason) => return skip(test, &reason),
        };

        let work = dir.join("work");
        let bare = dir.join("remote.git");
        std::fs::create_dir(&work).expect("mkdir work");
        git(&work, &["init", "-q"]);
        std::fs::write(work.join("kubelet-gitops.yaml"), "namespace: a\n").expect("write");
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "-m", "first"]);
        let first = git(&work, &["rev-parse", "HEAD"]);
        git(&dir, &["init", "-q", "--bare", path_str(&bare)]);
        git(&work, &["remote", "add", "origin", path_str(&bare)]);
        git(&work, &["push", "-q", "origin", "main"]);

        let sshd = match Sshd::start(&dir, &user) {
            Ok(sshd) => sshd,
            Err(reason) => return skip(test, &reason),
        };
        Some(Fixture {
            _tmp: tmp,
            dir,
            sshd,
            user,
            work,
            bare,
            user_key,
            host_key,
            first,
        })
    }

    /// `[127.0.0.1]:<port>`, the name known_hosts lists a non-22 port under.
    fn host(&self) -> String {
        format!("[127.0.0.1]:{}", self.sshd.port)
    }

    fn url(&self) -> String {
        format!(
            "ssh://{}@127.0.0.1:{}{}",
            self.user,
            self.sshd.port,
            self.bare.display()
        )
    }

    /// Writes a known_hosts file named `name` with `text`; returns its path.
    fn known_hosts(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).expect("write known_hosts");
        path
    }

    /// A cache `cache` of `main` over SSH with the user key and `known_hosts`.
    fn open(&self, cache: &str, known_hosts: &Path) -> GitRepo {
        self.open_with_key(cache, known_hosts, &self.user_key)
    }

    fn open_with_key(&self, cache: &str, known_hosts: &Path, key: &Path) -> GitRepo {
        GitRepo::open(GitConfig {
            url: self.url(),
            branch: "main".to_string(),
            auth: GitAuth::Ssh {
                // The user in the URL wins; this one must not be used.
                username: "git".to_string(),
                key_file: key.to_path_buf(),
                known_hosts_file: known_hosts.to_path_buf(),
            },
            cache_dir: self.dir.join(cache),
            extra_refspecs: Vec::new(),
        })
        .expect("open cache")
    }

    /// Commits `body` to the file and pushes it to the bare repository (locally, not over
    /// SSH); returns the new commit id.
    fn push(&self, body: &str, message: &str) -> String {
        std::fs::write(self.work.join("kubelet-gitops.yaml"), body).expect("write");
        git(&self.work, &["commit", "-q", "-a", "-m", message]);
        git(&self.work, &["push", "-q", "origin", "main"]);
        git(&self.work, &["rev-parse", "HEAD"])
    }
}

#[test]
fn fetches_over_ssh_with_a_key_and_known_hosts_then_incrementally() {
    let Some(fx) = Fixture::start("fetches_over_ssh_with_a_key_and_known_hosts_then_incrementally")
    else {
        return;
    };
    let known_hosts = fx.known_hosts("known_hosts", &format!("{} {}\n", fx.host(), fx.host_key));
    let mut repo = fx.open("cache", &known_hosts);

    let got = repo
        .fetch()
        .unwrap_or_else(|e| panic!("first fetch: {e}\nsshd log:\n{}", fx.sshd.log()));
    assert_eq!(got.head, fx.first);
    assert_eq!(got.previous, None);
    assert!(got.changed && !got.forced);
    assert_eq!(got.received_objects, 3, "commit, tree, blob");
    let src = repo.commit_source(&got.head).expect("commit source");
    assert_eq!(
        src.read("kubelet-gitops.yaml").expect("read"),
        b"namespace: a\n"
    );

    let again = repo.fetch().expect("unchanged fetch");
    assert_eq!(again.head, fx.first);
    assert!(!again.changed);
    assert_eq!(again.received_objects, 0, "nothing new, nothing sent");

    let second = fx.push("namespace: b\n", "second");
    let next = repo
        .fetch()
        .unwrap_or_else(|e| panic!("incremental fetch: {e}\nsshd log:\n{}", fx.sshd.log()));
    assert_eq!(next.head, second);
    assert_eq!(next.previous.as_deref(), Some(fx.first.as_str()));
    assert!(next.changed && !next.forced);
    // Only the new commit, its root tree and the changed blob.
    assert_eq!(next.received_objects, 3);
    let src = repo.commit_source(&second).expect("commit source");
    assert_eq!(
        src.read("kubelet-gitops.yaml").expect("read"),
        b"namespace: b\n"
    );
    assert_eq!(src.summary(), "second");
}

#[test]
fn a_changed_host_key_is_refused_naming_the_host_and_the_file() {
    let Some(fx) = Fixture::start("a_changed_host_key_is_refused_naming_the_host_and_the_file")
    else {
        return;
    };
    let other = new_key(&fx.dir.join("other_host_key")).expect("another key");
    assert_ne!(other, fx.host_key);
    let known_hosts = fx.known_hosts(
        "known_hosts",
        &format!("# another server\n{} {other}\n", fx.host()),
    );
    let mut repo = fx.open("cache", &known_hosts);

    let err = repo.fetch().expect_err("a changed host key is refused");
    let text = err.to_string();
    match &err {
        GitError::HostKeyMismatch {
            host,
            key_type,
            known_hosts: file,
            lines,
        } => {
            assert_eq!(host, &fx.host());
            assert_eq!(key_type, "ssh-ed25519");
            assert_eq!(file, &known_hosts);
            assert_eq!(lines, &vec![2]);
        }
        other => panic!("expected a host key mismatch, got {other:?}"),
    }
    assert!(text.contains(&fx.host()), "{text}");
    assert!(text.contains(path_str(&known_hosts)), "{text}");
    assert!(!err.is_retryable(), "a person must act: {text}");
    assert_eq!(repo.head(), None, "nothing fetched from an unverified host");
}

#[test]
fn an_unknown_host_is_refused() {
    let Some(fx) = Fixture::start("an_unknown_host_is_refused") else {
        return;
    };
    // Empty, then the right key listed under the port-22 name, which is another host.
    for (name, text) in [
        ("empty_known_hosts", String::new()),
        (
            "port_22_known_hosts",
            format!("127.0.0.1 {}\n", fx.host_key),
        ),
    ] {
        let known_hosts = fx.known_hosts(name, &text);
        let mut repo = fx.open(&format!("cache-{name}"), &known_hosts);
        let err = repo.fetch().expect_err(name);
        match &err {
            GitError::UnknownHostKey {
                host,
                key_type,
                known_hosts: file,
            } => {
                assert_eq!(host, &fx.host(), "{name}");
                assert_eq!(key_type, "ssh-ed25519", "{name}");
                assert_eq!(file, &known_hosts, "{name}");
            }
            other => panic!("{name}: expected an unknown host key, got {other:?}"),
        }
        let text = err.to_string();
        assert!(text.contains(path_str(&known_hosts)), "{text}");
        assert!(!err.is_retryable(), "{text}");
        assert_eq!(repo.head(), None, "{name}");
    }
}

#[test]
fn a_hashed_known_hosts_entry_is_accepted() {
    let Some(fx) = Fixture::start("a_hashed_known_hosts_entry_is_accepted") else {
        return;
    };
    let known_hosts = fx.known_hosts("known_hosts", &format!("{} {}\n", fx.host(), fx.host_key));
    ssh_keygen(&["-q", "-H", "-f", path_str(&known_hosts)]).expect("hash known_hosts");
    let hashed = std::fs::read_to_string(&known_hosts).expect("read known_hosts");
    assert!(hashed.starts_with("|1|"), "{hashed}");
    assert!(!hashed.contains("127.0.0.1"), "{hashed}");

    let mut repo = fx.open("cache", &known_hosts);
    let got = repo
        .fetch()
        .unwrap_or_else(|e| panic!("fetch: {e}\nsshd log:\n{}", fx.sshd.log()));
    assert_eq!(got.head, fx.first);
}

#[test]
fn a_key_the_server_does_not_accept_is_an_auth_error() {
    let Some(fx) = Fixture::start("a_key_the_server_does_not_accept_is_an_auth_error") else {
        return;
    };
    let known_hosts = fx.known_hosts("known_hosts", &format!("{} {}\n", fx.host(), fx.host_key));
    let stranger = fx.dir.join("stranger_key");
    new_key(&stranger).expect("another user key");
    let mut repo = fx.open_with_key("cache", &known_hosts, &stranger);

    let err = repo.fetch().expect_err("an unauthorized key is rejected");
    assert!(matches!(err, GitError::Auth { .. }), "{err:?}");
    assert!(err.is_retryable(), "a rotated key Secret may fix it: {err}");
    let text = err.to_string();
    assert!(text.contains(&fx.url()), "{text}");
    assert!(
        !text.contains("PRIVATE KEY"),
        "the key never appears: {text}"
    );
    assert_eq!(repo.head(), None);
}
