//! Recovering the kubelet's argument vector from where nodes keep it: a shell-like
//! command line, `KEY=VALUE` environment files (kubeadm's `kubeadm-flags.env`, the
//! packages' `/etc/default/kubelet` or `/etc/sysconfig/kubelet`), systemd units and
//! drop-ins (`Environment=`, `EnvironmentFile=`, `ExecStart=` with `$VAR`), and
//! `/proc/<pid>/cmdline`.

use super::FlagError;

/// Where `kubeadm init`/`join` write `KUBELET_KUBEADM_ARGS`.
pub const KUBEADM_FLAGS_ENV: &str = "/var/lib/kubelet/kubeadm-flags.env";
/// Where the deb packages' drop-in reads `KUBELET_EXTRA_ARGS`.
pub const DEFAULT_KUBELET_ENV: &str = "/etc/default/kubelet";
/// Where the rpm packages' drop-in reads `KUBELET_EXTRA_ARGS`.
pub const SYSCONFIG_KUBELET_ENV: &str = "/etc/sysconfig/kubelet";

/// kubeadm's `10-kubeadm.conf` drop-in for `kubelet.service`, as the deb packages ship
/// it (the rpm one reads `/etc/sysconfig/kubelet` instead of `/etc/default/kubelet`).
pub const KUBEADM_DROPIN: &str = r#"# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
# This is a file that "kubeadm init" and "kubeadm join" generates at runtime, populating the KUBELET_KUBEADM_ARGS variable dynamically
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
# This is a file that the user can use for overrides of the kubelet args as a last resort. Preferably, the user should use
# the .NodeRegistration.KubeletExtraArgs object in the configuration files instead. KUBELET_EXTRA_ARGS should be sourced from this file.
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"#;

/// Splits a command line into words as `sh` would pass them to a program: whitespace
/// separates words, `'...'` is literal, `"..."` keeps `\"`, `\\`, `\$` and `` \` ``
/// escapes, a backslash outside quotes escapes the next character, backslash-newline
/// joins lines. No variable expansion, globbing or comments.
pub fn split_command_line(s: &str) -> Result<Vec<String>, FlagError> {
    split_words(s, false)
}

/// The word splitter; `relaxed` is systemd's `EXTRACT_RELAX`: an unterminated quote ends
/// at the end of the input, a trailing backslash is dropped.
fn split_words(s: &str, relaxed: bool) -> Result<Vec<String>, FlagError> {
    let unterminated = |quote| FlagError::UnterminatedQuote {
        quote,
        input: s.to_string(),
    };
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None if relaxed => break,
                        None => return Err(unterminated('\'')),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None if relaxed => break,
                            None => return Err(unterminated('"')),
                        },
                        Some(c) => word.push(c),
                        None if relaxed => break,
                        None => return Err(unterminated('"')),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(c) => {
                    in_word = true;
                    word.push(c);
                }
                None if relaxed => {}
                None => {
                    return Err(FlagError::TrailingBackslash {
                        input: s.to_string(),
                    });
                }
            },
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// The words of `/proc/<pid>/cmdline` (NUL-separated), program name first.
pub fn split_proc_cmdline(data: &[u8]) -> Vec<String> {
    let data = data.strip_suffix(&[0]).unwrap_or(data);
    if data.is_empty() {
        return Vec::new();
    }
    data.split(|b| *b == 0)
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect()
}

fn is_env_name(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses a `KEY=VALUE` environment file as systemd's `EnvironmentFile=` reads it:
/// blank lines and lines starting with `#` or `;` are skipped; an optional `export `
/// prefix is accepted; values may be `"double"` (with `\"`, `\\`, `` \` ``, `\$`
/// escapes) or `'single'` quoted, or bare (backslash escapes, trailing whitespace
/// trimmed, `#` literal); a backslash at the end of a line continues the value. Lines
/// without `=` or with an invalid name are ignored. Assignments come back in file order
/// (the last one of a key wins, see [`env_lookup`]).
pub fn parse_env_file(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(&first) = chars.peek() else { break };
        if first == '#' || first == ';' {
            while chars.next().is_some_and(|c| c != '\n') {}
            continue;
        }
        let mut key = String::new();
        let mut has_eq = false;
        for c in chars.by_ref() {
            if c == '=' {
                has_eq = true;
                break;
            }
            if c == '\n' {
                break;
            }
            key.push(c);
        }
        if !has_eq {
            continue;
        }
        while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
        let mut value = String::new();
        // Length of the value up to its last character that is not unquoted whitespace.
        let mut keep = 0;
        while let Some(c) = chars.next() {
            match c {
                '\n' => break,
                '\\' => match chars.next() {
                    Some('\n') | None => {}
                    Some(c) => {
                        value.push(c);
                        keep = value.len();
                    }
                },
                '\'' => {
                    for c in chars.by_ref() {
                        if c == '\'' {
                            break;
                        }
                        value.push(c);
                    }
                    keep = value.len();
                }
                '"' => {
                    while let Some(c) = chars.next() {
                        match c {
                            '"' => break,
                            '\\' => match chars.next() {
                                Some(c @ ('"' | '\\' | '`' | '$')) => value.push(c),
                                Some('\n') | None => {}
                                Some(c) => {
                                    value.push('\\');
                                    value.push(c);
                                }
                            },
                            c => value.push(c),
                        }
                    }
                    keep = value.len();
                }
                c => {
                    value.push(c);
                    if !c.is_whitespace() {
                        keep = value.len();
                    }
                }
            }
        }
        value.truncate(keep);
        let key = key.trim();
        let key = key.strip_prefix("export ").map_or(key, str::trim_start);
        if is_env_name(key) {
            out.push((key.to_string(), value));
        }
    }
    out
}

/// The value of `key` in parsed assignments: the last one wins.
pub fn env_lookup<'a>(vars: &'a [(String, String)], key: &str) -> Option<&'a str> {
    vars.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The kubelet arguments in `KUBELET_KUBEADM_ARGS` of a `kubeadm-flags.env` text, split
/// as systemd splits an unbraced `$KUBELET_KUBEADM_ARGS`.
pub fn kubeadm_args(kubeadm_flags_env: &str) -> Result<Vec<String>, FlagError> {
    args_of(kubeadm_flags_env, "KUBELET_KUBEADM_ARGS")
}

/// The kubelet arguments in `KUBELET_EXTRA_ARGS` of an `/etc/default/kubelet` or
/// `/etc/sysconfig/kubelet` text.
pub fn extra_args(env_text: &str) -> Result<Vec<String>, FlagError> {
    args_of(env_text, "KUBELET_EXTRA_ARGS")
}

fn args_of(text: &str, key: &str) -> Result<Vec<String>, FlagError> {
    match env_lookup(&parse_env_file(text), key) {
        Some(v) => split_command_line(v),
        None => Ok(Vec::new()),
    }
}

/// The kubelet's arguments on a kubeadm node, composed as kubeadm's `10-kubeadm.conf`
/// drop-in ([`KUBEADM_DROPIN`]) passes them:
/// `$KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS`,
/// so a flag in the extra args wins over the same flag from kubeadm. Give the texts of
/// `/var/lib/kubelet/kubeadm-flags.env` and of `/etc/default/kubelet` (or
/// `/etc/sysconfig/kubelet`); `None` for a file that does not exist.
pub fn kubelet_args_from_kubeadm_layout(
    kubeadm_flags_env: Option<&str>,
    extra_args_env: Option<&str>,
) -> Result<Vec<String>, FlagError> {
    let service = parse_systemd_service(&[KUBEADM_DROPIN]);
    service.kubelet_args(|path| match path {
        KUBEADM_FLAGS_ENV => kubeadm_flags_env.map(str::to_string),
        DEFAULT_KUBELET_ENV | SYSCONFIG_KUBELET_ENV => extra_args_env.map(str::to_string),
        _ => None,
    })
}

/// An `EnvironmentFile=` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvironmentFile {
    /// The file's path.
    pub path: String,
    /// Written with a leading `-`: a missing file is no error.
    pub optional: bool,
}

/// What the `[Service]` sections of a unit and its drop-ins say about the command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SystemdService {
    /// `Environment=` assignments in order (an empty `Environment=` resets the list).
    pub environment: Vec<(String, String)>,
    /// `EnvironmentFile=` entries in order (an empty one resets the list).
    pub environment_files: Vec<EnvironmentFile>,
    /// The effective `ExecStart=`: the last one after any empty reset, split into words,
    /// program first, variables not yet expanded.
    pub exec_start: Option<Vec<String>>,
}

/// Parses a unit and its drop-ins, in the order systemd applies them (the unit file,
/// then drop-ins sorted by file name). Only `[Service]`'s `Environment=`,
/// `EnvironmentFile=` and `ExecStart=` are read; comments (`#`, `;`) and line
/// continuations (trailing `\`) are handled.
pub fn parse_systemd_service(units: &[&str]) -> SystemdService {
    let mut service = SystemdService::default();
    for text in units {
        let mut in_service = false;
        for line in logical_lines(text) {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if line.starts_with('[') {
                in_service = line == "[Service]";
                continue;
            }
            if !in_service {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let value = value.trim();
            match key.trim() {
                "Environment" if value.is_empty() => service.environment.clear(),
                "Environment" => {
                    // Relaxed splitting cannot fail.
                    for word in split_words(value, true).unwrap_or_default() {
                        if let Some((k, v)) = word.split_once('=')
                            && is_env_name(k)
                        {
                            service.environment.push((k.to_string(), v.to_string()));
                        }
                    }
                }
                "EnvironmentFile" if value.is_empty() => service.environment_files.clear(),
                "EnvironmentFile" => {
                    let (optional, path) = match value.strip_prefix('-') {
                        Some(path) => (true, path),
                        None => (false, value),
                    };
                    service.environment_files.push(EnvironmentFile {
                        path: path.to_string(),
                        optional,
                    });
                }
                "ExecStart" if value.is_empty() => service.exec_start = None,
                "ExecStart" => {
                    service.exec_start = Some(exec_words(value));
                }
                _ => {}
            }
        }
    }
    service
}

/// Joins lines ending in a backslash (systemd replaces the backslash-newline with a
/// space); comment lines inside a continuation are skipped.
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending: Option<String> = None;
    for raw in text.lines() {
        if pending.is_some() {
            let t = raw.trim_start();
            if t.starts_with('#') || t.starts_with(';') {
                continue;
            }
        }
        let (content, continues) = match raw.strip_suffix('\\') {
            Some(c) => (c, true),
            None => (raw, false),
        };
        let mut acc = pending.take().unwrap_or_default();
        if !acc.is_empty() {
            acc.push(' ');
        }
        acc.push_str(content);
        if continues {
            pending = Some(acc);
        } else {
            out.push(acc);
        }
    }
    if let Some(acc) = pending {
        out.push(acc);
    }
    out
}

/// `ExecStart=` words, without systemd's prefixes (`-`, `@`, `:`, `+`, `!`, `!!`). With
/// `@`, the second word is `argv[0]` and the program's own name is dropped so the
/// arguments still start at index 1.
fn exec_words(value: &str) -> Vec<String> {
    let prefix_len = value
        .char_indices()
        .find(|(_, c)| !matches!(c, '-' | '@' | ':' | '+' | '!'))
        .map_or(value.len(), |(i, _)| i);
    let (prefixes, command) = value.split_at(prefix_len);
    let mut words = split_words(command, true).unwrap_or_default();
    if prefixes.contains('@') && words.len() >= 2 {
        words.remove(0);
    }
    words
}

impl SystemdService {
    /// The environment the command sees: `Environment=` assignments, then each
    /// `EnvironmentFile=` read through `read_file` (files override `Environment=`, later
    /// files override earlier ones). A missing non-optional file is an error, as systemd
    /// refuses to start the unit.
    pub fn environment<F>(&self, read_file: F) -> Result<Vec<(String, String)>, FlagError>
    where
        F: Fn(&str) -> Option<String>,
    {
        let mut env = self.environment.clone();
        for file in &self.environment_files {
            match read_file(&file.path) {
                Some(text) => env.extend(parse_env_file(&text)),
                None if file.optional => {}
                None => {
                    return Err(FlagError::MissingEnvironmentFile {
                        path: file.path.clone(),
                    });
                }
            }
        }
        Ok(env)
    }

    /// The kubelet's arguments (without the program name): `ExecStart=` with variables
    /// expanded as systemd does. A word that is exactly `$NAME` becomes the value split
    /// into words (none when unset or empty); `${NAME}` anywhere in a word is replaced by
    /// the value, the word staying one word; `$$` is a `$`.
    pub fn kubelet_args<F>(&self, read_file: F) -> Result<Vec<String>, FlagError>
    where
        F: Fn(&str) -> Option<String>,
    {
        let exec = self.exec_start.as_ref().ok_or(FlagError::NoExecStart)?;
        let env = self.environment(read_file)?;
        let mut args = Vec::new();
        for word in exec.iter().skip(1) {
            match word.strip_prefix('$') {
                Some(name) if is_env_name(name) => {
                    if let Some(value) = env_lookup(&env, name) {
                        args.extend(split_words(value, true).unwrap_or_default());
                    }
                }
                _ => args.push(expand_braced(word, &env)),
            }
        }
        Ok(args)
    }
}

/// Replaces `${NAME}` (unset: empty) and `$$` in one word.
fn expand_braced(word: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = word;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(after) = after.strip_prefix('$') {
            out.push('$');
            rest = after;
        } else if let Some(inner) = after.strip_prefix('{')
            && let Some(end) = inner.find('}')
            && is_env_name(&inner[..end])
        {
            out.push_str(env_lookup(env, &inner[..end]).unwrap_or_default());
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        match split_command_line(s) {
            Ok(w) => w,
            Err(e) => panic!("{s:?}: {e}"),
        }
    }

    #[test]
    fn splitting_honours_quotes_and_escapes() {
        assert_eq!(words("  --a=1   --b 2 "), ["--a=1", "--b", "2"]);
        assert_eq!(
            words(r#"--node-labels="a=b c" --x='$HOME "q"' --y=a\ b"#),
            ["--node-labels=a=b c", "--x=$HOME \"q\"", "--y=a b"]
        );
        assert_eq!(words(r#""a\"b\\c\d""#), [r#"a"b\c\d"#]);
        assert_eq!(words("--a=$VAR"), ["--a=$VAR"]);
        assert_eq!(words("'' x"), ["", "x"]);
        assert_eq!(words("--a \\\n--b"), ["--a", "--b"]);
        assert_eq!(words("a\"b c\"d"), ["ab cd"]);
        assert!(words("").is_empty());
        assert!(matches!(
            split_command_line("--a='x"),
            Err(FlagError::UnterminatedQuote { quote: '\'', .. })
        ));
        assert!(matches!(
            split_command_line("--a=\"x"),
            Err(FlagError::UnterminatedQuote { quote: '"', .. })
        ));
        assert!(matches!(
            split_command_line("--a=x\\"),
            Err(FlagError::TrailingBackslash { .. })
        ));
    }

    #[test]
    fn kubeadm_flags_env_style() {
        let text = "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10\"\n";
        assert_eq!(
            kubeadm_args(text).unwrap(),
            [
                "--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock",
                "--pod-infra-container-image=registry.k8s.io/pause:3.10"
            ]
        );
        assert!(kubeadm_args("").unwrap().is_empty());
    }

    #[test]
    fn default_and_sysconfig_styles() {
        // Debian /etc/default/kubelet: bare value.
        assert_eq!(
            extra_args("KUBELET_EXTRA_ARGS=--node-ip=10.0.0.5 --max-pods=64   \n").unwrap(),
            ["--node-ip=10.0.0.5", "--max-pods=64"]
        );
        // RHEL /etc/sysconfig/kubelet: empty by default, comments, later assignment wins.
        let text = "# extra args\nKUBELET_EXTRA_ARGS=\n; more\nKUBELET_EXTRA_ARGS='--node-labels=a=b,c=d'\n";
        assert_eq!(extra_args(text).unwrap(), ["--node-labels=a=b,c=d"]);
        // Quotes inside the value reach the kubelet as one word.
        assert_eq!(
            extra_args("KUBELET_EXTRA_ARGS=\"--node-labels='a=b c' -v=2\"").unwrap(),
            ["--node-labels=a=b c", "-v=2"]
        );
    }

    #[test]
    fn env_file_details() {
        let vars = parse_env_file(
            "export A=1\nB = \"two words\"  \nC=x\\\ny\nnot an assignment\n1BAD=x\nD='a#b' # tail\nE=\n",
        );
        assert_eq!(env_lookup(&vars, "A"), Some("1"));
        assert_eq!(env_lookup(&vars, "B"), Some("two words"));
        assert_eq!(env_lookup(&vars, "C"), Some("xy"));
        assert_eq!(env_lookup(&vars, "D"), Some("a#b # tail"));
        assert_eq!(env_lookup(&vars, "E"), Some(""));
        assert_eq!(env_lookup(&vars, "1BAD"), None);
        assert_eq!(vars.len(), 5);
    }

    #[test]
    fn kubeadm_layout_orders_extra_args_last() {
        let kubeadm = "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock --node-ip=10.0.0.1\"";
        let extra = "KUBELET_EXTRA_ARGS=--node-ip=10.0.0.2";
        let args = kubelet_args_from_kubeadm_layout(Some(kubeadm), Some(extra)).unwrap();
        assert_eq!(
            args,
            [
                "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
                "--kubeconfig=/etc/kubernetes/kubelet.conf",
                "--config=/var/lib/kubelet/config.yaml",
                "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
                "--node-ip=10.0.0.1",
                "--node-ip=10.0.0.2",
            ]
        );
        // Later occurrences win: the extra args' node IP.
        let flags = crate::flags::KubeletFlags::parse(&args).unwrap();
        assert_eq!(flags.node_ip(), Some("10.0.0.2"));
        assert_eq!(flags.config_file(), Some("/var/lib/kubelet/config.yaml"));

        // Neither file present: only the drop-in's own arguments.
        let args = kubelet_args_from_kubeadm_layout(None, None).unwrap();
        assert_eq!(args.len(), 3);
    }

    #[test]
    fn systemd_unit_with_drop_ins() {
        let unit = "[Unit]\nDescription=kubelet\nEnvironment=IGNORED=1\n[Service]\nExecStart=/usr/bin/kubelet\nRestart=always\n";
        let dropin = r#"[Service]
Environment="A=--max-pods=10 --node-ip=1.2.3.4" B=--v=3
Environment=C=/etc/kubelet.yaml
EnvironmentFile=-/missing
EnvironmentFile=/etc/kubelet.env
ExecStart=
ExecStart=-/usr/local/bin/kubelet $A \
    # a comment inside the continuation
    --config=${C} $UNSET "$B" --literal=$$x --dollar=$NOTBRACED
"#;
        let service = parse_systemd_service(&[unit, dropin]);
        assert_eq!(
            service.environment_files,
            [
                EnvironmentFile {
                    path: "/missing".into(),
                    optional: true
                },
                EnvironmentFile {
                    path: "/etc/kubelet.env".into(),
                    optional: false
                },
            ]
        );
        assert!(service.environment.iter().all(|(k, _)| k != "IGNORED"));
        let read =
            |path: &str| (path == "/etc/kubelet.env").then(|| "C=/from/file.yaml\n".to_string());
        let args = service.kubelet_args(read).unwrap();
        assert_eq!(
            args,
            [
                "--max-pods=10",
                "--node-ip=1.2.3.4",
                "--config=/from/file.yaml",
                "--v=3",
                "--literal=$x",
                "--dollar=$NOTBRACED",
            ]
        );
        // A missing non-optional environment file stops the unit.
        assert_eq!(
            service.kubelet_args(|_| None),
            Err(FlagError::MissingEnvironmentFile {
                path: "/etc/kubelet.env".into()
            })
        );
    }

    #[test]
    fn exec_start_reset_and_last_wins() {
        let service = parse_systemd_service(&["[Service]\nExecStart=/a --x\nExecStart=\n"]);
        assert_eq!(service.exec_start, None);
        assert_eq!(service.kubelet_args(|_| None), Err(FlagError::NoExecStart));
        let service = parse_systemd_service(&[
            "[Service]\nExecStart=/a --x\n",
            "[Service]\nExecStart=\nExecStart=/b --y\nExecStart=@/c kubelet --z\n",
        ]);
        assert_eq!(service.kubelet_args(|_| None).unwrap(), ["--z"]);
        let service = parse_systemd_service(&[
            "[Service]\nEnvironment=A=1\nEnvironment=\nEnvironment=B=2\nExecStart=/k ${A}x ${B}\n",
        ]);
        assert_eq!(service.kubelet_args(|_| None).unwrap(), ["x", "2"]);
    }

    #[test]
    fn proc_cmdline_splits_on_nul() {
        assert_eq!(
            split_proc_cmdline(b"/usr/bin/kubelet\0--max-pods=5\0--node-labels=a=b c\0"),
            ["/usr/bin/kubelet", "--max-pods=5", "--node-labels=a=b c"]
        );
        assert!(split_proc_cmdline(b"").is_empty());
    }
}
