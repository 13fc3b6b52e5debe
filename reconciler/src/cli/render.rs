//! `kubelet-gitops render [--effective] FILE`: the configuration a kubelet runs with, as
//! YAML, each field set by a kubelet flag marked with a comment naming the flag and the
//! value it overrides.

use std::path::Path;

use kubelet_gitops_core::effective::{Effective, Source};
use kubelet_gitops_core::message::OneLine;
use kubelet_gitops_core::validation::{self, HostInfo};
use kubelet_gitops_core::{effective, flags::FlagOverride};

use super::inputs::{Failure, NodeArgs};
use super::inputs::{Node, print_validation_errors, read_file};

pub(super) fn run(file: &Path, with_defaults: bool, node_args: &NodeArgs) -> Result<(), Failure> {
    let node = Node::load(node_args)?;
    let name = file.display().to_string();
    let bytes = read_file(file)?;
    let drop_ins: Vec<Source<'_>> = node
        .drop_ins
        .iter()
        .map(|(n, b)| Source::new(n, b))
        .collect();
    let opts = effective::Options {
        apply_defaults: with_defaults,
    };
    let eff = effective::effective_with(
        Some(Source::new(&name, &bytes)),
        &drop_ins,
        node.flags.as_ref(),
        opts,
    )
    .map_err(|e| {
        eprintln!("{}", OneLine(&e.to_string()));
        Failure::Invalid
    })?;
    let yaml = serde_saphyr::to_string(&eff.config)
        .map_err(|e| Failure::Usage(format!("cannot print the config as YAML: {e}")))?;
    let what = if with_defaults {
        "kubelet defaults, then "
    } else {
        ""
    };
    // The file's name on the comment lines: a newline in it would end the comment.
    let shown = OneLine(&name);
    println!(
        "# {} configuration of {shown}",
        if with_defaults { "Effective" } else { "Merged" }
    );
    println!(
        "# {what}{shown}, then {} drop-in file(s), then {} kubelet flag(s)",
        drop_ins.len(),
        eff.flag_fields.len()
    );
    if !eff.flag_fields.is_empty() {
        println!(
            "# Fields marked `# flag --x` are set on the kubelet's command line: a flag wins over every file."
        );
    }
    print!("{}", annotate(&yaml, &eff));
    // The effective config is what the kubelet validates; say so when it would refuse it.
    if with_defaults {
        let errors = validation::validate(&eff.config, &HostInfo::default());
        if !errors.is_empty() {
            print_validation_errors(&name, &eff, &errors);
            return Err(Failure::Invalid);
        }
    }
    Ok(())
}

/// Appends `# flag --name (overrides X)` to each line whose key path a flag set.
fn annotate(yaml: &str, eff: &Effective) -> String {
    let mut out = String::with_capacity(yaml.len() + 256);
    let mut stack: Vec<(usize, String)> = Vec::new();
    for line in yaml.lines() {
        out.push_str(line);
        let indent = line.len() - line.trim_start().len();
        let mut content = line.trim_start();
        let mut depth = indent;
        while let Some(rest) = content.strip_prefix("- ") {
            // A list item: a level of its own, with no name a flag could set.
            while stack.last().is_some_and(|(i, _)| *i > depth) {
                stack.pop();
            }
            stack.push((depth + 1, "[]".into()));
            depth += 2;
            content = rest;
        }
        if let Some(key) = mapping_key(content) {
            while stack.last().is_some_and(|(i, _)| *i >= depth) {
                stack.pop();
            }
            stack.push((depth, key));
            let path: Vec<&str> = stack.iter().map(|(_, k)| k.as_str()).collect();
            let path = path.join(".");
            if let Some(note) = flag_note(&path, eff) {
                out.push_str("  # ");
                out.push_str(&note);
            }
        }
        out.push('\n');
    }
    out
}

fn mapping_key(content: &str) -> Option<String> {
    if content.starts_with('#') {
        return None;
    }
    if let Some(rest) = content.strip_prefix('"') {
        let end = rest.find('"')?;
        return rest[end + 1..]
            .starts_with(':')
            .then(|| rest[..end].to_string());
    }
    let idx = content
        .find(": ")
        .or_else(|| content.strip_suffix(':').map(str::len))?;
    Some(content[..idx].to_string())
}

fn flag_note(path: &str, eff: &Effective) -> Option<String> {
    let (flag, _) = eff.flag_fields.iter().find(|(_, field)| field == path)?;
    let over: Option<&FlagOverride> = eff.overrides.iter().find(|o| o.field == path);
    Some(match over.and_then(|o| o.file_value.as_ref()) {
        Some(old) => format!("flag {flag} (overrides {})", compact(old)),
        None if over.is_some() => format!("flag {flag} (not set by the files)"),
        None => format!("flag {flag} (same value as the files)"),
    })
}

fn compact(v: &serde_json::Value) -> String {
    let s = v.to_string();
    if s.len() > 60 {
        format!("{}...", &s[..s.floor_char_boundary(57)])
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::mapping_key;

    #[test]
    fn keys() {
        assert_eq!(mapping_key("maxPods: 110").as_deref(), Some("maxPods"));
        assert_eq!(
            mapping_key("systemReserved:").as_deref(),
            Some("systemReserved")
        );
        assert_eq!(mapping_key("\"n\": 1").as_deref(), Some("n"));
        assert_eq!(mapping_key("a").as_deref(), None);
    }
}
