//! Watch responses: the store's events as one JSON line each in a chunked response,
//! until the timeout (a random 30 to 60 minutes unless `timeoutSeconds` says), the client
//! going away, shutdown, or an injected drop.

use std::convert::Infallible;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

use super::negotiate::Output;
use super::params::{Params, field_selector, include_object};
use super::response::error_response;
use super::table::{self, IncludeObject};
use super::{AppState, Target};
use crate::error::ApiError;
use crate::faults::WatchDropper;
use crate::resources::ResourceType;
use crate::store::{WatchEvent, WatchOptions};

/// A random server-side watch timeout between 30 and 60 minutes, as kube-apiserver's
/// `--min-request-timeout` (1800 s) times a factor in [1, 2).
fn default_watch_timeout() -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    Duration::from_secs(1800 + u64::from(nanos % 1800))
}

pub(super) fn do_watch(st: &AppState, t: &Target, params: &Params, output: Output) -> Response {
    match start_watch(st, t, params, output) {
        Ok(resp) => resp,
        Err(e) => error_response(&e),
    }
}

fn start_watch(
    st: &AppState,
    t: &Target,
    params: &Params,
    output: Output,
) -> Result<Response, ApiError> {
    let timeout = match params.get("timeoutSeconds") {
        None => default_watch_timeout(),
        Some(v) => {
            let secs: i64 = v.parse().map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid value for timeoutSeconds: {v:?} is not an integer"
                ))
            })?;
            // Upstream: 0 or less means the server default.
            u64::try_from(secs)
                .ok()
                .filter(|s| *s > 0)
                .map_or_else(default_watch_timeout, Duration::from_secs)
        }
    };
    let include = match output {
        Output::Table(_) => include_object(params)?,
        _ => IncludeObject::Metadata,
    };
    // A watch on one object's path watches that name.
    let mut field_selector = field_selector(params);
    if let Some(name) = &t.name {
        let by_name = format!("metadata.name={name}");
        field_selector = Some(match field_selector {
            Some(f) => format!("{f},{by_name}"),
            None => by_name,
        });
    }
    let opts = WatchOptions {
        resource_version: params.owned("resourceVersion"),
        label_selector: params.owned("labelSelector"),
        field_selector,
        allow_bookmarks: params.flag("allowWatchBookmarks"),
        send_initial_events: params.flag("sendInitialEvents"),
        timeout: Some(timeout),
    };
    let events = st.store.watch(t.rt, t.ns.as_deref(), &opts)?;
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(64);
    let stream = WatchStream {
        rt: t.rt,
        events,
        tx,
        output,
        include,
        dropper: st.faults.watch_dropper(),
        shutdown: st.shutdown.clone(),
        timeout,
    };
    tokio::spawn(stream.run());
    let mut resp = Body::from_stream(ReceiverStream::new(rx)).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(resp)
}

/// Forwards store events to one client's chunked response until the timeout, the
/// store closing the channel, the client going away, shutdown, or an injected drop.
struct WatchStream {
    rt: &'static ResourceType,
    events: mpsc::Receiver<WatchEvent>,
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
    output: Output,
    include: IncludeObject,
    dropper: WatchDropper,
    shutdown: watch::Receiver<bool>,
    timeout: Duration,
}

impl WatchStream {
    async fn run(mut self) {
        let deadline = tokio::time::sleep(self.timeout);
        tokio::pin!(deadline);
        let mut first = true;
        if *self.shutdown.borrow() {
            return;
        }
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                _ = self.shutdown.changed() => break,
                _ = self.tx.closed() => break,
                ev = self.events.recv() => {
                    let Some(ev) = ev else { break };
                    let line = encode_event(self.rt, &ev, self.output, self.include, first);
                    first = false;
                    if self.tx.send(Ok(line)).await.is_err() {
                        break;
                    }
                    if self.dropper.drop_now() {
                        tracing::debug!(resource = self.rt.plural, "dropping watch stream (fault injection)");
                        break;
                    }
                }
            }
        }
    }
}

fn encode_event(
    rt: &ResourceType,
    ev: &WatchEvent,
    output: Output,
    include: IncludeObject,
    first: bool,
) -> Bytes {
    let object = match output {
        _ if ev.kind == "ERROR" => return Bytes::from(ev.to_line()),
        Output::Json | Output::Yaml => return Bytes::from(ev.to_line()),
        Output::Meta(v) => {
            let object = table::partial_metadata_json(ev.encoded_object(), v);
            let mut line = String::with_capacity(object.len() + 32);
            line.push_str("{\"type\":");
            line.push_str(&serde_json::Value::String(ev.kind.into()).to_string());
            line.push_str(",\"object\":");
            line.push_str(&object);
            line.push_str("}\n");
            return Bytes::from(line);
        }
        Output::Table(_) if ev.kind == "BOOKMARK" => return Bytes::from(ev.to_line()),
        Output::Table(v) => {
            let meta = json!({ "resourceVersion": ev.object().pointer("/metadata/resourceVersion").cloned().unwrap_or(json!("")) });
            table::table(rt, [ev.object()], meta, v, include, first)
        }
    };
    let mut line =
        serde_json::to_vec(&json!({ "type": ev.kind, "object": object })).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}
