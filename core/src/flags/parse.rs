//! The kubelet's command line parsed as `cleanFlagSet.Parse(args)` parses it: pflag's
//! syntax, upstream's word-separator normalization (`max_pods` is `max-pods`), and each
//! flag's own `Set`, called once per occurrence in order.

use std::collections::BTreeMap;

use super::FlagError;
use super::table::{FlagInfo, ValueKind, flag_by_shorthand, flag_info};
use super::values::{ParsedValue, parse_value};

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
}

impl KubeletFlags {
    /// Parses the kubelet's arguments (without the program name) as the kubelet does.
    ///
    /// pflag's rules: `--flag=value`, `--flag value`, `-v 2`, `-v=2`, `-v2`; a boolean
    /// flag (and `--version`) never consumes the next word, `--bool=false` sets it
    /// false; `--` ends the flags; `_` in a name reads as `-`. A word that is not a flag
    /// is an error (`unknown command x`), as for the kubelet.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<KubeletFlags, FlagError> {
        let mut parser = Parser::default();
        let mut positional: Vec<&str> = Vec::new();
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
                let value = match (inline, info.kind.no_opt_default()) {
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
                parser.set(info, value)?;
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
        if let Some(first) = positional.first() {
            return Err(FlagError::UnknownCommand {
                arg: (*first).to_string(),
            });
        }
        Ok(KubeletFlags {
            occurrences: parser.occurrences,
        })
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
