//! The kubelet's command-line flags, known as the kubelet knows them.
//!
//! The kubelet builds its effective configuration as: built-in defaults, then the
//! `--config` file, then the `--config-dir` drop-ins (JSON merge patches, in file-name
//! order), then **only the flags explicitly set on the command line**, re-parsed over the
//! loaded object (`kubeletConfigFlagPrecedence` in `cmd/kubelet/app/server.go`). This
//! module is that last step and everything needed to get to it:
//!
//! - [`split_command_line`], [`parse_env_file`], [`parse_systemd_service`] and
//!   [`kubelet_args_from_kubeadm_layout`] recover the kubelet's argument vector from the
//!   files kubeadm, the packages and systemd use;
//! - [`KubeletFlags::parse`] parses it with pflag's rules and every flag's own `Set`
//!   (errors read as the kubelet's: `unknown flag: --foo`,
//!   `invalid argument "x" for "--max-pods" flag: ...`);
//! - [`flag_info`] answers for any kubelet flag: the [`FLAGS`] table lists every flag the
//!   kubelet registers, with the `KubeletConfiguration` JSON field each config flag writes;
//! - [`apply_flags`] writes the explicitly set config flags into the JSON form of the
//!   config (upstream v1beta1 field names) and reports every field a flag changes.
//!
//! Semantics worth knowing, all from upstream: the first occurrence of a map flag
//! (`--system-reserved`, `--eviction-hard`, ...) replaces the file's whole map and later
//! occurrences merge into it; `--feature-gates` is merged over the file's gates instead;
//! string-list flags replace, then append; `--vmodule` appends to the file's list; a bool
//! flag never consumes the next word (`--fail-swap-on false` makes `false` a stray
//! argument, which the kubelet rejects).
//!
//! Upstream sources read (kubernetes/kubernetes unless noted):
//! `cmd/kubelet/app/options/options.go` @ 6785e9ed401a526cfb4ae33d498b088e27237ad1,
//! `cmd/kubelet/app/server.go` @ 001332b0422071acf4860769f18e34b5e9b7c1bc,
//! `pkg/kubelet/config/flags.go` @ 030880a5dc5449403c6d1f0aa146a7dc21d6c6dc,
//! `cmd/kubelet/app/options/globalflags_linux.go` @ f9cfc9d93491c42c0ee6b3705d4c46f7e173f356,
//! `pkg/util/flag/flags.go` @ ddd467a0e8b7a211671e5ecef9fc892391e478c6,
//! `staging/src/k8s.io/component-base/cli/flag/` (map_string_string.go @ 205c32a8,
//! map_string_bool.go @ 3971407c, colon_separated_multimap_string_string.go @ 9d38f210,
//! langle_separated_map_string_string_test.go @ 04791b49, flags.go @ 15ed3b36),
//! `staging/src/k8s.io/component-base/logs/api/v1/options.go` @ 02efe09a and `pflags.go`
//! @ 3971407c, and the generated kubelet reference (kubernetes/website
//! `content/en/docs/reference/command-line-tools-reference/kubelet.md` @
//! 00cce4136eb6507551a29d29715ff10b463cc5ad, the v1.34 `kubelet --help`). The table is
//! checked against the v1.36.3 kubelet's own flag set (`kubelet-oracle flags`, in
//! `tests/tests/kubelet_flags_oracle.rs`): `--pod-infra-container-image`,
//! `--iptables-masquerade-bit` and `--iptables-drop-bit` are gone there.

mod apply;
mod parse;
mod table;
mod values;
mod words;

pub use apply::{FlagOverride, apply_flags, config_flags_set};
pub use parse::{DEFAULT_CERT_DIR, DEFAULT_ROOT_DIR, FlagOccurrence, KubeletFlags};
pub use table::{FLAGS, FlagGroup, FlagInfo, ValueKind, flag_by_shorthand, flag_info};
pub use words::{
    DEFAULT_KUBELET_ENV, EnvironmentFile, KUBEADM_DROPIN, KUBEADM_FLAGS_ENV, SYSCONFIG_KUBELET_ENV,
    SystemdService, env_lookup, extra_args, kubeadm_args, kubelet_args_from_kubeadm_layout,
    parse_env_file, parse_systemd_service, split_command_line, split_proc_cmdline,
};

/// Why a kubelet command line (or the file it came from) could not be understood.
///
/// The flag-parsing messages are pflag's, so they read as the kubelet's own
/// (`failed to parse kubelet flag: <this>`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    /// A quote opened and never closed while splitting a command line.
    #[error("unterminated {quote} quote in {input:?}")]
    UnterminatedQuote { quote: char, input: String },
    /// A command line ending in a lone backslash.
    #[error("trailing backslash in {input:?}")]
    TrailingBackslash { input: String },
    /// A `--name` the kubelet does not register.
    #[error("unknown flag: {flag}")]
    UnknownFlag { flag: String },
    /// A `-x` shorthand the kubelet does not register (only `-v` and `-h` exist).
    #[error("unknown shorthand flag: {shorthand:?} in -{arg}")]
    UnknownShorthand { shorthand: char, arg: String },
    /// `---x`, `--=x`.
    #[error("bad flag syntax: {arg}")]
    BadFlagSyntax { arg: String },
    /// A flag that needs a value given none (`--max-pods` at the end of the line).
    #[error("flag needs an argument: {arg}")]
    MissingArgument { arg: String },
    /// A value the flag's own parser rejects.
    #[error("invalid argument {value:?} for \"{flag}\" flag: {reason}")]
    InvalidArgument {
        flag: String,
        value: String,
        reason: String,
    },
    /// `--node-labels` that `ValidateKubeletFlags` refuses (the kubelet says `failed to
    /// validate kubelet flags: <this>`).
    #[error("{message}")]
    InvalidNodeLabels { message: String },
    /// `--help` or `-h` where the flag set has none: the kubelet's second parse
    /// (`kubeletConfigFlagPrecedence`), after a `--help=false` the first parse took; its
    /// flag set is `ExitOnError`, so the kubelet exits with status 0.
    #[error("pflag: help requested")]
    HelpRequested,
    /// A word that is not a flag: the kubelet takes no positional arguments.
    #[error("unknown command {arg}")]
    UnknownCommand { arg: String },
    /// A systemd unit (with its drop-ins) that never sets `ExecStart=`.
    #[error("the kubelet unit has no ExecStart= command")]
    NoExecStart,
    /// `EnvironmentFile=/path` (without `-`) naming a file that is not there: systemd
    /// refuses to start the unit.
    #[error("environment file {path} is missing and not optional (no '-' prefix)")]
    MissingEnvironmentFile { path: String },
}
