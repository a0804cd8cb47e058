//! Raw HTTP/1.1 over TLS, for requests a well-behaved client library would not send, and
//! helpers around hyper's client connections.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::{Client, response_of};

/// How a raw exchange ended.
#[derive(Debug)]
pub enum Ending {
    /// A complete response.
    Answered { status: u16, body: Vec<u8> },
    /// The connection ended (end of stream, or an error) before a complete response.
    Closed {
        received: usize,
        error: Option<String>,
    },
}

impl Ending {
    /// The `response` of an HTTP 200 AdmissionReview.
    pub fn response(&self) -> Value {
        match self {
            Ending::Answered { status: 200, body } => response_of(body),
            Ending::Answered { status, body } => panic!(
                "expected HTTP 200, got {status}: {}",
                String::from_utf8_lossy(body)
            ),
            Ending::Closed { received, error } => panic!(
                "expected an answer; the connection ended after {received} bytes ({error:?})"
            ),
        }
    }
}

/// The head of a POST to `path`, with a Content-Length or chunked.
pub fn post_head(path: &str, content_length: Option<usize>) -> Vec<u8> {
    let length = match content_length {
        Some(n) => format!("content-length: {n}\r\n"),
        None => "transfer-encoding: chunked\r\n".to_string(),
    };
    format!(
        "POST {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n{length}\r\n"
    )
    .into_bytes()
}

/// `body` in the chunked transfer coding, 64 KiB a chunk.
pub fn chunked(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + body.len() / 1000 + 16);
    for chunk in body.chunks(64 * 1024) {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// A complete response at the start of `buf`, if there is one.
pub fn parse_response(buf: &[u8]) -> Option<Ending> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..end]);
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    (buf.len() >= end + length).then(|| Ending::Answered {
        status,
        body: buf[end..end + length].to_vec(),
    })
}

/// Reads until a complete response or the end of the connection.
pub async fn read_response<R: AsyncRead + Unpin>(r: &mut R) -> Ending {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        if let Some(done) = parse_response(&buf) {
            return done;
        }
        match r.read(&mut chunk).await {
            Ok(0) => {
                return Ending::Closed {
                    received: buf.len(),
                    error: None,
                };
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => {
                return Ending::Closed {
                    received: buf.len(),
                    error: Some(e.to_string()),
                };
            }
        }
    }
}

/// Sends `head` and `body` on a new connection while reading, and returns how the exchange
/// ended (the server may answer, and close, before the body is all sent).
pub async fn exchange(client: &Client, head: Vec<u8>, body: Vec<u8>) -> Ending {
    let tls = client.connect().await.expect("connect");
    let (mut rd, mut wr) = tokio::io::split(tls);
    let writer = tokio::spawn(async move {
        wr.write_all(&head).await?;
        for chunk in body.chunks(64 * 1024) {
            wr.write_all(chunk).await?;
        }
        wr.flush().await?;
        Ok::<_, std::io::Error>(wr)
    });
    let ending = tokio::time::timeout(Duration::from_secs(20), read_response(&mut rd))
        .await
        .expect("an answer or a close within 20 s");
    writer.abort();
    ending
}

/// A POST of `body` (Content-Length) to `/validate?timeout=10s` on a raw connection.
pub async fn post_raw(client: &Client, body: Vec<u8>) -> Ending {
    exchange(
        client,
        post_head("/validate?timeout=10s", Some(body.len())),
        body,
    )
    .await
}

/// The request of a review over any hyper client connection.
pub fn review_request(uri: &str, review: &Value) -> hyper::Request<Full<Bytes>> {
    hyper::Request::builder()
        .method("POST")
        .uri(uri)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(
            serde_json::to_vec(review).expect("json"),
        )))
        .expect("request")
}

/// The `response` of a review's answer, after checking HTTP 200 and the echoed uid.
pub async fn review_answer(resp: hyper::Response<hyper::body::Incoming>, uid: &str) -> Value {
    assert_eq!(resp.status(), 200);
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    let response = response_of(&body);
    assert_eq!(response["uid"], uid, "{response}");
    response
}

/// Reads until the connection ends; the time it took and how it ended.
pub async fn until_closed<R: AsyncRead + Unpin>(r: &mut R, limit: Duration) -> (Duration, String) {
    let started = Instant::now();
    let mut chunk = [0u8; 1024];
    let how = tokio::time::timeout(limit, async {
        loop {
            match r.read(&mut chunk).await {
                Ok(0) => return "end of stream".to_string(),
                Ok(_) => {}
                Err(e) => return format!("error: {e}"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the connection was still open after {limit:?}"));
    (started.elapsed(), how)
}
