//! What one client costs the others, over real TLS against the real binary: a review waiting
//! for a worker is answered at its deadline by its own Composition's mode; slow bodies hold
//! only the memory they have sent; an answer when memory is short still echoes the uid and
//! the version; a Composition with thousands of errors gets a bounded denial; and validation
//! runs below the threads that read requests and write answers.

mod adversary;
mod webhook;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use webhook::raw::{Ending, exchange, post_head};
use webhook::{
    Client, ScratchDir, Server, assert_healthy, composition, composition_review, project_dir,
    review, start, wait_metric,
};

const MODE_ANNOTATION: &str = "crossplane.io/composition-schema-aware-validation-mode";
const IN_FLIGHT: &str = "composition_webhook_reviews_in_flight";

/// The example Composition named `name` in `mode`, made invalid (two resources share a name).
fn invalid(name: &str, mode: &str) -> Value {
    let mut c = composition();
    c["metadata"] = json!({"name": name, "annotations": {MODE_ANNOTATION: mode}});
    c["spec"]["resources"][0]["name"] = json!("same");
    c["spec"]["resources"][1]["name"] = json!("same");
    c
}

/// POSTs `review` with `?timeout=` and returns its `response` and how long it took.
async fn timed_review(client: &Client, review: &Value, timeout: &str) -> (Value, Duration) {
    let started = Instant::now();
    let reply = client
        .request(
            "POST",
            &format!("/validate?timeout={timeout}"),
            Some("application/json"),
            serde_json::to_vec(review).expect("json"),
        )
        .await;
    let elapsed = started.elapsed();
    let v = reply.answer_json();
    assert_eq!(v["apiVersion"], review["apiVersion"], "{v}");
    assert_eq!(v["response"]["uid"], review["request"]["uid"], "{v}");
    (v["response"].clone(), elapsed)
}

/// Waits (asynchronously) for a log line with `message` and `uid`.
async fn wait_log(server: &Server, message: &str, uid: &str, timeout: Duration) {
    let end = Instant::now() + timeout;
    while !server
        .logs()
        .iter()
        .any(|v| v["message"] == message && v["uid"] == uid)
    {
        assert!(
            Instant::now() < end,
            "no {message:?} for {uid} in {:#?}",
            server.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_waiting_for_a_worker_is_answered_by_its_own_mode() {
    let mut server = start(&["--workers", "1", "--log-level", "debug"]);
    let client = server.client();

    // The only worker is held until the deadline of a review that would take minutes (2,000
    // large regexps, 10 s timeout): held as long on a fast machine as on a slow one, where a
    // Composition that only takes long to validate can finish before the others' deadline.
    let slow = composition_review("v1", "uid-slow", "CREATE", adversary::large_regexps(None));
    let slow_task = {
        let client = client.clone();
        tokio::spawn(async move { timed_review(&client, &slow, "10s").await })
    };
    wait_log(&server, "reviewing", "uid-slow", Duration::from_secs(20)).await;

    // Meanwhile, two invalid Compositions with a 5 s timeout (a 4.5 s budget) wait for it.
    let strict = composition_review(
        "v1beta1",
        "uid-strict",
        "CREATE",
        invalid("strict-one", "strict"),
    );
    let loose = composition_review("v1", "uid-loose", "CREATE", invalid("loose-one", "loose"));
    let (strict, loose) = tokio::join!(
        timed_review(&client, &strict, "5s"),
        timed_review(&client, &loose, "5s")
    );
    eprintln!(
        "behind a busy worker: strict answered in {:?}, loose in {:?}",
        strict.1, loose.1
    );
    // At their own deadline, before the API server's timeout; not when the worker is free.
    for (_, elapsed) in [&strict, &loose] {
        assert!(
            *elapsed >= Duration::from_millis(4400) && *elapsed < Duration::from_secs(5),
            "{elapsed:?}"
        );
    }
    let why = "validation did not finish within 4500ms, the time left before the API server's webhook timeout";
    // Strict, as its annotation says (the server's default is loose): denied.
    assert_eq!(
        strict.0,
        json!({"uid": "uid-strict", "allowed": false, "status": {
            "status": "Failure", "code": 504, "reason": "Timeout",
            "message": format!("Composition \"strict-one\" was not validated: {why}; strict mode denies what it cannot check. Try again; if it persists, give the webhook more CPU or raise timeoutSeconds in its ValidatingWebhookConfiguration"),
        }})
    );
    // Loose: admitted, with a warning naming it.
    assert_eq!(
        loose.0,
        json!({"uid": "uid-loose", "allowed": true, "status": {},
               "warnings": [format!("Composition \"loose-one\": admitted without validation (loose mode): {why}")]})
    );

    // Their log says they never started.
    for (uid, mode) in [("uid-strict", "strict"), ("uid-loose", "loose")] {
        wait_log(
            &server,
            "review not validated",
            uid,
            Duration::from_secs(10),
        )
        .await;
        let logged = server
            .logs()
            .into_iter()
            .find(|v| v["message"] == "review not validated" && v["uid"] == uid)
            .unwrap_or_else(|| panic!("no log for {uid}: {:#?}", server.logs()));
        assert_eq!(
            logged["problem"],
            format!(
                "validation could not start within 4.5s: every worker was busy ({mode} mode answer)"
            ),
            "{logged}"
        );
    }

    // The slow one at its own deadline, by the server's default mode (loose): admitted.
    let (slow, elapsed) = slow_task.await.expect("slow review");
    eprintln!("the slow review took {elapsed:?}");
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    assert_eq!(
        slow,
        json!({"uid": "uid-slow", "allowed": true, "status": {},
               "warnings": ["Composition \"large-regexps\": admitted without validation (loose mode): validation did not finish within 9s, the time left before the API server's webhook timeout"]})
    );
    wait_log(
        &server,
        "review not validated",
        "uid-slow",
        Duration::from_secs(10),
    )
    .await;
    let logged = server
        .logs()
        .into_iter()
        .find(|v| v["message"] == "review not validated" && v["uid"] == "uid-slow")
        .expect("logged");
    assert_eq!(
        logged["problem"],
        "validation did not finish within 9s (loose mode answer)"
    );
    assert_healthy(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_chunked_bodies_hold_only_what_they_have_sent() {
    // With the default 8 MiB per body and 256 MiB in all, 32 bodies without a length used to
    // reserve everything up front, and every other review waited for their deadlines.
    let mut server = start(&[]);
    let client = server.client();
    let mut slow = Vec::new();
    for _ in 0..32 {
        let tls = client.connect().await.expect("connect");
        slow.push(tokio::spawn(async move {
            let (_rd, mut wr) = tokio::io::split(tls);
            wr.write_all(&post_head("/validate?timeout=30s", None))
                .await?;
            // A byte every 200 ms, for at most 20 s.
            for _ in 0..100 {
                wr.write_all(b"1\r\n \r\n").await?;
                wr.flush().await?;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok::<_, std::io::Error>(())
        }));
    }
    wait_metric(&server, IN_FLIGHT, 32.0, Duration::from_secs(10)).await;
    // Validated: a review that found no memory for its body would be refused at its
    // deadline with a 503.
    let started = Instant::now();
    let response = client.review(&review("uid-beside-slow")).await;
    eprintln!(
        "review beside 32 slow chunked bodies answered in {:?}",
        started.elapsed()
    );
    assert_eq!(
        response,
        json!({"uid": "uid-beside-slow", "allowed": true, "status": {}})
    );
    for task in slow {
        task.abort();
    }
    assert_healthy(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_without_memory_echo_the_uid_and_version() {
    let mut server = start(&["--max-body-bytes", "65536", "--body-memory-bytes", "65536"]);
    let client = server.client();
    let padded = |uid: &str, size: usize| {
        let mut r = composition_review("v1beta1", uid, "CREATE", composition());
        let len = serde_json::to_vec(&r).expect("json").len();
        r["request"]["object"]["metadata"]["annotations"] =
            json!({"padding": "x".repeat(size - len - 30)});
        let body = serde_json::to_vec(&r).expect("json");
        assert!(
            body.len() <= size && body.len() > size - 100,
            "{}",
            body.len()
        );
        body
    };

    // One body takes nearly all the memory, and stalls.
    let big = padded("uid-big", 65_000);
    let tls = client.connect().await.expect("connect");
    let (mut big_rd, mut big_wr) = tokio::io::split(tls);
    big_wr
        .write_all(&post_head("/validate?timeout=10s", Some(big.len())))
        .await
        .expect("head");
    big_wr.write_all(&big[..64_000]).await.expect("body");
    big_wr.flush().await.expect("flush");
    wait_metric(&server, IN_FLIGHT, 1.0, Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Another gets none before its deadline: 503, with its uid, in its version.
    let small = padded("uid-busy", 8_000);
    let started = Instant::now();
    let ending = exchange(
        &client,
        post_head("/validate?timeout=5s", Some(small.len())),
        small.clone(),
    )
    .await;
    let elapsed = started.elapsed();
    eprintln!("no memory: answered in {elapsed:?}");
    let Ending::Answered { status: 200, body } = ending else {
        panic!("expected an answer: {ending:?}");
    };
    let v: Value = serde_json::from_slice(&body).expect("JSON");
    let message = format!(
        "the webhook is busy: no memory for a {}-byte body before the deadline; try again",
        small.len()
    );
    assert_eq!(v["apiVersion"], "admission.k8s.io/v1beta1", "{v}");
    assert_eq!(
        v["response"],
        json!({"uid": "uid-busy", "allowed": false, "status": {
            "status": "Failure", "code": 503, "reason": "ServiceUnavailable", "message": message}})
    );
    // The promise: before the API server's timeout.
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");

    // The first body, once whole, is validated.
    big_wr.write_all(&big[64_000..]).await.expect("rest");
    big_wr.flush().await.expect("flush");
    let ending = tokio::time::timeout(
        Duration::from_secs(10),
        webhook::raw::read_response(&mut big_rd),
    )
    .await
    .expect("an answer");
    let Ending::Answered { status: 200, body } = ending else {
        panic!("expected an answer: {ending:?}");
    };
    let v: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(
        (&v["response"]["uid"], &v["response"]["allowed"]),
        (&json!("uid-big"), &json!(true)),
        "{v}"
    );
    assert_healthy(&mut server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_errors_get_a_bounded_denial() {
    // 3,000 resources, each patching from a patchSet that does not exist.
    let mut c = composition();
    c["metadata"] = json!({"name": "many-errors"});
    let resources: Vec<Value> = (0..3000)
        .map(|i| {
            let mut r = c["spec"]["resources"][0].clone();
            r["name"] = json!(format!("r{i}"));
            r["patches"] = json!([{"type": "PatchSet", "patchSetName": "missing"}]);
            r
        })
        .collect();
    c["spec"]["resources"] = json!(resources);

    // How many errors there are, as the CLI reports them all.
    let dir = ScratchDir::new("many-errors");
    let file = dir.path("composition.json");
    std::fs::write(&file, serde_json::to_vec(&c).expect("json")).expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_composition-webhook"))
        .current_dir(project_dir())
        .args(["validate", "--output", "json", "--crds", "testdata/crds"])
        .args(["--crds", "testdata/example/definition.yaml"])
        .args(["--crossplane-version", "v1"])
        .arg(&file)
        .output()
        .expect("validate");
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let errors = report["compositions"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["severity"] == "error")
        .count();
    assert!(errors >= 3000, "{errors}");

    let mut server = start(&[]);
    let reply = server
        .client()
        .post_json(&composition_review("v1", "uid-many", "CREATE", c))
        .await;
    eprintln!("{errors} errors: a {}-byte answer", reply.body.len());
    assert!(reply.body.len() < 64 * 1024, "{}", reply.body.len());
    let response = reply.answer_json()["response"].clone();
    assert_eq!(response["allowed"], false);
    let status = &response["status"];
    assert_eq!(
        (&status["code"], &status["reason"]),
        (&json!(422), &json!("Invalid"))
    );
    let causes = status["details"]["causes"].as_array().expect("causes");
    let tail = format!(
        "and {} more errors; run `composition-webhook validate` on the Composition to see all",
        errors + 1 - causes.len()
    );
    assert_eq!(causes.len(), 101);
    assert_eq!(causes[100], json!({"message": tail}));
    let message = status["message"].as_str().expect("message");
    assert!(
        message.starts_with(
            "Composition.apiextensions.crossplane.io \"many-errors\" is invalid: [spec.resources[0].patches[0].patchSetName: "
        ),
        "{message}"
    );
    assert!(message.ends_with(&format!("{tail}]")), "{message}");
    assert_healthy(&mut server).await;
}

/// The nice value of each of `pid`'s threads, by thread name (Linux's `/proc`).
#[cfg(target_os = "linux")]
fn nice_by_thread(pid: u32) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the server's threads") {
        let dir = task.expect("a thread").path();
        let (Ok(name), Ok(stat)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("stat")),
        ) else {
            continue; // ended meanwhile
        };
        // After the name in parentheses: state is field 3, nice field 19.
        let rest = &stat[stat.rfind(')').expect("stat's name") + 2..];
        let nice = rest
            .split(' ')
            .nth(16)
            .expect("nice")
            .parse()
            .expect("a number");
        out.push((name.trim().to_string(), nice));
    }
    out
}

/// The server's threads' nice values, and its main thread's.
#[cfg(target_os = "linux")]
#[derive(Debug)]
struct Threads {
    own: i32,
    all: Vec<(String, i32)>,
}

#[cfg(target_os = "linux")]
impl Threads {
    fn of(pid: u32) -> Threads {
        let all = nice_by_thread(pid);
        let own = all
            .iter()
            .find(|(name, _)| name.starts_with("composition-w"))
            .map(|(_, nice)| *nice)
            .unwrap_or_else(|| panic!("the main thread: {all:?}"));
        Threads { own, all }
    }

    /// The nice values of the threads whose names start with `prefix`.
    fn nice_of(&self, prefix: &str) -> Vec<i32> {
        self.all
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .map(|(_, nice)| *nice)
            .collect()
    }
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_run_below_the_threads_that_answer() {
    // `auto` (the default) is 0 here: the server shares its cgroup with the tests.
    for (extra, increment) in [
        (vec!["--review-nice", "19"], 19),
        (vec!["--review-nice", "0"], 0),
        (vec![], 0),
    ] {
        let mut args = vec!["--workers", "2"];
        args.extend(extra);
        let mut server = start(&args);
        let review = composition_review("v1", "uid-nice", "CREATE", composition());
        let (answer, _) = timed_review(&server.client(), &review, "10s").await;
        assert_eq!(answer["allowed"], true, "{answer}");
        let threads = Threads::of(server.pid());
        let expected = (threads.own + increment).min(19);
        assert_eq!(threads.nice_of("review-"), vec![expected; 2], "{threads:?}");
        let answering = threads.nice_of("tokio-rt-worker");
        assert!(
            !answering.is_empty() && answering.iter().all(|&n| n == threads.own),
            "{threads:?}"
        );
        let auto = server
            .logs()
            .into_iter()
            .find(|v| v["message"] == "--review-nice auto");
        if args.len() == 2 {
            let auto = auto.unwrap_or_else(|| panic!("{:#?}", server.logs()));
            assert_eq!(auto["review_nice"], 0, "{auto}");
            let reason = auto["reason"].as_str().unwrap_or_default();
            assert!(
                reason.starts_with("the process shares its CPU cgroup (/sys/fs/cgroup/")
                    && reason.ends_with(") with other processes"),
                "{auto}"
            );
        } else {
            assert_eq!(auto, None);
        }
        assert_healthy(&mut server).await;
    }
}

/// A CPU cgroup made for one process, removed on drop: cgroup v1's `cpu` controller, else
/// cgroup v2's root. `None` where neither can be written (not root, or no cgroup mounted).
#[cfg(target_os = "linux")]
struct OwnCgroup(std::path::PathBuf);

#[cfg(target_os = "linux")]
impl OwnCgroup {
    fn create() -> Option<OwnCgroup> {
        let name = format!("cw-test-{}", std::process::id());
        ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup"]
            .into_iter()
            .map(std::path::Path::new)
            .filter(|root| root.join("cgroup.procs").exists())
            .find_map(|root| {
                let dir = root.join(&name);
                std::fs::create_dir(&dir).ok()?;
                Some(OwnCgroup(dir))
            })
    }
}

#[cfg(target_os = "linux")]
impl Drop for OwnCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// `--review-nice auto` in a CPU cgroup of the server's own, as in a pod: 19 levels lower.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_nice_is_19_in_a_cgroup_of_the_servers_own() {
    let Some(cgroup) = OwnCgroup::create() else {
        eprintln!("skipped: no CPU cgroup can be made here (root, and a cgroup mount, needed)");
        return;
    };
    // The shell moves itself into the cgroup, then becomes the server (same process).
    let mut program = std::process::Command::new("sh");
    program.args([
        "-c",
        "echo $$ > \"$0\" && exec \"$@\"",
        &cgroup.0.join("cgroup.procs").display().to_string(),
        env!("CARGO_BIN_EXE_composition-webhook"),
    ]);
    let crds = webhook::crds();
    let refs: Vec<&std::path::Path> = crds.iter().map(std::path::PathBuf::as_path).collect();
    let mut server = Server::start_self_signed(
        webhook::serve_command_of(program, &refs),
        &["--workers", "2"],
    );
    let review = composition_review("v1", "uid-own", "CREATE", composition());
    let (answer, _) = timed_review(&server.client(), &review, "10s").await;
    assert_eq!(answer["allowed"], true, "{answer}");
    let auto = server
        .logs()
        .into_iter()
        .find(|v| v["message"] == "--review-nice auto")
        .unwrap_or_else(|| panic!("{:#?}", server.logs()));
    assert_eq!(auto["review_nice"], 19, "{auto}");
    assert_eq!(
        auto["reason"],
        format!(
            "the process has a CPU cgroup of its own ({})",
            cgroup.0.display()
        )
    );
    let threads = Threads::of(server.pid());
    assert_eq!(
        threads.nice_of("review-"),
        vec![(threads.own + 19).min(19); 2],
        "{threads:?}"
    );
    assert_healthy(&mut server).await;
    drop(server);
    drop(cgroup);
}

/// A request body that never arrives.
struct NeverEnds;

impl hyper::body::Body for NeverEnds {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        std::task::Poll::Pending
    }
}

/// A TLS connection to the admission port from `source` (any loopback address), as ALPN
/// `alpn` says.
async fn tls_from(
    server: &Server,
    source: &str,
    alpn: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{source}:0").parse().expect("address"))
        .expect("bind");
    let tcp = socket.connect(server.admission).await.expect("connect");
    webhook::connector(&server.ca_pem, rustls::DEFAULT_VERSIONS, &[alpn])
        .connect(
            rustls_pki_types::ServerName::try_from("localhost").expect("name"),
            tcp,
        )
        .await
        .expect("handshake")
}

/// `review` POSTed over HTTP/1.1 from `source` (a loopback address); the response.
async fn post_from(
    server: &Server,
    source: &str,
    review: &Value,
) -> hyper::Response<hyper::body::Incoming> {
    let tls = tls_from(server, source, b"http/1.1").await;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .expect("http/1.1");
    tokio::spawn(conn);
    sender
        .send_request(webhook::raw::review_request(
            "/validate?timeout=10s",
            review,
        ))
        .await
        .expect("response")
}

/// An HTTP/2 connection from `source` holding `n` reviews whose bodies never arrive; the
/// statuses of those answered at once (the rest wait for their bodies).
async fn hold_streams(
    server: &Server,
    source: &str,
    n: usize,
) -> (Vec<u16>, Vec<tokio::task::JoinHandle<()>>) {
    let refusals = ["this client has 20 reviews in flight, the most one address may; try again\n"];
    hold_streams_refused_with(server, source, 1, n, &refusals).await
}

/// [`hold_streams`] on `connections` connections, `n` streams each, each refusal one of
/// `refusals`.
async fn hold_streams_refused_with(
    server: &Server,
    source: &str,
    connections: usize,
    n: usize,
    refusals: &[&str],
) -> (Vec<u16>, Vec<tokio::task::JoinHandle<()>>) {
    let mut tasks = Vec::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..connections {
        let tls = tls_from(server, source, b"h2").await;
        let (sender, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tls),
        )
        .await
        .expect("h2 handshake");
        tasks.push(tokio::spawn(async move {
            let _ = conn.await;
        }));
        streams(&sender, &tx, n, &mut tasks);
    }
    drop(tx);
    // Those refused are answered at once; the others wait for their bodies.
    let mut answered = Vec::new();
    while let Ok(Some((status, text))) =
        tokio::time::timeout(Duration::from_secs(3), rx.recv()).await
    {
        assert!(
            status == 429 && refusals.contains(&text.as_str()),
            "{status} {text}"
        );
        answered.push(status);
    }
    (answered, tasks)
}

/// `n` requests on `sender` whose bodies never come, each answer sent on `tx`.
fn streams(
    sender: &hyper::client::conn::http2::SendRequest<NeverEnds>,
    tx: &tokio::sync::mpsc::UnboundedSender<(u16, String)>,
    n: usize,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) {
    for _ in 0..n {
        let mut sender = sender.clone();
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            let request = hyper::Request::builder()
                .method("POST")
                .uri("https://localhost/validate?timeout=30s")
                .header("content-type", "application/json")
                .header("content-length", "100000")
                .body(NeverEnds)
                .expect("request");
            if let Ok(response) = sender.send_request(request).await {
                let status = response.status().as_u16();
                let text = http_body_util::BodyExt::collect(response.into_body())
                    .await
                    .map(|b| String::from_utf8_lossy(&b.to_bytes()).to_string())
                    .unwrap_or_default();
                let _ = tx.send((status, text));
            }
        }));
    }
}

/// Reviews in flight are bounded per client address and in all: streams whose bodies never
/// come take at most a client's share; past it they are refused at once (429), and a review
/// from another address is validated beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_in_flight_are_bounded_per_client_and_in_all() {
    let server = start(&[
        "--max-reviews-in-flight",
        "30",
        "--max-reviews-in-flight-per-client",
        "20",
    ]);
    let (refused, held) = hold_streams(&server, "127.0.0.1", 25).await;
    assert_eq!(refused, [429; 5]);
    wait_metric(&server, IN_FLIGHT, 20.0, Duration::from_secs(10)).await;

    // Another address has its own share.
    let response = post_from(&server, "127.0.0.2", &review("uid-other-address")).await;
    let answer = webhook::raw::review_answer(response, "uid-other-address").await;
    assert_eq!(answer["allowed"], true, "{answer}");

    // A third address takes the rest of the places; then every address is refused.
    let (refused, held_too) = hold_streams(&server, "127.0.0.3", 10).await;
    assert!(refused.is_empty());
    wait_metric(&server, IN_FLIGHT, 30.0, Duration::from_secs(10)).await;
    let response = post_from(&server, "127.0.0.2", &review("uid-no-place")).await;
    assert_eq!(response.status(), 429);
    assert_eq!(
        response.headers().get("retry-after").map(|v| v.as_bytes()),
        Some(&b"1"[..])
    );
    let text = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("body")
        .to_bytes();
    assert_eq!(
        String::from_utf8_lossy(&text),
        "the webhook has 30 reviews in flight, its most; try again\n"
    );
    let (_, metrics) = server.ops_get("/metrics").await;
    for line in [
        r#"composition_webhook_reviews_refused_total{reason="client_in_flight"} 5"#,
        r#"composition_webhook_reviews_refused_total{reason="in_flight"} 1"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line} in\n{metrics}"
        );
    }
    for task in held.into_iter().chain(held_too) {
        task.abort();
    }
}

/// The probe's 130,000 header-only HTTP/2 streams (520 connections x 250) put resident
/// memory past deploy/'s 640 Mi: now at most 2,048 are in flight at the defaults (1,024 per
/// address), the rest refused at once. Here 24 connections x 250 streams from three
/// addresses: 2,048 held, 3,952 refused, memory a few MiB above idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_only_streams_past_the_bound_cost_no_memory() {
    let server = start(&[]);
    let idle = server.rss_kib();
    let refusals = [
        "this client has 1024 reviews in flight, the most one address may; try again\n",
        "the webhook has 2048 reviews in flight, its most; try again\n",
    ];
    let mut refused = 0;
    let mut tasks = Vec::new();
    for source in ["127.0.0.1", "127.0.0.2", "127.0.0.3"] {
        let (r, t) = hold_streams_refused_with(&server, source, 8, 250, &refusals).await;
        refused += r.len();
        tasks.extend(t);
    }
    wait_metric(&server, IN_FLIGHT, 2048.0, Duration::from_secs(30)).await;
    assert_eq!(refused, 6000 - 2048);
    let held = server.rss_kib();
    eprintln!("idle {idle} KiB, 2,048 reviews held {held} KiB");
    assert!(
        held < idle + 64 * 1024,
        "idle {} MiB, with 2,048 reviews held {} MiB",
        idle / 1024,
        held / 1024
    );
    // Still answering, once a place is free.
    for task in tasks {
        task.abort();
    }
    wait_metric(&server, IN_FLIGHT, 0.0, Duration::from_secs(30)).await;
    let response = post_from(&server, "127.0.0.2", &review("uid-after")).await;
    let answer = webhook::raw::review_answer(response, "uid-after").await;
    assert_eq!(answer["allowed"], true, "{answer}");
}

/// Bodies held just under the limit from one address take at most its share of the body
/// memory (half): a review from another address is validated beside them, where it got
/// a 503 when they could hold all of it (the probe's 8 clients of 8 MiB - 1 byte each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_held_from_one_address_leave_memory_for_others() {
    let server = start(&["--max-body-bytes", "65536", "--body-memory-bytes", "262144"]);
    // Four bodies of 64,000 bytes from 127.0.0.1, each stalled 500 bytes short.
    let body = vec![b' '; 64_000];
    let mut held = Vec::new();
    for _ in 0..4 {
        let tls = tls_from(&server, "127.0.0.1", b"http/1.1").await;
        let (rd, mut wr) = tokio::io::split(tls);
        wr.write_all(&post_head("/validate?timeout=30s", Some(body.len())))
            .await
            .expect("head");
        wr.write_all(&body[..63_500]).await.expect("body");
        wr.flush().await.expect("flush");
        held.push((rd, wr));
    }
    wait_metric(&server, IN_FLIGHT, 4.0, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // A review of the example from 127.0.0.2, padded to 60 KB: validated.
    let mut r = composition_review("v1", "uid-other-client", "CREATE", composition());
    let len = serde_json::to_vec(&r).expect("json").len();
    r["request"]["object"]["metadata"]["annotations"] =
        json!({"padding": "x".repeat(60_000 - len)});
    let response = post_from(&server, "127.0.0.2", &r).await;
    let answer = webhook::raw::review_answer(response, "uid-other-client").await;
    assert_eq!(answer["allowed"], true, "{answer}");
    drop(held);
}
