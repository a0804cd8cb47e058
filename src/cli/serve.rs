//! `composition-webhook serve`: flags (each also read from an environment variable) into a
//! [`ServeConfig`], the schemas (`--crds` files, or else the cluster's), a runtime, and the
//! server until SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::functions::FunctionFiles;
use super::{
    CrdFiles, EXIT_ALLOWED, EXIT_INPUT_ERROR, ModeArg, build_catalog, count, load_all,
    review_memory,
};
use crate::budget::Limits;
use crate::cluster::calls::CallObserver;
use crate::cluster::function_endpoints::{DEFAULT_NAMESPACE, FunctionCallOptions};
use crate::cluster::lease::{self, Leadership, LeaseOptions};
use crate::cluster::required::ClusterRequired;
use crate::cluster::{ClusterOptions, ClusterSchemas, ca_bundle, connect};
use crate::render::function_steps::Required;
use crate::runner::steps::{Addresses, FirstOf, FunctionCaller, FunctionCalls, Resolve};
use crate::server::audit::{Audit, AuditOptions, DEFAULT_DEADLINE};
use crate::server::impact::ChangeImpact;
use crate::server::logging::{self, LogFormat};
use crate::server::metrics::{ApiCall, ApiCallLabels, ApiCallRecorder, Metrics};
use crate::server::operations::Readiness;
use crate::server::{self, FileSchemas, ServeConfig, ServedSchemas, TlsSource, deadline, https};
use tokio::sync::watch;

/// The longest duration a flag takes: more is a typo, and deadlines must not overflow.
const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

/// A duration flag: more than zero (a zero timeout would fail every connection), at most
/// [`MAX_DURATION`].
/// `--review-nice`: chosen from the process's cgroup, or given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReviewNice {
    Auto,
    Levels(usize),
}

/// `auto` or 0 to 19.
fn review_nice(s: &str) -> Result<ReviewNice, String> {
    if s == "auto" {
        return Ok(ReviewNice::Auto);
    }
    count(0, 19)(s)
        .map(ReviewNice::Levels)
        .map_err(|_| "must be auto or a whole number from 0 to 19".to_string())
}

pub(super) fn duration(s: &str) -> Result<Duration, String> {
    let d = deadline::parse_go_duration(s).map_err(|e| e.to_string())?;
    if d.is_zero() || d > MAX_DURATION {
        return Err("must be more than 0s and at most 24h".to_string());
    }
    Ok(d)
}

/// `--audit-lease-duration`: at least [`lease::MIN_DURATION`].
fn lease_duration(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d < lease::MIN_DURATION {
        return Err(format!(
            "must be at least {}s",
            lease::MIN_DURATION.as_secs()
        ));
    }
    Ok(d)
}

/// `--audit-cpu`: a share of one core, more than 0 and at most 1.
fn cpu_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(share) if share > 0.0 && share <= 1.0 => Ok(share),
        _ => Err("must be a share of one core, more than 0 and at most 1 (0.25)".to_string()),
    }
}

/// The smallest `--max-body-bytes`: an AdmissionReview's envelope alone takes about 1 KiB.
const MIN_BODY_BYTES: usize = 4096;
/// The largest `--max-body-bytes` (the API server sends at most 3 MiB per object).
const MAX_BODY_BYTES: usize = 1 << 30;
/// The largest `--verdict-cache-bytes`.
const MAX_VERDICT_CACHE_BYTES: usize = 64 << 30;
/// The largest `--body-memory-bytes`.
const MAX_BODY_MEMORY_BYTES: usize = 64 << 30;

#[derive(Debug, clap::Args)]
pub(super) struct ServeArgs {
    #[command(flatten)]
    schemas: CrdFiles,

    /// With `--crds`: the Functions installed (without `--crds` they come from the cluster).
    #[command(flatten)]
    functions: FunctionFiles,

    /// Kubeconfig of the cluster to take schemas from [default: KUBECONFIG, ~/.kube/config,
    /// else the pod's service account].
    #[arg(
        long,
        value_name = "FILE",
        env = "COMPOSITION_WEBHOOK_KUBECONFIG",
        conflicts_with = "crds"
    )]
    kubeconfig: Option<PathBuf>,

    /// Drop a cached schema when its definition is deleted or becomes unusable, or the API
    /// server refuses it (401, 403, 404), instead of validating with the last good one.
    #[arg(
        long,
        env = "COMPOSITION_WEBHOOK_FAIL_ON_DATA_ERRORS",
        conflicts_with = "crds"
    )]
    fail_on_data_errors: bool,

    /// How long a request for one CRD or XRD may take.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration, env = "COMPOSITION_WEBHOOK_API_TIMEOUT")]
    api_timeout: Duration,

    /// How often the API server's OpenAPI v3 index (built-in kinds' schemas) is read again
    /// while a document of it is cached; a document whose hash changed is fetched again.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration, env = "COMPOSITION_WEBHOOK_OPENAPI_REFRESH")]
    openapi_refresh: Duration,

    /// Objects per list page when CRDs, MRDs, XRDs, Functions or Compositions are listed again
    /// after a watch expired (a page of large provider CRDs is held in memory at once); the
    /// first list comes whole from the API server's watch cache.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 50,
        value_parser = clap::value_parser!(u32).range(1..=10_000),
        env = "COMPOSITION_WEBHOOK_LIST_PAGE_SIZE"
    )]
    list_page_size: u32,

    /// Audit every Composition of the cluster in the background, again whenever a schema it
    /// uses changes: findings in /metrics and /debug/audit, Events on a Composition whose
    /// verdict changes, a ClusterPolicyReport where its CRD is installed (schemas from the
    /// cluster only, not with --crds).
    #[arg(long, env = "COMPOSITION_WEBHOOK_AUDIT")]
    audit: bool,

    /// With --audit, the share of one core the audit may use (more than 0, at most 1); it
    /// also waits while admission reviews are in flight.
    #[arg(long, value_name = "SHARE", default_value = "0.25", value_parser = cpu_share, env = "COMPOSITION_WEBHOOK_AUDIT_CPU")]
    audit_cpu: f64,

    /// With --audit, the coordination.k8s.io/v1 Lease the replicas hold in turn: only its
    /// holder audits and writes Events and the ClusterPolicyReport.
    #[arg(long, value_name = "NAME", default_value = lease::DEFAULT_NAME, env = "COMPOSITION_WEBHOOK_AUDIT_LEASE")]
    audit_lease: String,

    /// The Lease's namespace (default: the kubeconfig's namespace; in a pod, its own).
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "COMPOSITION_WEBHOOK_AUDIT_LEASE_NAMESPACE"
    )]
    audit_lease_namespace: Option<String>,

    /// How long the Lease's holder keeps it without renewing it (at least 3s): another
    /// replica takes over within that after the holder dies; the holder renews every
    /// seventh of it and stops auditing two thirds of it after its last renewal.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = lease_duration, env = "COMPOSITION_WEBHOOK_AUDIT_LEASE_DURATION")]
    audit_lease_duration: Duration,

    /// Warn about the Compositions an UPDATE of a CRD, MRD or XRD would break, naming each and
    /// the field (needs --audit, which knows what each Composition uses, and the webhook
    /// configuration's rule for those updates: deploy/components/change-impact).
    #[arg(long, requires = "audit", env = "COMPOSITION_WEBHOOK_CHANGE_IMPACT")]
    change_impact: bool,

    /// With --change-impact, deny an update that breaks a Composition instead of warning.
    #[arg(
        long,
        requires = "change_impact",
        env = "COMPOSITION_WEBHOOK_DENY_BREAKING_CHANGES"
    )]
    deny_breaking_changes: bool,

    /// Mode of Compositions without the crossplane.io/composition-schema-aware-validation-mode annotation.
    #[arg(long, value_enum, default_value_t = ModeArg::Loose, env = "COMPOSITION_WEBHOOK_MODE")]
    mode: ModeArg,
    /// Skip rendered-resource validation (rendering each composed resource from a mock
    /// composite resource and validating it against its CRD).
    #[arg(long, env = "COMPOSITION_WEBHOOK_NO_RENDER")]
    no_render: bool,

    /// Run the pipeline steps of other functions than patch-and-transform by calling their functions (with `--function-address`, Functions annotated render.crossplane.io/runtime: Development, or in the cluster their FunctionRevisions' endpoints), and validate what they compose; `off` leaves those steps unrendered.
    #[arg(long, value_enum, default_value_t = Switch::On, env = "COMPOSITION_WEBHOOK_FUNCTION_CALLS")]
    function_calls: Switch,

    /// Crossplane's namespace (without --crds): where the client certificate its functions accept is read from, Secret crossplane-tls-client.
    #[arg(long, value_name = "NAMESPACE", default_value = DEFAULT_NAMESPACE, env = "COMPOSITION_WEBHOOK_CROSSPLANE_NAMESPACE")]
    crossplane_namespace: String,

    /// Address of the admission port (HTTPS; POST /validate).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "0.0.0.0:9443",
        env = "COMPOSITION_WEBHOOK_ADDRESS"
    )]
    address: SocketAddr,

    /// Address of the operations port (plain HTTP; /livez, /readyz, /metrics).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "0.0.0.0:8080",
        env = "COMPOSITION_WEBHOOK_OPERATIONS_ADDRESS"
    )]
    operations_address: SocketAddr,

    /// Serving certificate chain, PEM (leaf first); re-read when it changes.
    #[arg(
        long,
        value_name = "FILE",
        env = "COMPOSITION_WEBHOOK_TLS_CERT_FILE",
        required_unless_present = "self_signed",
        requires = "tls_key_file"
    )]
    tls_cert_file: Option<PathBuf>,

    /// Private key of the serving certificate, PEM (PKCS#8, PKCS#1 or SEC1).
    #[arg(
        long,
        value_name = "FILE",
        env = "COMPOSITION_WEBHOOK_TLS_KEY_FILE",
        requires = "tls_cert_file"
    )]
    tls_key_file: Option<PathBuf>,

    /// How often the certificate files are checked for changes.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration, env = "COMPOSITION_WEBHOOK_TLS_RELOAD_INTERVAL")]
    tls_reload_interval: Duration,

    /// Generate a CA and a serving certificate at start instead of reading files.
    #[arg(long, env = "COMPOSITION_WEBHOOK_SELF_SIGNED", conflicts_with_all = ["tls_cert_file", "tls_key_file"])]
    self_signed: bool,

    /// DNS names of the self-signed certificate (repeatable; in the environment, comma-separated).
    #[arg(
        long = "self-signed-dns-name",
        value_name = "NAME",
        env = "COMPOSITION_WEBHOOK_SELF_SIGNED_DNS_NAMES",
        value_delimiter = ',',
        default_value = "composition-webhook.composition-webhook.svc"
    )]
    self_signed_dns_names: Vec<String>,

    /// Keep the self-signed CA in the caBundle of this ValidatingWebhookConfiguration (needs
    /// get and patch on it); /readyz waits until it is there.
    #[arg(
        long,
        value_name = "NAME",
        env = "COMPOSITION_WEBHOOK_CONFIGURATION",
        requires = "self_signed",
        conflicts_with = "crds"
    )]
    webhook_configuration: Option<String>,

    /// Where to write the self-signed CA certificate (PEM), the webhook configuration's caBundle.
    #[arg(
        long,
        value_name = "FILE",
        env = "COMPOSITION_WEBHOOK_CA_BUNDLE_OUT",
        requires = "self_signed"
    )]
    ca_bundle_out: Option<PathBuf>,

    /// Reviews decoded and validated at once, 1 to 1024 [default: the number of CPUs].
    #[arg(long, value_name = "N", value_parser = count(1, 1024), env = "COMPOSITION_WEBHOOK_WORKERS")]
    workers: Option<usize>,

    /// How many nice levels below the server's own threads reviews are validated, 0 to 19,
    /// or `auto`: reading requests and writing answers go first. Linux only. `auto` is 19
    /// where the process has a CPU cgroup of its own (a container in a pod: nice then orders
    /// only the server's threads) and 0 elsewhere (on a shared host, nice 19 loses to every
    /// busy process and reviews miss their deadlines); 0 also where throughput at
    /// saturation matters more than the tail.
    #[arg(long, value_name = "N", default_value = "auto", value_parser = review_nice, env = "COMPOSITION_WEBHOOK_REVIEW_NICE")]
    review_nice: ReviewNice,

    /// Largest request body read, in bytes (4096 to 1 GiB).
    #[arg(long, value_name = "BYTES", default_value_t = server::DEFAULT_MAX_BODY_BYTES, value_parser = count(MIN_BODY_BYTES, MAX_BODY_BYTES), env = "COMPOSITION_WEBHOOK_MAX_BODY_BYTES")]
    max_body_bytes: usize,

    /// Bytes of request bodies held at once across all requests (at least --max-body-bytes,
    /// at most 64 GiB).
    #[arg(long, value_name = "BYTES", default_value_t = 64 * 1024 * 1024, value_parser = count(MIN_BODY_BYTES, MAX_BODY_MEMORY_BYTES), env = "COMPOSITION_WEBHOOK_BODY_MEMORY_BYTES")]
    body_memory_bytes: usize,

    /// Memory one review may hold while it is decoded, rendered and validated (at least 4
    /// MiB); past it the review gets a finding instead of a result (an error in strict mode,
    /// a warning in loose and warn).
    #[arg(long, value_name = "BYTES", default_value_t = Limits::DEFAULT.memory_bytes, value_parser = review_memory, env = "COMPOSITION_WEBHOOK_REVIEW_MEMORY_BYTES")]
    review_memory_bytes: usize,

    /// Memory the verdict cache may hold, in bytes (0 turns it off): the answers of
    /// Compositions reviewed before, given again while the schemas they used are unchanged.
    #[arg(long, value_name = "BYTES", default_value_t = server::verdicts::DEFAULT_BYTES, value_parser = count(0, MAX_VERDICT_CACHE_BYTES), env = "COMPOSITION_WEBHOOK_VERDICT_CACHE_BYTES")]
    verdict_cache_bytes: usize,

    /// Connections served at once on the admission port (1 to 1000000); when all are taken,
    /// the longest idle one is closed to make room.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1024,
        value_parser = count(1, 1_000_000),
        env = "COMPOSITION_WEBHOOK_MAX_CONNECTIONS"
    )]
    max_connections: usize,

    /// Reviews in flight at once on the admission port (1 to 1000000): one more is refused
    /// with 429 before its body is read.
    #[arg(long, value_name = "N", default_value_t = server::in_flight::DEFAULT_MAX_TOTAL, value_parser = count(1, 1_000_000), env = "COMPOSITION_WEBHOOK_MAX_REVIEWS_IN_FLIGHT")]
    max_reviews_in_flight: usize,

    /// Reviews in flight at once from one client address (1 to 1000000), so that one client
    /// cannot take every place.
    #[arg(long, value_name = "N", default_value_t = server::in_flight::DEFAULT_MAX_PER_CLIENT, value_parser = count(1, 1_000_000), env = "COMPOSITION_WEBHOOK_MAX_REVIEWS_IN_FLIGHT_PER_CLIENT")]
    max_reviews_in_flight_per_client: usize,

    /// Connections served at once on the operations port (1 to 65536).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 64,
        value_parser = count(1, 65_536),
        env = "COMPOSITION_WEBHOOK_OPERATIONS_MAX_CONNECTIONS"
    )]
    operations_max_connections: usize,

    /// Time a client has to complete the TLS handshake.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration, env = "COMPOSITION_WEBHOOK_HANDSHAKE_TIMEOUT")]
    handshake_timeout: Duration,

    /// Time a client has to send a request's headers, from their first byte (the first
    /// request's from the handshake).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration, env = "COMPOSITION_WEBHOOK_HEADER_READ_TIMEOUT")]
    header_read_timeout: Duration,

    /// Time a connection stays open with no request in flight (the API server keeps its
    /// connections for the next reviews).
    #[arg(long, value_name = "DURATION", default_value = "90s", value_parser = duration, env = "COMPOSITION_WEBHOOK_IDLE_TIMEOUT")]
    idle_timeout: Duration,

    /// On SIGTERM, how long in-flight reviews may take to finish.
    #[arg(long, value_name = "DURATION", default_value = "25s", value_parser = duration, env = "COMPOSITION_WEBHOOK_DRAIN_TIMEOUT")]
    drain_timeout: Duration,

    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "COMPOSITION_WEBHOOK_LOG_FORMAT")]
    log_format: LogFormat,

    /// Log level or filter (error, warn, info, debug, trace; or e.g. info,composition_webhook=debug).
    #[arg(
        long,
        value_name = "LEVEL",
        default_value = "info",
        env = "COMPOSITION_WEBHOOK_LOG_LEVEL"
    )]
    log_level: String,
}

impl ServeArgs {
    /// What the flags' own parsers cannot check: how they go together.
    fn check(&self) -> Result<(), String> {
        if !self.functions.paths.is_empty() && self.schemas.crds.is_empty() {
            return Err(
                "--functions needs --crds: without --crds the Functions come from the cluster"
                    .to_string(),
            );
        }
        if self.audit && !self.schemas.crds.is_empty() {
            return Err(
                "--audit needs schemas from the cluster (it audits the cluster's Compositions): leave out --crds"
                    .to_string(),
            );
        }
        if self.body_memory_bytes < self.max_body_bytes {
            return Err(format!(
                "--body-memory-bytes ({}) must be at least --max-body-bytes ({}): a body of the largest size must fit",
                self.body_memory_bytes, self.max_body_bytes
            ));
        }
        Ok(())
    }
}

/// Runs `serve`: 0 after a clean shutdown, 2 when it cannot start.
pub(super) fn run(args: &ServeArgs) -> u8 {
    if let Err(e) = args.check() {
        eprintln!("error: {e}");
        return EXIT_INPUT_ERROR;
    }
    if let Err(e) = logging::init(args.log_format, &args.log_level) {
        eprintln!("error: {e}");
        return EXIT_INPUT_ERROR;
    }
    let mut errors = Vec::new();
    let required = args.functions.required_objects(&mut errors);
    let observed = args.functions.observed_resources(&mut errors);
    if let Some(e) = errors.first() {
        tracing::error!(error = %e, "cannot load --required-resources");
        return EXIT_INPUT_ERROR;
    }
    let (files, addresses) = if args.schemas.crds.is_empty() {
        (None, args.functions.flag_addresses())
    } else {
        match file_schemas(&args.schemas.crds, &args.functions) {
            Some((f, addresses)) => (Some(f), addresses),
            None => return EXIT_INPUT_ERROR,
        }
    };
    let workers = args.workers.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
    });
    let review_nice = match args.review_nice {
        // At most 19 by the parser.
        ReviewNice::Levels(n) => n as i32,
        ReviewNice::Auto => {
            let (nice, why) = server::priority::review_nice_for_this_process();
            tracing::info!(review_nice = nice, reason = %why, "--review-nice auto");
            nice
        }
    };
    let tls = if args.self_signed {
        TlsSource::SelfSigned {
            dns_names: args.self_signed_dns_names.clone(),
            ca_common_name: ca_common_name(),
            ca_bundle_out: args.ca_bundle_out.clone(),
        }
    } else {
        match (&args.tls_cert_file, &args.tls_key_file) {
            (Some(cert), Some(key)) => TlsSource::Files {
                cert: cert.clone(),
                key: key.clone(),
                reload_interval: args.tls_reload_interval,
            },
            // clap requires both or --self-signed.
            _ => {
                tracing::error!(
                    "--tls-cert-file and --tls-key-file, or --self-signed, are required"
                );
                return EXIT_INPUT_ERROR;
            }
        }
    };
    let config = ServeConfig {
        address: args.address,
        operations_address: args.operations_address,
        tls,
        default_mode: args.mode.into(),
        rendered: !args.no_render,
        max_body_bytes: args.max_body_bytes,
        body_memory_bytes: args.body_memory_bytes,
        workers,
        review_nice,
        release_memory: Some(release_memory),
        review_limits: Limits {
            memory_bytes: args.review_memory_bytes,
            ..Limits::DEFAULT
        },
        verdict_cache_bytes: args.verdict_cache_bytes,
        limits: https::ConnectionLimits {
            handshake_timeout: args.handshake_timeout,
            header_read_timeout: args.header_read_timeout,
            idle_timeout: args.idle_timeout,
            max_connections: args.max_connections,
        },
        operations_max_connections: args.operations_max_connections,
        max_reviews_in_flight: args.max_reviews_in_flight,
        max_reviews_in_flight_per_client: args.max_reviews_in_flight_per_client,
        drain_timeout: args.drain_timeout,
        ca_publisher: None,
        change_impact: None,
        audit: None,
        function_calls: None,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Objects nest as deep as the API server allows (10,000 levels), and some walks of
        // them recurse: room for that on every thread (address space, not memory).
        .thread_stack_size(REVIEW_STACK_BYTES)
        // Reviews run on threads of their own (`server::review_threads`); the blocking pool
        // is for the clients' DNS lookups and files. Bounded, so the stacks' address space is.
        .max_blocking_threads(32)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the async runtime");
            return EXIT_INPUT_ERROR;
        }
    };
    let mut config = config;
    let code = runtime.block_on(async {
        let metrics = Arc::new(Metrics::new());
        let mut resolvers: Vec<Arc<dyn Resolve>> = Vec::new();
        let mut required: Box<dyn Required + Send + Sync> = Box::new(required);
        if !addresses.is_empty() {
            resolvers.push(Arc::new(addresses));
        }
        let schemas: Arc<dyn ServedSchemas> = match files {
            Some(files) => Arc::new(files),
            None => {
                purge_delay(0);
                match cluster_schemas(args, &metrics).await {
                    Ok((cluster, client)) => {
                        if let Some(name) = &args.webhook_configuration {
                            config.ca_publisher = Some(Arc::new(WebhookConfigurationCa {
                                client: client.clone(),
                                name: name.clone(),
                            }));
                        }
                        let cluster = Arc::new(cluster);
                        if let Some(endpoints) = cluster.function_endpoints() {
                            resolvers.push(Arc::new(endpoints.clone()));
                        }
                        // Without files of them, what functions require is read from the
                        // cluster.
                        if args.functions.required.is_empty() {
                            required = Box::new(ClusterRequired::new(
                                client.clone(),
                                tokio::runtime::Handle::current(),
                            ));
                        }
                        purge_until_listed(cluster.clone());
                        if args.audit {
                            let options = AuditOptions {
                                default_mode: config.default_mode,
                                rendered: config.rendered,
                                limits: config.review_limits,
                                cpu_share: args.audit_cpu,
                                deadline: DEFAULT_DEADLINE,
                                stack_bytes: REVIEW_STACK_BYTES,
                                page_size: args.list_page_size,
                            };
                            let changes = cluster.changes();
                            let lease = LeaseOptions {
                                name: args.audit_lease.clone(),
                                namespace: args
                                    .audit_lease_namespace
                                    .clone()
                                    .unwrap_or_else(|| client.default_namespace().to_string()),
                                identity: lease::identity(),
                                duration: args.audit_lease_duration,
                            };
                            let (leadership, _election) = Leadership::start(client.clone(), lease);
                            let audit = Audit::start(
                                cluster.clone(),
                                changes,
                                Some(client),
                                Some(leadership),
                                metrics.clone(),
                                options,
                            );
                            if args.change_impact {
                                config.change_impact = Some(ChangeImpact {
                                    compositions: audit.clone(),
                                    deny: args.deny_breaking_changes,
                                });
                            }
                            config.audit = Some(audit);
                        }
                        cluster
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "cannot connect to the cluster");
                        return EXIT_INPUT_ERROR;
                    }
                }
            }
        };
        if args.function_calls == Switch::On && !resolvers.is_empty() {
            let caller = FunctionCaller::new(
                Arc::new(FirstOf(resolvers)),
                tokio::runtime::Handle::current(),
            );
            config.function_calls = Some(Arc::new(
                FunctionCalls::new(caller, required).with_observed(observed),
            ));
        }
        match server::run(config, schemas, metrics, server::shutdown_signal()).await {
            Ok(()) => EXIT_ALLOWED,
            Err(e) => {
                tracing::error!(error = %e, "cannot serve");
                EXIT_INPUT_ERROR
            }
        }
    });
    // Reviews still running were cancelled with their connections; they stop at their next
    // check, so this does not wait long.
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

/// The stack of every server thread: a review's walks of an object recurse.
pub use crate::server::review_threads::REVIEW_STACK_BYTES;

/// The `--crds` files as a catalog; `None` (after logging why) when one cannot be loaded.
fn file_schemas(paths: &[PathBuf], functions: &FunctionFiles) -> Option<(FileSchemas, Addresses)> {
    let mut errors = Vec::new();
    let docs = load_all(paths, &mut errors);
    let catalog = build_catalog(docs.iter(), &mut errors);
    let (functions, addresses) = functions.load_with_addresses(&mut errors);
    if !errors.is_empty() {
        for e in &errors {
            tracing::error!(error = %e, "cannot load schemas");
        }
        return None;
    }
    if catalog.is_empty() {
        tracing::warn!(crds = ?paths, "no CRD or XRD found: every schema lookup will report a missing schema");
    }
    let mut description = format!(
        "schema catalog loaded: {} kinds from --crds files",
        catalog.len()
    );
    if let Some(f) = &functions {
        description.push_str(&format!(", {} Functions from --functions files", f.len()));
    }
    Some((
        FileSchemas {
            description,
            catalog,
            functions,
        },
        addresses,
    ))
}

/// `--function-calls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Switch {
    /// On.
    On,
    /// Off.
    Off,
}

/// Returns what the calling thread's mimalloc heap has freed to the system: after a review
/// of tens of MiB, the review thread that ran it may idle for long with those pages
/// resident.
fn release_memory() {
    // SAFETY: collects the calling thread's heap; no pointer is passed.
    unsafe { libmimalloc_sys::mi_collect(false) };
}

/// mimalloc's `mi_option_purge_delay` (option 15 in its v2 and v3 headers), in ms.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// Its default.
const DEFAULT_PURGE_DELAY_MS: std::ffi::c_long = 10;

/// Sets how soon mimalloc returns freed memory to the system (a no-op for the tests, whose
/// allocator is the system's).
fn purge_delay(ms: std::ffi::c_long) {
    // SAFETY: sets an option value; mimalloc reads options atomically.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, ms) };
}

/// Until the first list of CRDs is in, freed memory goes back to the system at once: mimalloc
/// purges on a thread's later allocations, so the pages of the lists, freed by runtime
/// threads that then idle, stayed resident (benches/cluster.rs: 69 MiB once 1,000 CRDs are
/// listed, 44 MiB so). Then the default delay again, which reviews need (purging at once
/// cost a quarter of benches/serve.rs's throughput).
fn purge_until_listed(schemas: Arc<ClusterSchemas>) {
    tokio::spawn(async move {
        while !schemas.readiness().0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        purge_delay(DEFAULT_PURGE_DELAY_MS);
    });
}

/// The cluster's schemas, its calls to the API server counted in `metrics`.
async fn cluster_schemas(
    args: &ServeArgs,
    metrics: &Arc<Metrics>,
) -> Result<(ClusterSchemas, kube::Client), connect::ConnectError> {
    // kube's TLS needs the process's rustls provider.
    let _ = server::tls::provider();
    let (recorder, counting) = ApiCallRecorder::new(metrics.clone());
    tokio::spawn(counting);
    let observer: CallObserver = Arc::new(move |call| {
        recorder.record(ApiCall {
            labels: ApiCallLabels {
                verb: call.verb,
                resource: call.resource,
            },
            duration: call.duration,
            error: call.error,
        });
    });
    let options = ClusterOptions {
        fail_on_data_errors: args.fail_on_data_errors,
        page_size: args.list_page_size,
        request_timeout: args.api_timeout,
        openapi_refresh: args.openapi_refresh,
        function_calls: (args.function_calls == Switch::On).then(|| FunctionCallOptions {
            namespace: args.crossplane_namespace.clone(),
        }),
        ..ClusterOptions::default()
    };
    let (schemas, client) =
        ClusterSchemas::connect(args.kubeconfig.as_deref(), options, observer).await?;
    tracing::info!(server = %schemas.server(), "watching CRDs and XRDs");
    Ok((schemas, client))
}

/// How often the webhook configuration's caBundle is checked for this server's CA.
const CA_BUNDLE_INTERVAL: Duration = Duration::from_secs(30);

/// Publishes the self-signed CA in the caBundle of a ValidatingWebhookConfiguration.
struct WebhookConfigurationCa {
    client: kube::Client,
    name: String,
}

impl server::CaPublisher for WebhookConfigurationCa {
    fn publish(&self, ca_pem: &str) -> watch::Receiver<Readiness> {
        let (tx, rx) = watch::channel(Readiness::not_ready(format!(
            "adding this server's CA to the caBundle of ValidatingWebhookConfiguration {}",
            self.name
        )));
        tokio::spawn(ca_bundle::keep(
            ca_bundle::api(self.client.clone()),
            self.name.clone(),
            ca_pem.to_owned(),
            CA_BUNDLE_INTERVAL,
            move |trusted, detail| {
                let readiness = if trusted {
                    Readiness::ready(detail)
                } else {
                    Readiness::not_ready(detail)
                };
                tx.send_replace(readiness);
            },
        ));
        rx
    }
}

/// The self-signed CA's name: the pod's (host) name tells replicas' CAs apart in a shared
/// caBundle, and a restarted container's from its earlier run's.
fn ca_common_name() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    if host.is_empty() {
        ca_bundle::CA_NAME_PREFIX.to_owned()
    } else {
        format!("{} {host}", ca_bundle::CA_NAME_PREFIX)
    }
}
