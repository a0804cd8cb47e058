//! The admission webhook server (`composition-webhook serve`): a shell around the validation
//! core.
//!
//! - [`review`]: the AdmissionReview envelope (v1 and v1beta1), uid salvage, encoding;
//! - [`admission`]: the decision for a request (operation, kind, validation);
//! - [`answer`]: a validation report as a Status with causes, and warnings;
//! - [`warnings`]: warnings shaped as the API server and kubectl need them;
//! - [`deadline`]: the time a review may take (`?timeout=`);
//! - [`handler`]: `POST /validate` (body limits, workers, deadline);
//! - [`review_threads`]: the threads that decode and validate reviews, the most recently
//!   idle first, below the server's own threads ([`priority`]: a thread's nice value);
//! - [`verdicts`]: the verdict cache (answers again for a Composition reviewed before, while
//!   the schemas it used are unchanged);
//! - [`connections`]: the accept loop of both ports (connection cap, timeouts, room made by
//!   closing idle connections, graceful drain);
//! - [`https`]: the admission port (TLS);
//! - [`tls`]: certificates from files (reloaded) or self-signed;
//! - [`operations`]: `/livez`, `/readyz`, `/metrics`, `/debug/schemas`, `/debug/audit` on a
//!   plain-HTTP port;
//! - [`schemas`]: where schemas come from (files or the cluster), as the server uses them;
//! - [`audit`]: `--audit`, every Composition validated again as the schemas under it change,
//!   and [`audit_results`], the Events and the ClusterPolicyReport it writes;
//! - [`metrics`]: the Prometheus metrics;
//! - [`logging`]: structured logs.

pub mod admission;
pub mod answer;
pub mod audit;
pub mod audit_results;
pub mod connections;
pub mod deadline;
pub mod handler;
pub mod https;
pub mod impact;
pub mod in_flight;
pub mod logging;
pub mod metrics;
pub mod operations;
pub mod priority;
pub mod review;
pub mod review_threads;
pub mod schemas;
pub mod tls;
pub mod verdicts;
pub mod warnings;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::mode::Mode;
use handler::ReviewState;
use metrics::Metrics;
use operations::Readiness;
pub use schemas::{FileSchemas, ServedSchemas};

/// The path the API server posts AdmissionReviews to.
pub const VALIDATE_PATH: &str = "/validate";
/// The default admission port.
pub const DEFAULT_PORT: u16 = 9443;
/// The default operations port.
pub const DEFAULT_OPERATIONS_PORT: u16 = 8080;
/// The default largest request body: above the API server's 3 MiB per object, for an UPDATE
/// that carries the object and the old object.
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum TlsSource {
    /// PEM files, re-read every `reload_interval`.
    Files {
        /// Certificate chain (leaf first).
        cert: PathBuf,
        /// Private key.
        key: PathBuf,
        /// How often the files are checked for changes.
        reload_interval: Duration,
    },
    /// A CA and serving certificate generated at start.
    SelfSigned {
        /// The DNS names of the serving certificate.
        dns_names: Vec<String>,
        /// The CA's common name; it tells this server's CA from others in a shared
        /// `caBundle`.
        ca_common_name: String,
        /// Where to write the CA certificate (PEM), if anywhere.
        ca_bundle_out: Option<PathBuf>,
    },
}

/// Everything `serve` is configured with.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address of the admission port (HTTPS).
    pub address: SocketAddr,
    /// Address of the operations port (HTTP).
    pub operations_address: SocketAddr,
    /// The serving certificate.
    pub tls: TlsSource,
    /// The mode of Compositions without the mode annotation.
    pub default_mode: Mode,
    /// Whether rendered-resource validation runs.
    pub rendered: bool,
    /// The largest request body read.
    pub max_body_bytes: usize,
    /// Bytes of request bodies held at once across requests.
    pub body_memory_bytes: usize,
    /// Reviews decoded and validated at once.
    pub workers: usize,
    /// How many nice levels below the server's own threads reviews run (Linux).
    pub review_nice: i32,
    /// The memory and work one review may take.
    pub review_limits: crate::budget::Limits,
    /// Bytes the verdict cache may hold (0: no cache).
    pub verdict_cache_bytes: usize,
    /// Returns freed memory to the system after a large review (the allocator's collect).
    pub release_memory: Option<fn()>,
    /// Connection limits of the admission port.
    pub limits: https::ConnectionLimits,
    /// Connections served at once on the operations port (its timeouts are the admission
    /// port's).
    pub operations_max_connections: usize,
    /// Reviews in flight at once on the admission port, in all.
    pub max_reviews_in_flight: usize,
    /// Reviews in flight at once from one client address.
    pub max_reviews_in_flight_per_client: usize,
    /// How long in-flight reviews may take to finish on shutdown.
    pub drain_timeout: Duration,
    /// Where a self-signed CA is published for the API server (the cluster shell patches the
    /// webhook configuration's `caBundle`); `/readyz` waits for it.
    pub ca_publisher: Option<Arc<dyn CaPublisher>>,
    /// Change impact: UPDATEs of CRDs, MRDs and XRDs checked against the Compositions that
    /// use them.
    pub change_impact: Option<impact::ChangeImpact>,
    /// The background audit (`--audit`), started; stopped with the server.
    pub audit: Option<Arc<audit::Audit>>,
    /// Pipeline steps of other functions than patch-and-transform run for real, if on.
    pub function_calls: Option<Arc<crate::runner::steps::FunctionCalls>>,
}

/// Publishes the self-signed CA where the API server reads it.
pub trait CaPublisher: Send + Sync {
    /// Starts publishing `ca_pem` (on the current tokio runtime); the receiver says whether
    /// the API server trusts this server yet, and why not.
    fn publish(&self, ca_pem: &str) -> watch::Receiver<Readiness>;
}

impl std::fmt::Debug for dyn CaPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CaPublisher")
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The certificate could not be loaded or made.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The review threads could not be started.
    #[error("cannot start the review threads: {0}")]
    Threads(std::io::Error),
    /// A port could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Runs the server until `shutdown` completes, then stops accepting, finishes in-flight
/// reviews (for at most the drain timeout) and returns. `metrics` may already hold records
/// (the cluster source's calls to the API server).
pub async fn run(
    config: ServeConfig,
    schemas: Arc<dyn ServedSchemas>,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let operations_limits = https::ConnectionLimits {
        max_connections: config.operations_max_connections,
        ..config.limits
    };
    raise_file_limit(&[config.limits, operations_limits]);
    let provider = tls::provider();

    let mut ca_pem = None;
    let mut renewal = None;
    let (loaded, watch_files) = match &config.tls {
        TlsSource::Files {
            cert,
            key,
            reload_interval,
        } => {
            let (loaded, served) = tls::load_files(cert, key, &provider)?;
            let watch = (cert.clone(), key.clone(), *reload_interval, served);
            (loaded, Some(watch))
        }
        TlsSource::SelfSigned {
            dns_names,
            ca_common_name,
            ca_bundle_out,
        } => {
            let generated = tls::self_signed(dns_names, ca_common_name, &provider)?;
            if let Some(path) = ca_bundle_out {
                tls::write_bundle(path, &generated.ca_pem)?;
                tracing::info!(path = %path.display(), "CA bundle written");
            }
            ca_pem = Some(generated.ca_pem);
            renewal = Some(generated.issuer);
            (generated.loaded, None)
        }
    };
    let published = match (&config.ca_publisher, ca_pem) {
        (Some(publisher), Some(pem)) => Some(publisher.publish(&pem)),
        _ => None,
    };
    tracing::info!(dns_names = ?loaded.dns_names, not_after = loaded.not_after, "serving certificate loaded");
    metrics.certificate(Some(loaded.not_after));
    let resolver = Arc::new(tls::CertResolver::new(loaded.key.clone()));
    let renewer = renewal.map(|issuer| {
        tokio::spawn(tls::renew_self_signed(
            issuer,
            loaded.clone(),
            resolver.clone(),
            provider.clone(),
            metrics.clone(),
        ))
    });
    let tls_config = Arc::new(tls::server_config(provider.clone(), resolver.clone())?);

    let bind = |address: SocketAddr| async move {
        TcpListener::bind(address)
            .await
            .map_err(|source| ServeError::Bind { address, source })
    };
    let admission_listener = bind(config.address).await?;
    let operations_listener = bind(config.operations_address).await?;
    let admission_addr = admission_listener.local_addr().unwrap_or(config.address);
    let operations_addr = operations_listener
        .local_addr()
        .unwrap_or(config.operations_address);

    let state = Arc::new(ReviewState {
        schemas: schemas.clone(),
        default_mode: config.default_mode,
        rendered: config.rendered,
        max_body_bytes: config.max_body_bytes,
        body_memory: Arc::new(Semaphore::new(
            config.body_memory_bytes.max(config.max_body_bytes),
        )),
        review_threads: Arc::new(
            review_threads::ReviewThreads::start(
                config.workers.max(1),
                review_threads::REVIEW_STACK_BYTES,
                config.review_nice,
            )
            .map_err(ServeError::Threads)?,
        ),
        limits: config.review_limits,
        verdicts: verdicts::Verdicts::new(config.verdict_cache_bytes, metrics.clone()),
        release_memory: config.release_memory,
        metrics: metrics.clone(),
        change_impact: config.change_impact.clone(),
        audit: config.audit.clone(),
        function_calls: config.function_calls.clone(),
        in_flight: in_flight::InFlightLimit::new(
            config.max_reviews_in_flight,
            config.max_reviews_in_flight_per_client,
            in_flight::body_share(
                config.body_memory_bytes.max(config.max_body_bytes),
                config.max_body_bytes,
            ),
        ),
    });
    let router = Router::new()
        .route(VALIDATE_PATH, post(handler::validate))
        .with_state(state);

    let (ready_tx, ready_rx) = watch::channel(Readiness::ready("serving"));
    let ops_router = operations::router(
        std::iter::once(ready_rx).chain(published).collect(),
        metrics.clone(),
        schemas.clone(),
        config.audit.clone(),
    );
    let (stop_tx, stop_rx) = watch::channel(false);

    let watcher = watch_files.map(|(cert, key, interval, served)| {
        tokio::spawn(tls::watch_files(
            cert,
            key,
            interval,
            served,
            resolver,
            provider,
            metrics.clone(),
        ))
    });

    tracing::info!(
        admission = %admission_addr,
        operations = %operations_addr,
        path = VALIDATE_PATH,
        default_mode = config.default_mode.name(),
        schemas = %schemas.readiness().detail,
        workers = config.workers,
        review_nice = config.review_nice,
        "serving"
    );

    let admission = tokio::spawn(https::serve(
        admission_listener,
        tls_config,
        router,
        config.limits,
        stop_rx.clone(),
        config.drain_timeout,
    ));
    let (ops_stop_tx, ops_stop_rx) = watch::channel(false);
    let operations = tokio::spawn(connections::serve(
        connections::Port {
            name: "operations",
            requests: "requests",
        },
        operations_listener,
        connections::Plain,
        ops_router,
        operations_limits,
        ops_stop_rx,
        config.drain_timeout,
    ));

    shutdown.await;
    tracing::info!("shutting down: not ready, no new connections");
    if let Some(audit) = &config.audit {
        // Its thread stops at its validation's next check, without waiting for it; the
        // Lease is given up at once, so another replica audits from its next try.
        let stopping = audit.clone();
        tokio::task::spawn_blocking(move || stopping.stop());
        audit.release_lease(Duration::from_secs(2)).await;
    }
    ready_tx.send_replace(Readiness::not_ready("shutting down"));
    let _ = stop_tx.send(true);
    let _ = admission.await;
    // The operations port outlives the drain, so probes and scrapes see it.
    let _ = ops_stop_tx.send(true);
    let _ = operations.await;
    for task in [watcher, renewer].into_iter().flatten() {
        task.abort();
    }
    tracing::info!("stopped");
    Ok(())
}

/// Sockets and files the process holds besides the ports' connections: the API server's
/// client connections, watches, certificate and schema files, standard streams.
pub const OTHER_FILES: u64 = 256;

/// Raises the soft limit on open files to the hard limit (many distributions start
/// processes at 1024 soft), and warns when the ports' connection caps do not fit under it:
/// past the limit, accepting fails for every client alike.
fn raise_file_limit(ports: &[https::ConnectionLimits]) {
    let needed = ports.iter().map(|p| p.most_sockets() as u64).sum::<u64>() + OTHER_FILES;
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) if limit < needed => tracing::warn!(
            limit,
            needed,
            "the open-file limit is below what the connection caps need (--max-connections and --operations-max-connections, each plus a quarter for connections closing, plus {OTHER_FILES}); lower the caps or raise the limit"
        ),
        Ok(limit) => tracing::debug!(limit, needed, "open-file limit"),
        Err(e) => tracing::warn!(error = %e, "cannot read or raise the open-file limit"),
    }
}

/// Completes on SIGTERM (what the kubelet sends) or SIGINT.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("SIGINT received"),
        _ = term => tracing::info!("SIGTERM received"),
    }
}
