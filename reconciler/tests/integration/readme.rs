//! The README and the docs against the binaries and the file tree.
//!
//! - `docs/configuration.md` documents every option of every `kubelet-gitops` command
//!   (read from the built binary's `--help`) and of `kubelet-gitops-agent` (read from its
//!   clap definition in `node-agent/src/args.rs`; both parsers are in `support/options.rs`,
//!   shared with `deploy_manifests.rs`): each in a table row of the command's section,
//!   with its environment variable and default; and it documents no option a binary lacks.
//! - `README.md` holds the two set-up commands in its "Two commands" block and links every
//!   page of `docs/`.
//! - Every relative link in `README.md` and `docs/*.md` resolves to a file or directory of
//!   the repository, and a `#fragment` to a heading of the page it names.
//!
//! Nothing here needs a network or a cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::support::commands::{read, repo_root, stdout_of};
use crate::support::options::{Opt, agent_options, agent_sources, declares, help_options};

// ---------------------------------------------------------------------------------------
// Options declared by the binaries

/// The subcommands `kubelet-gitops --help` lists under "Commands:" (without `help`).
fn subcommands() -> Vec<String> {
    let help = stdout_of(&["--help"]);
    let mut commands = Vec::new();
    let mut in_commands = false;
    for line in help.lines() {
        if line.trim_end() == "Commands:" {
            in_commands = true;
            continue;
        }
        if !in_commands {
            continue;
        }
        if line.trim().is_empty() {
            break;
        }
        let indent = line.len() - line.trim_start().len();
        // "  validate        Check ..."; wrapped descriptions are indented further.
        if indent == 2 {
            let name = line.split_whitespace().next().unwrap_or_default();
            if name != "help" {
                commands.push(name.to_string());
            }
        }
    }
    assert!(
        commands.iter().any(|c| c == "run") && commands.iter().any(|c| c == "validate"),
        "kubelet-gitops --help parsed: {commands:?}"
    );
    commands
}

// ---------------------------------------------------------------------------------------
// docs/configuration.md

/// The lines of the section that starts at the heading `heading` (exactly), up to the
/// next heading of the same or a higher level.
fn section<'a>(doc: &'a str, heading: &str) -> Option<Vec<&'a str>> {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let mut lines = doc.lines();
    lines.by_ref().find(|l| l.trim_end() == heading)?;
    let mut out = Vec::new();
    let mut fenced = false;
    for line in lines {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !fenced && hashes > 0 && hashes <= level && line[hashes..].starts_with(' ') {
            break;
        }
        out.push(line);
    }
    Some(out)
}

/// A documented option: a table row whose first cell names a `--flag`.
#[derive(Debug)]
struct Row {
    flags: Vec<String>,
    env: String,
    default: String,
}

fn option_rows(lines: &[&str]) -> Vec<Row> {
    let mut rows = Vec::new();
    for line in lines {
        let Some(inner) = line.trim().strip_prefix('|') else {
            continue;
        };
        let cells: Vec<&str> = inner.trim_end_matches('|').split('|').collect();
        if cells.len() < 3 {
            continue;
        }
        let flags: Vec<String> = cells[0]
            .split('`')
            .skip(1)
            .step_by(2)
            .filter_map(|code| code.split_whitespace().next())
            .filter(|w| w.starts_with("--"))
            .map(str::to_string)
            .collect();
        if flags.is_empty() {
            continue;
        }
        rows.push(Row {
            flags,
            env: cells[1].to_string(),
            default: cells[2].to_string(),
        });
    }
    rows
}

/// Every problem with how `heading`'s section documents `options` of `what`.
fn check_section(doc: &str, heading: &str, what: &str, options: &[Opt]) -> Vec<String> {
    let Some(lines) = section(doc, heading) else {
        return vec![format!(
            "docs/configuration.md has no section `{heading}` for {what}"
        )];
    };
    let rows = option_rows(&lines);
    let mut problems = Vec::new();
    for opt in options {
        let Some(row) = rows.iter().find(|r| r.flags.contains(&opt.flag)) else {
            problems.push(format!(
                "{what}: {} ({}) has no row in docs/configuration.md `{heading}`",
                opt.flag,
                opt.env.as_deref().unwrap_or("no variable")
            ));
            continue;
        };
        if let Some(env) = &opt.env
            && !row.env.contains(&format!("`{env}`"))
        {
            problems.push(format!(
                "{what}: the row of {} in `{heading}` does not name its variable `{env}`: {:?}",
                opt.flag, row.env
            ));
        }
        if let Some(default) = &opt.default
            && !row.default.contains(&format!("`{default}`"))
        {
            problems.push(format!(
                "{what}: the row of {} in `{heading}` does not give its default `{default}`: {:?}",
                opt.flag, row.default
            ));
        }
    }
    let declared: BTreeSet<&str> = options.iter().map(|o| o.flag.as_str()).collect();
    for row in &rows {
        for flag in &row.flags {
            if !declared.contains(flag.as_str()) {
                problems.push(format!(
                    "docs/configuration.md `{heading}` documents {flag}, which {what} does not have"
                ));
            }
        }
    }
    problems
}

/// The section of docs/configuration.md that documents each `kubelet-gitops` command.
fn command_section(command: &str) -> Option<&'static str> {
    Some(match command {
        "run" => "## `kubelet-gitops run` (the reconciler)",
        // configmap-name has no options; the section says so, and a new option would
        // have to be documented in it.
        "validate" | "render" | "configmap-name" => "### `validate` and `render`",
        "plan" => "### `plan`",
        "demo" => "### `demo`",
        "status" => "### `status`",
        _ => return None,
    })
}

#[test]
fn configuration_md_documents_every_option_of_kubelet_gitops() {
    let doc = read("docs/configuration.md");
    let mut problems = Vec::new();
    let mut by_section: BTreeMap<&str, Vec<Opt>> = BTreeMap::new();
    for command in subcommands() {
        let Some(heading) = command_section(&command) else {
            problems.push(format!(
                "`kubelet-gitops {command}` is new: document its options in \
                 docs/configuration.md and name the section in command_section()"
            ));
            continue;
        };
        let options = help_options(&stdout_of(&[&command, "--help"]));
        let merged = by_section.entry(heading).or_default();
        for opt in options {
            if !merged.contains(&opt) {
                merged.push(opt);
            }
        }
    }
    let run = by_section
        .get(command_section("run").expect("run has a section"))
        .expect("run --help parsed");
    assert!(
        run.len() > 25
            && declares(run, "--repo-url", Some("KUBELET_GITOPS_REPO_URL"), None)
            && declares(
                run,
                "--interval",
                Some("KUBELET_GITOPS_INTERVAL"),
                Some("30s")
            ),
        "run --help parsed: {run:?}"
    );
    for (heading, options) in &by_section {
        problems.extend(check_section(&doc, heading, "kubelet-gitops", options));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn configuration_md_documents_every_option_of_the_agent() {
    let doc = read("docs/configuration.md");
    let problems = check_section(
        &doc,
        "## `kubelet-gitops-agent` (the node agent)",
        "kubelet-gitops-agent",
        &agent_options(&agent_sources()),
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn an_undocumented_option_or_a_stale_row_is_reported() {
    let doc = "\
# Reference
## `tool`
| flag | environment variable | default | what |
| --- | --- | --- | --- |
| `--kept DIR` | `TOOL_KEPT` | `/var/lib/x` | documented |
| `--old` | `TOOL_OLD` | | removed from the tool |
| `--wrong` | `TOOL_WRONG_NAME` | `1s` | variable and default out of date |
## Other
| `--missing` | `TOOL_MISSING` | | a row outside the section |
";
    let options = [
        Opt::new("--kept", Some("TOOL_KEPT"), Some("/var/lib/x")),
        Opt::new("--wrong", Some("TOOL_WRONG"), Some("2s")),
        Opt::new("--missing", Some("TOOL_MISSING"), None),
    ];
    let problems = check_section(doc, "## `tool`", "tool", &options);
    let joined = problems.join("\n");
    assert_eq!(problems.len(), 4, "{joined}");
    assert!(
        joined
            .contains("the row of --wrong in `## `tool`` does not name its variable `TOOL_WRONG`"),
        "{joined}"
    );
    assert!(
        joined.contains("the row of --wrong in `## `tool`` does not give its default `2s`"),
        "{joined}"
    );
    assert!(
        joined.contains("--missing (TOOL_MISSING) has no row"),
        "{joined}"
    );
    assert!(
        joined.contains("documents --old, which tool does not have"),
        "{joined}"
    );
    assert_eq!(
        check_section(doc, "## `absent`", "tool", &options),
        vec!["docs/configuration.md has no section `## `absent`` for tool".to_string()]
    );
}

#[test]
fn help_is_parsed_in_both_of_claps_layouts() {
    let long = "\
Usage: kubelet-gitops run [OPTIONS] --repo-url <URL>

Options:
  -h, --help
          Print help (see a summary with '-h')

Git source:
      --repo-url <URL>
          The config repository: https://..., or a path
          
          [env: KUBELET_GITOPS_REPO_URL=]

      --root <DIR>
          The directory, e.g. clusters/prod
          
          [env: KUBELET_GITOPS_ROOT=]
          [default: \"\"]

      --log-format <LOG_FORMAT>
          Possible values:
          - text: Human-readable lines with `key=value` fields
          - json: One JSON object per line
          
          [env: KUBELET_GITOPS_LOG_FORMAT=]
          [default: text]
";
    let short = "\
Options:
      --effective          Include the kubelet's defaults
      --flags <ARGS>       The kubelet's flags (e.g. '--max-pods=110
                           --node-ip=10.0.0.5'). Applied last [env:
                           KUBELET_GITOPS_FLAGS=]
  -V, --version            Print version
";
    let opt = Opt::new;
    assert_eq!(
        help_options(long),
        vec![
            opt("--repo-url", Some("KUBELET_GITOPS_REPO_URL"), None),
            opt("--root", Some("KUBELET_GITOPS_ROOT"), None),
            opt(
                "--log-format",
                Some("KUBELET_GITOPS_LOG_FORMAT"),
                Some("text")
            ),
        ]
    );
    assert_eq!(
        help_options(short),
        vec![
            opt("--effective", None, None),
            opt("--flags", Some("KUBELET_GITOPS_FLAGS"), None),
        ]
    );
}

// ---------------------------------------------------------------------------------------
// README.md

/// The two set-up commands, exactly as a newcomer types them.
const SET_UP_COMMANDS: [&str; 2] = [
    "cargo build --release -p node-agent -p reconciler && target/release/kubelet-gitops demo",
    "upstream/build.sh && cargo test --workspace",
];

#[test]
fn readme_has_the_two_set_up_commands() {
    let readme = read("README.md");
    let lines = section(&readme, "## Two commands").expect("README.md has `## Two commands`");
    let mut in_sh = false;
    let mut commands = Vec::new();
    for line in &lines {
        let t = line.trim();
        if t.starts_with("```") {
            in_sh = !in_sh && t == "```sh";
            continue;
        }
        if in_sh && !t.is_empty() && !t.starts_with('#') {
            commands.push(t);
        }
    }
    assert_eq!(
        commands, SET_UP_COMMANDS,
        "the `sh` block of README.md's `## Two commands` must hold exactly the two set-up commands"
    );
    // The test command's first step exists and is executable.
    let build = Path::new(env!("CARGO_MANIFEST_DIR")).join("../upstream/build.sh");
    let mode = std::fs::metadata(&build)
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()))
        .unwrap_or(0);
    assert!(
        mode & 0o111 != 0,
        "{} is missing or not executable",
        build.display()
    );
    // The main job's subcommand exists.
    let help = stdout_of(&["demo", "--help"]);
    assert!(help.contains("--workdir"), "{help}");
}

#[test]
fn readme_links_every_page_of_docs() {
    let readme = read("README.md");
    let targets: BTreeSet<String> = links(&readme)
        .into_iter()
        .map(|l| l.split('#').next().unwrap_or_default().to_string())
        .collect();
    let mut missing = Vec::new();
    for page in markdown_files("docs") {
        let rel = format!("docs/{page}");
        if !targets.contains(&rel) {
            missing.push(rel);
        }
    }
    assert!(
        missing.is_empty(),
        "README.md links none of: {}",
        missing.join(", ")
    );
}

// ---------------------------------------------------------------------------------------
// Links

/// The `.md` files directly in `dir` (relative to the repository root), sorted.
fn markdown_files(dir: &str) -> Vec<String> {
    let path = repo_root().join(dir);
    let mut files: Vec<String> = std::fs::read_dir(&path)
        .unwrap_or_else(|e| panic!("list {}: {e}", path.display()))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    files.sort();
    files
}

/// `text` without its inline code spans (`` `...` ``).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    for (i, part) in line.split('`').enumerate() {
        if i % 2 == 0 {
            out.push_str(part);
        }
    }
    out
}

/// The lines of `doc` outside fenced code blocks (` ``` ` or `~~~`), fences left out.
fn unfenced_lines(doc: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    doc.lines().filter(move |line| {
        let fence = line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~");
        if fence {
            fenced = !fenced;
        }
        !fence && !fenced
    })
}

/// The targets of the Markdown links and images in `doc` (`[text](target)`,
/// `[label]: target`), outside fenced code blocks and code spans.
fn links(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in unfenced_lines(doc) {
        let line = without_code_spans(raw);
        // Reference definitions: "[label]: target".
        let trimmed = line.trim_start();
        if trimmed.starts_with('[')
            && let Some(end) = trimmed.find("]:")
        {
            if let Some(target) = trimmed[end + 2..].split_whitespace().next() {
                out.push(target.trim_matches(['<', '>']).to_string());
            }
            continue;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            // The target ends at the ")" that balances the "(".
            let mut depth = 0usize;
            let mut end = after.len();
            for (i, c) in after.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => {
                        end = i;
                        break;
                    }
                    ')' => depth -= 1,
                    _ => {}
                }
            }
            let inner = after[..end].trim();
            // An optional title: [text](target "title").
            let target = inner.split_whitespace().next().unwrap_or_default();
            out.push(target.trim_matches(['<', '>']).to_string());
            rest = &after[end.min(after.len())..];
        }
    }
    out
}

/// GitHub's anchor for a heading: lowercase, punctuation other than `-` and `_` dropped,
/// spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of `doc`'s headings (outside code blocks), numbered as GitHub numbers
/// repeated headings (`-1`, `-2`).
pub(crate) fn anchors(doc: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in unfenced_lines(doc) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let text = line[hashes..].trim().trim_end_matches('#').trim();
        // Link text only: "[a](b)" -> "a".
        let mut plain = String::new();
        let mut rest = text;
        while let Some(open) = rest.find('[') {
            match rest[open..].find("](") {
                Some(mid) => {
                    let close = rest[open + mid..].find(')').map(|c| open + mid + c);
                    plain.push_str(&rest[..open]);
                    plain.push_str(&rest[open + 1..open + mid]);
                    rest = close.map_or("", |c| &rest[c + 1..]);
                }
                None => break,
            }
        }
        plain.push_str(rest);
        let base = slug(&plain);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// Every problem with the relative links of the Markdown file `rel` (relative to the
/// repository root) whose text is `doc`.
fn check_links(root: &Path, rel: &str, doc: &str) -> Vec<String> {
    let base = Path::new(rel).parent().unwrap_or(Path::new(""));
    let mut problems = Vec::new();
    for target in links(doc) {
        if target.is_empty()
            || target.contains("://")
            || target.starts_with("mailto:")
            || target.starts_with("//")
        {
            continue;
        }
        let (path, fragment) = match target.split_once('#') {
            Some((p, f)) => (p, Some(f)),
            None => (target.as_str(), None),
        };
        let (file, file_text) = if path.is_empty() {
            (PathBuf::from(rel), Some(doc.to_string()))
        } else {
            if path.starts_with('/') {
                problems.push(format!(
                    "{rel}: link {target} is absolute; make it relative"
                ));
                continue;
            }
            let joined = root.join(base).join(path);
            // Stay inside the repository.
            let Ok(full) = joined.canonicalize() else {
                problems.push(format!("{rel}: link {target}: {path} does not exist"));
                continue;
            };
            if !full.starts_with(root) {
                problems.push(format!("{rel}: link {target} leaves the repository"));
                continue;
            }
            if path.ends_with('/') && !full.is_dir() {
                problems.push(format!("{rel}: link {target}: {path} is not a directory"));
                continue;
            }
            let text = (full.is_file() && path.ends_with(".md"))
                .then(|| std::fs::read_to_string(&full).ok())
                .flatten();
            (full, text)
        };
        if let Some(fragment) = fragment {
            match file_text {
                Some(text) if !anchors(&text).contains(fragment) => problems.push(format!(
                    "{rel}: link {target}: {} has no heading with the anchor #{fragment}",
                    file.display()
                )),
                Some(_) => {}
                None => problems.push(format!(
                    "{rel}: link {target}: a #fragment on a file that is not Markdown"
                )),
            }
        }
    }
    problems
}

#[test]
fn every_relative_link_in_readme_and_docs_resolves() {
    let root = repo_root()
        .canonicalize()
        .expect("the repository root exists");
    let mut files = vec!["README.md".to_string()];
    files.extend(
        markdown_files("docs")
            .into_iter()
            .map(|f| format!("docs/{f}")),
    );
    assert!(
        files.contains(&"docs/configuration.md".to_string()) && files.len() > 10,
        "{files:?}"
    );
    let mut problems = Vec::new();
    let mut checked = 0;
    for rel in &files {
        let doc = read(rel);
        checked += links(&doc).len();
        problems.extend(check_links(&root, rel, &doc));
    }
    assert!(checked > 100, "only {checked} links found in {files:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn links_and_anchors_are_read_as_github_reads_them() {
    let doc = "\
# Title
See [a](a.md), [b](docs/b.md#some-heading \"title\") and ![img](img/x.png).
`[not](a link.md)` is code; so is this:
```sh
[also](not-a-link.md)
# not a heading
```
[ref]: ../up.md
## Node inventory (`--nodes`)
## Repeated
## Repeated
### [Linked](x.md) heading: with, punctuation!
";
    assert_eq!(
        links(doc),
        [
            "a.md",
            "docs/b.md#some-heading",
            "img/x.png",
            "../up.md",
            "x.md"
        ]
    );
    let a = anchors(doc);
    for expected in [
        "title",
        "node-inventory---nodes",
        "repeated",
        "repeated-1",
        "linked-heading-with-punctuation",
    ] {
        assert!(a.contains(expected), "{expected} not in {a:?}");
    }
    assert!(!a.contains("not-a-heading"), "{a:?}");
}

#[test]
fn a_broken_link_or_anchor_is_reported() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let outer = dir.path().canonicalize().expect("the temporary directory");
    let root = outer.join("repo");
    std::fs::create_dir_all(root.join("docs")).expect("mkdir docs");
    // A file next to the repository: it exists, but a link to it leaves the repository.
    std::fs::write(outer.join("elsewhere.md"), "# Elsewhere\n").expect("write");
    std::fs::write(root.join("docs/page.md"), "# Page\n## Real section\n").expect("write");
    let readme = "\
[ok](docs/page.md) [ok anchor](docs/page.md#real-section) [dir](docs/) [self](#top)
[gone](docs/missing.md) [bad anchor](docs/page.md#no-such-section) [not dir](docs/page.md/)
[outside](../elsewhere.md) [web](https://example.com/x.md)
# Top
";
    std::fs::write(root.join("README.md"), readme).expect("write");
    let problems = check_links(&root, "README.md", readme);
    let joined = problems.join("\n");
    assert_eq!(problems.len(), 4, "{joined}");
    assert!(
        joined.contains("docs/missing.md does not exist"),
        "{joined}"
    );
    assert!(joined.contains("#no-such-section"), "{joined}");
    assert!(joined.contains("docs/page.md/"), "{joined}");
    assert!(
        joined.contains("link ../elsewhere.md leaves the repository"),
        "{joined}"
    );
}
