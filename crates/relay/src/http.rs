//! `GET /health` and `GET /metrics` on the WebSocket port: the request line is peeked (not
//! read), so a WebSocket upgrade finds the stream untouched. A full HTTP stack would be most of
//! the relay's build time for two fixed answers.

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What the first line of the request asks for.
pub enum Route {
    Health,
    Metrics,
    /// A WebSocket upgrade (any path).
    WebSocket,
    /// Neither: answered 404.
    NotFound,
}

/// Peeks until the request head is complete (or 4 KiB, or 5 s), and routes on its path and
/// its `Upgrade` header.
pub async fn route(stream: &TcpStream) -> std::io::Result<Route> {
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let n = tokio::time::timeout_at(deadline, stream.peek(&mut buf))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no request line"))??;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let complete = buf[..n].windows(4).any(|w| w == b"\r\n\r\n");
        if complete || n == buf.len() {
            let head = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
            let mut parts = head.split(' ');
            return Ok(match (parts.next(), parts.next()) {
                (Some("get"), Some("/health")) => Route::Health,
                (Some("get"), Some("/metrics")) => Route::Metrics,
                _ if head.contains("upgrade: websocket") => Route::WebSocket,
                _ => Route::NotFound,
            });
        }
        // Part of the head only: wait for more (peek returns at once while data is there).
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Reads the request's headers away and writes one response, then closes.
pub async fn respond(mut stream: TcpStream, status: &str, content_type: &str, body: String) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") && seen.len() < 16 * 1024 {
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&buf[..n]),
            _ => return,
        }
    }
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}
