//! What the tests share. `api` serves the API server alone (no nodes); `kubelet` a whole
//! simulated cluster. Neither touches process-wide state (environment, current directory,
//! fixed ports, a global subscriber), so the tests run concurrently as threads.

pub mod api;
pub mod kubelet;
