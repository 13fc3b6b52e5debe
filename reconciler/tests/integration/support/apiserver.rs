//! What a real kube-apiserver's `/metrics` says about the requests it served: it keeps
//! no request log like the sim's, so writes are counted from `apiserver_request_total`
//! (by verb, resource and code; it does not say who sent them) and requests by client
//! from `apiserver_flowcontrol_dispatched_requests_total` (by API Priority and Fairness
//! flow schema: a service account outside kube-system, such as the reconciler's, is
//! `service-accounts`; `system:masters`, the harness's admin, is `exempt`). Read it
//! before and after a phase and subtract ([`ApiserverMetrics::writes_since`]).

use std::collections::BTreeMap;

/// The flow schema of the requests of a service account outside kube-system (the
/// reconciler's, when it runs with deploy/'s service account).
pub const SERVICE_ACCOUNTS: &str = "service-accounts";

/// One `apiserver_request_total` series, less the labels that do not tell requests apart
/// here (`component`, `scope`, `version`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RequestKey {
    /// As the API server reports it: `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`,
    /// `APPLY` (a server-side apply patch), `DELETE`, `DELETECOLLECTION`.
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub code: u16,
    /// `All` for a dry run, empty otherwise.
    pub dry_run: String,
}

/// The counters of one `/metrics` scrape that tell what was requested.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApiserverMetrics {
    /// `apiserver_request_total`.
    pub requests: BTreeMap<RequestKey, f64>,
    /// `apiserver_flowcontrol_dispatched_requests_total`, by flow schema.
    pub dispatched: BTreeMap<String, f64>,
    /// `process_cpu_seconds_total`: the API server's CPU time.
    pub cpu_seconds: f64,
    /// `apiserver_terminated_watchers_total`, by resource: watches the API server closed
    /// because their client did not keep up with the events.
    pub terminated_watchers: BTreeMap<String, f64>,
}

/// The sim's request-log verb of an API server's write verb (`PATCH` -> `patch`, `POST`
/// -> `create`), or `None` for a read.
pub fn write_verb(verb: &str) -> Option<&'static str> {
    Some(match verb {
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "APPLY" => "apply",
        "DELETE" => "delete",
        "DELETECOLLECTION" => "deletecollection",
        _ => return None,
    })
}

/// `name{k="v",...} value` as (name, labels, value); `None` for comments and lines that
/// are not samples.
fn parse_sample(line: &str) -> Option<(&str, BTreeMap<String, String>, f64)> {
    if line.starts_with('#') {
        return None;
    }
    let (series, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let Some((name, rest)) = series.split_once('{') else {
        return Some((series, BTreeMap::new(), value));
    };
    let mut labels = BTreeMap::new();
    let mut chars = rest.strip_suffix('}')?.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
        if key.is_empty() {
            break;
        }
        if chars.next() != Some('"') {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                '"' => break,
                c => value.push(c),
            }
        }
        labels.insert(key.trim_start_matches(',').to_string(), value);
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    Some((name, labels, value))
}

impl ApiserverMetrics {
    /// Reads the counters out of a `/metrics` text.
    pub fn parse(text: &str) -> ApiserverMetrics {
        let mut out = ApiserverMetrics::default();
        for (name, labels, value) in text.lines().filter_map(parse_sample) {
            let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
            match name {
                "apiserver_request_total" => {
                    let key = RequestKey {
                        verb: label("verb"),
                        group: label("group"),
                        resource: label("resource"),
                        subresource: label("subresource"),
                        code: label("code").parse().unwrap_or(0),
                        dry_run: label("dry_run"),
                    };
                    *out.requests.entry(key).or_default() += value;
                }
                "apiserver_flowcontrol_dispatched_requests_total" => {
                    *out.dispatched.entry(label("flow_schema")).or_default() += value;
                }
                "process_cpu_seconds_total" => out.cpu_seconds = value,
                "apiserver_terminated_watchers_total" => {
                    *out.terminated_watchers
                        .entry(label("resource"))
                        .or_default() += value;
                }
                _ => {}
            }
        }
        out
    }

    /// Accepted (2xx), not dry-run writes since `before`, by (verb, resource) in the
    /// sim request log's words (`("patch", "nodes")`, `("create", "configmaps")`; a
    /// subresource as `nodes/status`). Only series that grew are listed.
    pub fn writes_since(&self, before: &ApiserverMetrics) -> BTreeMap<(String, String), usize> {
        let mut out = BTreeMap::new();
        for (key, &after) in &self.requests {
            let Some(verb) = write_verb(&key.verb) else {
                continue;
            };
            if !(200..300).contains(&key.code) || !key.dry_run.is_empty() {
                continue;
            }
            let grew = after - before.requests.get(key).copied().unwrap_or(0.0);
            if grew < 0.5 {
                continue;
            }
            let resource = if key.subresource.is_empty() {
                key.resource.clone()
            } else {
                format!("{}/{}", key.resource, key.subresource)
            };
            *out.entry((verb.to_string(), resource)).or_default() += grew.round() as usize;
        }
        out
    }

    /// Reads (any outcome) since `before`, by (verb, resource) in the sim request log's
    /// words (`("list", "nodes")`, `("watch", "configmaps")`). A watch is counted when it
    /// ends, as the API server records a request once it has been answered.
    pub fn reads_since(&self, before: &ApiserverMetrics) -> BTreeMap<(String, String), usize> {
        let mut out = BTreeMap::new();
        for (key, &after) in &self.requests {
            // Not the non-resource requests (the harness's own `GET /metrics`).
            if write_verb(&key.verb).is_some() || key.resource.is_empty() {
                continue;
            }
            let grew = after - before.requests.get(key).copied().unwrap_or(0.0);
            if grew >= 0.5 {
                let verb = key.verb.to_lowercase();
                *out.entry((verb, key.resource.clone())).or_default() += grew.round() as usize;
            }
        }
        out
    }

    /// Watches the API server closed as too slow since `before`, by resource.
    pub fn terminated_watchers_since(&self, before: &ApiserverMetrics) -> BTreeMap<String, usize> {
        self.terminated_watchers
            .iter()
            .map(|(r, &n)| {
                let was = before.terminated_watchers.get(r).copied().unwrap_or(0.0);
                (r.clone(), (n - was).max(0.0).round() as usize)
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// The API server's CPU time since `before`.
    pub fn cpu_since(&self, before: &ApiserverMetrics) -> std::time::Duration {
        std::time::Duration::from_secs_f64((self.cpu_seconds - before.cpu_seconds).max(0.0))
    }

    /// Requests of any kind, any outcome, dispatched for `flow_schema` since `before`.
    pub fn dispatched_since(&self, before: &ApiserverMetrics, flow_schema: &str) -> usize {
        let get = |m: &ApiserverMetrics| m.dispatched.get(flow_schema).copied().unwrap_or(0.0);
        (get(self) - get(before)).max(0.0).round() as usize
    }
}
