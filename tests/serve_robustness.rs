//! Robustness of the admission port, over real TLS against the real binary: oversized,
//! deeply nested, truncated and slow requests, idle and concurrent connections, memory under
//! a barrage, keep-alive, HTTP/2 and the drain on SIGTERM.
//!
//! Every bad input must get a correct and prompt answer (HTTP 200 and an AdmissionReview
//! denial echoing the uid whenever it can be salvaged) or a clean close, and the server must
//! stay up and keep answering normal reviews.

mod webhook;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::ServerName;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use webhook::raw::{
    chunked, exchange, post_head, post_raw, read_response, review_answer, review_request,
    until_closed,
};
use webhook::{Client, assert_healthy, response_of, review, start, wait_metric};

const MIB: usize = 1024 * 1024;
/// The default `--max-body-bytes`.
const DEFAULT_LIMIT: usize = 8 * MIB;
const TOO_LARGE: &str = "the request body is larger than the limit of 8388608 bytes (the API server sends at most 3 MiB per object)";

/// A review whose Composition carries an annotation of `padding` bytes.
fn padded_review(uid: &str, padding: usize) -> Vec<u8> {
    let mut r = review(uid);
    r["request"]["object"]["metadata"]["annotations"] = json!({"padding": "x".repeat(padding)});
    serde_json::to_vec(&r).expect("json")
}

/// A review whose Composition holds arrays nested `depth` deep.
fn nested_review(uid: &str, depth: usize) -> Vec<u8> {
    let mut r = review(uid);
    r["request"]["object"]["spec"]["deep"] = json!("__DEEP__");
    let text = serde_json::to_string(&r).expect("json");
    let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let body = text.replace("\"__DEEP__\"", &deep);
    assert!(body.len() > 2 * depth);
    body.into_bytes()
}

/// The `response` of a 400 BadRequest denial.
fn bad_request(uid: &str, message: &str) -> Value {
    json!({
        "uid": uid,
        "allowed": false,
        "status": {"status": "Failure", "code": 400, "reason": "BadRequest", "message": message},
    })
}

// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_are_denied_with_the_uid() {
    let mut server = start(&[]);
    let client = server.client();
    let body = padded_review("uid-big", 10 * MIB);
    assert!(body.len() > 10 * MIB);

    // Declared with Content-Length: refused from the length, the uid salvaged from the prefix.
    let started = Instant::now();
    let ending = post_raw(&client, body.clone()).await;
    let declared = started.elapsed();
    assert_eq!(ending.response(), bad_request("uid-big", TOO_LARGE));

    // Chunked, with no length to go by: refused once the limit is crossed.
    let started = Instant::now();
    let ending = exchange(
        &client,
        post_head("/validate?timeout=10s", None),
        chunked(&body),
    )
    .await;
    let streamed = started.elapsed();
    assert_eq!(ending.response(), bad_request("uid-big", TOO_LARGE));
    eprintln!("10 MB body answered in {declared:?} (Content-Length), {streamed:?} (chunked)");

    // Just under the limit is read and validated.
    let body = padded_review("uid-7mb", 7 * MIB);
    assert!(body.len() < DEFAULT_LIMIT);
    let response = post_raw(&client, body).await.response();
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["uid"], "uid-7mb");

    assert_healthy(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_json_is_a_bad_request_with_the_uid() {
    let mut server = start(&[]);
    let client = server.client();
    let reply = client
        .request(
            "POST",
            "/validate?timeout=10s",
            Some("application/json"),
            nested_review("uid-deep", 100_000),
        )
        .await;
    assert_eq!(reply.status, 200);
    let response = response_of(&reply.body);
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert_eq!(
        message,
        "the request body nests more than 10002 levels deep: the API server accepts objects of at most 10000 levels, 10002 in an AdmissionReview",
        "{response}"
    );
    assert_eq!(response, bad_request("uid-deep", message));
    assert_healthy(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_bodies_neither_hang_nor_crash_the_server() {
    let mut server = start(&[]);
    let client = server.client();
    let body = serde_json::to_vec(&review("uid-cut")).expect("json");

    // Content-Length promises 1000 bytes more than are sent, then the client shuts down its
    // write side (TLS close_notify and FIN) and waits for the answer: given at the end of
    // the body, not at the deadline (27 s away).
    let tls = client.connect().await.expect("connect");
    let (mut rd, mut wr) = tokio::io::split(tls);
    let started = Instant::now();
    wr.write_all(&post_head("/validate?timeout=30s", Some(body.len() + 1000)))
        .await
        .expect("head");
    wr.write_all(&body).await.expect("body");
    wr.shutdown().await.expect("shutdown");
    let ending = tokio::time::timeout(Duration::from_secs(20), read_response(&mut rd))
        .await
        .expect("an answer or a close before the deadline");
    eprintln!(
        "truncated body, write side shut: answered after {:?}",
        started.elapsed()
    );
    // The uid is salvaged from what arrived.
    let response = ending.response();
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("the request body could not be read: "),
        "{response}"
    );
    assert_eq!(response, bad_request("uid-cut", message));

    // The same, but the client goes away entirely.
    let tls = client.connect().await.expect("connect");
    let (_rd, mut wr) = tokio::io::split(tls);
    wr.write_all(&post_head("/validate?timeout=10s", Some(body.len() + 1000)))
        .await
        .expect("head");
    wr.write_all(&body[..body.len() / 2])
        .await
        .expect("half a body");
    wr.flush().await.expect("flush");
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop((_rd, wr));

    // Neither review is left in flight.
    wait_metric(
        &server,
        "composition_webhook_reviews_in_flight",
        0.0,
        Duration::from_secs(5),
    )
    .await;
    assert_healthy(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_silent_clients_are_cut_off() {
    let mut server = start(&["--header-read-timeout", "1s", "--handshake-timeout", "1s"]);
    let client = server.client();

    // Request headers at one byte a second.
    let tls = client.connect().await.expect("connect");
    let (mut rd, mut wr) = tokio::io::split(tls);
    let head = post_head("/validate", Some(100));
    let writer = tokio::spawn(async move {
        for b in head {
            if wr.write_all(&[b]).await.is_err() || wr.flush().await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    // Cut at the header-read timeout (1 s), not when the head is done (after 100 s), nor at
    // the idle timeout (90 s).
    let (slow_headers, how) = until_closed(&mut rd, Duration::from_secs(30)).await;
    writer.abort();
    eprintln!("slow headers: closed after {slow_headers:?} ({how})");
    assert!(
        slow_headers >= Duration::from_millis(800) && slow_headers < Duration::from_secs(10),
        "{slow_headers:?}"
    );

    // A TLS connection on which nothing is sent (HTTP/1.1 and h2 by ALPN).
    for alpn in [&b"http/1.1"[..], &b"h2"[..]] {
        let tcp = TcpStream::connect(server.admission).await.expect("tcp");
        let mut tls = webhook::connector(&server.ca_pem, rustls::DEFAULT_VERSIONS, &[alpn])
            .connect(ServerName::try_from("localhost").expect("name"), tcp)
            .await
            .expect("handshake");
        let (silent, how) = until_closed(&mut tls, Duration::from_secs(30)).await;
        eprintln!(
            "silent TLS connection ({}): closed after {silent:?} ({how})",
            String::from_utf8_lossy(alpn)
        );
        assert!(silent < Duration::from_secs(10), "{silent:?}");
    }

    // A TCP connection on which no TLS handshake is started.
    let mut tcp = TcpStream::connect(server.admission).await.expect("tcp");
    let (no_handshake, how) = until_closed(&mut tcp, Duration::from_secs(30)).await;
    eprintln!("no TLS handshake: closed after {no_handshake:?} ({how})");
    assert!(no_handshake < Duration::from_secs(10), "{no_handshake:?}");

    assert_healthy(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_body_is_answered_at_the_deadline() {
    let mut server = start(&[]);
    let client = server.client();
    let body = serde_json::to_vec(&review("uid-slow")).expect("json");
    let tls = client.connect().await.expect("connect");
    let (mut rd, mut wr) = tokio::io::split(tls);
    let started = Instant::now();
    let writer = tokio::spawn(async move {
        wr.write_all(&post_head("/validate?timeout=5s", Some(body.len())))
            .await?;
        // Enough for the uid, then a byte every 100 ms (the whole would take minutes).
        wr.write_all(&body[..200]).await?;
        wr.flush().await?;
        for b in &body[200..] {
            tokio::time::sleep(Duration::from_millis(100)).await;
            wr.write_all(&[*b]).await?;
            wr.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let ending = tokio::time::timeout(Duration::from_secs(20), read_response(&mut rd))
        .await
        .expect("an answer");
    let elapsed = started.elapsed();
    writer.abort();
    eprintln!("slow body with ?timeout=5s answered after {elapsed:?}");
    assert_eq!(
        ending.response(),
        bad_request(
            "uid-slow",
            "the request body could not be read: the body did not arrive before the deadline"
        )
    );
    // The promise: at the budget of a 5 s timeout (4.5 s), before the API server gives up.
    assert!(
        elapsed >= Duration::from_millis(4400) && elapsed < Duration::from_secs(5),
        "{elapsed:?}"
    );
    assert_healthy(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_connections_concurrent_or_idle() {
    let mut server = start(&[]);
    let client = server.client();

    // 200 connections at once, each posting one review.
    let started = Instant::now();
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let client = client.clone();
            let review = review(&format!("uid-{i}"));
            tokio::spawn(async move {
                let response = client.review(&review).await;
                assert_eq!(response["allowed"], true, "{response}");
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("review task");
    }
    eprintln!("200 concurrent reviews answered in {:?}", started.elapsed());

    // 200 idle connections held open do not keep a review from being answered.
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(client.connect().await.expect("idle connection"));
    }
    let started = Instant::now();
    let response = client.review(&review("uid-beside-idle")).await;
    assert_eq!(response["allowed"], true, "{response}");
    eprintln!(
        "review beside 200 idle connections answered in {:?}",
        started.elapsed()
    );
    drop(idle);
    assert_healthy(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_cannot_hold_every_slot() {
    // Four slots, all taken by connections that never send a request: they are cut off
    // at the header read timeout, and a waiting review gets a slot.
    let mut server = start(&["--max-connections", "4", "--header-read-timeout", "1s"]);
    let client = server.client();
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(client.connect().await.expect("idle connection"));
    }
    let started = Instant::now();
    // Served, not held until an idle connection's idle timeout (90 s).
    let response = tokio::time::timeout(
        Duration::from_secs(30),
        client.review(&review("uid-waited")),
    )
    .await
    .expect("the review got a slot");
    let waited = started.elapsed();
    assert_eq!(response["allowed"], true, "{response}");
    eprintln!("review behind 4 idle connections (4 slots) answered in {waited:?}");
    for mut tls in idle {
        let _ = until_closed(&mut tls, Duration::from_secs(5)).await;
    }
    assert_healthy(&mut server).await;
}

/// Oversized, large, many and malformed reviews at once; returns when all are answered.
async fn barrage(client: &Client) {
    // 20 bodies of 10 MB at once.
    let big = Arc::new(padded_review("uid-big", 10 * MIB));
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let client = client.clone();
            let big = big.clone();
            tokio::spawn(async move { post_raw(&client, big.to_vec()).await.response() })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.expect("task"), bad_request("uid-big", TOO_LARGE));
    }
    // 4 chunked bodies of 10 MB at once (each read up to the 8 MiB limit).
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let client = client.clone();
            let big = big.clone();
            tokio::spawn(async move {
                exchange(&client, post_head("/validate", None), chunked(&big))
                    .await
                    .response()
            })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.expect("task"), bad_request("uid-big", TOO_LARGE));
    }
    drop(big);
    // 8 bodies of 7 MB (under the limit: read, decoded and validated) at once.
    let seven = Arc::new(padded_review("uid-7mb", 7 * MIB));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let client = client.clone();
            let seven = seven.clone();
            tokio::spawn(async move { post_raw(&client, seven.to_vec()).await.response() })
        })
        .collect();
    for t in tasks {
        let response = t.await.expect("task");
        assert_eq!(response["uid"], "uid-7mb");
        assert_eq!(response["allowed"], true, "{response}");
    }
    drop(seven);
    // 200 reviews at once.
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let client = client.clone();
            let review = review(&format!("uid-{i}"));
            tokio::spawn(async move { client.review(&review).await["allowed"].clone() })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.expect("task"), true);
    }
    // Deeply nested JSON, five times at once.
    let nested = nested_review("uid-deep", 100_000);
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let client = client.clone();
            let nested = nested.clone();
            tokio::spawn(async move { post_raw(&client, nested).await.response() })
        })
        .collect();
    for t in tasks {
        let response = t.await.expect("task");
        assert_eq!(response["uid"], "uid-deep");
        assert_eq!(response["status"]["code"], 400);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_stays_bounded_under_a_barrage() {
    let mut server = start(&[]);
    let client = server.client();
    for i in 0..5 {
        let response = client.review(&review(&format!("uid-warm-{i}"))).await;
        assert_eq!(response["allowed"], true);
    }
    let before = server.rss_kib();
    let started = Instant::now();
    barrage(&client).await;
    let first = started.elapsed();
    let after_one = server.rss_kib();
    let started = Instant::now();
    barrage(&client).await;
    let second = started.elapsed();
    let after_two = server.rss_kib();
    let peak = server.peak_rss_kib();
    eprintln!(
        "RSS before {} MiB, after one barrage {} MiB ({first:?}), after two {} MiB ({second:?}), peak {} MiB",
        before / 1024,
        after_one / 1024,
        after_two / 1024,
        peak / 1024
    );
    // At most about 100 MiB of bodies are held at once here (8 x 7 MB read in full, 4 x
    // 8 MiB up to the limit, 64 KiB prefixes of the rest), the two workers decode at most two
    // reviews at once (a few copies of a 7 MB object each), and the allocator keeps freed
    // memory mapped: 300 MiB is a generous ceiling for all of it, well below what reading the
    // 20 x 10 MB bodies in full would cost. A second barrage must stay under the same
    // ceiling: what one request allocates is not kept for the next.
    for (after, round) in [(after_one, "one barrage"), (after_two, "two barrages")] {
        assert!(
            after.saturating_sub(before) < 300 * 1024,
            "RSS grew from {before} KiB to {after} KiB after {round}"
        );
    }
    assert_healthy(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_and_http2() {
    let mut server = start(&[]);
    let client = server.client();

    // Several reviews, one after the other, on one HTTP/1.1 connection.
    let tls = client.connect().await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("http/1.1 handshake");
    let conn = tokio::spawn(conn);
    for i in 0..5 {
        let uid = format!("uid-ka-{i}");
        sender.ready().await.expect("connection still usable");
        let resp = sender
            .send_request(review_request("/validate?timeout=10s", &review(&uid)))
            .await
            .expect("response");
        assert_eq!(resp.version(), hyper::Version::HTTP_11);
        let response = review_answer(resp, &uid).await;
        assert_eq!(response["allowed"], true, "{response}");
    }
    drop(sender);
    conn.await.expect("task").expect("connection ends cleanly");

    // HTTP/2 by ALPN: one review, then 20 at once on the same connection.
    let tcp = TcpStream::connect(server.admission).await.expect("tcp");
    let tls = webhook::connector(&server.ca_pem, rustls::DEFAULT_VERSIONS, &[b"h2"])
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
        .expect("handshake");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    let uri = "https://localhost/validate?timeout=10s";
    let resp = sender
        .clone()
        .send_request(review_request(uri, &review("uid-h2")))
        .await
        .expect("response");
    assert_eq!(resp.version(), hyper::Version::HTTP_2);
    assert_eq!(review_answer(resp, "uid-h2").await["allowed"], true);
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let mut sender = sender.clone();
            let uid = format!("uid-h2-{i}");
            let request = review_request(uri, &review(&uid));
            tokio::spawn(async move {
                let resp = sender.send_request(request).await.expect("response");
                review_answer(resp, &uid).await["allowed"].clone()
            })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.expect("task"), true);
    }
    assert_healthy(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_review_in_flight_then_exits_zero() {
    let mut server = start(&["--drain-timeout", "60s"]);
    let client = server.client();
    assert_eq!(server.ops_get("/readyz").await.0, 200);

    // A review in flight: headers and half the body sent.
    let body = serde_json::to_vec(&review("uid-drain")).expect("json");
    let (first, rest) = body.split_at(body.len() / 2);
    let tls = client.connect().await.expect("connect");
    let (mut rd, mut wr) = tokio::io::split(tls);
    wr.write_all(&post_head("/validate?timeout=10s", Some(body.len())))
        .await
        .expect("head");
    wr.write_all(first).await.expect("first half");
    wr.flush().await.expect("flush");
    wait_metric(
        &server,
        "composition_webhook_reviews_in_flight",
        1.0,
        Duration::from_secs(5),
    )
    .await;

    let signalled = Instant::now();
    server.sigterm();
    assert!(
        server
            .wait_for_log(
                "admission port closed; finishing in-flight reviews",
                Duration::from_secs(5)
            )
            .is_some(),
        "{:#?}",
        server.logs()
    );
    // Draining: not ready, and no new connections.
    let (status, text) = server.ops_get("/readyz").await;
    assert_eq!((status, text.as_str()), (503, "not ready: shutting down\n"));
    let refused = TcpStream::connect(server.admission).await;
    assert!(
        refused.is_err(),
        "a new connection was accepted while draining"
    );

    // The review in flight is still answered in full.
    wr.write_all(rest).await.expect("second half");
    wr.flush().await.expect("flush");
    let ending = tokio::time::timeout(Duration::from_secs(5), read_response(&mut rd))
        .await
        .expect("an answer within 5 s");
    let response = ending.response();
    assert_eq!(
        response,
        json!({"uid": "uid-drain", "allowed": true, "status": {}})
    );

    // Once drained, not at the drain timeout (a minute).
    let status = server
        .wait_exit(Duration::from_secs(30))
        .expect("exited once drained");
    let elapsed = signalled.elapsed();
    eprintln!("exited {status} {elapsed:?} after SIGTERM");
    assert_eq!(status.code(), Some(0), "{:#?}", server.logs());
    let messages: Vec<String> = server
        .logs()
        .iter()
        .filter_map(|v| v["message"].as_str().map(str::to_string))
        .collect();
    for m in ["SIGTERM received", "all connections drained", "stopped"] {
        assert!(messages.iter().any(|x| x == m), "no {m:?} in {messages:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_stuck_review_exits_zero_at_the_drain_timeout() {
    let mut server = start(&["--drain-timeout", "1s"]);
    let client = server.client();
    // A review whose body never arrives in full (its own deadline is 27 s away).
    let tls = client.connect().await.expect("connect");
    let (_rd, mut wr) = tokio::io::split(tls);
    wr.write_all(&post_head("/validate?timeout=30s", Some(10_000)))
        .await
        .expect("head");
    wr.write_all(b"{\"apiVersion\":").await.expect("body");
    wr.flush().await.expect("flush");
    wait_metric(
        &server,
        "composition_webhook_reviews_in_flight",
        1.0,
        Duration::from_secs(5),
    )
    .await;
    let signalled = Instant::now();
    server.sigterm();
    let status = server
        .wait_exit(Duration::from_secs(20))
        .expect("exited soon after the drain timeout");
    let elapsed = signalled.elapsed();
    eprintln!("stuck review: exited {status} {elapsed:?} after SIGTERM (drain timeout 1s)");
    assert_eq!(status.code(), Some(0), "{:#?}", server.logs());
    // At the drain timeout (1 s), not at the review's deadline (27 s).
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(10),
        "{elapsed:?}"
    );
    assert!(
        server
            .logs()
            .iter()
            .any(|v| v["message"] == "connections still open after the drain timeout; closing them"),
        "{:#?}",
        server.logs()
    );
}
