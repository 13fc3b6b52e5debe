//! A stand-in kubelet per simulated node, which behaves like a kubelet from the outside.
//!
//! Each node has a root directory, the node's `/`, laid out like a kubeadm host
//! ([`KubeletPaths`]; paths as the node sees them):
//!
//! | path on the node | what |
//! | --- | --- |
//! | `/var/lib/kubelet/config.yaml` | the `--config` file (the sim writes a small valid one) |
//! | `/etc/kubernetes/kubelet.conf.d/` | the `--config-dir` drop-in directory |
//! | `/var/lib/kubelet/kubeadm-flags.env` | `KUBELET_KUBEADM_ARGS="..."`: the kubelet's command line |
//! | `/sys/fs/cgroup/` | a plain directory tree standing in for cgroupfs (v2, or v1 with one tree per controller) |
//! | `/proc/sys/kernel/pid_max` | the kubelet's internal `pid` capacity, read at each start (written once with this host's value) |
//! | `/proc/swaps` | the header only: no swap |
//! | `/run/containerd/containerd.sock` | a listening Unix socket standing in for containerd's ([`runtime`]) |
//! | `/etc/kubernetes/pki/ca.crt`, `/etc/kubernetes/manifests/`, `/etc/resolv.conf`, `/run/systemd/resolve/resolv.conf` | what a kubeadm node on Ubuntu has and kubelet configs name (`clientCAFile`, `staticPodPath`, `resolvConf`); the CA is a placeholder, not a certificate |
//! | `/var/log/kubelet.log` | klog-style lines: what it started with, why it exited |
//!
//! The flags name the files as on a real node (`--config=/var/lib/kubelet/config.yaml
//! --config-dir=/etc/kubernetes/kubelet.conf.d`): nothing in a node's files names its
//! root. The stand-in resolves every path it reads from its flags and configuration
//! under its node's root as a process chrooted there would ([`noderoot::resolve`]: `..`
//! stops at the root, symlinks are followed inside it), and whatever else reads a node's
//! files, such as a node agent, does the same with the root as its host root
//! (`--host-root=<root>`, as a DaemonSet pod reads the host's `/` at `/host`).
//!
//! On every (re)start it re-reads everything and does what the kubelet does with its
//! configuration ([`kubelet_gitops_core`]): parse the flags, build the effective config
//! (defaults, file, drop-ins, flags), validate it for the host's cgroup version, compute
//! node allocatable from the node's capacity, dial the container runtime's socket, create
//! the pods cgroup and check that the reserved cgroups that `enforceNodeAllocatable`
//! names exist. If all passes it runs:
//! it serves `/healthz` and `/configz` on `127.0.0.1:<port>` (one port for both; the port
//! stays the same across restarts), posts its Node's status (Ready, capacity,
//! allocatable), and renews its Lease in `kube-node-lease`. If anything fails it exits:
//! the port refuses connections, the reason (the kubelet's own words) is recorded in its
//! state and in `kubelet.log`, and after [`KubeletOptions::not_ready_delay`] the Node
//! turns `Ready=False` (reason `KubeletNotReady`, the exit reason in the message). Like
//! systemd's `Restart=always`, an exited kubelet is started again after
//! [`KubeletOptions::restart_after_exit`]. The runtime's socket listens for as long as
//! the node's stand-in exists, whatever its kubelet does.
//!
//! Deliberate differences from a real cluster: a real Node goes `Ready=Unknown`
//! (`NodeStatusUnknown`) 40 s after its kubelet stops renewing the Lease; here it goes
//! `Ready=False` after a short, configurable delay, with the reason in the message, so
//! tests and `kubectl describe node` see why. `/healthz` and `/configz` are plain http
//! without authentication, on one port. The runtime's socket accepts connections and
//! speaks no CRI.
//!
//! Control: [`KubeletHandle::restart`], the HTTP endpoints of [`control_router`]
//! (`POST /sim/v1/nodes/{name}/kubelet/restart`, `GET /sim/v1/nodes/{name}/kubelet`),
//! the `kubelet-gitops-sim restart-kubelet` command, and SIGHUP when the stand-in runs as
//! its own process ([`run_process`]).

mod api;
mod control;
mod handle;
mod node;
pub mod noderoot;
mod paths;
mod port;
mod process;
pub mod runtime;
mod serve;
mod startup;
mod supervisor;

use std::time::Duration;

pub use api::{ApiFailure, HttpTarget, Kind, NodeApi, TargetError};
pub use control::{Kubelets, control_router, request_restart};
pub use handle::{KubeletHandle, KubeletPhase, KubeletSpec, KubeletState};
pub use node::{
    CONTAINER_RUNTIME_VERSION, DEFAULT_PID_MAX, KUBELET_VERSION, LEASE_NAMESPACE, NodeStatus,
    READY_MESSAGE, Readiness, conditions, host_pid_max, initial_config_yaml,
    initial_effective_config, internal_ip, lease_object, node_object, node_object_with,
    ready_status, reported_capacity, rfc3339,
};
pub use paths::{KubeletPaths, kubeadm_flags_env};
pub use port::ReservedPort;
pub use process::{ProcessOptions, run_process};
pub use startup::{V1_CONTROLLERS, cgroup_name_repr};

/// How the stand-in kubelets behave. The defaults keep tests fast; the real figures are
/// in each field's documentation.
#[derive(Debug, Clone)]
pub struct KubeletOptions {
    /// The host's cgroup hierarchy: v2 (unified) or v1. Validation depends on it
    /// (`failCgroupV1`, swap), and so does the cgroup tree's layout. Default: v2.
    pub cgroup_v2: bool,
    /// The pause between stopping and starting again on a restart. Default 200 ms.
    pub start_delay: Duration,
    /// How long after the kubelet stops the Node turns NotReady. A real control plane
    /// waits for the Lease to expire (40 s). Default 3 s.
    pub not_ready_delay: Duration,
    /// How often the Lease is renewed. The real kubelet: every 10 s. Default 2 s.
    pub lease_renew_interval: Duration,
    /// `spec.leaseDurationSeconds` of the Lease (the kubelet's `nodeLeaseDurationSeconds`).
    /// Default 40.
    pub lease_duration_seconds: u32,
    /// systemd's `RestartSec=` with `Restart=always`: an exited kubelet is started again
    /// after this long; `None` leaves it down until restarted. Default 10 s, as kubeadm's
    /// kubelet unit.
    pub restart_after_exit: Option<Duration>,
    /// Post core/v1 Events as the kubelet does (`Starting`, `NodeReady`,
    /// `NodeAllocatableEnforced`, `FailedNodeAllocatableEnforcement`, `NodeNotReady`).
    /// Default true.
    pub events: bool,
}

impl Default for KubeletOptions {
    fn default() -> Self {
        KubeletOptions {
            cgroup_v2: true,
            start_delay: Duration::from_millis(200),
            not_ready_delay: Duration::from_secs(3),
            lease_renew_interval: Duration::from_secs(2),
            lease_duration_seconds: 40,
            restart_after_exit: Some(Duration::from_secs(10)),
            events: true,
        }
    }
}
