//! The operations port (plain HTTP, for the kubelet and Prometheus): `/livez`, `/readyz` and
//! `/metrics`.
//!
//! `/readyz` is ready only while schemas are available (the file catalog loaded, or later the
//! cluster cache synced once) and the server is not shutting down, so that no review reaches
//! a replica that would answer every Composition with "no CRD defines ...".

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::sync::watch;

use super::metrics::Metrics;

/// Whether the server should get traffic, and why (shown by `/readyz`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// Ready for reviews.
    pub ready: bool,
    /// What makes it ready or not.
    pub detail: String,
}

impl Readiness {
    /// Ready because of `detail`.
    pub fn ready(detail: impl Into<String>) -> Self {
        Readiness {
            ready: true,
            detail: detail.into(),
        }
    }

    /// Not ready because of `detail`.
    pub fn not_ready(detail: impl Into<String>) -> Self {
        Readiness {
            ready: false,
            detail: detail.into(),
        }
    }
}

#[derive(Clone)]
struct Ops {
    readiness: watch::Receiver<Readiness>,
    metrics: Arc<Metrics>,
}

/// The router of the operations port.
pub fn router(readiness: watch::Receiver<Readiness>, metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/livez", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(Ops { readiness, metrics })
}

async fn readyz(State(ops): State<Ops>) -> Response {
    let r = ops.readiness.borrow().clone();
    let code = if r.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let word = if r.ready { "ready" } else { "not ready" };
    (code, format!("{word}: {}\n", r.detail)).into_response()
}

async fn metrics_text(State(ops): State<Ops>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        ops.metrics.encode(),
    )
        .into_response()
}
