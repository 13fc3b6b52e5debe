//! A node's kubelet set-up, and the check of a payload against it that the agent, the
//! plan and `run` share.
//!
//! What a kubelet runs is not the payload alone: its `--config-dir` drop-ins are merged
//! over the config file, then its command-line flags ([`crate::effective`]), and the
//! result is validated on the host ([`crate::validation`]). The same payload can pass on
//! one node and be refused on another (`--cgroups-per-qos=false` with the default
//! `enforceNodeAllocatable: [pods]`). This module is that check, in one place:
//!
//! - [`NodeFiles`] is the node's side of the effective config (its config file in drop-in
//!   mode, its other drop-ins, its flags), and [`effective_on_node`] puts a payload in
//!   its place as the agent writes it (the config file in [`Mode::Replace`], one drop-in
//!   in [`Mode::DropIn`]);
//! - [`check_effective`] is the kubelet's validation of the result for the node
//!   ([`NodeFacts`]: its cgroup version, its container runtime's cgroup driver), each
//!   message with the kubelet flag that set the field (`(value set by the kubelet flag
//!   --cgroups-per-qos)`), and the cgroup-driver rule below;
//! - [`NodeSetup`] is the same set-up as data: what the agent reports on its Node
//!   ([`crate::protocol::NODE_SETUP`]) and what a node inventory gives
//!   ([`crate::inventory`]), so that `kubelet-gitops plan` and `run` check every pool
//!   against the nodes it would reach ([`NodeSetup::check`]) exactly as the agent will.
//!
//! # The cgroup driver
//!
//! A v1.36 kubelet asks its runtime for the cgroup driver (`getCgroupDriverFromCRI` in
//! `cmd/kubelet/app/server.go`, called unconditionally since KubeletCgroupDriverFromCRI
//! went GA in 1.34): a runtime that implements the CRI `RuntimeConfig` call (containerd
//! 2.0 and later, CRI-O 1.28 and later) decides, and the config's `cgroupDriver` is
//! ignored (and `/configz`, registered right after, shows the runtime's); an older
//! runtime answers `Unimplemented` and the kubelet falls back to the config's value,
//! `cgroupfs` when unset. So a config whose effective `cgroupDriver` differs from the
//! runtime's is harmless on a new runtime and breaks an old one (the kubelet is healthy,
//! but runc refuses the pods' cgroupfs-style parents under systemd: no new pod starts).
//! [`check_effective`] refuses it whenever the runtime's driver is known, with a message
//! saying to set `cgroupDriver` to it: the config then means the same on both kinds of
//! runtime.
//!
//! # What the report holds, and what it leaves out
//!
//! Only what the check reads, as JSON: the mode; the kubelet's command-line flags that
//! set config fields (`--max-pods=110`; not `--node-ip`, `--kubeconfig` and the like,
//! which the check does not read); the node's drop-ins other than the agent's own and,
//! in drop-in mode, its config file, each as its decoded JSON object (comments and
//! formatting dropped); the runtime's cgroup driver; the cgroup version. Two fields can
//! carry credentials and are never reported: `staticPodURL` (a URL may hold a user and
//! password) and `staticPodURLHeader` (HTTP headers, e.g. `Authorization`), with their
//! flags `--manifest-url` and `--manifest-url-header`; no validation rule reads them. A
//! report larger than [`MAX_REPORT_BYTES`] is replaced by one that says so
//! ([`NodeSetup::incomplete`]), and such a node is not checked.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::decode;
use crate::effective::{self, Effective, EffectiveError, Options, Source};
use crate::flags::KubeletFlags;
use crate::protocol::reason;
use crate::validation::{self, HostInfo};

/// The largest report the agent writes on its Node (an annotation; the API server allows
/// 256 KiB for all of a Node's annotations together).
pub const MAX_REPORT_BYTES: usize = 32 * 1024;

/// The version of the report's format ([`NodeSetup::version`]).
pub const REPORT_VERSION: u32 = 1;

/// The config fields that may carry credentials, never reported, with their flags.
const SECRET_FIELDS: &[&str] = &["staticPodURL", "staticPodURLHeader"];
const SECRET_FLAGS: &[&str] = &["manifest-url", "manifest-url-header"];

/// The longest error text of a node file kept in a report.
const MAX_FILE_ERROR: usize = 512;

/// The name of the agent's drop-in in the kubelet's `--config-dir` (drop-in mode).
pub const AGENT_DROP_IN_FILE: &str = "50-kubelet-gitops.conf";

/// The kubelet's default `cgroupDriver` (`pkg/kubelet/apis/config/v1beta1/defaults.go`).
pub const DEFAULT_CGROUP_DRIVER: &str = "cgroupfs";

/// Where the agent puts a payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The payload is the kubelet's config file (`--config`).
    #[default]
    Replace,
    /// The payload is one drop-in in the kubelet's `--config-dir`, over the node's own
    /// config file.
    DropIn,
}

impl Mode {
    /// `replace` or `drop-in`, as the agent's `--mode` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Replace => "replace",
            Mode::DropIn => "drop-in",
        }
    }
}

/// The node's side of the effective config: everything but the payload.
#[derive(Debug, Clone, Default)]
pub struct NodeFiles<'a> {
    /// Where the payload goes.
    pub mode: Mode,
    /// The node's config file: read in drop-in mode (in replace mode the payload takes
    /// its place; without a payload, it is what the node runs).
    pub config_file: Option<Source<'a>>,
    /// The node's drop-ins, in any order. In drop-in mode a payload takes the place of
    /// the agent's own ([`NodeFiles::agent_drop_in`]), which stays when there is none.
    pub drop_ins: Vec<Source<'a>>,
    /// In drop-in mode, the path of the agent's drop-in (which decides its place in the
    /// kubelet's order).
    pub agent_drop_in: Option<&'a str>,
    /// The kubelet's command-line flags.
    pub flags: Option<&'a KubeletFlags>,
}

/// What validation needs to know of the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// Whether the host runs cgroup v2 (`None`: unknown).
    pub cgroup_v2: Option<bool>,
    /// The container runtime's cgroup driver (`systemd`, `cgroupfs`; `None`: unknown).
    pub runtime_cgroup_driver: Option<String>,
}

/// Why a node would not take a payload, in the kubelet's words: `reason` is
/// [`reason::LOAD_ERROR`] or [`reason::VALIDATE_ERROR`] (or, on the node,
/// [`reason::INTERNAL_ERROR`] when the agent cannot tell), `detail` names files, fields
/// and the kubelet flags involved. The node agent's rejection of a payload is this type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// [`reason::LOAD_ERROR`], [`reason::VALIDATE_ERROR`] or [`reason::INTERNAL_ERROR`].
    pub reason: &'static str,
    /// What exactly, naming files, fields and lines.
    pub detail: String,
}

impl Refusal {
    /// The files do not load (decode, drop-ins, flags).
    pub fn load(detail: impl Into<String>) -> Refusal {
        Refusal {
            reason: reason::LOAD_ERROR,
            detail: detail.into(),
        }
    }

    /// The config loads but the kubelet's validation refuses it.
    pub fn invalid(detail: impl Into<String>) -> Refusal {
        Refusal {
            reason: reason::VALIDATE_ERROR,
            detail: detail.into(),
        }
    }

    /// The check itself could not be done (a file or cgroup the node cannot read).
    pub fn internal(detail: impl Into<String>) -> Refusal {
        Refusal {
            reason: reason::INTERNAL_ERROR,
            detail: detail.into(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason, self.detail)
    }
}

impl std::error::Error for Refusal {}

/// The config file and the drop-ins (in the kubelet's order) the kubelet reads with
/// `payload` in place, and the name the payload has among them.
fn sources<'a>(
    payload: Option<Source<'a>>,
    node: &NodeFiles<'a>,
) -> (Option<Source<'a>>, Vec<Source<'a>>, Option<&'a str>) {
    let file = match (node.mode, payload) {
        (Mode::Replace, Some(p)) => Some(p),
        _ => node.config_file,
    };
    let mut drop_ins: Vec<Source<'a>> = node
        .drop_ins
        .iter()
        .filter(|s| {
            payload.is_none() || node.mode == Mode::Replace || Some(s.name) != node.agent_drop_in
        })
        .copied()
        .collect();
    let payload_name = payload.map(|p| match node.mode {
        Mode::Replace => p.name,
        Mode::DropIn => node.agent_drop_in.unwrap_or(p.name),
    });
    if let (Mode::DropIn, Some(p), Some(name)) = (node.mode, payload, payload_name)
        && !p.bytes.is_empty()
    {
        drop_ins.push(Source::new(name, p.bytes));
    }
    let order = effective::drop_in_order(drop_ins.iter().map(|s| s.name.to_string()).collect());
    drop_ins.retain(|s| order.iter().any(|o| o == s.name));
    drop_ins.sort_by_key(|s| order.iter().position(|o| o == s.name));
    (file, drop_ins, payload_name)
}

/// The effective config the kubelet builds with `payload` in place (`None`: the node as
/// it is; in drop-in mode an empty payload is no drop-in of the agent's), as the agent
/// writes it: the config file in replace mode, the agent's drop-in in drop-in mode. A
/// payload that does not decode is `failed to load config: <file>:<line>: ...`; a node
/// file that does not, `failed to load config: node file ...`.
pub fn effective_on_node(
    payload: Option<Source<'_>>,
    node: &NodeFiles<'_>,
) -> Result<Effective, Refusal> {
    let (file, drop_ins, payload_name) = sources(payload, node);
    effective::effective(file, &drop_ins, node.flags).map_err(|e| match e {
        EffectiveError::Decode(d) if Some(d.file.as_str()) == payload_name => {
            Refusal::load(d.to_string())
        }
        EffectiveError::Decode(d) => Refusal::load(format!("node file {d}")),
        other => Refusal::load(other.to_string()),
    })
}

/// The kubelet's validation of `eff` on a node with `facts` (see the module
/// documentation): `failed to validate config: <message>` (several: `[a, b]`), each
/// message followed by ` (value set by the kubelet flag --x)` when a flag set the field.
pub fn check_effective(eff: &Effective, facts: &NodeFacts) -> Result<(), Refusal> {
    let problems = validation::validate(
        &eff.config,
        &HostInfo {
            cgroup_v2: facts.cgroup_v2,
        },
    );
    if problems.is_empty() {
        return Ok(());
    }
    let messages: Vec<String> = problems
        .iter()
        .map(|p| match eff.flag_of(&p.field) {
            Some(flag) => format!("{}{}", p.message, flag_hint(flag)),
            None => p.message.clone(),
        })
        .collect();
    let detail = crate::go::aggregate(&messages);
    Err(Refusal::invalid(detail))
}

/// ` (value set by the kubelet flag --x)`, what `kubelet-gitops validate` says too.
pub fn flag_hint(flag: &str) -> String {
    format!(" (value set by the kubelet flag {flag})")
}

/// What the node would say of `payload`: [`effective_on_node`], [`check_effective`],
/// then the cgroup-driver rule (see the module documentation).
pub fn check_payload(
    payload: Source<'_>,
    node: &NodeFiles<'_>,
    facts: &NodeFacts,
) -> Result<Effective, Refusal> {
    let eff = effective_on_node(Some(payload), node)?;
    check_effective(&eff, facts)?;
    let Some(runtime) = facts.runtime_cgroup_driver.as_deref() else {
        return Ok(eff);
    };
    let configured = eff
        .config
        .cgroup_driver
        .as_deref()
        .filter(|d| !d.is_empty())
        .unwrap_or(DEFAULT_CGROUP_DRIVER);
    if configured == runtime {
        return Ok(eff);
    }
    let source = match eff.flag_of("cgroupDriver") {
        Some(flag) => flag_hint(flag),
        None => {
            let (file, drop_ins, _) = sources(Some(payload), node);
            let set = effective::effective_with(
                file,
                &drop_ins,
                None,
                Options {
                    apply_defaults: false,
                },
            )
            .is_ok_and(|e| e.config.cgroup_driver.is_some());
            if set {
                String::new()
            } else {
                " (the kubelet's default: nothing sets cgroupDriver)".to_string()
            }
        }
    };
    Err(Refusal::invalid(format!(
        "cgroupDriver is {configured:?}{source} but the container runtime's cgroup driver is {runtime:?}: \
         a runtime that does not report its driver to the kubelet (containerd before 2.0, CRI-O before 1.28) \
         leaves the kubelet on {configured:?} and no new pod can start; set cgroupDriver: {runtime} in the pool or the base"
    )))
}

/// One of the node's files in a report: its path and its decoded content, or why it does
/// not decode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportedFile {
    /// The file's path on the node.
    pub path: String,
    /// The file's content as the kubelet decodes it (JSON), without the fields that may
    /// carry credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Why the file does not decode (then `config` is absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ReportedFile {
    /// The report of file `path` holding `bytes`.
    pub fn new(path: &str, bytes: &[u8]) -> ReportedFile {
        match decode::decode_value(path, bytes) {
            Ok((mut value, _)) => {
                if let Value::Object(m) = &mut value {
                    for field in SECRET_FIELDS {
                        m.remove(*field);
                    }
                }
                ReportedFile {
                    path: path.to_string(),
                    config: Some(value),
                    error: None,
                }
            }
            Err(e) => ReportedFile {
                path: path.to_string(),
                config: None,
                error: Some(crate::message::truncate(
                    &e.to_string(),
                    crate::message::Limit::Bytes(MAX_FILE_ERROR),
                    " ... (truncated)",
                )),
            },
        }
    }

    /// The bytes the check decodes: the JSON content, or `None` when the file does not
    /// decode.
    fn bytes(&self) -> Option<Vec<u8>> {
        self.config
            .as_ref()
            .and_then(|v| serde_json::to_vec(v).ok())
    }
}

/// A node's kubelet set-up: what the agent reports in
/// [`crate::protocol::NODE_SETUP`], and what an inventory node gives. See the module
/// documentation for what it holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSetup {
    /// The format's version ([`REPORT_VERSION`]).
    pub version: u32,
    /// Where the agent puts the payload.
    #[serde(default)]
    pub mode: Mode,
    /// The kubelet's command-line flags that set config fields, one word each
    /// (`--max-pods=110`), in command-line order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// Drop-in mode: the node's own config file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_file: Option<ReportedFile>,
    /// The node's `--config-dir` drop-ins other than the agent's, in the kubelet's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop_ins: Vec<ReportedFile>,
    /// Drop-in mode: the path of the agent's own drop-in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_drop_in: Option<String>,
    /// The container runtime's cgroup driver (`systemd` or `cgroupfs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_cgroup_driver: Option<String>,
    /// `v1` or `v2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_version: Option<String>,
    /// Set when the set-up did not fit in [`MAX_REPORT_BYTES`] (or could not be read):
    /// why. The files and flags are then left out and the node is not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
}

/// What [`NodeSetup::check`] says of a payload on a node.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// The node would take it; the effective config it would run.
    Accepted(Box<Effective>),
    /// The node would refuse it.
    Refused(Refusal),
    /// The report cannot be used (incomplete, unknown version, flags that do not parse):
    /// why. The node is not checked.
    Unchecked(String),
}

impl NodeSetup {
    /// The report of a node whose kubelet runs with `flags` and these files (in drop-in
    /// mode `config_file` is the node's own config file; `drop_ins` are every drop-in
    /// but the agent's, named by path). Cut to [`NodeSetup::incomplete`] when larger than
    /// [`MAX_REPORT_BYTES`].
    pub fn report(
        files: &NodeFiles<'_>,
        runtime_cgroup_driver: Option<&str>,
        cgroup_v2: Option<bool>,
    ) -> NodeSetup {
        let flags = files.flags.map(reported_flags).unwrap_or_default();
        let order = effective::drop_in_order(
            files
                .drop_ins
                .iter()
                .filter(|s| Some(s.name) != files.agent_drop_in)
                .map(|s| s.name.to_string())
                .collect(),
        );
        let drop_ins = order
            .iter()
            .filter_map(|name| files.drop_ins.iter().find(|s| s.name == name))
            .map(|s| ReportedFile::new(s.name, s.bytes))
            .collect();
        let full = NodeSetup {
            version: REPORT_VERSION,
            mode: files.mode,
            flags,
            config_file: match files.mode {
                Mode::DropIn => files
                    .config_file
                    .map(|s| ReportedFile::new(s.name, s.bytes)),
                Mode::Replace => None,
            },
            drop_ins,
            agent_drop_in: match files.mode {
                Mode::DropIn => files.agent_drop_in.map(str::to_string),
                Mode::Replace => None,
            },
            runtime_cgroup_driver: runtime_cgroup_driver.map(str::to_string),
            cgroup_version: cgroup_v2.map(|v2| if v2 { "v2" } else { "v1" }.to_string()),
            incomplete: None,
        };
        let size = full.to_annotation().len();
        if size <= MAX_REPORT_BYTES {
            return full;
        }
        full.cut(format!(
            "the node's kubelet set-up is {size} bytes as JSON, more than the {MAX_REPORT_BYTES} bytes a report may hold"
        ))
    }

    /// A report that says only `why` the set-up is not reported (besides the mode, the
    /// runtime's cgroup driver and the cgroup version).
    pub fn cut(self, why: String) -> NodeSetup {
        NodeSetup {
            version: REPORT_VERSION,
            mode: self.mode,
            runtime_cgroup_driver: self.runtime_cgroup_driver,
            cgroup_version: self.cgroup_version,
            incomplete: Some(why),
            ..NodeSetup::default()
        }
    }

    /// The annotation value: compact JSON.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads an annotation value.
    pub fn from_annotation(text: &str) -> Result<NodeSetup, String> {
        if text.len() > MAX_REPORT_BYTES {
            return Err(format!(
                "the report is {} bytes, more than {MAX_REPORT_BYTES}",
                text.len()
            ));
        }
        serde_json::from_str(text).map_err(|e| format!("the report does not parse: {e}"))
    }

    /// What validation knows of the host from this report.
    pub fn facts(&self) -> NodeFacts {
        NodeFacts {
            cgroup_v2: match self.cgroup_version.as_deref() {
                Some("v2") => Some(true),
                Some("v1") => Some(false),
                _ => None,
            },
            runtime_cgroup_driver: self.runtime_cgroup_driver.clone(),
        }
    }

    /// The kubelet's flags of this report, parsed.
    pub fn parsed_flags(&self) -> Result<KubeletFlags, String> {
        KubeletFlags::parse(&self.flags).map_err(|e| format!("its kubelet flags: {e}"))
    }

    /// What this node would say of `payload` (named `name`, e.g. the pool file), as the
    /// agent will: [`effective_on_node`] and [`check_effective`] on the reported files,
    /// flags and facts. A node file the report says does not decode refuses every payload,
    /// as on the node.
    pub fn check(&self, name: &str, payload: &[u8]) -> Verdict {
        if let Some(why) = &self.incomplete {
            return Verdict::Unchecked(why.clone());
        }
        if self.version != REPORT_VERSION {
            return Verdict::Unchecked(format!(
                "the report is of version {}, this build reads version {REPORT_VERSION}",
                self.version
            ));
        }
        let flags = match self.parsed_flags() {
            Ok(f) => f,
            Err(e) => return Verdict::Unchecked(e),
        };
        let mut files: Vec<(&ReportedFile, Vec<u8>)> = Vec::new();
        for f in self.config_file.iter().chain(&self.drop_ins) {
            match (&f.error, f.bytes()) {
                (None, Some(bytes)) => files.push((f, bytes)),
                (error, _) => {
                    return Verdict::Refused(Refusal::load(format!(
                        "node file {}: {}",
                        f.path,
                        error.as_deref().unwrap_or("does not decode")
                    )));
                }
            }
        }
        let source = |f: &ReportedFile| {
            files
                .iter()
                .find(|(r, _)| std::ptr::eq(*r, f))
                .map(|(r, b)| Source::new(&r.path, b))
        };
        let node = NodeFiles {
            mode: self.mode,
            config_file: self.config_file.as_ref().and_then(source),
            drop_ins: self.drop_ins.iter().filter_map(source).collect(),
            agent_drop_in: self.agent_drop_in.as_deref(),
            flags: Some(&flags),
        };
        match check_payload(Source::new(name, payload), &node, &self.facts()) {
            Ok(eff) => Verdict::Accepted(Box::new(eff)),
            Err(r) => Verdict::Refused(r),
        }
    }
}

/// The kubelet's flags that set config fields, one `--name=value` word each, in
/// command-line order, without those that may carry credentials.
pub fn reported_flags(flags: &KubeletFlags) -> Vec<String> {
    flags
        .occurrences()
        .iter()
        .filter(|o| o.flag.is_config() && !SECRET_FLAGS.contains(&o.flag.name))
        .map(|o| format!("--{}={}", o.flag.name, o.value))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

    fn config(fields: &str) -> String {
        format!("{HEAD}{fields}")
    }

    fn flags(line: &str) -> KubeletFlags {
        KubeletFlags::parse(&crate::flags::split_command_line(line).unwrap()).unwrap()
    }

    fn refused(v: Verdict) -> Refusal {
        match v {
            Verdict::Refused(r) => r,
            other => panic!("not refused: {other:?}"),
        }
    }

    fn report(files: &NodeFiles<'_>, driver: Option<&str>) -> NodeSetup {
        let r = NodeSetup::report(files, driver, Some(true));
        // What the reconciler reads is what the agent wrote.
        NodeSetup::from_annotation(&r.to_annotation()).unwrap()
    }

    #[test]
    fn a_flag_that_breaks_the_pools_config_is_named_with_the_kubelets_message() {
        let f = flags("--cgroups-per-qos=false --node-ip=10.0.0.5");
        let setup = report(
            &NodeFiles {
                flags: Some(&f),
                ..NodeFiles::default()
            },
            None,
        );
        assert_eq!(
            setup.flags,
            ["--cgroups-per-qos=false"],
            "config flags only"
        );
        let r = refused(setup.check("pools/general.yaml", config("maxPods: 64\n").as_bytes()));
        assert_eq!(r.reason, reason::VALIDATE_ERROR);
        assert_eq!(
            r.detail,
            "invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true when \"pods\" contained in enforceNodeAllocatable (--enforce-node-allocatable) (value set by the kubelet flag --cgroups-per-qos)"
        );
        // The pool that turns enforcement off passes.
        let ok = setup.check(
            "pools/general.yaml",
            config("enforceNodeAllocatable: []\n").as_bytes(),
        );
        assert!(matches!(ok, Verdict::Accepted(_)), "{ok:?}");
    }

    #[test]
    fn a_config_whose_cgroup_driver_is_not_the_runtimes_is_refused() {
        let setup = report(&NodeFiles::default(), Some("systemd"));
        let r = refused(setup.check("p.yaml", config("maxPods: 64\n").as_bytes()));
        assert_eq!(r.reason, reason::VALIDATE_ERROR);
        assert!(
            r.detail.starts_with("cgroupDriver is \"cgroupfs\" (the kubelet's default: nothing sets cgroupDriver) but the container runtime's cgroup driver is \"systemd\"")
                && r.detail.ends_with("set cgroupDriver: systemd in the pool or the base"),
            "{}",
            r.detail
        );
        let r = refused(setup.check("p.yaml", config("cgroupDriver: cgroupfs\n").as_bytes()));
        assert!(
            r.detail.starts_with("cgroupDriver is \"cgroupfs\" but"),
            "{}",
            r.detail
        );
        let ok = setup.check("p.yaml", config("cgroupDriver: systemd\n").as_bytes());
        assert!(matches!(ok, Verdict::Accepted(_)), "{ok:?}");
        // A flag that sets it is named.
        let f = flags("--cgroup-driver=cgroupfs");
        let setup = report(
            &NodeFiles {
                flags: Some(&f),
                ..NodeFiles::default()
            },
            Some("systemd"),
        );
        let r = refused(setup.check("p.yaml", config("cgroupDriver: systemd\n").as_bytes()));
        assert!(
            r.detail.starts_with(
                "cgroupDriver is \"cgroupfs\" (value set by the kubelet flag --cgroup-driver) but"
            ),
            "{}",
            r.detail
        );
        // Unknown runtime driver: no rule.
        let setup = report(&NodeFiles::default(), None);
        assert!(matches!(
            setup.check("p.yaml", config("maxPods: 64\n").as_bytes()),
            Verdict::Accepted(_)
        ));
    }

    #[test]
    fn in_drop_in_mode_the_payload_goes_over_the_nodes_file_in_the_kubelets_order() {
        let own = config("cgroupDriver: systemd\nmaxPods: 30\n");
        let early = config("maxPods: 40\n");
        let late = config("maxPods: 50\n");
        let dir = "/etc/kubernetes/kubelet.conf.d";
        let ours = format!("{dir}/50-kubelet-gitops.conf");
        let (early_name, late_name) = (format!("{dir}/10-a.conf"), format!("{dir}/90-z.conf"));
        let stale = config("maxPods: 1\n");
        let files = NodeFiles {
            mode: Mode::DropIn,
            config_file: Some(Source::new("/var/lib/kubelet/config.yaml", own.as_bytes())),
            drop_ins: vec![
                Source::new(&late_name, late.as_bytes()),
                Source::new(&ours, stale.as_bytes()),
                Source::new(&early_name, early.as_bytes()),
            ],
            agent_drop_in: Some(&ours),
            flags: None,
        };
        let setup = report(&files, Some("systemd"));
        let paths: Vec<&str> = setup.drop_ins.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [early_name.as_str(), late_name.as_str()],
            "ours left out, in order"
        );
        // The node's file sets the driver, so a drop-in without it is fine; 90-z wins.
        let Verdict::Accepted(eff) = setup.check("p.yaml", config("maxPods: 45\n").as_bytes())
        else {
            panic!("refused");
        };
        assert_eq!(eff.config.max_pods, Some(50));
        assert_eq!(eff.config.cgroup_driver.as_deref(), Some("systemd"));
        // The same on the node itself, with the stale drop-in of ours replaced.
        let on_node = check_payload(
            Source::new(&ours, config("maxPods: 45\n").as_bytes()),
            &files,
            &setup.facts(),
        )
        .unwrap();
        assert_eq!(on_node.config.max_pods, Some(50));
        // A payload that does not decode is named as the agent's drop-in.
        let r = effective_on_node(Some(Source::new("x", b"maxPod: 1\n")), &files).unwrap_err();
        assert_eq!(r.reason, reason::LOAD_ERROR);
        assert!(r.detail.starts_with(&ours), "{}", r.detail);
    }

    #[test]
    fn the_report_leaves_out_what_may_carry_credentials() {
        let f = flags(
            "--manifest-url=https://user:pw@h/x --manifest-url-header=Authorization:Bearer_t --max-pods=50",
        );
        let drop_in = config(
            "staticPodURL: https://user:pw@h/\nstaticPodURLHeader: {Authorization: [Bearer t]}\nmaxPods: 40 # comment\n",
        );
        let setup = report(
            &NodeFiles {
                drop_ins: vec![Source::new("/d/10.conf", drop_in.as_bytes())],
                flags: Some(&f),
                ..NodeFiles::default()
            },
            None,
        );
        let text = setup.to_annotation();
        assert!(!text.contains("pw") && !text.contains("Bearer"), "{text}");
        assert!(!text.contains("comment"), "{text}");
        assert_eq!(setup.flags, ["--max-pods=50"]);
        assert_eq!(setup.drop_ins[0].config.as_ref().unwrap()["maxPods"], 40);
    }

    #[test]
    fn a_node_file_that_does_not_decode_refuses_every_config() {
        let setup = report(
            &NodeFiles {
                drop_ins: vec![Source::new("/d/10.conf", b"maxPods: [\n")],
                ..NodeFiles::default()
            },
            None,
        );
        assert!(setup.drop_ins[0].error.is_some());
        let r = refused(setup.check("p.yaml", config("").as_bytes()));
        assert_eq!(r.reason, reason::LOAD_ERROR);
        assert!(
            r.detail.starts_with("node file /d/10.conf: "),
            "{}",
            r.detail
        );
    }

    #[test]
    fn a_report_too_large_says_so_and_is_not_checked() {
        let big = config(&format!("providerID: {}\n", "x".repeat(MAX_REPORT_BYTES)));
        let setup = report(
            &NodeFiles {
                drop_ins: vec![Source::new("/d/10.conf", big.as_bytes())],
                ..NodeFiles::default()
            },
            Some("systemd"),
        );
        assert!(setup.to_annotation().len() < 1024);
        assert!(setup.drop_ins.is_empty());
        assert_eq!(setup.runtime_cgroup_driver.as_deref(), Some("systemd"));
        let Verdict::Unchecked(why) = setup.check("p.yaml", config("").as_bytes()) else {
            panic!("checked");
        };
        assert!(why.contains("more than the 32768 bytes"), "{why}");
        // A report of another version or one that does not parse is not used either.
        let future = NodeSetup {
            version: 2,
            ..NodeSetup::default()
        };
        assert!(matches!(
            future.check("p.yaml", config("").as_bytes()),
            Verdict::Unchecked(_)
        ));
        assert!(NodeSetup::from_annotation("{\"version\":1,\"x\":2}").is_err());
    }

    #[test]
    fn several_problems_are_listed_each_with_its_flag() {
        let f = flags("--cgroups-per-qos=false --image-gc-high-threshold=150");
        let setup = report(
            &NodeFiles {
                flags: Some(&f),
                ..NodeFiles::default()
            },
            None,
        );
        let r = refused(setup.check("p.yaml", config("").as_bytes()));
        assert!(
            r.detail.starts_with('[') && r.detail.ends_with(']'),
            "{}",
            r.detail
        );
        assert!(
            r.detail
                .contains("(value set by the kubelet flag --image-gc-high-threshold)")
                && r.detail
                    .contains("(value set by the kubelet flag --cgroups-per-qos)"),
            "{}",
            r.detail
        );
    }
}
