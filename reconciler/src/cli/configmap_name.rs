//! `kubelet-gitops configmap-name BASENAME FILE`.

use std::path::Path;

use kubelet_gitops_core::{hash, names};

use super::inputs::Failure;
use super::inputs::read_file;

pub(super) fn run(basename: &str, file: &Path) -> Result<(), Failure> {
    check_basename(basename).map_err(Failure::Usage)?;
    let bytes = read_file(file)?;
    println!("{}", hash::kubelet_configmap_name(basename, &bytes));
    Ok(())
}

/// The name must be a DNS-1123 subdomain once `-<10 chars>` is appended.
fn check_basename(name: &str) -> Result<(), String> {
    const MAX: usize = 253 - 11;
    if name.is_empty() || name.len() > MAX {
        return Err(format!(
            "BASENAME {name:?} must be 1 to {MAX} characters, so that the name with its hash suffix fits 253"
        ));
    }
    if !names::is_dns1123_subdomain(name) {
        return Err(format!(
            "BASENAME {name:?} is not a valid ConfigMap name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_basename;

    #[test]
    fn basenames() {
        assert!(check_basename("kubelet-gpu").is_ok());
        assert!(check_basename("a.b-c1").is_ok());
        for bad in ["", "Kubelet", "-a", "a-", "a_b", &"a".repeat(243)] {
            assert!(check_basename(bad).is_err(), "{bad:?}");
        }
    }
}
