//! The crate's integration tests, one module per concern, in one test binary.

mod kubectl_hash;
mod nodes_inventory;
