//! The admission port: TCP, a TLS handshake, then HTTP/1.1 or HTTP/2 (told apart by the first
//! bytes; ALPN offers both), through the accept loop of [`super::connections`] (connection
//! cap, timeouts, room made by closing idle connections, graceful drain).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

pub use super::connections::ConnectionLimits;
use super::connections::{self, Port};

/// Serves `router` over TLS on `listener` until `shutdown` turns true, then drains
/// connections for at most `drain`.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    limits: ConnectionLimits,
    shutdown: watch::Receiver<bool>,
    drain: Duration,
) {
    let port = Port {
        name: "admission",
        requests: "reviews",
    };
    let acceptor = TlsAcceptor::from(tls);
    connections::serve(port, listener, acceptor, router, limits, shutdown, drain).await;
}
