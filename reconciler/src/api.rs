//! Kubernetes API calls with retries ([`kubelet_gitops_core::retry`]), every failure
//! counted in the metrics and each retry logged.

use std::future::Future;

pub use kubelet_gitops_core::retry::RetryPolicy;
pub(crate) use kubelet_gitops_core::retry::{error_code, jitter};

use crate::metrics::Metrics;

/// One kind of request, for logs and metrics.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    pub verb: &'static str,
    pub resource: &'static str,
    pub name: &'a str,
}

/// Runs `f` until it succeeds, fails permanently, or runs out of attempts; every failure
/// is counted in `metrics`. The last error is returned.
pub(crate) async fn retrying<T, F, Fut>(
    call: Call<'_>,
    policy: &RetryPolicy,
    metrics: &Metrics,
    f: F,
) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let on_failure = |failure: kubelet_gitops_core::retry::Failure<'_>| {
        metrics.api_error(call.verb, call.resource, error_code(failure.error));
        if let Some(retry_in) = failure.retry_in {
            tracing::debug!(
                verb = call.verb,
                resource = call.resource,
                name = call.name,
                attempt = failure.attempt,
                ?retry_in,
                error = %failure.error,
                "API request failed; retrying"
            );
        }
    };
    kubelet_gitops_core::retry::retrying(policy, on_failure, f).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Status::failure("x", reason).with_code(code).boxed())
    }

    #[tokio::test]
    async fn every_failed_attempt_is_counted() {
        let metrics = Metrics::new();
        let policy = RetryPolicy {
            attempts: 5,
            initial: Duration::from_millis(1),
            max: Duration::from_millis(2),
        };
        let calls = AtomicU32::new(0);
        let call = Call {
            verb: "patch",
            resource: "nodes",
            name: "n1",
        };
        let r = retrying(call, &policy, &metrics, || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 => Err(api(500, "InternalError")),
                1 => Err(api(409, "Conflict")),
                _ => Ok(7),
            }
        })
        .await;
        assert_eq!(r.ok(), Some(7));

        let r: Result<(), _> = retrying(call, &policy, &metrics, || async {
            Err(api(500, "InternalError"))
        })
        .await;
        assert!(r.is_err());
        let r: Result<(), _> = retrying(call, &policy, &metrics, || async {
            Err(api(403, "Forbidden"))
        })
        .await;
        assert!(r.is_err());
        let text = metrics.encode();
        for line in [
            "kubelet_gitops_api_errors_total{verb=\"patch\",resource=\"nodes\",code=\"500\"} 6",
            "kubelet_gitops_api_errors_total{verb=\"patch\",resource=\"nodes\",code=\"409\"} 1",
            "kubelet_gitops_api_errors_total{verb=\"patch\",resource=\"nodes\",code=\"403\"} 1",
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
    }
}
