//! Leader election with a `coordination.k8s.io/v1` Lease, so two replicas of the
//! reconciler can run and only one writes.
//!
//! kube 5 and kube-runtime ship no leader election, so this follows client-go's
//! `tools/leaderelection` (the algorithm every Kubernetes controller uses):
//!
//! - **Acquire or renew** every `retry_period`: read the Lease; create it when absent;
//!   renew it (new `renewTime`) when this replica holds it; take it (`holderIdentity`,
//!   `acquireTime`, `leaseTransitions + 1`) when it has no holder or has expired. Every
//!   write carries the `resourceVersion` that was read, so two replicas racing for an
//!   expired lease cannot both win: the loser gets 409 Conflict and follows.
//! - **Expiry by local clock**: a lease is expired when its record (its
//!   `resourceVersion`) has not changed for `leaseDurationSeconds` as measured on this
//!   replica's monotonic clock since it first saw that record. Comparing the holder's
//!   `renewTime` with the local wall clock would trust two machines' clocks to agree;
//!   this trusts neither.
//! - **Step down** when a renewal has not succeeded for `renew_deadline` (shorter than
//!   the lease duration, so the old leader stops before anyone else may take over) or
//!   when the Lease names another holder.
//! - **Release** on shutdown: the leader clears `holderIdentity` (and sets a 1 s
//!   duration), so a follower takes over at its next attempt instead of waiting for
//!   expiry.
//!
//! The controller reads [`LeaderStatus`] from a watch channel before every write.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kubelet_gitops_core::message::error_chain;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::api::{error_code, jitter};
use crate::metrics::Metrics;
use crate::publish::FIELD_MANAGER;

/// Where the Lease is and how it is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// The Lease's name.
    pub name: String,
    /// The Lease's namespace (must exist).
    pub namespace: String,
    /// This replica's identity, written as `holderIdentity` (the pod name in a cluster).
    pub identity: String,
    /// How long a lease lasts without renewal before another replica may take it.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down.
    pub renew_deadline: Duration,
    /// How often every replica tries to acquire or renew.
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// A config with client-go's proportions (15 s / 10 s / 2 s): the renew deadline is
    /// two thirds of `lease_duration`, the retry period a seventh of it (at least 50 ms).
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
        lease_duration: Duration,
    ) -> LeaseConfig {
        let lease_duration = lease_duration.max(Duration::from_secs(1));
        LeaseConfig {
            name: name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration,
            renew_deadline: lease_duration * 2 / 3,
            retry_period: (lease_duration / 7).max(Duration::from_millis(50)),
        }
    }
}

/// What this replica knows about the election.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderStatus {
    /// This replica holds the lease and may write.
    pub leading: bool,
    /// The holder as last seen (this replica's identity while leading).
    pub holder: Option<String>,
    /// The last attempt to read or write the Lease worked: a follower that cannot reach
    /// the Lease is not following properly (`/readyz` says so).
    pub lease_reachable: bool,
    /// The last attempt's error, if it failed.
    pub error: Option<String>,
}

/// Failure of one attempt on the Lease.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("failed to {verb} lease {namespace}/{name}")]
    Api {
        verb: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("lease {namespace}/{name}: no answer within {timeout:?}")]
    Timeout {
        namespace: String,
        name: String,
        timeout: Duration,
    },
}

/// The outcome of one successful attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Attempt {
    Leading,
    Following { holder: Option<String> },
}

/// What to do with the Lease as read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Decision {
    /// We hold it: write a new renewTime.
    Renew,
    /// No holder, or expired: take it.
    Take,
    /// Someone else holds it and it has not expired.
    Follow { holder: String },
}

/// The record last seen, and when (on this replica's clock) it was first seen.
#[derive(Debug, Clone)]
struct Observed {
    resource_version: String,
    duration: Duration,
    at: Instant,
}

/// Decides what to do with `spec`, which has been unchanged since `observed`.
fn decide(identity: &str, spec: &LeaseSpec, observed: &Observed, now: Instant) -> Decision {
    match spec.holder_identity.as_deref().filter(|h| !h.is_empty()) {
        Some(h) if h == identity => Decision::Renew,
        Some(h) if now < observed.at + observed.duration => Decision::Follow {
            holder: h.to_string(),
        },
        _ => Decision::Take,
    }
}

/// A lease's duration as written in the spec (at least 1 s).
fn spec_duration(spec: &LeaseSpec) -> Duration {
    Duration::from_secs(
        spec.lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .unwrap_or(1)
            .max(1),
    )
}

/// Runs the election for one replica.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    observed: Option<Observed>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("config", &self.config)
            .finish()
    }
}

impl LeaderElector {
    /// An elector for `config`'s Lease.
    pub fn new(client: kube::Client, config: LeaseConfig) -> LeaderElector {
        LeaderElector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
        }
    }

    fn api_err(&self, verb: &'static str) -> impl FnOnce(kube::Error) -> LeaseError + '_ {
        move |source| LeaseError::Api {
            verb,
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source: Box::new(source),
        }
    }

    fn our_spec(&self, now: Timestamp, transitions: i32, acquired: Option<MicroTime>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            acquire_time: Some(acquired.unwrap_or(MicroTime(now))),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// One attempt to acquire or renew.
    async fn try_acquire_or_renew(&mut self, metrics: &Metrics) -> Result<Attempt, LeaseError> {
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        let name = self.config.name.clone();
        let lease = match self.api.get_opt(&name).await {
            Ok(l) => l,
            Err(e) => {
                metrics.api_error("get", "leases", error_code(&e));
                return Err(self.api_err("get")(e));
            }
        };
        let Some(mut lease) = lease else {
            let fresh = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.our_spec(Timestamp::now(), 0, None)),
            };
            return match self.api.create(&pp, &fresh).await {
                Ok(created) => {
                    self.observe(&created);
                    Ok(Attempt::Leading)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    Ok(Attempt::Following { holder: None })
                }
                Err(e) => {
                    metrics.api_error("create", "leases", error_code(&e));
                    Err(self.api_err("create")(e))
                }
            };
        };
        self.observe(&lease);
        let spec = lease.spec.clone().unwrap_or_default();
        let now = Instant::now();
        let observed = self.observed.as_ref().map_or(
            Observed {
                resource_version: String::new(),
                duration: spec_duration(&spec),
                at: now,
            },
            Observed::clone,
        );
        let new_spec = match decide(&self.config.identity, &spec, &observed, now) {
            Decision::Follow { holder } => {
                return Ok(Attempt::Following {
                    holder: Some(holder),
                });
            }
            Decision::Renew => self.our_spec(
                Timestamp::now(),
                spec.lease_transitions.unwrap_or(0),
                spec.acquire_time.clone(),
            ),
            Decision::Take => {
                if let Some(old) = spec.holder_identity.as_deref().filter(|h| !h.is_empty()) {
                    tracing::info!(lease = %name, previous = old, "lease expired; taking it over");
                }
                self.our_spec(
                    Timestamp::now(),
                    spec.lease_transitions.unwrap_or(0).saturating_add(1),
                    None,
                )
            }
        };
        // The resourceVersion read above stays in metadata: the write is conditional on it.
        lease.spec = Some(new_spec);
        lease.metadata.managed_fields = None;
        match self.api.replace(&name, &pp, &lease).await {
            Ok(written) => {
                self.observe(&written);
                Ok(Attempt::Leading)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Someone wrote it since we read it: they won this round.
                metrics.api_error("update", "leases", 409);
                Ok(Attempt::Following { holder: None })
            }
            Err(e) => {
                metrics.api_error("update", "leases", error_code(&e));
                Err(self.api_err("update")(e))
            }
        }
    }

    /// Records `lease` as seen now unless its record is the one already seen.
    fn observe(&mut self, lease: &Lease) {
        let rv = lease.metadata.resource_version.clone().unwrap_or_default();
        if self
            .observed
            .as_ref()
            .is_some_and(|o| o.resource_version == rv)
        {
            return;
        }
        self.observed = Some(Observed {
            resource_version: rv,
            duration: lease
                .spec
                .as_ref()
                .map_or(Duration::from_secs(1), spec_duration),
            at: Instant::now(),
        });
    }

    /// Gives the lease up, if this replica holds it.
    async fn release(&mut self) -> Result<(), LeaseError> {
        let name = self.config.name.clone();
        let Some(mut lease) = self.api.get_opt(&name).await.map_err(self.api_err("get"))? else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        let now = MicroTime(Timestamp::now());
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.acquire_time = Some(now.clone());
        spec.renew_time = Some(now);
        lease.spec = Some(spec);
        lease.metadata.managed_fields = None;
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        self.api
            .replace(&name, &pp, &lease)
            .await
            .map_err(self.api_err("update"))?;
        Ok(())
    }

    /// Campaigns until `shutdown`, publishing every change of status on `status`; then
    /// releases the lease if held.
    pub async fn run(
        mut self,
        status: watch::Sender<LeaderStatus>,
        metrics: &Metrics,
        shutdown: CancellationToken,
    ) {
        let lease = format!("{}/{}", self.config.namespace, self.config.name);
        let identity = self.config.identity.clone();
        let mut leading = false;
        let mut last_renewal = Instant::now();
        loop {
            let attempt_timeout = self.config.renew_deadline.max(Duration::from_millis(100));
            let result = tokio::select! {
                () = shutdown.cancelled() => break,
                r = tokio::time::timeout(attempt_timeout, self.try_acquire_or_renew(metrics)) => {
                    r.unwrap_or_else(|_| Err(LeaseError::Timeout {
                        namespace: self.config.namespace.clone(),
                        name: self.config.name.clone(),
                        timeout: attempt_timeout,
                    }))
                }
            };
            let next = match result {
                Ok(Attempt::Leading) => {
                    last_renewal = Instant::now();
                    if !leading {
                        tracing::info!(%lease, %identity, "acquired the leader lease; this replica writes");
                        leading = true;
                    }
                    LeaderStatus {
                        leading: true,
                        holder: Some(identity.clone()),
                        lease_reachable: true,
                        error: None,
                    }
                }
                Ok(Attempt::Following { holder }) => {
                    if leading {
                        tracing::error!(%lease, %identity, holder = ?holder, "lost the leader lease; stepping down");
                        leading = false;
                    }
                    LeaderStatus {
                        leading: false,
                        holder,
                        lease_reachable: true,
                        error: None,
                    }
                }
                Err(e) => {
                    let error = error_chain(&e);
                    if leading && last_renewal.elapsed() >= self.config.renew_deadline {
                        tracing::error!(%lease, %identity, %error, "could not renew the leader lease in time; stepping down");
                        leading = false;
                    } else {
                        tracing::warn!(%lease, %identity, %error, "leader lease attempt failed");
                    }
                    LeaderStatus {
                        leading,
                        holder: status.borrow().holder.clone(),
                        lease_reachable: false,
                        error: Some(error),
                    }
                }
            };
            metrics.set_leader(leading);
            status.send_if_modified(|s| {
                let changed = *s != next;
                *s = next;
                changed
            });
            // Followers spread their attempts (client-go's jitter factor 1.2).
            let wait = if leading {
                self.config.retry_period
            } else {
                self.config.retry_period.mul_f64(1.0 + 0.2 * jitter())
            };
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(wait) => {}
            }
        }
        if leading {
            status.send_modify(|s| s.leading = false);
            metrics.set_leader(false);
            match tokio::time::timeout(self.config.renew_deadline, self.release()).await {
                Ok(Ok(())) => tracing::info!(%lease, %identity, "released the leader lease"),
                Ok(Err(e)) => {
                    tracing::warn!(%lease, error = %error_chain(&e), "failed to release the leader lease; it expires on its own")
                }
                Err(_) => {
                    tracing::warn!(%lease, "releasing the leader lease timed out; it expires on its own")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: Some(15),
            ..LeaseSpec::default()
        }
    }

    fn seen(ago: Duration, now: Instant) -> Observed {
        Observed {
            resource_version: "1".into(),
            duration: Duration::from_secs(15),
            at: now - ago,
        }
    }

    #[test]
    fn decisions() {
        let now = Instant::now() + Duration::from_secs(60);
        let fresh = seen(Duration::from_secs(3), now);
        let stale = seen(Duration::from_secs(16), now);
        assert_eq!(decide("a", &spec(Some("a")), &fresh, now), Decision::Renew);
        assert_eq!(decide("a", &spec(Some("a")), &stale, now), Decision::Renew);
        assert_eq!(
            decide("a", &spec(Some("b")), &fresh, now),
            Decision::Follow { holder: "b".into() }
        );
        assert_eq!(decide("a", &spec(Some("b")), &stale, now), Decision::Take);
        assert_eq!(decide("a", &spec(None), &fresh, now), Decision::Take);
        assert_eq!(decide("a", &spec(Some("")), &fresh, now), Decision::Take);
    }

    #[test]
    fn config_proportions() {
        let c = LeaseConfig::new("l", "ns", "me", Duration::from_secs(15));
        assert_eq!(c.renew_deadline, Duration::from_secs(10));
        assert!(
            c.retry_period >= Duration::from_secs(2) && c.retry_period < Duration::from_secs(3)
        );
        let tiny = LeaseConfig::new("l", "ns", "me", Duration::from_millis(10));
        assert_eq!(tiny.lease_duration, Duration::from_secs(1));
        assert!(tiny.renew_deadline < tiny.lease_duration);
        assert_eq!(spec_duration(&spec(None)), Duration::from_secs(15));
        assert_eq!(spec_duration(&LeaseSpec::default()), Duration::from_secs(1));
    }
}
