//! kubelet-gitops: the command-line tool and, later, the reconciler (`run`).
//!
//! Today: `validate`, `render` and `configmap-name`, which answer from files alone.

pub mod cli;
pub mod model;
pub mod source;
