//! hostflags: reading the kubelet's command line from a fake host root laid out like a
//! node: `proc/<pid>/cmdline`, kubeadm's environment files, a systemd unit with drop-ins.

use std::fs;
use std::path::Path;

use node_agent::error::HostError;
use node_agent::hostflags::{FlagSource, host_path, read_args, read_flags};

fn write(root: &Path, path: &str, bytes: &[u8]) {
    let full = host_path(root, path);
    fs::create_dir_all(full.parent().unwrap()).unwrap();
    fs::write(full, bytes).unwrap();
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_running_kubelet_is_found_in_proc() {
    let host = tempfile::tempdir().unwrap();
    let root = host.path();
    write(root, "/proc/1/cmdline", b"/sbin/init\0splash\0");
    write(root, "/proc/2/cmdline", b""); // a kernel thread
    write(root, "/proc/77/cmdline", b"/usr/bin/containerd\0");
    write(
        root,
        "/proc/812/cmdline",
        b"/usr/bin/kubelet-gitops-agent\0--node=x\0",
    );
    write(
        root,
        "/proc/1234/cmdline",
        b"/usr/bin/kubelet\0--config=/var/lib/kubelet/config.yaml\0--node-labels=a=b\0--provider-id=aws:///zone/a b\0--max-pods\x00150\0",
    );
    fs::create_dir_all(root.join("proc/self")).unwrap(); // not a pid
    write(root, "/proc/meminfo", b"MemTotal: 1 kB\n");

    let args = read_args(&FlagSource::Proc, root).unwrap();
    assert_eq!(
        args,
        strings(&[
            "--config=/var/lib/kubelet/config.yaml",
            "--node-labels=a=b",
            "--provider-id=aws:///zone/a b",
            "--max-pods",
            "150"
        ])
    );
    let flags = read_flags(&FlagSource::Proc, root).unwrap();
    assert_eq!(flags.config_file(), Some("/var/lib/kubelet/config.yaml"));
    assert_eq!(flags.value("max-pods"), Some("150"));
    assert_eq!(flags.node_labels().get("a").map(String::as_str), Some("b"));
    // A NUL-separated argument keeps its space.
    assert_eq!(flags.value("provider-id"), Some("aws:///zone/a b"));
}

#[test]
fn no_kubelet_or_two_kubelets_are_errors() {
    let host = tempfile::tempdir().unwrap();
    let root = host.path();
    write(root, "/proc/1/cmdline", b"/sbin/init\0");
    let err = read_flags(&FlagSource::Proc, root).unwrap_err();
    assert!(matches!(err, HostError::NoKubeletProcess { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&root.join("proc").display().to_string())
    );

    write(root, "/proc/20/cmdline", b"kubelet\0--v=2\0");
    write(root, "/proc/10/cmdline", b"/usr/local/bin/kubelet\0");
    let err = read_flags(&FlagSource::Proc, root).unwrap_err();
    match err {
        HostError::SeveralKubelets { pids, .. } => assert_eq!(pids, [10, 20]),
        other => panic!("{other}"),
    }

    let missing = tempfile::tempdir().unwrap();
    assert!(matches!(
        read_flags(&FlagSource::Proc, &missing.path().join("nope")),
        Err(HostError::Read { .. })
    ));
}

#[test]
fn a_flag_the_kubelet_rejects_names_its_source() {
    let host = tempfile::tempdir().unwrap();
    let root = host.path();
    write(
        root,
        "/proc/9/cmdline",
        b"/usr/bin/kubelet\0--max-pods=lots\0",
    );
    let err = read_flags(&FlagSource::Proc, root).unwrap_err().to_string();
    assert!(
        err.contains("/proc/<pid>/cmdline") && err.contains("--max-pods"),
        "{err}"
    );
}

#[test]
fn kubeadm_files_compose_like_the_kubeadm_drop_in() {
    let host = tempfile::tempdir().unwrap();
    let root = host.path();
    write(
        root,
        "/var/lib/kubelet/kubeadm-flags.env",
        b"KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock --node-ip=10.0.0.1 --max-pods=100\"\n",
    );
    write(
        root,
        "/etc/default/kubelet",
        b"# extra args\nKUBELET_EXTRA_ARGS=--max-pods=64 --node-labels=pool=gpu\n",
    );
    let src = FlagSource::kubeadm_files();
    let args = read_args(&src, root).unwrap();
    assert_eq!(
        args,
        strings(&[
            "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
            "--kubeconfig=/etc/kubernetes/kubelet.conf",
            "--config=/var/lib/kubelet/config.yaml",
            "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
            "--node-ip=10.0.0.1",
            "--max-pods=100",
            "--max-pods=64",
            "--node-labels=pool=gpu",
        ])
    );
    let flags = read_flags(&src, root).unwrap();
    assert_eq!(
        flags.value("max-pods"),
        Some("64"),
        "the extra args come last and win"
    );

    // The rpm flavour: /etc/sysconfig/kubelet; /etc/default/kubelet absent.
    fs::remove_file(host_path(root, "/etc/default/kubelet")).unwrap();
    write(
        root,
        "/etc/sysconfig/kubelet",
        b"KUBELET_EXTRA_ARGS='--v=4'\n",
    );
    let args = read_args(&src, root).unwrap();
    assert_eq!(args.last().map(String::as_str), Some("--v=4"));

    // Nothing at all: only the drop-in's own arguments.
    let empty = tempfile::tempdir().unwrap();
    assert_eq!(read_args(&src, empty.path()).unwrap().len(), 3);
}

#[test]
fn an_unreadable_env_file_is_an_error_not_absent() {
    let host = tempfile::tempdir().unwrap();
    let root = host.path();
    // A directory where a file should be: reading it fails with something other than
    // "not found", which must not be mistaken for an absent optional file.
    fs::create_dir_all(host_path(root, "/etc/default/kubelet")).unwrap();
    let err = read_args(&FlagSource::kubeadm_files(), root).unwrap_err();
    assert!(matches!(err, HostError::Read { .. }), "{err}");
}

#[test]
fn a_systemd_unit_with_drop_ins_expands_like_systemd() {
    let host = tempfile::tempdir().unwrap();
    let root = host.path();
    write(
        root,
        "/lib/systemd/system/kubelet.service",
        b"[Unit]\nDescription=kubelet\n\n[Service]\nExecStart=/usr/bin/kubelet\nRestart=always\n",
    );
    // kubeadm's drop-in, shipped in /usr/lib; an admin override of the same name in /etc
    // masks it; a later-named drop-in in /run adds extra arguments.
    write(
        root,
        "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
        b"[Service]\nEnvironment=\"KUBELET_CONFIG_ARGS=--config=/usr/lib/should-be-masked.yaml\"\nExecStart=\nExecStart=/usr/bin/kubelet $KUBELET_CONFIG_ARGS\n",
    );
    write(
        root,
        "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
        b"[Service]\nEnvironment=\"KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml\"\nEnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env\nEnvironmentFile=/etc/kubelet/extra.env\nExecStart=\nExecStart=/usr/bin/kubelet $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS \\\n  --node-labels=${POOL_LABEL} $EXTRA\n",
    );
    write(
        root,
        "/run/systemd/system/kubelet.service.d/20-extra.conf",
        b"[Service]\nEnvironment=EXTRA=--v=3\n",
    );
    write(
        root,
        "/etc/systemd/system/kubelet.service.d/README",
        b"not a .conf file: ignored\nExecStart=/bin/false\n",
    );
    write(
        root,
        "/var/lib/kubelet/kubeadm-flags.env",
        b"KUBELET_KUBEADM_ARGS=\"--max-pods=80 --node-ip=10.1.2.3\"\n",
    );
    write(root, "/etc/kubelet/extra.env", b"POOL_LABEL=pool=batch\n");

    let src = FlagSource::SystemdUnit("/lib/systemd/system/kubelet.service".into());
    let args = read_args(&src, root).unwrap();
    assert_eq!(
        args,
        strings(&[
            "--config=/var/lib/kubelet/config.yaml",
            "--max-pods=80",
            "--node-ip=10.1.2.3",
            "--node-labels=pool=batch",
            "--v=3",
        ])
    );

    // systemd refuses to start a unit whose non-optional environment file is missing.
    fs::remove_file(host_path(root, "/etc/kubelet/extra.env")).unwrap();
    let err = read_flags(&src, root).unwrap_err().to_string();
    assert!(
        err.contains("/etc/kubelet/extra.env") && err.contains("systemd unit"),
        "{err}"
    );

    let err = read_flags(
        &FlagSource::SystemdUnit("/etc/systemd/system/nope.service".into()),
        root,
    )
    .unwrap_err();
    assert!(matches!(err, HostError::Read { .. }), "{err}");
}

#[test]
fn the_sims_flags_file_reads_back_as_the_stand_in_reads_it() {
    // The sim writes its node's command line as KUBELET_KUBEADM_ARGS with paths on the
    // node, as kubeadm does; read through the kubeadm layout with the node's root as the
    // host root (the agent's --flags-file default), --config is the sim's (the drop-in's
    // own --config comes first and loses), and it names the file the agent then reads
    // under that root.
    let host = tempfile::tempdir().unwrap();
    let node_root = host.path().join("nodes/w1");
    let paths = kubelet_gitops_sim::kubelet::KubeletPaths::new(&node_root);
    let inv = kubelet_gitops_core::inventory::Inventory::parse(
        "i.yaml",
        b"nodes:\n- name: w1\n  capacity: {cpu: \"2\", memory: 4Gi, ephemeral-storage: 20Gi, pods: \"20\"}\n  kubeletFlags: \"--max-pods=20 --node-labels=x=y\"\n",
    )
    .unwrap();
    paths.prepare(&inv.nodes[0], true).unwrap();
    let flags = read_flags(&FlagSource::kubeadm_files(), &node_root).unwrap();
    assert_eq!(flags.config_file(), Some("/var/lib/kubelet/config.yaml"));
    assert_eq!(flags.config_dir(), Some("/etc/kubernetes/kubelet.conf.d"));
    assert_eq!(flags.value("max-pods"), Some("20"));
    let config = flags.config_file().unwrap();
    assert_eq!(host_path(&node_root, config), paths.config);
    assert_eq!(
        host_path(&node_root, flags.config_dir().unwrap()),
        paths.drop_in_dir
    );
}
