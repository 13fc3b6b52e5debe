//! The stand-in kubelet's HTTP endpoints: `/healthz` and `/configz`.
//!
//! A tiny HTTP/1.1 server of its own (every answer closes its connection) rather than
//! axum, so that stopping the kubelet really closes everything: the listener and every
//! open connection belong to one task, and aborting that task drops them all. A client
//! then gets "connection refused", as from a kubelet that exited.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// What the endpoints answer.
#[derive(Debug)]
pub(crate) struct Endpoints {
    /// The body of `/configz`: `{"kubeletconfig": {...}}`.
    pub configz: String,
}

/// Serves `listener` until the task running it is aborted.
pub(crate) async fn serve(listener: TcpListener, endpoints: Arc<Endpoints>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let endpoints = endpoints.clone();
                    conns.spawn(async move {
                        // A slow or silent client is dropped after a while.
                        let _ = tokio::time::timeout(
                            Duration::from_secs(30),
                            handle(stream, &endpoints),
                        )
                        .await;
                    });
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn handle(mut stream: TcpStream, endpoints: &Endpoints) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
        if buf.len() > 16 * 1024 {
            return respond(&mut stream, 431, "text/plain", "request header too large\n").await;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let request_line = head.split("\r\n").next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default();
    let target = parts.next().unwrap_or_default();
    let path = target.split('?').next().unwrap_or_default();
    let (code, content_type, body) = route(method, path, endpoints);
    respond(&mut stream, code, content_type, body).await
}

fn route<'a>(method: &str, path: &str, endpoints: &'a Endpoints) -> (u16, &'static str, &'a str) {
    let known = matches!(
        path,
        "/healthz" | "/healthz/ping" | "/healthz/log" | "/healthz/syncloop" | "/configz"
    );
    if !known {
        return (404, "text/plain; charset=utf-8", "404 page not found\n");
    }
    if method != "GET" {
        return (405, "text/plain; charset=utf-8", "Method Not Allowed\n");
    }
    if path == "/configz" {
        (200, "application/json", endpoints.configz.as_str())
    } else {
        (200, "text/plain; charset=utf-8", "ok")
    }
}

async fn respond(
    stream: &mut TcpStream,
    code: u16,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let reason = match code {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "",
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nX-Content-Type-Options: nosniff\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await?;
    stream.shutdown().await
}
