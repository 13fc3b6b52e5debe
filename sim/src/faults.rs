//! Seeded, deterministic fault injection for Kubernetes API requests.
//!
//! One ChaCha RNG is seeded from [`FaultConfig::seed`] whenever a configuration is set,
//! and every API request draws from it in the order the requests arrive: the same seed
//! and the same sequence of requests give the same sequence of faults. Each request
//! draws exactly four numbers (throttle, error, conflict, latency jitter) whatever its
//! verb, so one request's kind does not shift the faults of the next. A watch draws a
//! fifth number, the seed of its own RNG, which then decides after each event whether
//! the stream is dropped: concurrent watches cannot disturb each other's sequence.
//!
//! Faults apply to API requests only; discovery, `/version`, the OpenAPI paths and the
//! health endpoints are never faulted (kubectl and kube-rs fetch discovery outside of
//! their retry loops, so faulting it would test the clients' caches, not the product).
//!
//! Order of checks for a request: 429 (the real server's priority-and-fairness filter
//! rejects before any handler runs), then 500, then 409 for writes (create, update,
//! patch, delete). A faulted request never reaches the store.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What to inject. `Default` injects nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultConfig {
    /// Seed of the RNG that decides every fault.
    pub seed: u64,
    /// Share of API requests answered 500 InternalError (0.0 to 1.0).
    pub error_500_rate: f64,
    /// Share of API requests answered 429 TooManyRequests with `Retry-After`.
    pub throttle_429_rate: f64,
    /// Value of the `Retry-After` header (and of the Status's retryAfterSeconds).
    pub retry_after_seconds: u64,
    /// Share of writes (create, update, patch, delete) answered 409 Conflict.
    pub conflict_409_rate_on_writes: f64,
    /// Chance, after each watch event sent, that the stream is closed there.
    pub drop_watch_rate: f64,
    /// Latency added to every API request before it is handled.
    pub latency: Duration,
    /// Extra latency, uniform in `[0, latency_jitter]`, added on top of `latency`.
    pub latency_jitter: Duration,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            seed: 0,
            error_500_rate: 0.0,
            throttle_429_rate: 0.0,
            retry_after_seconds: 1,
            conflict_409_rate_on_writes: 0.0,
            drop_watch_rate: 0.0,
            latency: Duration::ZERO,
            latency_jitter: Duration::ZERO,
        }
    }
}

impl FaultConfig {
    /// Whether this configuration injects anything at all.
    pub fn is_active(&self) -> bool {
        rate(self.error_500_rate) > 0.0
            || rate(self.throttle_429_rate) > 0.0
            || rate(self.conflict_409_rate_on_writes) > 0.0
            || rate(self.drop_watch_rate) > 0.0
            || !self.latency.is_zero()
            || !self.latency_jitter.is_zero()
    }
}

/// A rate clamped to `[0, 1]`; NaN counts as 0.
fn rate(r: f64) -> f64 {
    if r.is_nan() { 0.0 } else { r.clamp(0.0, 1.0) }
}

/// The fault chosen for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 429 TooManyRequests with this `Retry-After` (seconds).
    Throttle {
        /// Seconds the client is told to wait.
        retry_after_seconds: u64,
    },
    /// 500 InternalError.
    Internal,
    /// 409 Conflict (writes only).
    Conflict,
}

/// What happens to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Latency to add before handling (or failing) the request.
    pub delay: Duration,
    /// The fault to answer with, if any.
    pub fault: Option<Fault>,
}

/// Decides, per watch stream, whether to drop the stream after an event.
#[derive(Debug)]
pub struct WatchDropper {
    rng: ChaCha8Rng,
    rate: f64,
}

impl WatchDropper {
    /// A dropper that never drops.
    pub fn never() -> WatchDropper {
        WatchDropper {
            rng: ChaCha8Rng::seed_from_u64(0),
            rate: 0.0,
        }
    }

    /// Whether to close the stream after the event just sent.
    pub fn drop_now(&mut self) -> bool {
        self.rate > 0.0 && self.rng.random::<f64>() < self.rate
    }
}

#[derive(Debug)]
struct State {
    config: FaultConfig,
    rng: ChaCha8Rng,
}

/// The live fault injector shared by the server's handlers; clones share state.
#[derive(Debug, Clone)]
pub struct Faults {
    state: Arc<Mutex<State>>,
}

impl Faults {
    /// An injector for `config`, its RNG seeded from `config.seed`.
    pub fn new(config: FaultConfig) -> Faults {
        let rng = ChaCha8Rng::seed_from_u64(config.seed);
        Faults {
            state: Arc::new(Mutex::new(State { config, rng })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a config and an RNG: always consistent, even after a panic elsewhere.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Replaces the configuration and reseeds the RNG from its seed.
    pub fn set(&self, config: FaultConfig) {
        let mut state = self.lock();
        state.rng = ChaCha8Rng::seed_from_u64(config.seed);
        state.config = config;
    }

    /// The current configuration.
    pub fn config(&self) -> FaultConfig {
        self.lock().config.clone()
    }

    /// Draws the fault for the next request; `write` is true for create, update,
    /// patch and delete.
    pub fn decide(&self, write: bool) -> Decision {
        let mut state = self.lock();
        let State { config, rng } = &mut *state;
        let throttle = rng.random::<f64>();
        let error = rng.random::<f64>();
        let conflict = rng.random::<f64>();
        let jitter = rng.random::<f64>();
        let fault = if throttle < rate(config.throttle_429_rate) {
            Some(Fault::Throttle {
                retry_after_seconds: config.retry_after_seconds,
            })
        } else if error < rate(config.error_500_rate) {
            Some(Fault::Internal)
        } else if write && conflict < rate(config.conflict_409_rate_on_writes) {
            Some(Fault::Conflict)
        } else {
            None
        };
        let delay = config.latency + config.latency_jitter.mul_f64(jitter);
        Decision { delay, fault }
    }

    /// A dropper for a watch that starts now (draws its seed from the shared RNG).
    pub fn watch_dropper(&self) -> WatchDropper {
        let mut state = self.lock();
        let seed = state.rng.random::<u64>();
        let r = rate(state.config.drop_watch_rate);
        WatchDropper {
            rng: ChaCha8Rng::seed_from_u64(seed),
            rate: r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequence(config: &FaultConfig, n: usize) -> Vec<Option<Fault>> {
        let faults = Faults::new(config.clone());
        (0..n).map(|i| faults.decide(i % 3 == 0).fault).collect()
    }

    #[test]
    fn same_seed_same_faults_other_seed_other_faults() {
        let config = FaultConfig {
            seed: 42,
            error_500_rate: 0.2,
            throttle_429_rate: 0.2,
            conflict_409_rate_on_writes: 0.3,
            ..FaultConfig::default()
        };
        let a = sequence(&config, 200);
        assert_eq!(a, sequence(&config, 200));
        assert_ne!(
            a,
            sequence(
                &FaultConfig {
                    seed: 43,
                    ..config.clone()
                },
                200
            )
        );
        assert!(a.contains(&Some(Fault::Internal)));
        assert!(a.contains(&Some(Fault::Throttle {
            retry_after_seconds: 1
        })));
        assert!(a.contains(&Some(Fault::Conflict)));
        assert!(a.contains(&None));
        // Conflicts only on writes (every third request here).
        for (i, f) in a.iter().enumerate() {
            if *f == Some(Fault::Conflict) {
                assert_eq!(i % 3, 0, "conflict on a read at {i}");
            }
        }
    }

    #[test]
    fn default_injects_nothing_and_set_reseeds() {
        let faults = Faults::new(FaultConfig::default());
        assert!(!FaultConfig::default().is_active());
        for _ in 0..100 {
            assert_eq!(
                faults.decide(true),
                Decision {
                    delay: Duration::ZERO,
                    fault: None
                }
            );
        }
        let config = FaultConfig {
            seed: 9,
            error_500_rate: 0.5,
            ..FaultConfig::default()
        };
        faults.set(config.clone());
        let first: Vec<_> = (0..50).map(|_| faults.decide(false).fault).collect();
        faults.set(config);
        let again: Vec<_> = (0..50).map(|_| faults.decide(false).fault).collect();
        assert_eq!(first, again);
    }

    #[test]
    fn latency_within_jitter_and_rates_clamped() {
        let faults = Faults::new(FaultConfig {
            seed: 1,
            latency: Duration::from_millis(10),
            latency_jitter: Duration::from_millis(5),
            error_500_rate: f64::NAN,
            throttle_429_rate: -1.0,
            ..FaultConfig::default()
        });
        let mut distinct = std::collections::BTreeSet::new();
        for _ in 0..100 {
            let d = faults.decide(false);
            assert!(d.delay >= Duration::from_millis(10) && d.delay <= Duration::from_millis(15));
            assert_eq!(d.fault, None);
            distinct.insert(d.delay);
        }
        assert!(distinct.len() > 10);
    }

    #[test]
    fn watch_dropper_rate() {
        let faults = Faults::new(FaultConfig {
            seed: 5,
            drop_watch_rate: 0.25,
            ..FaultConfig::default()
        });
        let mut dropper = faults.watch_dropper();
        let drops = (0..4000).filter(|_| dropper.drop_now()).count();
        assert!((800..1200).contains(&drops), "{drops}");
        let mut never = WatchDropper::never();
        assert!((0..1000).all(|_| !never.drop_now()));
    }
}
