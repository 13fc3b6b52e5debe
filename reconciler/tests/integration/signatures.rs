//! Commit signatures (`run --require-signed-commits`), with commits signed by the real
//! `git commit -S`, ssh (keys from `ssh-keygen -t ed25519`) and gpg (a throwaway
//! `GNUPGHOME`): the decision ([`signature::verify`], pure) for each case, then the loop
//! on the simulated cluster: a signed commit rolls out with its key on the ConfigMaps, an
//! unsigned one or one signed by an unknown key applies nothing and gets an `error`
//! status saying why.

use std::path::{Path, PathBuf};

use crate::support::commands::git;
use crate::support::signing::{GpgHome, Signing, SshKey, commit, tampered};
use crate::support::*;
use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::protocol::{SOURCE_COMMIT, SOURCE_SIGNING_KEY};
use reconciler::git::CommitSource;
use reconciler::git::signature::{
    self, SignatureFormat, SignaturePolicy, SignatureRefusal, Signer,
};
use reconciler::status::{StatusState, commit_statuses};

/// A work tree with one file, for commits.
fn work_tree(dir: &Path) -> PathBuf {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q"]);
    work
}

/// Writes `n` into a file of `work` and commits it as `signing` says.
fn change(work: &Path, n: usize, signing: &Signing<'_>) -> String {
    std::fs::write(work.join("file"), format!("{n}\n")).unwrap();
    commit(work, &format!("change {n}"), signing)
}

/// The decision for commit `id` of `work`.
fn decide(policy: &SignaturePolicy, work: &Path, id: &str) -> Result<Signer, SignatureRefusal> {
    let src = CommitSource::open(work, id, "test").expect("open commit");
    signature::verify(policy, &src.signature().expect("read signature"))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn ssh_policy(dir: &Path, allowed_signers: &str) -> (SignaturePolicy, PathBuf) {
    let path = write(dir, "allowed_signers", allowed_signers);
    (
        SignaturePolicy::load(Some(&path), None).expect("allowed signers load"),
        path,
    )
}

#[test]
fn ssh_signatures_verify_against_the_allowed_signers_and_nothing_else_does() {
    let tmp = tempfile::tempdir().unwrap();
    let work = work_tree(tmp.path());
    let alice = SshKey::generate(tmp.path(), "alice");
    let mallory = SshKey::generate(tmp.path(), "mallory");
    let (policy, path) = ssh_policy(
        tmp.path(),
        &format!("# the team\n{}", alice.allowed("alice@example.com", "")),
    );

    // Signed by the allowed key: accepted, naming the key as ssh-keygen does.
    let good = change(&work, 1, &Signing::Ssh(&alice));
    let signer = decide(&policy, &work, &good).expect("alice's commit");
    assert_eq!(
        signer,
        Signer {
            format: SignatureFormat::Ssh,
            fingerprint: alice.fingerprint.clone(),
            identity: "alice@example.com".into(),
            listed_at: format!("{}:2", path.display()),
        }
    );

    // Unsigned.
    let unsigned = change(&work, 2, &Signing::Unsigned);
    let refusal = decide(&policy, &work, &unsigned).expect_err("unsigned");
    assert_eq!(refusal, SignatureRefusal::Unsigned);
    assert_eq!(
        refusal.to_string(),
        "not signed (signed commits are required)"
    );

    // Signed by a key the file does not list.
    let unknown = change(&work, 3, &Signing::Ssh(&mallory));
    let refusal = decide(&policy, &work, &unknown).expect_err("mallory's commit");
    assert_eq!(
        refusal.to_string(),
        format!(
            "signed by key {}, which is not in {}",
            mallory.fingerprint,
            path.display()
        )
    );
    assert_eq!(refusal.kind(), "unknown_key");

    // Alice's signature over a commit whose message was changed afterwards.
    let forged = tampered(&work, &good, "change 1, and something else");
    let refusal = decide(&policy, &work, &forged).expect_err("tampered");
    assert!(
        matches!(&refusal, SignatureRefusal::BadSignature { fingerprint, .. } if *fingerprint == alice.fingerprint),
        "{refusal:?}"
    );
    assert!(
        refusal.to_string().starts_with(&format!(
            "bad signature by key {} (alice@example.com): ",
            alice.fingerprint
        )),
        "{refusal}"
    );

    // An ssh signature when only OpenPGP keys are trusted.
    let gpg_only_home = GpgHome::new(&tmp.path().join("gnupg"));
    let fpr = gpg_only_home.generate("Carol <carol@example.com>");
    let keys = write(tmp.path(), "trusted.asc", &gpg_only_home.export(&fpr));
    let gpg_only = SignaturePolicy::load(None, Some(&keys)).unwrap();
    assert_eq!(
        decide(&gpg_only, &work, &good).expect_err("no ssh keys"),
        SignatureRefusal::FormatNotTrusted {
            format: SignatureFormat::Ssh,
            flag: "--allowed-signers",
        }
    );
}

#[test]
fn an_allowed_signers_line_applies_only_inside_its_window_and_for_namespace_git() {
    let tmp = tempfile::tempdir().unwrap();
    let work = work_tree(tmp.path());
    let alice = SshKey::generate(tmp.path(), "alice");
    let id = change(&work, 1, &Signing::Ssh(&alice));
    let committed = git(&work, &["log", "-1", "--format=%ct", &id]);
    let committed: i64 = committed.parse().unwrap();

    // The key's window ended in 2020: the commit (made now) is outside it.
    let (policy, path) = ssh_policy(
        tmp.path(),
        &alice.allowed("alice@example.com", "valid-before=\"20200101Z\""),
    );
    let refusal = decide(&policy, &work, &id).expect_err("expired");
    assert_eq!(refusal.kind(), "key_not_valid");
    let text = refusal.to_string();
    assert!(
        text.starts_with(&format!(
            "signed by key {} (alice@example.com) outside its validity: committed ",
            alice.fingerprint
        )) && text.ends_with(&format!(
            ", valid-before 2020-01-01T00:00:00Z ({}:1)",
            path.display()
        )),
        "{text}"
    );

    // Not valid yet.
    let (policy, _) = ssh_policy(
        tmp.path(),
        &alice.allowed("alice@example.com", "valid-after=\"29990101\""),
    );
    let text = decide(&policy, &work, &id)
        .expect_err("not yet")
        .to_string();
    assert!(text.contains("valid-after 2999-01-01T00:00:00Z"), "{text}");

    // A window around the commit time, and a second line for the same key: the first
    // line that allows it wins.
    let (policy, path) = ssh_policy(
        tmp.path(),
        &format!(
            "{}{}",
            alice.allowed("old@example.com", "valid-before=\"20200101\""),
            alice.allowed(
                "alice@example.com",
                "namespaces=\"git\",valid-after=\"20200101\""
            )
        ),
    );
    let signer = decide(&policy, &work, &id).expect("inside the window");
    assert_eq!(signer.identity, "alice@example.com");
    assert_eq!(signer.listed_at, format!("{}:2", path.display()));
    assert!(committed > 1_577_836_800);

    // A line for other namespaces only.
    let (policy, _) = ssh_policy(
        tmp.path(),
        &alice.allowed("alice@example.com", "namespaces=\"file,email\""),
    );
    let refusal = decide(&policy, &work, &id).expect_err("namespace");
    assert!(
        refusal
            .to_string()
            .contains("does not allow for namespace \"git\" (namespaces=\"file,email\")"),
        "{refusal}"
    );
}

#[test]
fn gpg_signatures_verify_against_the_trusted_keys_and_nothing_else_does() {
    let tmp = tempfile::tempdir().unwrap();
    let work = work_tree(tmp.path());
    let home = GpgHome::new(&tmp.path().join("gnupg"));
    let alice = home.generate("Alice <alice@example.com>");
    let mallory = home.generate("Mallory <mallory@example.com>");
    // A keyring of alice only (two blocks: the second a key nobody signs with).
    let bob_home = GpgHome::new(&tmp.path().join("gnupg-bob"));
    let bob = bob_home.generate("Bob <bob@example.com>");
    let keys = write(
        tmp.path(),
        "trusted.asc",
        &format!("{}\n{}", home.export(&alice), bob_home.export(&bob)),
    );
    let policy = SignaturePolicy::load(None, Some(&keys)).expect("keyring loads");
    assert_eq!(policy.counts(), (0, 2));

    let good = change(&work, 1, &Signing::Gpg(&home, &alice));
    let signer = decide(&policy, &work, &good).expect("alice's commit");
    assert_eq!(signer.format, SignatureFormat::OpenPgp);
    assert_eq!(signer.fingerprint, alice);
    assert_eq!(signer.identity, "Alice <alice@example.com>");
    assert_eq!(signer.listed_at, format!("{}:1", keys.display()));

    let unknown = change(&work, 2, &Signing::Gpg(&home, &mallory));
    let refusal = decide(&policy, &work, &unknown).expect_err("mallory's commit");
    assert_eq!(
        refusal.to_string(),
        format!(
            "signed by key {mallory}, which is not in {}",
            keys.display()
        )
    );

    let forged = tampered(&work, &good, "change 1, and something else");
    let refusal = decide(&policy, &work, &forged).expect_err("tampered");
    assert_eq!(refusal.kind(), "bad_signature");
    assert!(
        refusal.to_string().starts_with(&format!(
            "bad signature by key {alice} (Alice <alice@example.com>): "
        )),
        "{refusal}"
    );

    let unsigned = change(&work, 3, &Signing::Unsigned);
    assert_eq!(
        decide(&policy, &work, &unsigned).expect_err("unsigned"),
        SignatureRefusal::Unsigned
    );
}

#[test]
fn trust_files_that_do_not_parse_are_refused_naming_the_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let alice = SshKey::generate(tmp.path(), "alice");
    let bad = write(
        tmp.path(),
        "allowed_signers",
        &format!(
            "{}alice@example.com cert-authority {}\n",
            alice.allowed("a@example.com", ""),
            alice.public
        ),
    );
    let err = SignaturePolicy::load(Some(&bad), None).expect_err("cert-authority");
    assert!(
        err.to_string().starts_with(&format!(
            "--allowed-signers {}:2: cert-authority is not supported",
            bad.display()
        )),
        "{err}"
    );
    let empty = write(tmp.path(), "empty", "# nobody\n");
    let err = SignaturePolicy::load(Some(&empty), None).expect_err("empty");
    assert_eq!(
        err.to_string(),
        format!(
            "--allowed-signers {}: the file lists no signer",
            empty.display()
        )
    );
    let not_keys = write(tmp.path(), "keys.asc", "just text\n");
    let err = SignaturePolicy::load(None, Some(&not_keys)).expect_err("no key block");
    assert!(
        err.to_string().starts_with(&format!(
            "--trusted-keys {}:1: no public key block",
            not_keys.display()
        )),
        "{err}"
    );
    let missing = tmp.path().join("missing");
    let err = SignaturePolicy::load(None, Some(&missing)).expect_err("missing");
    assert_eq!(
        err.to_string(),
        format!("--trusted-keys {}: cannot read it", missing.display())
    );
}

/// The `error` status a rejected commit gets, as the reporter composes it.
fn error_status(state: &reconciler::controller::SyncState) -> (String, String) {
    let statuses = commit_statuses(state, None, 140);
    let s = statuses
        .iter()
        .find(|s| s.state == StatusState::Error)
        .unwrap_or_else(|| panic!("no error status in {statuses:?}"));
    (s.sha.clone(), s.description.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_commits_signed_by_a_trusted_key_are_applied() {
    let h = Harness::with_agent(Inventory::generate(4, &["a", "b"]), AgentOptions::default()).await;
    let keys_dir = h.dir.path().join("keys");
    std::fs::create_dir_all(&keys_dir).unwrap();
    let alice = SshKey::generate(&keys_dir, "alice");
    let mallory = SshKey::generate(&keys_dir, "mallory");
    let home = GpgHome::new(&keys_dir.join("gnupg"));
    let carol = home.generate("Carol <carol@example.com>");
    let allowed = write(
        &keys_dir,
        "allowed_signers",
        &alice.allowed("alice@example.com", ""),
    );
    let trusted = write(&keys_dir, "trusted.asc", &home.export(&carol));

    let mut config = h.run_config("r1");
    config.signatures = Some(std::sync::Arc::new(
        SignaturePolicy::load(Some(&allowed), Some(&trusted)).unwrap(),
    ));
    let repo = h.repo.path.clone();

    // Signed by alice (ssh): rolls out, her key on every ConfigMap.
    h.repo.settings_and_pools(&[
        ("a", "maxUnavailable: 2", "    maxPods: 60\n"),
        ("b", "maxUnavailable: 2", "    maxPods: 70\n"),
    ]);
    let first = commit(&repo, "alice's", &Signing::Ssh(&alice));
    let r = h.reconciler(config).await;
    let mut sync = r.sync_state();
    wait_state(&mut sync, "alice's commit complete", LONG, |s| {
        all_complete(s, 2) && s.applied.as_ref().is_some_and(|a| a.commit == first)
    })
    .await;
    let cms = h.configmaps();
    assert_eq!(cms.len(), 2);
    for cm in &cms {
        let ann = &cm["metadata"]["annotations"];
        assert_eq!(ann[SOURCE_COMMIT].as_str(), Some(first.as_str()));
        assert_eq!(
            ann[SOURCE_SIGNING_KEY].as_str(),
            Some(alice.fingerprint.as_str())
        );
    }
    let metrics = r.metrics().encode();
    assert_eq!(
        sample(
            &metrics,
            "kubelet_gitops_commit_signatures_total{result=\"verified\"}"
        ),
        Some(1.0),
        "{metrics}"
    );

    // Unsigned, then signed by an unknown key: nothing applied, an error on each.
    let before = h.snapshot();
    for (n, signing, says) in [
        (
            61,
            Signing::Unsigned,
            "commit signature: not signed (signed commits are required)".to_string(),
        ),
        (
            62,
            Signing::Ssh(&mallory),
            format!(
                "commit signature: signed by key {}, which is not in",
                mallory.fingerprint
            ),
        ),
    ] {
        h.repo
            .pool("a", "maxUnavailable: 2", &format!("    maxPods: {n}\n"));
        let id = commit(&repo, &format!("maxPods {n}"), &signing);
        let state = wait_state(&mut sync, "the commit refused", LONG, |s| {
            s.rejected.as_ref().is_some_and(|r| r.commit == id)
        })
        .await;
        assert_eq!(
            state.applied.as_ref().map(|a| a.commit.as_str()),
            Some(first.as_str())
        );
        let (sha, description) = error_status(&state);
        assert_eq!(sha, id);
        assert!(description.starts_with(&says), "{description}");
        h.assert_nothing_applied(&r, &before, "a refused signature applies nothing")
            .await;
    }
    let metrics = r.metrics().encode();
    for result in ["unsigned", "unknown_key"] {
        assert_eq!(
            sample(
                &metrics,
                &format!("kubelet_gitops_commit_signatures_total{{result=\"{result}\"}}")
            ),
            Some(1.0),
            "{result}: {metrics}"
        );
    }
    assert_eq!(sample(&metrics, "kubelet_gitops_repo_valid"), Some(0.0));

    // Signed by carol (gpg): applies; pool a's new ConfigMap carries her key, pool b's
    // (unchanged since alice's commit) keeps alice's.
    h.repo.pool("a", "maxUnavailable: 2", "    maxPods: 63\n");
    let last = commit(&repo, "carol's", &Signing::Gpg(&home, &carol));
    let state = wait_state(&mut sync, "carol's commit complete", LONG, |s| {
        all_complete(s, 2)
            && s.rejected.is_none()
            && s.applied.as_ref().is_some_and(|a| a.commit == last)
    })
    .await;
    let applied = state.applied.unwrap();
    for cm in h.configmaps() {
        let name = cm["metadata"]["name"].as_str().unwrap().to_string();
        let key = cm["metadata"]["annotations"][SOURCE_SIGNING_KEY].as_str();
        if name == applied.configmaps["a"] {
            assert_eq!(key, Some(carol.as_str()), "{name}");
        } else if name == applied.configmaps["b"] {
            assert_eq!(key, Some(alice.fingerprint.as_str()), "{name}");
        }
    }
    h.finish(r).await;
}
