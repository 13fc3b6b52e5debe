//! `kubelet-gitops validate FILE...`.

use std::path::PathBuf;

use kubelet_gitops_core::message::OneLine;
use kubelet_gitops_core::validation::{self, HostInfo};

use super::inputs::{Failure, NodeArgs};
use super::inputs::{Node, print_validation_errors, read_file};

pub(super) fn run(files: &[PathBuf], node_args: &NodeArgs) -> Result<(), Failure> {
    let node = Node::load(node_args)?;
    let mut invalid = 0usize;
    for path in files {
        let name = path.display().to_string();
        let shown = OneLine(&name);
        let bytes = read_file(path)?;
        let eff = match node.effective(&name, &bytes) {
            Ok(eff) => eff,
            Err(e) => {
                eprintln!("{}", OneLine(&e.to_string()));
                invalid += 1;
                continue;
            }
        };
        let errors = validation::validate(&eff.config, &HostInfo::default());
        if errors.is_empty() {
            println!("{shown}: valid");
        } else {
            print_validation_errors(&name, &eff, &errors);
            invalid += 1;
        }
    }
    if invalid > 0 {
        eprintln!("{invalid} of {} file(s) invalid", files.len());
        return Err(Failure::Invalid);
    }
    Ok(())
}
