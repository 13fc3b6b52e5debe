//! kubelet-gitops: the reconciler (`kubelet-gitops run`, [`controller`]) and the
//! command-line tools around it (`validate`, `render`, `configmap-name`, `plan`, and
//! `demo` with the `demo` feature), dispatched by [`cli`].
//!
//! The pure planning ([`render`], [`model`], [`rollout`], [`gc`], [`plan`],
//! [`nodecheck`]) is kept
//! apart from the code that talks to git, the API server and the forges, which carries
//! out what it returns.

pub mod admin;
pub mod api;
pub mod args;
pub mod cli;
pub mod clock;
pub mod controller;
#[cfg(feature = "demo")]
pub mod demo;
pub mod fleet;
pub mod gc;
pub mod git;
pub mod leader;
pub mod metrics;
pub mod model;
pub mod nodecheck;
pub mod plan;
pub mod publish;
pub mod record;
pub mod render;
pub mod review;
pub mod rollout;
pub mod source;
pub mod state;
pub mod status;
pub mod webhook;
