//! Logs: the node log query, the container log manager's settings and `podLogsDir`.

use crate::duration::{Duration, SECOND};
use crate::go;
use crate::quantity::Quantity;
use crate::types::KubeletConfiguration;

use super::{ValidationError, err};

/// The log rules of `ValidateKubeletConfiguration`, in its order.
pub(super) fn check(
    c: &KubeletConfiguration,
    on: &dyn Fn(&str) -> bool,
    out: &mut Vec<ValidationError>,
) {
    let d = |v: Option<Duration>| v.unwrap_or(Duration::ZERO);
    let log_query = c.enable_system_log_query.unwrap_or(false);
    if log_query && !on("NodeLogQuery") {
        out.push(err(
            "enableSystemLogQuery",
            "invalid configuration: NodeLogQuery feature gate is required for enableSystemLogQuery",
        ));
    }
    if log_query && !c.enable_system_log_handler.unwrap_or(false) {
        out.push(err(
            "enableSystemLogHandler",
            "invalid configuration: enableSystemLogHandler is required for enableSystemLogQuery",
        ));
    }

    if c.container_log_max_workers.unwrap_or(0) < 1 {
        out.push(err(
            "containerLogMaxWorkers",
            "invalid configuration: containerLogMaxWorkers must be greater than or equal to 1",
        ));
    }
    if d(c.container_log_monitor_interval).as_nanos() < 3 * SECOND {
        out.push(err(
            "containerLogMonitorInterval",
            "invalid configuration: containerLogMonitorInterval must be a positive time duration greater than or equal to 3s",
        ));
    }
    if c.container_log_max_files.unwrap_or(0) <= 1 {
        out.push(err(
            "containerLogMaxFiles",
            "invalid configuration: containerLogMaxFiles must be greater than 1",
        ));
    }

    check_pod_logs_dir(c.pod_logs_dir.as_deref().unwrap_or(""), out);
}

/// `containerLogMaxSize`, which the container log manager parses at start.
pub(super) fn check_max_size(c: &KubeletConfiguration, out: &mut Vec<ValidationError>) {
    let max_size = c.container_log_max_size.as_deref().unwrap_or("");
    let size_error = match Quantity::parse(max_size) {
        Err(e) => Some(e.to_string()),
        Ok(q) if q.nanos() % 1_000_000_000 != 0 || i64::try_from(q.value()).is_err() => {
            Some("invalid max log size".to_string())
        }
        Ok(_) => None,
    };
    if let Some(e) = size_error {
        out.push(err(
            "containerLogMaxSize",
            format!(
                "failed to initialize container log manager: failed to parse container log max size {}: {e}",
                go::quote(max_size)
            ),
        ));
    }
}

fn check_pod_logs_dir(dir: &str, out: &mut Vec<ValidationError>) {
    const FIELD: &str = "podLogsDir";
    if dir.is_empty() {
        out.push(err(
            FIELD,
            "invalid configuration: podLogsDir was not specified",
        ));
    }
    if !dir.starts_with('/') {
        out.push(err(
            FIELD,
            format!(
                "invalid configuration: pod logs path {} must be absolute path",
                go::quote(dir)
            ),
        ));
    }
    if !is_clean_path(dir) {
        out.push(err(
            FIELD,
            format!(
                "invalid configuration: pod logs path {} must be normalized",
                go::quote(dir)
            ),
        ));
    }
    if !dir.is_ascii() {
        // Upstream's wording, typo included.
        out.push(err(
            FIELD,
            format!(
                "invalid configuration: pod logs path {} mut contains ASCII characters only",
                go::quote(dir)
            ),
        ));
    }
}

/// Whether Go's `filepath.Clean(p) == p` on Linux.
fn is_clean_path(p: &str) -> bool {
    go::clean_path(p) == p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_paths_as_go_cleans_them() {
        for p in ["/", "/var/log/pods", ".", "a/b", "../a", "../../a"] {
            assert!(is_clean_path(p), "{p}");
        }
        for p in [
            "",
            "/var/",
            "//var",
            "/var//log",
            "/./var",
            "/var/.",
            "/..",
            "/a/../b",
            "a/../b",
            "a/..",
        ] {
            assert!(!is_clean_path(p), "{p}");
        }
    }
}
