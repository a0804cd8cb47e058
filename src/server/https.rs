//! The admission port's accept loop: TCP, a TLS handshake with a time limit, then HTTP/1.1
//! or HTTP/2 (told apart by the first bytes; ALPN offers both) with a time limit on the
//! request head, at most `max_connections` at once, and a graceful drain on shutdown (no new
//! connections, in-flight reviews finished).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::time::Sleep;
use tokio_rustls::TlsAcceptor;

/// Connection limits of the admission port.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Time for a client to finish the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time for a client to send a request's headers.
    pub header_read_timeout: Duration,
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
}

/// Serves `router` over TLS on `listener` until `shutdown` turns true, then drains
/// connections for at most `drain`.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    limits: ConnectionLimits,
    mut shutdown: watch::Receiver<bool>,
    drain: Duration,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Duration::from_secs(30))
        .max_concurrent_streams(250);
    let builder = Arc::new(builder);
    loop {
        let slot = tokio::select! {
            s = slots.clone().acquire_owned() => s,
            _ = stopped(&mut shutdown) => break,
        };
        let Ok(slot) = slot else { break };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: pause instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stopped(&mut shutdown) => break,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let builder = builder.clone();
        let service = TowerToHyperService::new(router.clone());
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _slot = slot;
            let tls =
                match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
            let tls = FirstBytes::new(tls, limits.header_read_timeout);
            let connection = builder.serve_connection(TokioIo::new(tls), service);
            if let Err(e) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tracing::info!("admission port closed; finishing in-flight reviews");
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("all connections drained"),
        _ = tokio::time::sleep(drain) => tracing::warn!(?drain, "connections still open after the drain timeout; closing them"),
    }
}

/// Bytes a client must send within the header-read timeout: the length of the HTTP/2
/// preface, shorter than any HTTP/1.1 request head.
const FIRST_BYTES: usize = 24;

/// A stream whose reads fail once `deadline` passes before the client has sent its first
/// [`FIRST_BYTES`]. Telling HTTP/1.1 from HTTP/2 waits for those bytes with no time limit of
/// its own, and the HTTP/1.1 header-read timeout only starts after it, so without this a
/// connection on which nothing is sent would hold a connection slot forever.
struct FirstBytes<T> {
    inner: T,
    missing: usize,
    deadline: Pin<Box<Sleep>>,
}

impl<T> FirstBytes<T> {
    fn new(inner: T, timeout: Duration) -> Self {
        FirstBytes {
            inner,
            missing: FIRST_BYTES,
            deadline: Box::pin(tokio::time::sleep(timeout)),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for FirstBytes<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.missing == 0 {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.missing = this.missing.saturating_sub(buf.filled().len() - before);
                Poll::Ready(Ok(()))
            }
            Poll::Pending if this.deadline.as_mut().poll(cx).is_ready() => {
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no request within the header-read timeout",
                )))
            }
            other => other,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for FirstBytes<T> {
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
