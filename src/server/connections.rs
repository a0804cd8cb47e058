//! The accept loop of both ports: the admission port (TLS) and the operations port (plain
//! TCP). A port serves at most `max_connections` at once and bounds every phase of a
//! connection in time:
//!
//! - the handshake (TLS) within the handshake timeout;
//! - each request head within the header-read timeout of its first byte (the first request
//!   within that of the handshake: a connection on which nothing is sent does not stay);
//! - no request in flight (HTTP/1.1 between requests, HTTP/2 with no open stream; PINGs do
//!   not count) for at most the idle timeout, then a graceful close.
//!
//! When every slot is taken, a new connection does not wait behind idle ones: of those with
//! no request in flight, the one waiting longest (in its handshake since its accept, idle
//! since its last request) is closed to make room (gracefully: GOAWAY for HTTP/2, a close
//! between requests for HTTP/1.1). Only when
//! every connection has a request in flight does a new one wait, in the listen backlog.
//! On shutdown, no new connections, and the open ones are drained for at most the drain
//! timeout.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::{Instant, Sleep};

/// Connection limits of a port.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Time for a client to finish the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time for a client to send a request's head, from its first byte.
    pub header_read_timeout: Duration,
    /// Time a connection may stay open with no request in flight.
    pub idle_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
}

impl ConnectionLimits {
    /// Connections closed to make room that may still be finishing (an HTTP/2 client has up
    /// to [`CLOSE_GRACE`] to answer the GOAWAY's PING) on top of `max_connections`.
    pub fn closing_allowance(&self) -> usize {
        (self.max_connections / 4).max(4)
    }

    /// The most sockets the port holds at once, its listener included.
    pub fn most_sockets(&self) -> usize {
        self.max_connections + self.closing_allowance() + 1
    }
}

/// How long a connection being closed gracefully may take before it is dropped, unless a
/// request is still in flight on it.
pub const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// How often a new connection waiting for a slot looks again for one to close (a
/// connection going idle frees none by itself).
const RECHECK: Duration = Duration::from_millis(50);

/// The step between accepting a TCP connection and serving HTTP on it.
pub trait Handshake: Clone + Send + Sync + 'static {
    /// The stream HTTP is served on.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// Performs the handshake.
    fn handshake(&self, tcp: TcpStream) -> impl Future<Output = io::Result<Self::Io>> + Send;
}

/// Plain TCP: no handshake.
#[derive(Debug, Clone, Copy)]
pub struct Plain;

impl Handshake for Plain {
    type Io = TcpStream;

    fn handshake(&self, tcp: TcpStream) -> impl Future<Output = io::Result<TcpStream>> + Send {
        std::future::ready(Ok(tcp))
    }
}

impl Handshake for tokio_rustls::TlsAcceptor {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;

    fn handshake(&self, tcp: TcpStream) -> impl Future<Output = io::Result<Self::Io>> + Send {
        self.accept(tcp)
    }
}

/// How a port is called in logs.
#[derive(Debug, Clone, Copy)]
pub struct Port {
    /// `admission`, `operations`.
    pub name: &'static str,
    /// What its requests are (`reviews`).
    pub requests: &'static str,
}

/// Serves `router` on `listener` until `shutdown` turns true, then drains connections for at
/// most `drain`.
pub async fn serve<H: Handshake>(
    port: Port,
    listener: TcpListener,
    handshake: H,
    router: Router,
    limits: ConnectionLimits,
    mut shutdown: watch::Receiver<bool>,
    drain: Duration,
) {
    let registry = Arc::new(Registry::new(
        limits.max_connections.max(1),
        limits.closing_allowance(),
    ));
    let mut count = registry.count.subscribe();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // Its timer runs from the end of the previous response, so it would close idle
        // keep-alive connections: heads are timed from their first byte instead.
        .header_read_timeout(None)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Duration::from_secs(30))
        .max_concurrent_streams(250);
    let builder = Arc::new(builder);
    'accept: loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: pause instead of spinning.
                    tracing::warn!(port = port.name, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stopped(&mut shutdown) => break,
        };
        let slot = loop {
            if let Some(slot) = registry.admit() {
                break slot;
            }
            // Every connection has a request in flight, or too many are still closing.
            tokio::select! {
                _ = count.changed() => {}
                _ = tokio::time::sleep(RECHECK) => {}
                _ = stopped(&mut shutdown) => break 'accept,
            }
        };
        let _ = tcp.set_nodelay(true);
        tokio::spawn(connection(
            tcp,
            peer,
            handshake.clone(),
            builder.clone(),
            router.clone(),
            limits,
            slot,
            shutdown.clone(),
        ));
    }
    drop(listener);
    tracing::info!(
        port = port.name,
        "{} port closed; finishing in-flight {}",
        port.name,
        port.requests
    );
    tokio::select! {
        _ = count.wait_for(|n| *n == 0) => tracing::info!(port = port.name, "all connections drained"),
        _ = tokio::time::sleep(drain) => tracing::warn!(port = port.name, ?drain, "connections still open after the drain timeout; closing them"),
    }
}

/// One connection, from its handshake to its close.
#[allow(clippy::too_many_arguments)]
async fn connection<H: Handshake>(
    tcp: TcpStream,
    peer: std::net::SocketAddr,
    handshake: H,
    builder: Arc<auto::Builder<TokioExecutor>>,
    router: Router,
    limits: ConnectionLimits,
    slot: Slot,
    mut shutdown: watch::Receiver<bool>,
) {
    let conn = slot.conn.clone();
    let io = tokio::select! {
        done = tokio::time::timeout(limits.handshake_timeout, handshake.handshake(tcp)) => match done {
            Ok(Ok(io)) => io,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "handshake timed out");
                return;
            }
        },
        _ = conn.close.notified() => {
            tracing::debug!(%peer, "closed before its handshake, to make room");
            return;
        }
        _ = stopped(&mut shutdown) => return,
    };
    conn.handshaken.store(true, Ordering::Release);
    conn.set_idle();
    let io = Watched::new(io, conn.clone(), limits.header_read_timeout);
    let service = Tracked {
        inner: TowerToHyperService::new(router),
        conn: conn.clone(),
        peer: super::in_flight::Peer(peer.ip()),
    };
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    // Once closing: when to drop the connection if it has not finished by then.
    let mut closing: Option<Instant> = None;
    let mut draining = false;
    loop {
        let idle_end = conn.idle_end(limits.idle_timeout);
        // An answer the client does not take (an HTTP/2 flow-control window left at zero,
        // a socket not read) would keep its request in flight, and the slot, forever.
        let write_end = conn.write_deadline(limits.header_read_timeout);
        let wake = closing.map_or(idle_end, |c| c.min(idle_end));
        let wake = write_end.map_or(wake, |w| w.min(wake));
        tokio::select! {
            ended = connection.as_mut() => {
                if let Err(e) = ended {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            _ = tokio::time::sleep_until(wake) => {
                let now = Instant::now();
                // Looked at again: the answer may have been written while this slept.
                if conn
                    .write_deadline(limits.header_read_timeout)
                    .is_some_and(|w| now >= w)
                {
                    tracing::warn!(%peer, timeout = ?limits.header_read_timeout, "an answer was not taken by the client in time; connection closed");
                    return;
                }
                match closing {
                    Some(at) if now >= at => {
                        if conn.in_flight.load(Ordering::Acquire) == 0 {
                            tracing::debug!(%peer, "connection did not close in time; dropped");
                            return;
                        }
                        // A request in flight ends by its own deadline.
                        closing = Some(now + CLOSE_GRACE);
                    }
                    None if now >= conn.idle_end(limits.idle_timeout) => {
                        tracing::debug!(%peer, "idle connection closed");
                        connection.as_mut().graceful_shutdown();
                        closing = Some(now + CLOSE_GRACE);
                    }
                    _ => {}
                }
            }
            _ = conn.answered.notified() => {}
            _ = conn.close.notified(), if closing.is_none() => {
                tracing::debug!(%peer, "idle connection closed to make room");
                connection.as_mut().graceful_shutdown();
                closing = Some(Instant::now() + CLOSE_GRACE);
            }
            _ = stopped(&mut shutdown), if !draining => {
                draining = true;
                connection.as_mut().graceful_shutdown();
                if closing.is_none() && conn.in_flight.load(Ordering::Acquire) == 0 {
                    closing = Some(Instant::now() + CLOSE_GRACE);
                }
            }
        }
    }
}

/// What the accept loop and the eviction need to know of a connection.
struct Conn {
    /// Set once the handshake is done.
    handshaken: AtomicBool,
    /// When it was accepted.
    accepted: Instant,
    /// Requests in flight (their responses not sent yet).
    in_flight: AtomicUsize,
    /// Requests started so far.
    started: AtomicU64,
    /// When the last request ended (or the handshake did), in ms since `epoch`.
    idle_since: AtomicU64,
    /// The time idle_since counts from.
    epoch: Instant,
    /// Asks the connection to close, to make room.
    close: Notify,
    /// Answers ready but not written in full yet, by request number: since when.
    unsent: Mutex<HashMap<u64, Instant>>,
    /// Wakes the connection's task when an answer is ready, to time its writing.
    answered: Notify,
}

impl Conn {
    fn set_idle(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.idle_since.store(ms, Ordering::Release);
    }

    fn idle_since(&self) -> Instant {
        self.epoch + Duration::from_millis(self.idle_since.load(Ordering::Acquire))
    }

    /// When the answer waiting longest to be written will have waited `timeout`.
    fn write_deadline(&self, timeout: Duration) -> Option<Instant> {
        lock(&self.unsent)
            .values()
            .min()
            .map(|since| *since + timeout)
    }

    /// When the connection will have been idle for `timeout`: from its last request, or
    /// `timeout` from now while a request is in flight.
    fn idle_end(&self, timeout: Duration) -> Instant {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            Instant::now() + timeout
        } else {
            self.idle_since() + timeout
        }
    }
}

/// The connections of a port.
struct Registry {
    max: usize,
    /// Connections asked to close that may still be open, on top of `max`.
    allowance: usize,
    inner: Mutex<Inner>,
    /// Connections held (open or closing), for the accept loop and the drain.
    count: watch::Sender<usize>,
    epoch: Instant,
}

#[derive(Default)]
struct Inner {
    next: u64,
    open: HashMap<u64, Arc<Conn>>,
    /// Connections asked to close to make room, not ended yet.
    closing: usize,
}

impl Registry {
    fn new(max: usize, allowance: usize) -> Self {
        Registry {
            max,
            allowance,
            inner: Mutex::default(),
            count: watch::Sender::new(0),
            epoch: Instant::now(),
        }
    }

    /// A slot for a new connection; when all are taken, the connection longest in its
    /// handshake, or else the longest idle, is asked to close to make room. `None` when no
    /// connection can be closed (each has a request in flight) or too many are still
    /// closing.
    fn admit(self: &Arc<Self>) -> Option<Slot> {
        let mut inner = lock(&self.inner);
        if inner.open.len() >= self.max {
            if inner.closing >= self.allowance {
                return None;
            }
            let victim = Self::victim(&inner.open)?;
            if let Some(conn) = inner.open.remove(&victim) {
                inner.closing += 1;
                conn.close.notify_one();
            }
        }
        let id = inner.next;
        inner.next += 1;
        let conn = Arc::new(Conn {
            handshaken: AtomicBool::new(false),
            accepted: Instant::now(),
            in_flight: AtomicUsize::new(0),
            started: AtomicU64::new(0),
            idle_since: AtomicU64::new(0),
            epoch: self.epoch,
            close: Notify::new(),
            unsent: Mutex::default(),
            answered: Notify::new(),
        });
        conn.set_idle();
        inner.open.insert(id, conn.clone());
        self.count.send_replace(inner.open.len() + inner.closing);
        Some(Slot {
            registry: self.clone(),
            id,
            conn,
        })
    }

    /// The connection to close to make room: of those with no request in flight, the one
    /// that has waited longest, counting a handshake's wait from its accept and an idle
    /// connection's (a partial request head included) from its last request or handshake.
    /// A new handshake is the newest of all: a flood of connections that send half a head
    /// makes room from its own oldest, not from the handshakes arriving beside it.
    fn victim(open: &HashMap<u64, Arc<Conn>>) -> Option<u64> {
        open.iter()
            .filter(|(_, c)| c.in_flight.load(Ordering::Acquire) == 0)
            .min_by_key(|(_, c)| {
                if c.handshaken.load(Ordering::Acquire) {
                    c.idle_since()
                } else {
                    c.accepted
                }
            })
            .map(|(id, _)| *id)
    }

    fn release(&self, id: u64) {
        let mut inner = lock(&self.inner);
        if inner.open.remove(&id).is_none() {
            inner.closing = inner.closing.saturating_sub(1);
        }
        self.count.send_replace(inner.open.len() + inner.closing);
    }
}

/// A connection's place in the registry, given back when the connection ends.
struct Slot {
    registry: Arc<Registry>,
    id: u64,
    conn: Arc<Conn>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.registry.release(self.id);
    }
}

/// The router, counting the requests in flight on the connection: from the call until the
/// response body has been sent (or dropped).
#[derive(Clone)]
struct Tracked {
    inner: TowerToHyperService<Router>,
    conn: Arc<Conn>,
    /// The connection's peer, for the handlers (an extension of each request).
    peer: super::in_flight::Peer,
}

impl hyper::service::Service<hyper::Request<Incoming>> for Tracked {
    type Response = hyper::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, mut request: hyper::Request<Incoming>) -> Self::Future {
        request.extensions_mut().insert(self.peer);
        let busy = Busy::start(self.conn.clone());
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            busy.answered();
            Ok(response.map(|body| Body::new(Guarded { body, _busy: busy })))
        })
    }
}

/// A request in flight.
struct Busy {
    conn: Arc<Conn>,
    /// Its number on the connection.
    id: u64,
}

impl Busy {
    fn start(conn: Arc<Conn>) -> Self {
        let id = conn.started.fetch_add(1, Ordering::AcqRel);
        conn.in_flight.fetch_add(1, Ordering::AcqRel);
        Busy { conn, id }
    }

    /// Its answer is ready: from now on it is being written.
    fn answered(&self) {
        lock(&self.conn.unsent).insert(self.id, Instant::now());
        self.conn.answered.notify_one();
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        lock(&self.conn.unsent).remove(&self.id);
        if self.conn.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.conn.set_idle();
        }
    }
}

/// A lock, kept usable after a panic elsewhere (the counts it guards stay meaningful).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A response body that keeps its request in flight until it is sent.
struct Guarded {
    body: Body,
    _busy: Busy,
}

impl HttpBody for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The HTTP/2 connection preface.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A stream whose reads fail once a request head takes longer than the header-read timeout
/// from its first byte (HTTP/1.1), or the HTTP/2 preface longer than that from the
/// handshake. Telling HTTP/1.1 from HTTP/2 waits for the first bytes with no time limit of
/// its own, and hyper's HTTP/1.1 header-read timer also runs between requests; this times
/// what a client sends, not what it does not.
struct Watched<T> {
    inner: T,
    conn: Arc<Conn>,
    timeout: Duration,
    /// Bytes of the HTTP/2 preface matched so far; `None` once the protocol is known.
    preface: Option<usize>,
    /// Whether the connection speaks HTTP/2 (no heads to time).
    http2: bool,
    /// The head being timed: the requests started when its first byte came.
    head: Option<u64>,
    deadline: Pin<Box<Sleep>>,
}

impl<T> Watched<T> {
    fn new(inner: T, conn: Arc<Conn>, timeout: Duration) -> Self {
        // The first request is timed from the handshake.
        let head = Some(conn.started.load(Ordering::Acquire));
        Watched {
            inner,
            conn,
            timeout,
            preface: Some(0),
            http2: false,
            head,
            deadline: Box::pin(tokio::time::sleep(timeout)),
        }
    }

    /// Notes bytes read.
    fn read(&mut self, bytes: &[u8], started: u64) {
        if let Some(matched) = self.preface {
            let n = bytes.len().min(H2_PREFACE.len() - matched);
            if bytes[..n] != H2_PREFACE[matched..matched + n] {
                self.preface = None;
            } else if matched + n == H2_PREFACE.len() {
                self.preface = None;
                self.http2 = true;
                self.head = None;
            } else {
                self.preface = Some(matched + n);
            }
        }
        if self.http2 || bytes.is_empty() || self.head.is_some() {
            return;
        }
        if self.conn.in_flight.load(Ordering::Acquire) == 0 {
            // The first byte of the next request's head.
            self.head = Some(started);
            let at = Instant::now() + self.timeout;
            self.deadline.as_mut().reset(at);
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let started = this.conn.started.load(Ordering::Acquire);
        if this.head.is_some_and(|h| h != started) {
            // A request started: its head is in.
            this.head = None;
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.read(&buf.filled()[before..], started);
                Poll::Ready(Ok(()))
            }
            Poll::Pending if this.head.is_some() && this.deadline.as_mut().poll(cx).is_ready() => {
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no request head within the header-read timeout",
                )))
            }
            other => other,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Completes once `shutdown` is true (or its sender is gone).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(max: usize) -> Arc<Registry> {
        Arc::new(Registry::new(max, 2))
    }

    #[tokio::test]
    async fn room_is_made_by_closing_the_longest_waiting_or_idle() {
        let r = registry(3);
        let a = r.admit().expect("a");
        let b = r.admit().expect("b");
        let c = r.admit().expect("c");
        for s in [&a, &b, &c] {
            s.conn.handshaken.store(true, Ordering::Release);
        }
        // a busy, b idle since later than c.
        let _busy = Busy::start(a.conn.clone());
        tokio::time::sleep(Duration::from_millis(5)).await;
        b.conn.set_idle();
        let d = r.admit().expect("c closed to make room");
        assert_eq!(*r.count.borrow(), 4, "c still counts until it ends");
        drop(c);
        assert_eq!(*r.count.borrow(), 3);
        // d is in its handshake, since after b went idle: b goes first (a flood of half
        // heads makes room from its own oldest, not from the handshakes beside it).
        tokio::time::sleep(Duration::from_millis(5)).await;
        let e = r.admit().expect("b closed to make room");
        assert!(!r.inner.lock().unwrap().open.contains_key(&b.id));
        assert!(r.inner.lock().unwrap().open.contains_key(&d.id));
        d.conn.handshaken.store(true, Ordering::Release);
        e.conn.handshaken.store(true, Ordering::Release);
        // d has been idle since before e; then the closing allowance (2) is used up.
        let f = r.admit().expect("d closed to make room");
        assert!(!r.inner.lock().unwrap().open.contains_key(&d.id));
        f.conn.handshaken.store(true, Ordering::Release);
        let _busy_e = Busy::start(e.conn.clone());
        let _busy_f = Busy::start(f.conn.clone());
        assert!(r.admit().is_none(), "the closing allowance is used up");
        drop((b, d));
        assert_eq!(*r.count.borrow(), 3);
        assert!(
            r.admit().is_none(),
            "every connection has a request in flight"
        );
        drop(_busy_e);
        let g = r.admit().expect("e idle now");
        drop((a, e, f, g));
        assert_eq!(*r.count.borrow(), 0);
    }
}
