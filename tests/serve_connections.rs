//! Connections that hold a slot without sending a request, over real TLS (and plain TCP on
//! the operations port) against the real binary: idle HTTP/2 connections (whose PINGs the
//! client answers), silent TCP connections, keep-alive between requests, and the operations
//! port's own cap. A review must still be answered without waiting for a slot to time out,
//! and idle connections close after the idle timeout, not the header-read timeout.
//!
//! Servers here are started with handshake and header-read timeouts of a minute where a
//! connection held behind others would wait for one of them: "served" is then told from
//! "held" by an answer within 20 s, whatever the machine's load, not by a fraction of a
//! second.

mod webhook;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::ServerName;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use webhook::raw::{post_head, read_response, review_answer, review_request, until_closed};
use webhook::{Server, assert_healthy, review, start};

/// An HTTP/2 connection (ALPN h2) on which nothing is sent; hyper answers the server's
/// PINGs. The task ends when the server closes the connection.
async fn h2_connection(
    server: &Server,
) -> (
    SendRequest<Full<Bytes>>,
    JoinHandle<Result<(), hyper::Error>>,
) {
    let tcp = TcpStream::connect(server.admission).await.expect("tcp");
    let tls = webhook::connector(&server.ca_pem, rustls::DEFAULT_VERSIONS, &[b"h2"])
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
        .expect("handshake");
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .expect("h2 handshake");
    (sender, tokio::spawn(conn))
}

/// Timeouts of a minute: a connection that waited for a slot to time out would wait that long.
const SLOW_TIMEOUTS: [&str; 4] = ["--handshake-timeout", "60s", "--header-read-timeout", "60s"];

/// How long a connection or review may take to be served beside others on a loaded machine:
/// well under [`SLOW_TIMEOUTS`], so that one held until a slot times out fails.
const SERVED_WITHIN: Duration = Duration::from_secs(20);

/// Opens `n` idle HTTP/2 connections one after the other (each served, not held), then checks
/// that a review on a new connection, and one on the newest idle connection, are answered.
async fn idle_http2_then_review(server: &mut Server, n: usize) {
    let started = Instant::now();
    let mut idle = Vec::with_capacity(n);
    for i in 0..n {
        let conn = tokio::time::timeout(SERVED_WITHIN, h2_connection(server))
            .await
            .unwrap_or_else(|_| panic!("connection {i} was not served within {SERVED_WITHIN:?}"));
        idle.push(conn);
    }
    let opened = started.elapsed();
    // Let the server's GOAWAYs arrive.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let open = idle.iter().filter(|(_, task)| !task.is_finished()).count();
    eprintln!("{n} idle HTTP/2 connections opened in {opened:?}; {open} still open");

    allowed_beside(
        server,
        "uid-beside-idle",
        &format!("{n} idle HTTP/2 connections"),
    )
    .await;

    // The newest idle connection is still there, and serves.
    let (mut sender, _) = idle.pop().expect("a connection");
    let uri = "https://localhost/validate?timeout=10s";
    let resp = sender
        .send_request(review_request(uri, &review("uid-newest")))
        .await
        .expect("response on the newest connection");
    assert_eq!(review_answer(resp, "uid-newest").await["allowed"], true);
    drop(idle);
    assert_healthy(server).await;
}

/// A review of the example beside `what` is allowed, served rather than held.
async fn allowed_beside(server: &Server, uid: &str, what: &str) {
    let started = Instant::now();
    let response = tokio::time::timeout(SERVED_WITHIN, server.client().review(&review(uid)))
        .await
        .unwrap_or_else(|_| panic!("no answer within {SERVED_WITHIN:?} beside {what}"));
    eprintln!("review beside {what} answered in {:?}", started.elapsed());
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_http2_connections_make_room_for_a_review() {
    let mut server = start(&[&SLOW_TIMEOUTS[..], &["--max-connections", "64"]].concat());
    idle_http2_then_review(&mut server, 1100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_http2_connections_at_the_default_cap() {
    let mut server = start(&SLOW_TIMEOUTS);
    idle_http2_then_review(&mut server, 1100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_tcp_connections_make_room_for_a_review() {
    let mut server = start(&[&SLOW_TIMEOUTS[..], &["--max-connections", "64"]].concat());
    let mut silent = Vec::new();
    for _ in 0..200 {
        silent.push(TcpStream::connect(server.admission).await.expect("tcp"));
    }
    allowed_beside(
        &server,
        "uid-beside-silent",
        "200 silent TCP connections (64 slots)",
    )
    .await;
    // The oldest were closed to make room, rather than at the handshake timeout (a minute).
    let (closed_after, how) = until_closed(&mut silent[0], SERVED_WITHIN).await;
    assert!(closed_after < SERVED_WITHIN, "{closed_after:?} ({how})");
    drop(silent);
    assert_healthy(&mut server).await;
}

/// The header-read timeout runs from a head's first byte, not between requests: a kept-alive
/// connection paused for longer than it still serves, while half a head then nothing is cut
/// at the header-read timeout, long before the idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_between_requests_is_idle_time_a_stalled_head_is_not() {
    let mut server = start(&["--header-read-timeout", "1s", "--idle-timeout", "20s"]);
    let tls = server.client().connect().await.expect("connect");
    let (mut rd, mut wr) = tokio::io::split(tls);
    for (i, pause) in [0, 2500].into_iter().enumerate() {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let uid = format!("uid-pause-{i}");
        let body = serde_json::to_vec(&review(&uid)).expect("json");
        let mut request = post_head("/validate?timeout=10s", Some(body.len()));
        request.extend_from_slice(&body);
        wr.write_all(&request).await.expect("request sent");
        let answer = read_response(&mut rd).await.response();
        assert_eq!(answer["uid"], uid.as_str(), "after a pause of {pause} ms");
        assert_eq!(answer["allowed"], true);
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let head = post_head("/validate?timeout=10s", Some(100));
    wr.write_all(&head[..head.len() / 2])
        .await
        .expect("half a head sent");
    let (stalled, how) = until_closed(&mut rd, Duration::from_secs(30)).await;
    eprintln!("half a head after a pause: closed after {stalled:?} ({how})");
    // At the header-read timeout (1 s), not at the idle timeout (20 s).
    assert!(
        stalled >= Duration::from_millis(800) && stalled < Duration::from_secs(10),
        "{stalled:?}"
    );
    assert_healthy(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_lasts_until_the_idle_timeout() {
    let mut server = start(&["--header-read-timeout", "1s", "--idle-timeout", "3s"]);
    let client = server.client();

    // HTTP/1.1: a second review after longer than the header-read timeout, on the same
    // connection; then the server closes it once idle for 3 s.
    let tls = client.connect().await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("http/1.1 handshake");
    let conn = tokio::spawn(conn);
    for (i, pause) in [0, 1500].into_iter().enumerate() {
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let uid = format!("uid-ka-{i}");
        sender.ready().await.expect("connection still usable");
        let resp = sender
            .send_request(review_request("/validate?timeout=10s", &review(&uid)))
            .await
            .expect("response");
        assert_eq!(review_answer(resp, &uid).await["allowed"], true);
    }
    let idle = Instant::now();
    tokio::time::timeout(Duration::from_secs(30), conn)
        .await
        .expect("closed within 30 s")
        .expect("task")
        .expect("a clean close");
    let http1 = idle.elapsed();

    // HTTP/2: the same, closed with a GOAWAY.
    let (mut sender, conn) = h2_connection(&server).await;
    let uri = "https://localhost/validate?timeout=10s";
    let resp = sender
        .send_request(review_request(uri, &review("uid-h2")))
        .await
        .expect("response");
    assert_eq!(review_answer(resp, "uid-h2").await["allowed"], true);
    let idle = Instant::now();
    tokio::time::timeout(Duration::from_secs(30), conn)
        .await
        .expect("closed within 30 s")
        .expect("task")
        .expect("a clean close");
    let http2 = idle.elapsed();
    eprintln!("idle connections closed after {http1:?} (HTTP/1.1), {http2:?} (HTTP/2)");
    // At the idle timeout (3 s), not at the header-read timeout (1 s), nor left open.
    for elapsed in [http1, http2] {
        assert!(
            elapsed >= Duration::from_millis(2800) && elapsed < Duration::from_secs(10),
            "{elapsed:?}"
        );
    }
    assert_healthy(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_operations_connections_lock_out_nobody() {
    let mut server = start(&SLOW_TIMEOUTS);
    let started = Instant::now();
    let mut idle = Vec::new();
    for i in 0..2000 {
        let tcp = tokio::time::timeout(SERVED_WITHIN, TcpStream::connect(server.operations))
            .await
            .unwrap_or_else(|_| panic!("connection {i} not accepted within {SERVED_WITHIN:?}"))
            .expect("tcp");
        idle.push(tcp);
    }
    eprintln!(
        "2000 idle connections to the operations port opened in {:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sockets = std::fs::read_dir(format!("/proc/{}/fd", server.pid()))
        .expect("/proc fd")
        .count();
    eprintln!("the server holds {sockets} file descriptors");
    assert!(sockets < 300, "{sockets}");

    let started = Instant::now();
    let (status, text) = tokio::time::timeout(SERVED_WITHIN, server.ops_get("/readyz"))
        .await
        .expect("/readyz served, not held behind idle connections");
    eprintln!(
        "/readyz beside 2000 idle connections answered in {:?}",
        started.elapsed()
    );
    assert_eq!(status, 200, "{text}");
    assert_healthy(&mut server).await;

    // The soft limit on open files was raised to the hard one.
    let limits =
        std::fs::read_to_string(format!("/proc/{}/limits", server.pid())).expect("/proc limits");
    let open_files: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files")
        .split_whitespace()
        .collect();
    assert_eq!(open_files[3], open_files[4], "{limits}");
}

/// Connections that finish their handshake and send half a request line, `per_second` of
/// them (the outside probe's rates), beside `serve` for `legit` clients: returns how many of
/// `legit` failed. The flood keeps its newest 64 connections open and stops with the legit
/// ones.
async fn beside_a_flood_of_half_heads<F, Fut>(
    open: impl Fn() -> Fut + Send + 'static,
    per_second: u32,
    legit: usize,
    serve: F,
) -> usize
where
    Fut: std::future::Future<Output = Option<Box<dyn tokio::io::AsyncWrite + Unpin + Send>>> + Send,
    F: AsyncFn(usize) -> Result<(), String>,
{
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut held = std::collections::VecDeque::new();
            let mut opened = 0usize;
            let mut pace = tokio::time::interval(Duration::from_secs(1) / per_second);
            // A loaded machine that falls behind does not make up for it in a burst.
            pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            // Bounded: at most 20,000 connections or a minute.
            let end = Instant::now() + Duration::from_secs(60);
            while !stop.load(std::sync::atomic::Ordering::Relaxed)
                && opened < 20_000
                && Instant::now() < end
            {
                pace.tick().await;
                if let Some(mut conn) = open().await {
                    let _ = conn.write_all(b"POST /valid").await;
                    let _ = conn.flush().await;
                    held.push_back(conn);
                    if held.len() > 64 {
                        held.pop_front();
                    }
                }
                opened += 1;
            }
            opened
        })
    };
    // Let the flood fill the slots first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut failed = 0;
    for i in 0..legit {
        if let Err(e) = serve(i).await {
            eprintln!("legit client {i}: {e}");
            failed += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let opened = flood.await.expect("flood");
    eprintln!("{failed} of {legit} legit clients failed beside {opened} half heads");
    failed
}

/// A review on a new connection, every error returned.
async fn review_on_a_new_connection(server: &Server, uid: &str) -> Result<(), String> {
    let tls = server
        .client()
        .connect()
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| format!("http: {e}"))?;
    tokio::spawn(conn);
    let resp = sender
        .send_request(review_request("/validate?timeout=10s", &review(uid)))
        .await
        .map_err(|e| format!("request: {e}"))?;
    let answer = review_answer(resp, uid).await;
    if answer["allowed"] != true {
        return Err(format!("not allowed: {answer}"));
    }
    Ok(())
}

/// The outside probe's flood (230 connections a second finishing TLS and sending a partial
/// request line) cut 22 of 28 legitimate handshakes: room was made from the newest
/// handshakes. It is made from the flood's own oldest now, and every review is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_heads_make_room_from_their_own_oldest_not_from_new_handshakes() {
    let server = start(&[&SLOW_TIMEOUTS[..], &["--max-connections", "16"]].concat());
    let client = server.client();
    let open = move || {
        let client = client.clone();
        async move {
            let tls = client.connect().await.ok()?;
            Some(Box::new(tls) as Box<dyn tokio::io::AsyncWrite + Unpin + Send>)
        }
    };
    let failed = beside_a_flood_of_half_heads(open, 230, 28, async |i| {
        tokio::time::timeout(
            SERVED_WITHIN,
            review_on_a_new_connection(&server, &format!("uid-flood-{i}")),
        )
        .await
        .map_err(|_| "no answer".to_string())?
    })
    .await;
    assert_eq!(failed, 0);
}

/// The kubelet's probes (2 s timeouts in deploy/) are answered beside 40 half request lines
/// a second on the operations port (the outside probe's rate, at which probes failed 14 of
/// 16).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_are_answered_beside_a_flood_of_half_heads() {
    let server = start(&[]);
    let ops = server.operations;
    let open = move || async move {
        let tcp = TcpStream::connect(ops).await.ok()?;
        Some(Box::new(tcp) as Box<dyn tokio::io::AsyncWrite + Unpin + Send>)
    };
    let failed = beside_a_flood_of_half_heads(open, 40, 16, async |_| {
        let (status, text) =
            tokio::time::timeout(Duration::from_secs(2), server.ops_get("/readyz"))
                .await
                .map_err(|_| "no answer within the kubelet's 2 s".to_string())?;
        if status != 200 {
            return Err(format!("{status}: {text}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok(())
    })
    .await;
    assert_eq!(failed, 0);
}

/// HTTP/2 connections that advertise a zero flow-control window never take their answers:
/// each kept its request in flight, and its slot, for as long as the client liked (1,024 of
/// them were a full outage). An answer not taken within the header-read timeout closes its
/// connection, and a review on a new connection is served beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_a_client_does_not_take_close_its_connection() {
    let mut server = start(&[
        "--max-connections",
        "16",
        "--header-read-timeout",
        "2s",
        "--handshake-timeout",
        "60s",
    ]);
    let mut stuck = Vec::new();
    for i in 0..16 {
        let tcp = TcpStream::connect(server.admission).await.expect("tcp");
        let tls = webhook::connector(&server.ca_pem, rustls::DEFAULT_VERSIONS, &[b"h2"])
            .connect(ServerName::try_from("localhost").expect("name"), tcp)
            .await
            .expect("handshake");
        let (mut sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .initial_stream_window_size(0)
            .initial_connection_window_size(0)
            .handshake(TokioIo::new(tls))
            .await
            .expect("h2 handshake");
        let conn = tokio::spawn(conn);
        let uid = format!("uid-zero-window-{i}");
        let response = sender
            .send_request(review_request(
                "https://localhost/validate?timeout=10s",
                &review(&uid),
            ))
            .await
            .expect("the answer's head (HEADERS are not flow-controlled)");
        assert_eq!(response.status(), 200);
        // The body is never read: no WINDOW_UPDATE is sent.
        stuck.push((sender, response, conn));
    }
    allowed_beside(
        &server,
        "uid-beside-zero-windows",
        "16 zero-window connections",
    )
    .await;
    // Each was closed by the server, not left open.
    for (i, (_, _, conn)) in stuck.into_iter().enumerate() {
        tokio::time::timeout(SERVED_WITHIN, conn)
            .await
            .unwrap_or_else(|_| panic!("zero-window connection {i} still open"))
            .expect("task")
            .ok();
    }
    let warned = server
        .logs()
        .iter()
        .filter(|v| {
            v["message"] == "an answer was not taken by the client in time; connection closed"
        })
        .count();
    assert_eq!(warned, 16, "{:#?}", server.logs());
    assert_healthy(&mut server).await;
}
