//! Real signed commits for the signature tests: keys made by `ssh-keygen -t ed25519` and
//! by gpg in a throwaway `GNUPGHOME`, and commits made by `git commit -S` with
//! `gpg.format=ssh` or gpg, as a developer would make them.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::commands::{git, git_command, text};

/// An ed25519 key pair made by ssh-keygen, for `gpg.format=ssh`.
pub struct SshKey {
    /// The private key file (`user.signingkey`).
    pub private: PathBuf,
    /// `ssh-ed25519 AAAA...` (without comment).
    pub public: String,
    /// `SHA256:...`, as `ssh-keygen -l` prints it.
    pub fingerprint: String,
}

impl SshKey {
    /// A new key `dir/name`, without passphrase.
    pub fn generate(dir: &Path, name: &str) -> SshKey {
        let private = dir.join(name);
        run(Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
            .arg(&private));
        let pub_file = private.with_extension("pub");
        let line = std::fs::read_to_string(&pub_file).unwrap();
        let public = line
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        // `256 SHA256:... name (ED25519)`
        let listed = run(Command::new("ssh-keygen").arg("-lf").arg(&pub_file));
        let fingerprint = listed.split_whitespace().nth(1).unwrap().to_string();
        assert!(fingerprint.starts_with("SHA256:"), "{listed}");
        SshKey {
            private,
            public,
            fingerprint,
        }
    }

    /// An allowed-signers line for this key: `principal [options] key`.
    pub fn allowed(&self, principal: &str, options: &str) -> String {
        format!("{principal} {options} {}\n", self.public)
    }
}

/// A throwaway gpg home (its agent stopped when dropped).
pub struct GpgHome {
    pub dir: PathBuf,
}

impl GpgHome {
    /// A new, empty home at `dir` (mode 0700, as gpg wants).
    pub fn new(dir: &Path) -> GpgHome {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        GpgHome {
            dir: dir.to_path_buf(),
        }
    }

    fn gpg(&self) -> Command {
        let mut c = Command::new("gpg");
        c.env("GNUPGHOME", &self.dir).args(["--batch", "--quiet"]);
        c
    }

    /// A new key for `uid` (gpg's default algorithms, no passphrase, no expiry): its
    /// fingerprint, upper-case hex.
    pub fn generate(&self, uid: &str) -> String {
        run(self.gpg().args([
            "--passphrase",
            "",
            "--quick-gen-key",
            uid,
            "default",
            "default",
            "never",
        ]));
        let listed = run(self.gpg().args(["--with-colons", "--list-keys", uid]));
        listed
            .lines()
            .find_map(|l| l.strip_prefix("fpr:"))
            .map(|rest| rest.trim_matches(':').to_string())
            .expect("a fingerprint")
    }

    /// The public key `fingerprint`, armored (`gpg --export --armor`).
    pub fn export(&self, fingerprint: &str) -> String {
        run(self.gpg().args(["--export", "--armor", fingerprint]))
    }
}

impl Drop for GpgHome {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf")
            .env("GNUPGHOME", &self.dir)
            .args(["--kill", "gpg-agent"])
            .output();
    }
}

/// How a commit is signed.
pub enum Signing<'a> {
    Unsigned,
    Ssh(&'a SshKey),
    /// The gpg home and the key's fingerprint.
    Gpg(&'a GpgHome, &'a str),
}

/// Commits everything in the work tree `work` with `git commit -S` as `signing` says;
/// the commit id.
pub fn commit(work: &Path, message: &str, signing: &Signing<'_>) -> String {
    git(work, &["add", "-A"]);
    let mut c = git_command(work);
    match signing {
        Signing::Unsigned => {
            c.arg("commit");
        }
        Signing::Ssh(key) => {
            c.args(["-c", "gpg.format=ssh", "-c"])
                .arg(format!("user.signingkey={}", key.private.display()))
                .args(["commit", "-S"]);
        }
        Signing::Gpg(home, fingerprint) => {
            c.env("GNUPGHOME", &home.dir)
                .args(["-c", "gpg.format=openpgp", "-c"])
                .arg(format!("user.signingkey={fingerprint}"))
                .args(["commit", "-S"]);
        }
    }
    let out = c
        .args(["-q", "--allow-empty", "-m", message])
        .output()
        .expect("run git commit");
    assert!(
        out.status.success(),
        "git commit in {}: {}",
        work.display(),
        text(&out.stderr)
    );
    git(work, &["rev-parse", "HEAD"])
}

/// A copy of commit `id` whose message says `message` instead, its signature kept (the
/// signature no longer covers it): the new object's id. Not on any branch.
pub fn tampered(work: &Path, id: &str, message: &str) -> String {
    let object = git(work, &["cat-file", "commit", id]);
    let (headers, _) = object.split_once("\n\n").expect("a commit message");
    assert!(headers.contains("gpgsig"), "{id} is not signed");
    let forged = format!("{headers}\n\n{message}\n");
    let out = git_command(work)
        .args(["hash-object", "-t", "commit", "-w", "--stdin"])
        .stdin_bytes(forged.as_bytes());
    assert!(
        out.status.success(),
        "git hash-object: {}",
        text(&out.stderr)
    );
    text(&out.stdout).trim().to_string()
}

/// Feeding a command's stdin.
trait StdinBytes {
    fn stdin_bytes(&mut self, input: &[u8]) -> std::process::Output;
}

impl StdinBytes for Command {
    fn stdin_bytes(&mut self, input: &[u8]) -> std::process::Output {
        use std::io::Write;
        use std::process::Stdio;
        let mut child = self
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input)
            .expect("write stdin");
        child.wait_with_output().expect("wait")
    }
}

/// Runs `c`, which must succeed: its stdout.
fn run(c: &mut Command) -> String {
    let out = c.output().unwrap_or_else(|e| panic!("run {c:?}: {e}"));
    assert!(
        out.status.success(),
        "{c:?}: {}{}",
        text(&out.stderr),
        text(&out.stdout)
    );
    text(&out.stdout)
}
