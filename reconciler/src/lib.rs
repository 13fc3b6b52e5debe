//! kubelet-gitops: the command-line tool and, later, the reconciler (`run`).
//!
//! Today: `validate`, `render` and `configmap-name`, which answer from files alone.

pub mod admin;
pub mod api;
pub mod args;
pub mod cli;
pub mod controller;
#[cfg(feature = "demo")]
pub mod demo;
pub mod gc;
pub mod git;
pub mod leader;
pub mod message;
pub mod metrics;
pub mod model;
pub mod plan;
pub mod publish;
pub mod render;
pub mod review;
pub mod rollout;
pub mod source;
pub mod state;
pub mod status;
pub mod webhook;
