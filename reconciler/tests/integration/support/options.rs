//! The options the binaries declare, parsed from what declares them: a command's clap
//! `--help` for `kubelet-gitops`, and the clap definition in `node-agent/src/args.rs` for
//! the agent (whose binary is another package's, not built for this crate's tests; `cargo
//! run` from inside `cargo test` would wait on the build lock it holds).
//!
//! Pure parsers over text; the callers run the binary or read the file.

use std::collections::BTreeSet;

/// One option: its long flag, environment variable, default (`None`: none or empty) and,
/// for a `value_enum` option of the agent, the values clap accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opt {
    pub flag: String,
    pub env: Option<String>,
    pub default: Option<String>,
    pub values: Option<BTreeSet<String>>,
}

impl Opt {
    /// An option without a value list.
    pub fn new(flag: &str, env: Option<&str>, default: Option<&str>) -> Opt {
        Opt {
            flag: flag.into(),
            env: env.map(Into::into),
            default: default.map(Into::into),
            values: None,
        }
    }
}

/// The options of a `kubelet-gitops <command> --help` text (without `--help` and
/// `--version`). Works for clap's one-line layout ("  --flags <ARGS>   text [env: X=]")
/// and its long layout (the description, `[env: X=]` and `[default: Y]` on later lines).
pub fn help_options(help: &str) -> Vec<Opt> {
    // Each option's text: its line and the more-indented lines after it.
    let mut blocks: Vec<(String, String)> = Vec::new();
    for line in help.lines() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        if indent <= 6 && trimmed.starts_with('-') {
            // The flag spec ends at the first double space: "-h, --help", "--root <DIR>".
            let spec = trimmed.split("  ").next().unwrap_or_default().to_string();
            blocks.push((spec, trimmed.to_string()));
        } else if indent <= 6 && !trimmed.is_empty() {
            // A heading ("Git source:", "Usage: ...") ends the option before it.
            blocks.push((String::new(), String::new()));
        } else if let Some((spec, text)) = blocks.last_mut()
            && !spec.is_empty()
        {
            text.push(' ');
            text.push_str(trimmed);
        }
    }
    let bracketed = |text: &str, key: &str| -> Option<String> {
        let at = text.find(key)?;
        let rest = text[at + key.len()..].trim_start();
        let end = rest.find(']')?;
        Some(rest[..end].trim().to_string())
    };
    let mut options = Vec::new();
    for (spec, text) in blocks {
        let Some(flag) = spec
            .split([' ', ','])
            .find_map(|w| w.strip_prefix("--"))
            .map(|name| {
                name.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect::<String>()
            })
        else {
            continue;
        };
        if flag == "help" || flag == "version" {
            continue;
        }
        // "[env: X=]", or "[env: X=value]" when the variable is set.
        let env = bracketed(&text, "[env:").and_then(|e| e.split('=').next().map(str::to_string));
        let default = bracketed(&text, "[default:")
            .map(|d| d.trim_matches('"').to_string())
            .filter(|d| !d.is_empty());
        options.push(Opt {
            flag: format!("--{flag}"),
            env,
            default,
            values: None,
        });
    }
    options
}

/// The text `agent_options` reads: the agent's arguments, and core's log set-up, whose
/// `LogFormat` they use.
pub fn agent_sources() -> String {
    ["node-agent/src/args.rs", "core/src/logging.rs"]
        .map(super::commands::read)
        .concat()
}

/// The agent's options from the text of `node-agent/src/args.rs` (`src`): every field of
/// `pub struct Args` with a long flag (and of the structs it flattens), its `env`,
/// `default_value` and, for a `value_enum`, the variants of its enum. Checks that the
/// parse found the options every agent has.
pub fn agent_options(src: &str) -> Vec<Opt> {
    let mut options = Vec::new();
    struct_options(src, "Args", &mut options);
    assert!(
        options.len() > 20
            && declares(&options, "--node-name", Some("NODE_NAME"), None)
            && declares(
                &options,
                "--checkpoint-dir",
                Some("KUBELET_GITOPS_CHECKPOINT_DIR"),
                Some("/var/lib/kubelet-gitops")
            ),
        "node-agent/src/args.rs parsed: {options:?}"
    );
    options
}

/// The options of `pub struct <name>` of `src`, in order, following each
/// `#[command(flatten)]` field into the struct it names.
fn struct_options(src: &str, name: &str, options: &mut Vec<Opt>) {
    let body_start = src
        .find(&format!("pub struct {name} {{"))
        .unwrap_or_else(|| panic!("node-agent/src/args.rs defines no `pub struct {name}`"));
    let body = &src[body_start..];
    let body = &body[..body
        .find("\n}\n")
        .unwrap_or_else(|| panic!("the end of struct {name}"))];
    let mut attr = String::new();
    let mut in_attr = false;
    let mut flatten = false;
    for line in body.lines().map(str::trim) {
        if line == "#[command(flatten)]" {
            flatten = true;
            continue;
        }
        if line.starts_with("#[arg(") {
            in_attr = true;
            attr.clear();
        }
        if in_attr {
            attr.push_str(line);
            attr.push(' ');
            if line.ends_with(")]") {
                in_attr = false;
            }
            continue;
        }
        let Some(field) = line.strip_prefix("pub ") else {
            continue;
        };
        let Some((name, ty)) = field.split_once(':') else {
            continue;
        };
        let ty = ty.trim().trim_end_matches(',');
        if std::mem::take(&mut flatten) {
            struct_options(src, ty, options);
            attr.clear();
            continue;
        }
        let quoted = |key: &str| -> Option<String> {
            let at = attr.find(&format!("{key} = \""))?;
            let rest = &attr[at + key.len() + 4..];
            Some(rest[..rest.find('"')?].to_string())
        };
        let has_long = attr.split([',', '(', ')', ' ']).any(|w| w.trim() == "long");
        let flag = match quoted("long") {
            Some(l) => format!("--{l}"),
            None if has_long => format!("--{}", name.trim().replace('_', "-")),
            None => continue,
        };
        options.push(Opt {
            flag,
            env: quoted("env"),
            default: quoted("default_value").filter(|d| !d.is_empty()),
            values: attr.contains("value_enum").then(|| enum_values(src, ty)),
        });
        attr.clear();
    }
}

/// Whether `options` has `flag` with exactly this variable and default: for checking
/// that a parse found what it must have.
pub fn declares(options: &[Opt], flag: &str, env: Option<&str>, default: Option<&str>) -> bool {
    options
        .iter()
        .any(|o| o.flag == flag && o.env.as_deref() == env && o.default.as_deref() == default)
}

/// The values clap accepts for `enum name` of `src` (its variants in kebab-case).
fn enum_values(src: &str, name: &str) -> BTreeSet<String> {
    let start = src
        .find(&format!("pub enum {name} {{"))
        .unwrap_or_else(|| panic!("node-agent/src/args.rs: no `pub enum {name}`"));
    let body = &src[start..];
    let body = &body[..body.find("\n}").expect("the end of the enum")];
    let values: BTreeSet<String> = body
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && !l.starts_with("#[") && l.ends_with(','))
        .map(|l| {
            let variant = l.trim_end_matches(',');
            let mut kebab = String::new();
            for (i, ch) in variant.chars().enumerate() {
                if ch.is_ascii_uppercase() && i > 0 {
                    kebab.push('-');
                }
                kebab.push(ch.to_ascii_lowercase());
            }
            kebab
        })
        .collect();
    assert!(!values.is_empty(), "enum {name} has no variants");
    values
}
