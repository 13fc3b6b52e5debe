//! The kubelet's command line parsed as `cleanFlagSet.Parse(args)` parses it: pflag's
//! syntax, upstream's word-separator normalization (`max_pods` is `max-pods`), and each
//! flag's own `Set`, called once per occurrence in order.

use std::collections::BTreeMap;

use super::FlagError;
use super::table::{FlagGroup, FlagInfo, ValueKind, flag_by_shorthand, flag_info};
use super::values::{ParsedValue, parse_value};
use crate::names::{self, Wording};

/// `--root-dir` when the flag is not given.
pub const DEFAULT_ROOT_DIR: &str = "/var/lib/kubelet";
/// `--cert-dir` when the flag is not given.
pub const DEFAULT_CERT_DIR: &str = "/var/lib/kubelet/pki";

/// One flag as it appeared on the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct FlagOccurrence {
    /// The flag.
    pub flag: &'static FlagInfo,
    /// The value its `Set` received (`"true"` for a bare boolean).
    pub value: String,
    pub(crate) parsed: ParsedValue,
}

/// A parsed kubelet command line: every flag occurrence, in order, each value already
/// validated as the kubelet validates it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KubeletFlags {
    occurrences: Vec<FlagOccurrence>,
    /// The occurrences of the kubelet's second parse (`kubeletConfigFlagPrecedence`),
    /// where the global flags take any value and need one.
    reparsed: Vec<FlagOccurrence>,
    /// Why that second parse fails, if it does.
    reparse_error: Option<FlagError>,
}

/// Which of the kubelet's two parses of its command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// `cleanFlagSet.Parse(args)` in `NewKubeletCommand`.
    Clean,
    /// `kubeletConfigFlagPrecedence`'s parse over the loaded config: the global flags
    /// (`AddGlobalFlags`: cadvisor's, `--version`) are `cliflag.NoOp` values, which take
    /// any value and need one (a bare `--enable-load-reader` takes the next word), and
    /// words that are not flags are ignored.
    Precedence,
}

impl KubeletFlags {
    /// Parses the kubelet's arguments (without the program name) as the kubelet does,
    /// then checks them as `ValidateKubeletFlags` does (`--node-labels`).
    ///
    /// pflag's rules: `--flag=value`, `--flag value`, `-v 2`, `-v=2`, `-v2`; a boolean
    /// flag (and `--version`) never consumes the next word, `--bool=false` sets it
    /// false; `--` ends the flags; `_` in a name reads as `-`. A word that is not a flag
    /// is an error (`unknown command x`), as for the kubelet.
    ///
    /// The kubelet parses the line a second time over the config it loaded when it has
    /// `--config` or `--config-dir` ([`KubeletFlags::applied_occurrences`],
    /// [`KubeletFlags::precedence_error`]).
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<KubeletFlags, FlagError> {
        let occurrences = parse_pass(args, Pass::Clean)?;
        if !prints_and_exits(&occurrences) {
            validate_node_labels(&occurrences)?;
        }
        let (reparsed, reparse_error) = match parse_pass(args, Pass::Precedence) {
            Ok(o) => (o, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        Ok(KubeletFlags {
            occurrences,
            reparsed,
            reparse_error,
        })
    }

    /// Whether the kubelet parses its command line a second time, over the config it
    /// loaded (`kubeletConfigFlagPrecedence`): when it has `--config` or `--config-dir`.
    pub fn reparsed_over_config(&self) -> bool {
        self.config_file().is_some() || self.config_dir().is_some()
    }

    /// The occurrences whose values land in the config: those of the second parse when
    /// the kubelet makes one ([`KubeletFlags::reparsed_over_config`]), where a bare global
    /// flag takes the next word as its value (`--enable-load-reader --max-pods=5` loses
    /// `--max-pods`), else [`KubeletFlags::occurrences`].
    pub fn applied_occurrences(&self) -> &[FlagOccurrence] {
        if self.reparsed_over_config() && self.reparse_error.is_none() {
            &self.reparsed
        } else {
            &self.occurrences
        }
    }

    /// Why the kubelet's second parse of its command line fails, when it makes one: a
    /// bare global flag at the end (`flag needs an argument: --log-cadvisor-usage`), a
    /// word that a bare global flag shifted into a flag's place, or `--help=false`. The
    /// kubelet exits silently (its second flag set is `ExitOnError` with its output
    /// discarded: status 2, or 0 for help); with a `ContinueOnError` set the message would
    /// be `failed to precedence kubeletConfigFlag: <this>`.
    pub fn precedence_error(&self) -> Option<&FlagError> {
        self.reparse_error
            .as_ref()
            .filter(|_| self.reparsed_over_config())
    }

    /// Every flag occurrence, in command-line order.
    pub fn occurrences(&self) -> &[FlagOccurrence] {
        &self.occurrences
    }

    /// Whether the flag (any spelling [`flag_info`] accepts) is on the command line.
    pub fn is_set(&self, name: &str) -> bool {
        let Some(info) = flag_info(name) else {
            return false;
        };
        self.occurrences.iter().any(|o| o.flag.name == info.name)
    }

    /// The value of the flag's last occurrence, as given (`"true"` for a bare boolean).
    pub fn value(&self, name: &str) -> Option<&str> {
        let info = flag_info(name)?;
        self.occurrences
            .iter()
            .rev()
            .find(|o| o.flag.name == info.name)
            .map(|o| o.value.as_str())
    }

    /// A string flag that the kubelet ignores when empty (`len(x) > 0`).
    fn non_empty(&self, name: &str) -> Option<&str> {
        self.value(name).filter(|v| !v.is_empty())
    }

    /// The boolean value of a bool flag (false when absent).
    fn bool_flag(&self, name: &str) -> bool {
        let Some(info) = flag_info(name) else {
            return false;
        };
        self.occurrences
            .iter()
            .rev()
            .find(|o| o.flag.name == info.name)
            .is_some_and(|o| o.parsed == ParsedValue::Bool(true))
    }

    /// `--config`: the config file the kubelet loads (none when unset or empty).
    pub fn config_file(&self) -> Option<&str> {
        self.non_empty("config")
    }

    /// `--config-dir`: the drop-in directory merged over the config file.
    pub fn config_dir(&self) -> Option<&str> {
        self.non_empty("config-dir")
    }

    /// `--kubeconfig`: set means API-server mode, unset means standalone.
    pub fn kubeconfig(&self) -> Option<&str> {
        self.non_empty("kubeconfig")
    }

    /// `--bootstrap-kubeconfig`.
    pub fn bootstrap_kubeconfig(&self) -> Option<&str> {
        self.non_empty("bootstrap-kubeconfig")
    }

    /// `--hostname-override`: the node name instead of the host name.
    pub fn hostname_override(&self) -> Option<&str> {
        self.non_empty("hostname-override")
    }

    /// `--node-ip`: one IP, or a comma-separated dual-stack pair.
    pub fn node_ip(&self) -> Option<&str> {
        self.non_empty("node-ip")
    }

    /// `--root-dir`, or [`DEFAULT_ROOT_DIR`].
    pub fn root_dir(&self) -> &str {
        self.value("root-dir").unwrap_or(DEFAULT_ROOT_DIR)
    }

    /// `--cert-dir`, or [`DEFAULT_CERT_DIR`].
    pub fn cert_dir(&self) -> &str {
        self.value("cert-dir").unwrap_or(DEFAULT_CERT_DIR)
    }

    /// `--cloud-provider` (`external` with an out-of-tree cloud controller).
    pub fn cloud_provider(&self) -> Option<&str> {
        self.non_empty("cloud-provider")
    }

    /// `--image-credential-provider-config`.
    pub fn image_credential_provider_config(&self) -> Option<&str> {
        self.non_empty("image-credential-provider-config")
    }

    /// `--image-credential-provider-bin-dir`.
    pub fn image_credential_provider_bin_dir(&self) -> Option<&str> {
        self.non_empty("image-credential-provider-bin-dir")
    }

    /// `--runtime-cgroups`.
    pub fn runtime_cgroups(&self) -> Option<&str> {
        self.non_empty("runtime-cgroups")
    }

    /// `--lock-file`.
    pub fn lock_file(&self) -> Option<&str> {
        self.non_empty("lock-file")
    }

    /// `--seccomp-default`: the kubelet runs with `flag || config.seccompDefault`, so a
    /// true flag wins over a false config field without the config showing it.
    pub fn seccomp_default(&self) -> bool {
        self.bool_flag("seccomp-default")
    }

    /// `--node-labels`, all occurrences merged (later keys win).
    pub fn node_labels(&self) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::new();
        for o in &self.occurrences {
            if let (ValueKind::LabelMap, ParsedValue::Pairs(pairs)) = (o.flag.kind, &o.parsed) {
                for (k, v) in pairs {
                    labels.insert(k.clone(), v.clone());
                }
            }
        }
        labels
    }

    /// The deprecated flags on the command line (the kubelet warns about each), once
    /// each, as written: `--max-pods`.
    pub fn deprecated_flags(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for o in &self.occurrences {
            let name = o.flag.display_name();
            if o.flag.deprecated && !out.contains(&name) {
                out.push(name);
            }
        }
        out
    }
}

/// One parse of the command line (see [`Pass`]).
fn parse_pass<S: AsRef<str>>(args: &[S], pass: Pass) -> Result<Vec<FlagOccurrence>, FlagError> {
    let mut parser = Parser::default();
    let mut positional: Vec<&str> = Vec::new();
    // In the precedence pass a global flag is a NoOp: a value is required, never checked.
    let no_op = |info: &FlagInfo| pass == Pass::Precedence && info.group == FlagGroup::Global;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_ref();
        i += 1;
        if arg.len() < 2 || !arg.starts_with('-') {
            positional.push(arg);
            continue;
        }
        if arg == "--" {
            positional.extend(args[i..].iter().map(AsRef::as_ref));
            break;
        }
        if let Some(body) = arg.strip_prefix("--") {
            if body.starts_with('-') || body.starts_with('=') {
                return Err(FlagError::BadFlagSyntax {
                    arg: arg.to_string(),
                });
            }
            let (name, inline) = match body.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (body, None),
            };
            let Some(info) = flag_info(name) else {
                return Err(FlagError::UnknownFlag {
                    flag: format!("--{name}"),
                });
            };
            if pass == Pass::Precedence && info.name == "help" {
                // Not in the second flag set: pflag's answer to an unknown `help`.
                return Err(FlagError::HelpRequested);
            }
            let no_opt_default = if no_op(info) {
                None
            } else {
                info.kind.no_opt_default()
            };
            let value = match (inline, no_opt_default) {
                (Some(v), _) => v.to_string(),
                (None, Some(default)) => default.to_string(),
                (None, None) => match args.get(i) {
                    Some(next) => {
                        i += 1;
                        next.as_ref().to_string()
                    }
                    None => {
                        return Err(FlagError::MissingArgument {
                            arg: arg.to_string(),
                        });
                    }
                },
            };
            if !no_op(info) {
                parser.set(info, value)?;
            }
        } else {
            // A cluster of shorthands: `-h`, `-v2`, `-v=2`, `-hv 3`.
            let mut shorts = &arg[1..];
            while let Some(c) = shorts.chars().next() {
                let rest = &shorts[c.len_utf8()..];
                let Some(info) = flag_by_shorthand(c) else {
                    return Err(FlagError::UnknownShorthand {
                        shorthand: c,
                        arg: shorts.to_string(),
                    });
                };
                if pass == Pass::Precedence && info.name == "help" {
                    return Err(FlagError::HelpRequested);
                }
                let value;
                if rest.len() > 1 && rest.starts_with('=') {
                    value = rest[1..].to_string();
                    shorts = "";
                } else if let Some(default) = info.kind.no_opt_default() {
                    value = default.to_string();
                    shorts = rest;
                } else if !rest.is_empty() {
                    value = rest.to_string();
                    shorts = "";
                } else if let Some(next) = args.get(i) {
                    i += 1;
                    value = next.as_ref().to_string();
                    shorts = "";
                } else {
                    return Err(FlagError::MissingArgument {
                        arg: format!("{c:?} in -{shorts}"),
                    });
                }
                parser.set(info, value)?;
            }
        }
    }
    if pass == Pass::Clean
        && let Some(first) = positional.first()
    {
        return Err(FlagError::UnknownCommand {
            arg: (*first).to_string(),
        });
    }
    Ok(parser.occurrences)
}

/// Whether the kubelet prints its help or version and exits before it checks the flags:
/// `--help` (`-h`) true, or `--version` other than false (the last occurrence of each).
fn prints_and_exits(occurrences: &[FlagOccurrence]) -> bool {
    let last = |name: &str| occurrences.iter().rev().find(|o| o.flag.name == name);
    let help = last("help").is_some_and(|o| o.parsed == ParsedValue::Bool(true));
    let version = last("version").is_some_and(|o| crate::go::parse_bool(&o.value) != Ok(false));
    help || version
}

/// `kubeletapis.KubeletLabels()`: the `kubernetes.io` labels a kubelet may set on its node.
const KUBELET_LABELS: &[&str] = &[
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "kubernetes.io/arch",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];

/// `kubeletapis.KubeletLabelNamespaces()`: the label namespaces a kubelet may use.
const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

/// `ValidateKubeletFlags` (`cmd/kubelet/app/options/options.go`): the `--node-labels`
/// (all occurrences merged) must be valid labels, and those in the `kubernetes.io` or
/// `k8s.io` namespaces must be ones the kubelet may set (`kubeletapis.IsKubeletLabel`).
fn validate_node_labels(occurrences: &[FlagOccurrence]) -> Result<(), FlagError> {
    let mut labels = BTreeMap::new();
    for o in occurrences {
        if let (ValueKind::LabelMap, ParsedValue::Pairs(pairs)) = (o.flag.kind, &o.parsed) {
            for (k, v) in pairs {
                labels.insert(k.as_str(), v.as_str());
            }
        }
    }
    let in_namespace =
        |ns: &str, of: &str| ns == of || ns.strip_suffix(of).is_some_and(|p| p.ends_with('.'));
    let mut unknown = Vec::new();
    let mut invalid: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (k, v) in &labels {
        let ns = k.split_once('/').map(|(ns, _)| ns).unwrap_or("");
        let kubernetes = in_namespace(ns, "kubernetes.io") || in_namespace(ns, "k8s.io");
        let allowed = KUBELET_LABELS.contains(k)
            || KUBELET_LABEL_NAMESPACES
                .iter()
                .any(|allowed| in_namespace(ns, allowed));
        if kubernetes && !allowed {
            unknown.push(*k);
        }
        let key_errors = names::label_key_errors(k, Wording::Validation);
        if !key_errors.is_empty() {
            invalid.entry(k).or_default().extend(key_errors);
        }
        let value_errors = names::label_value_errors(v, Wording::Validation);
        if !value_errors.is_empty() {
            invalid.entry(v).or_default().extend(value_errors);
        }
    }
    if !unknown.is_empty() {
        return Err(FlagError::InvalidNodeLabels {
            message: format!(
                "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [{}]\n--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix ({}) or be in the specifically allowed set ({})",
                unknown.join(" "),
                KUBELET_LABEL_NAMESPACES.join(", "),
                KUBELET_LABELS.join(", ")
            ),
        });
    }
    if !invalid.is_empty() {
        // Upstream joins them in Go's map order (random); here, sorted.
        let parts: Vec<String> = invalid
            .iter()
            .map(|(k, errs)| format!("'{k}' - {}", errs.join(", ")))
            .collect();
        return Err(FlagError::InvalidNodeLabels {
            message: format!("invalid node labels: {}", parts.join("; ")),
        });
    }
    Ok(())
}

/// The state pflag keeps between `Set` calls of one parse.
#[derive(Default)]
struct Parser {
    occurrences: Vec<FlagOccurrence>,
    /// Flags whose `Set("")` detached them from the config (`IPVar`, `ReservedMemoryVar`).
    detached: Vec<&'static str>,
}

impl Parser {
    fn set(&mut self, flag: &'static FlagInfo, value: String) -> Result<(), FlagError> {
        let invalid = |reason: String| FlagError::InvalidArgument {
            flag: flag.error_name(),
            value: value.clone(),
            reason,
        };
        if self.detached.contains(&flag.name) {
            // Upstream: IPVar panics ("the string pointer passed into IPVar should not be
            // nil"), ReservedMemoryVar errors ("no target").
            let reason = match flag.kind {
                ValueKind::Ip if value.is_empty() => None,
                ValueKind::Ip => Some(
                    "a value after an empty one: the kubelet panics (\"the string pointer passed into IPVar should not be nil\")",
                ),
                _ => Some("no target (nil pointer to *[]MemoryReservation"),
            };
            if let Some(reason) = reason {
                return Err(invalid(reason.to_string()));
            }
        }
        let parsed = parse_value(flag.kind, &value).map_err(invalid)?;
        if parsed == ParsedValue::Empty
            && matches!(flag.kind, ValueKind::Ip | ValueKind::ReservedMemory)
            && !self.detached.contains(&flag.name)
        {
            self.detached.push(flag.name);
        }
        self.occurrences.push(FlagOccurrence {
            flag,
            value,
            parsed,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<KubeletFlags, FlagError> {
        KubeletFlags::parse(args)
    }

    fn err(args: &[&str]) -> String {
        match parse(args) {
            Ok(f) => panic!("{args:?} parsed: {f:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn long_flags_with_equals_or_next_word() {
        let f = parse(&[
            "--max-pods=64",
            "--node-ip",
            "10.0.0.5",
            "--config",
            "/etc/k.yaml",
        ])
        .unwrap();
        assert_eq!(f.value("max-pods"), Some("64"));
        assert_eq!(f.node_ip(), Some("10.0.0.5"));
        assert_eq!(f.config_file(), Some("/etc/k.yaml"));
        assert_eq!(f.occurrences().len(), 3);
    }

    #[test]
    fn a_value_may_start_with_a_dash() {
        let f = parse(&["--oom-score-adj", "-999"]).unwrap();
        assert_eq!(f.value("oom-score-adj"), Some("-999"));
    }

    #[test]
    fn bool_flags_never_consume_the_next_word() {
        let f = parse(&["--fail-swap-on", "--max-pods=10"]).unwrap();
        assert_eq!(f.value("fail-swap-on"), Some("true"));
        assert_eq!(f.value("max-pods"), Some("10"));

        let f = parse(&["--fail-swap-on=false"]).unwrap();
        assert_eq!(f.value("fail-swap-on"), Some("false"));

        // `false` is a stray word, which the kubelet rejects.
        assert_eq!(err(&["--fail-swap-on", "false"]), "unknown command false");
        assert_eq!(
            err(&["--fail-swap-on=maybe"]),
            "invalid argument \"maybe\" for \"--fail-swap-on\" flag: strconv.ParseBool: parsing \"maybe\": invalid syntax"
        );
    }

    #[test]
    fn verbosity_shorthand_forms() {
        for args in [
            &["-v", "3"][..],
            &["-v=3"],
            &["-v3"],
            &["--v=3"],
            &["--v", "3"],
        ] {
            let f = parse(args).unwrap();
            assert_eq!(f.value("v"), Some("3"), "{args:?}");
        }
        let f = parse(&["-hv", "2"]).unwrap();
        assert_eq!(f.value("help"), Some("true"));
        assert_eq!(f.value("v"), Some("2"));
        assert_eq!(
            err(&["-v=x"]),
            "invalid argument \"x\" for \"-v, --v\" flag: strconv.ParseUint: parsing \"x\": invalid syntax"
        );
        assert_eq!(err(&["-v"]), "flag needs an argument: 'v' in -v");
        assert_eq!(err(&["-x"]), "unknown shorthand flag: 'x' in -x");
    }

    #[test]
    fn unknown_flag_is_an_error() {
        assert_eq!(err(&["--max-pods=1", "--foo"]), "unknown flag: --foo");
        assert_eq!(err(&["--foo=bar"]), "unknown flag: --foo");
        assert_eq!(
            err(&["--keep-terminated-pod-volumes"]),
            "unknown flag: --keep-terminated-pod-volumes"
        );
    }

    #[test]
    fn bad_values_read_as_pflag_errors() {
        assert_eq!(
            err(&["--max-pods=x"]),
            "invalid argument \"x\" for \"--max-pods\" flag: strconv.ParseInt: parsing \"x\": invalid syntax"
        );
        assert_eq!(
            err(&["--max-pods=3000000000"]),
            "invalid argument \"3000000000\" for \"--max-pods\" flag: strconv.ParseInt: parsing \"3000000000\": value out of range"
        );
        assert_eq!(
            err(&["--sync-frequency=5"]),
            "invalid argument \"5\" for \"--sync-frequency\" flag: time: missing unit in duration \"5\""
        );
        assert!(err(&["--address=nope"]).contains("is not a valid IP address"));
        assert!(err(&["--system-reserved=cpu"]).ends_with("malformed pair, expect string=string"));
        assert_eq!(err(&["--max-pods"]), "flag needs an argument: --max-pods");
        assert_eq!(err(&["---max-pods=1"]), "bad flag syntax: ---max-pods=1");
    }

    #[test]
    fn positional_arguments_are_rejected_and_double_dash_ends_flags() {
        assert_eq!(err(&["kubelet", "--max-pods=1"]), "unknown command kubelet");
        assert_eq!(
            err(&["--max-pods=1", "--", "--node-ip=1.2.3.4"]),
            "unknown command --node-ip=1.2.3.4"
        );
        assert!(parse(&["--max-pods=1", "--"]).is_ok());
        assert_eq!(err(&["-"]), "unknown command -");
    }

    #[test]
    fn underscores_normalize_to_dashes() {
        let f = parse(&["--max_pods=7", "--hostname_override=n1"]).unwrap();
        assert_eq!(f.value("max-pods"), Some("7"));
        assert_eq!(f.hostname_override(), Some("n1"));
        assert!(f.is_set("max_pods"));
    }

    #[test]
    fn accessors_for_node_local_flags() {
        let f = parse(&[
            "--kubeconfig=/etc/kubernetes/kubelet.conf",
            "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
            "--config-dir=/etc/kubernetes/kubelet.conf.d",
            "--cert-dir=/pki",
            "--node-labels=a=b,c",
            "--node-labels=a=z",
            "--seccomp-default",
            "--config=",
        ])
        .unwrap();
        assert_eq!(f.kubeconfig(), Some("/etc/kubernetes/kubelet.conf"));
        assert_eq!(
            f.bootstrap_kubeconfig(),
            Some("/etc/kubernetes/bootstrap-kubelet.conf")
        );
        assert_eq!(f.config_dir(), Some("/etc/kubernetes/kubelet.conf.d"));
        assert_eq!(f.config_file(), None, "an empty --config means no file");
        assert_eq!(f.cert_dir(), "/pki");
        assert_eq!(f.root_dir(), DEFAULT_ROOT_DIR);
        assert!(f.seccomp_default());
        let labels = f.node_labels();
        assert_eq!(labels.get("a").map(String::as_str), Some("z"));
        assert_eq!(labels.get("c").map(String::as_str), Some(""));
        assert!(f.hostname_override().is_none());
    }

    #[test]
    fn deprecated_flags_are_listed_once() {
        let f = parse(&["--max-pods=1", "--max-pods=2", "--node-ip=1.2.3.4", "-v=2"]).unwrap();
        assert_eq!(f.deprecated_flags(), vec!["--max-pods".to_string()]);
    }

    #[test]
    fn ip_flag_after_an_empty_one_is_rejected() {
        assert!(parse(&["--address=1.2.3.4", "--address="]).is_ok());
        assert!(err(&["--address=", "--address=1.2.3.4"]).contains("panics"));
        assert!(
            err(&["--reserved-memory=", "--reserved-memory=0:memory=1Gi"]).contains("no target")
        );
    }

    #[test]
    fn node_labels_are_checked_as_validate_kubelet_flags_checks_them() {
        assert!(
            parse(&["--node-labels=a=b,node.kubernetes.io/pool=gpu,kubernetes.io/os=linux"])
                .is_ok()
        );
        assert!(parse(&["--node-labels=x.kubelet.kubernetes.io/y=z,example.com/k8s.io=1"]).is_ok());
        let e = err(&["--node-labels=kubernetes.io/role=x,a.k8s.io/b=c"]);
        assert!(
            e.starts_with("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [a.k8s.io/b kubernetes.io/role]\n--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix (kubelet.kubernetes.io, node.kubernetes.io)"),
            "{e}"
        );
        let e = err(&["--node-labels=-a=b c"]);
        assert!(
            e.starts_with("invalid node labels: '-a' - name part must consist"),
            "{e}"
        );
        assert!(e.contains("; 'b c' - a valid label must be"), "{e}");
        // Later occurrences override earlier keys before the check.
        assert!(parse(&["--node-labels=a=b c", "--node-labels=a=d"]).is_ok());
        // Help and version come first: the kubelet prints and exits.
        assert!(parse(&["-h", "--node-labels=kubernetes.io/role=x"]).is_ok());
        assert!(parse(&["--version=raw", "--node-labels=kubernetes.io/role=x"]).is_ok());
        assert!(parse(&["--version=false", "--node-labels=kubernetes.io/role=x"]).is_err());
    }

    #[test]
    fn the_second_parse_gives_global_flags_a_value() {
        // Without --config the kubelet parses once: a bare global bool is a bool.
        let f = parse(&["--enable-load-reader", "--max-pods=5"]).unwrap();
        assert!(!f.reparsed_over_config());
        let applied: Vec<&str> = f
            .applied_occurrences()
            .iter()
            .map(|o| o.flag.name)
            .collect();
        assert_eq!(applied, ["enable-load-reader", "max-pods"]);
        assert_eq!(f.precedence_error(), None);

        // With --config its second parse makes the global flag a NoOp that takes the next
        // word, here --max-pods=5, which is then never applied.
        let f = parse(&[
            "--config=/k.yaml",
            "--enable-load-reader",
            "--max-pods=5",
            "-v=2",
        ])
        .unwrap();
        assert!(f.reparsed_over_config());
        let applied: Vec<&str> = f
            .applied_occurrences()
            .iter()
            .map(|o| o.flag.name)
            .collect();
        assert_eq!(applied, ["config", "v"]);
        assert_eq!(f.precedence_error(), None);
        // A word so shifted into a flag's place that the first parse read as a value.
        let f = parse(&[
            "--config=/k.yaml",
            "--enable-load-reader",
            "--hostname-override",
            "--max-pods=x",
        ])
        .unwrap();
        assert!(f.precedence_error().is_some_and(|e| {
            e.to_string()
                .starts_with("invalid argument \"x\" for \"--max-pods\"")
        }));

        // At the end of the line it has no value.
        let f = parse(&["--config-dir=/d", "--log-cadvisor-usage"]).unwrap();
        assert_eq!(
            f.precedence_error().map(ToString::to_string).as_deref(),
            Some("flag needs an argument: --log-cadvisor-usage")
        );
        let f = parse(&["--log-cadvisor-usage"]).unwrap();
        assert_eq!(f.precedence_error(), None, "no second parse without a file");
        // The second flag set has no --help: pflag's ErrHelp (the kubelet exits 0).
        let f = parse(&["--config=/k.yaml", "--help=false"]).unwrap();
        assert_eq!(f.precedence_error(), Some(&FlagError::HelpRequested));
        // With a value it is fine either way.
        assert!(
            parse(&["--config=/k.yaml", "--log-cadvisor-usage=true"])
                .unwrap()
                .precedence_error()
                .is_none()
        );
    }

    #[test]
    fn version_takes_an_optional_value() {
        let f = parse(&["--version"]).unwrap();
        assert_eq!(f.value("version"), Some("true"));
        assert_eq!(
            parse(&["--version=raw"]).unwrap().value("version"),
            Some("raw")
        );
        assert_eq!(err(&["--version", "raw"]), "unknown command raw");
    }
}
