//! The operations port (plain HTTP, for the kubelet and Prometheus): `/livez`, `/readyz`,
//! `/metrics`, `/debug/schemas` and `/debug/audit`.
//!
//! `/readyz` is ready only while schemas are available (the file catalog loaded, or the
//! cluster's CRDs and XRDs listed once) and the server is not shutting down, so that no review
//! reaches a replica that would answer every Composition with "no CRD defines ...".

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::sync::watch;

use super::audit::Audit;
use super::metrics::Metrics;
use super::schemas::ServedSchemas;

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
    gates: Vec<watch::Receiver<Readiness>>,
    metrics: Arc<Metrics>,
    schemas: Arc<dyn ServedSchemas>,
    audit: Option<Arc<Audit>>,
}

/// The router of the operations port. `/readyz` answers the first of `gates` that is not
/// ready (shutting down; with `--webhook-configuration`, the CA not trusted yet), else the
/// schemas' readiness (never the audit's: admission does not need it).
pub fn router(
    gates: Vec<watch::Receiver<Readiness>>,
    metrics: Arc<Metrics>,
    schemas: Arc<dyn ServedSchemas>,
    audit: Option<Arc<Audit>>,
) -> Router {
    Router::new()
        .route("/livez", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route("/debug/schemas", get(debug_schemas))
        .route("/debug/audit", get(debug_audit))
        .with_state(Ops {
            gates,
            metrics,
            schemas,
            audit,
        })
}

async fn readyz(State(ops): State<Ops>) -> Response {
    let r = ops
        .gates
        .iter()
        .map(|g| g.borrow().clone())
        .find(|g| !g.ready)
        .unwrap_or_else(|| ops.schemas.readiness());
    let code = if r.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let word = if r.ready { "ready" } else { "not ready" };
    (code, format!("{word}: {}\n", r.detail)).into_response()
}

async fn metrics_text(State(ops): State<Ops>) -> Response {
    ops.metrics.set_schema_kinds(ops.schemas.kinds());
    ops.metrics
        .set_schema_entries(&ops.schemas.entries_by_state());
    let mut sources = ops.schemas.sources();
    if let Some(audit) = &ops.audit {
        sources.push(audit.source());
        audit.refresh_metrics();
    }
    ops.metrics.set_schema_sources(&sources);
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        ops.metrics.encode(),
    )
        .into_response()
}

async fn debug_schemas(State(ops): State<Ops>) -> Response {
    match ops.schemas.debug() {
        Some(view) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            serde_json::to_string_pretty(&view).unwrap_or_default(),
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "no schema cache: schemas come from --crds files\n",
        )
            .into_response(),
    }
}

async fn debug_audit(State(ops): State<Ops>) -> Response {
    match &ops.audit {
        Some(audit) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            serde_json::to_string_pretty(&audit.view()).unwrap_or_default(),
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "no audit: serve runs without --audit\n",
        )
            .into_response(),
    }
}
