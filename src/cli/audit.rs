//! `composition-webhook audit [FILE_OR_DIR]...`: every Composition validated and reported
//! one by one, with a summary for the whole estate.
//!
//! - With files: read exactly as `validate` reads them (CRDs, MRDs and XRDs among them and
//!   `--crds` as schemas).
//! - Without: the cluster's. Its schemas come from the cache `serve` uses
//!   ([`ClusterSchemas`]: CRDs, MRDs, XRDs and Functions listed and watched, each needed kind
//!   fetched once); Compositions are listed a page at a time and each is validated as
//!   admission would (the API server already accepted it), within its own time limit, before
//!   the next page is asked for: only the reports are kept, so a cluster of thousands of
//!   Compositions is audited in bounded memory.
//!
//! Exit status as `validate`'s: 0 when every Composition is allowed, 1 when any is denied, 2
//! for input errors, or when the cluster cannot be reached, its Compositions cannot be
//! listed, or its schemas are not listed in time.

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::output::{self, AuditSource};
use super::serve::{REVIEW_STACK_BYTES, duration};
use super::{
    CheckArgs, EXIT_INPUT_ERROR, FilesRun, Origin, OutputFormat, Validated, exit_status,
    no_composition_found, print, sarif, validate_files,
};
use crate::cluster::function_endpoints::{DEFAULT_NAMESPACE, FunctionCallOptions};
use crate::cluster::required::ClusterRequired;
use crate::cluster::{ClusterOptions, ClusterSchemas, UntilDeadline, describe_api_error};
use crate::render::function_steps::Required;
use crate::runner::steps::{FirstOf, FunctionCaller, FunctionCalls, Resolve};
use crate::validate::{Options, Validator};

/// Arguments of `audit`.
#[derive(Debug, clap::Args)]
pub(super) struct AuditArgs {
    #[command(flatten)]
    check: CheckArgs,

    /// Kubeconfig of the cluster to audit (without FILE_OR_DIR) [default: KUBECONFIG, ~/.kube/config, else the pod's service account].
    #[arg(long, value_name = "FILE", env = "COMPOSITION_WEBHOOK_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,

    /// How long to wait for the cluster's CRDs, MRDs, XRDs and Functions to be listed before giving up (exit status 2).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration, env = "COMPOSITION_WEBHOOK_AUDIT_WAIT")]
    wait: Duration,

    /// Time one Composition of the cluster may take, fetching its schemas included; past it the Composition gets a finding (an error in strict mode, a warning in loose and warn).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration, env = "COMPOSITION_WEBHOOK_AUDIT_COMPOSITION_TIMEOUT")]
    composition_timeout: Duration,

    /// Crossplane's namespace (without FILE_OR_DIR): where the client certificate its functions accept is read from, Secret crossplane-tls-client, to run pipeline steps through the cluster's functions.
    #[arg(long, value_name = "NAMESPACE", default_value = DEFAULT_NAMESPACE, env = "COMPOSITION_WEBHOOK_CROSSPLANE_NAMESPACE")]
    crossplane_namespace: String,

    /// Files or directories holding Compositions (CRDs, MRDs and XRDs among them are used as schemas); `-` reads standard input. Without them, every Composition of the cluster is audited.
    #[arg(value_name = "FILE_OR_DIR")]
    inputs: Vec<PathBuf>,
}

/// Compositions asked for per list request.
const PAGE_SIZE: u32 = 100;

/// How long one list request may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// The Compositions' collection.
const COMPOSITIONS_PATH: &str = "/apis/apiextensions.crossplane.io/v1/compositions";

/// Runs `audit`; the exit status.
pub(super) fn run(args: &AuditArgs) -> u8 {
    let mut stderr = io::stderr().lock();
    if args.inputs.is_empty() {
        if !args.check.schemas.crds.is_empty() || !args.check.functions.paths.is_empty() {
            return fail(
                args,
                &mut stderr,
                "--crds and --functions are for auditing files (FILE_OR_DIR): the cluster's Compositions are audited against the cluster's own schemas and Functions".to_string(),
            );
        }
        audit_cluster(args, &mut stderr)
    } else {
        if args.kubeconfig.is_some() {
            let _ = writeln!(
                stderr,
                "warning: --kubeconfig is not used: files are audited, not the cluster"
            );
        }
        audit_files(args, &mut stderr)
    }
}

/// Says why nothing could be audited (also as a SARIF log with `--output sarif`, which CI
/// uploads whatever happened); exit status 2.
fn fail(args: &AuditArgs, stderr: &mut impl Write, message: String) -> u8 {
    let _ = writeln!(stderr, "error: {message}");
    if args.check.output == OutputFormat::Sarif {
        let notices = [sarif::Notice::message(message)];
        print(stderr, |out| sarif::write(out, &[], &notices));
    }
    EXIT_INPUT_ERROR
}

fn audit_files(args: &AuditArgs, stderr: &mut impl Write) -> u8 {
    let FilesRun {
        results,
        errors,
        schema_count,
        api,
    } = validate_files(&args.check, &args.inputs, stderr);
    for e in &errors {
        let _ = writeln!(stderr, "error: {e}");
    }
    if results.is_empty() && errors.is_empty() {
        return fail(args, stderr, no_composition_found(&args.inputs));
    }
    let source = AuditSource::Files {
        schemas: schema_count,
        api,
    };
    let notices: Vec<_> = errors.iter().map(sarif::Notice::from).collect();
    if report(args, stderr, &results, &source, &notices) {
        exit_status(&results, errors.is_empty())
    } else {
        EXIT_INPUT_ERROR
    }
}

/// Prints the results in the chosen format; `false` when they could not be written.
fn report(
    args: &AuditArgs,
    stderr: &mut impl Write,
    results: &[Validated],
    source: &AuditSource,
    notices: &[sarif::Notice],
) -> bool {
    print(stderr, |out| match args.check.output {
        OutputFormat::Text => output::write_audit_text(out, results, source),
        OutputFormat::Json => output::write_audit_json(out, results, source),
        OutputFormat::Sarif => sarif::write(out, results, notices),
    })
}

fn audit_cluster(args: &AuditArgs, stderr: &mut impl Write) -> u8 {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(args, stderr, format!("cannot start the async runtime: {e}")),
    };
    // kube's TLS needs the process's rustls provider.
    let _ = crate::server::tls::provider();
    let connected = runtime.block_on(ClusterSchemas::connect(
        args.kubeconfig.as_deref(),
        ClusterOptions {
            function_calls: Some(FunctionCallOptions {
                namespace: args.crossplane_namespace.clone(),
            }),
            ..ClusterOptions::default()
        },
        Arc::new(|_| {}),
    ));
    let (schemas, client) = match connected {
        Ok(connected) => connected,
        Err(e) => return fail(args, stderr, e.to_string()),
    };
    let server = schemas.server().to_string();
    // Objects nest as deep as the API server allows (10,000 levels), and reading and
    // validating them recurses: on a thread with room for that, as the server's reviews.
    let audited = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("audit".to_string())
            .stack_size(REVIEW_STACK_BYTES)
            .spawn_scoped(scope, || {
                audit_listed(args, &runtime.handle().clone(), &client, &schemas)
            })
            .map_err(|e| format!("cannot start the audit: {e}"))?
            .join()
            .map_err(|_| "internal error: the audit failed unexpectedly".to_string())?
    });
    drop(schemas);
    runtime.shutdown_background();
    let results = match audited {
        Ok(results) => results,
        Err(message) => return fail(args, stderr, message),
    };
    if report(args, stderr, &results, &AuditSource::Cluster(server), &[]) {
        exit_status(&results, true)
    } else {
        EXIT_INPUT_ERROR
    }
}

/// Lists the cluster's Compositions page by page and validates each page's before asking for
/// the next; the first page is asked for before waiting for the schemas, so that a refused
/// list fails at once.
fn audit_listed(
    args: &AuditArgs,
    runtime: &tokio::runtime::Handle,
    client: &kube::Client,
    schemas: &ClusterSchemas,
) -> Result<Vec<Validated>, String> {
    let server = schemas.server();
    let mut page = runtime.block_on(list_page(client, server, None))?;
    wait_for_schemas(schemas, args.wait)?;
    // The API server has accepted every one of them.
    let options = Options::admitted(args.check.mode.into(), !args.check.no_render);
    let mut errors = Vec::new();
    let required = args.check.functions.required_objects(&mut errors);
    let observed = args.check.functions.observed_resources(&mut errors);
    if let Some(e) = errors.first() {
        return Err(e.to_string());
    }
    // `--function-address` first, then the cluster's FunctionRevisions.
    let mut resolvers: Vec<Arc<dyn Resolve>> =
        vec![Arc::new(args.check.functions.flag_addresses())];
    if let Some(endpoints) = schemas.function_endpoints() {
        resolvers.push(Arc::new(endpoints.clone()));
    }
    // Without files of them, what functions require is read from the cluster.
    let required: Box<dyn Required + Send + Sync> = if args.check.functions.required.is_empty() {
        Box::new(ClusterRequired::new(client.clone(), runtime.clone()))
    } else {
        Box::new(required)
    };
    let calls = FunctionCalls::new(
        FunctionCaller::new(Arc::new(FirstOf(resolvers)), runtime.clone()),
        required,
    )
    .with_observed(observed);
    let calls = Some(calls);
    let mut results = Vec::new();
    loop {
        for item in page.items.drain(..) {
            let resource_version = item
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
            let until = Instant::now() + args.composition_timeout;
            let source = UntilDeadline { schemas, until };
            let validator = Validator::new(&source, options.clone())
                .with_budget(args.check.budget().with_deadline(until));
            let validator = match &calls {
                Some(calls) => validator.with_calls(calls.calls()),
                None => validator,
            };
            let report = validator.validate_owned(item);
            results.push(Validated {
                origin: Origin::Cluster { resource_version },
                positions: vec![None; report.findings.len()],
                report,
            });
        }
        match page.next.take() {
            Some(token) => page = runtime.block_on(list_page(client, server, Some(token)))?,
            None => return Ok(results),
        }
    }
}

/// Waits until the cluster's CRDs, MRDs, ManagedResourceActivationPolicies, XRDs and
/// Functions are listed, at most `wait`.
fn wait_for_schemas(schemas: &ClusterSchemas, wait: Duration) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let (ready, why) = schemas.readiness();
        if ready {
            return Ok(());
        }
        if started.elapsed() >= wait {
            return Err(format!(
                "the cluster's schemas were not listed within {wait:?}: {why}"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One page of Compositions: its items and the token of the next page.
struct Page {
    items: Vec<Value>,
    next: Option<String>,
}

/// Lists one page of Compositions (`limit` [`PAGE_SIZE`]), after `token`.
async fn list_page(
    client: &kube::Client,
    server: &str,
    token: Option<String>,
) -> Result<Page, String> {
    let mut params = kube::api::ListParams::default().limit(PAGE_SIZE);
    if let Some(token) = token {
        params = params.continue_token(&token);
    }
    let request = kube::core::Request::new(COMPOSITIONS_PATH)
        .list(&params)
        .map_err(|e| format!("cannot build the request to list Compositions: {e}"))?;
    let text = match tokio::time::timeout(LIST_TIMEOUT, client.request_text(request)).await {
        Err(_) => {
            return Err(format!(
                "the API server at {server} did not list Compositions within {} s",
                LIST_TIMEOUT.as_secs()
            ));
        }
        Ok(Err(kube::Error::Api(status))) => return Err(refused(server, &status)),
        Ok(Err(e)) => {
            return Err(format!(
                "cannot list Compositions: the API server at {server} could not be reached: {e}"
            ));
        }
        Ok(Ok(text)) => text,
    };
    parse_page(text.as_bytes()).map_err(|e| {
        format!("the API server at {server} sent a list of Compositions that cannot be read: {e}")
    })
}

/// Why the API server refused to list Compositions, in words.
fn refused(server: &str, status: &kube::core::Status) -> String {
    let answer = describe_api_error(status);
    let detail = if status.message.is_empty() {
        String::new()
    } else {
        format!(": {}", status.message)
    };
    match status.code {
        401 | 403 => format!(
            "the API server at {server} refused to list Compositions: {answer} (RBAC must allow list on compositions.apiextensions.crossplane.io){detail}"
        ),
        404 => format!(
            "the API server at {server} does not serve compositions.apiextensions.crossplane.io/v1 (is Crossplane installed?): {answer}{detail}"
        ),
        _ => {
            format!("the API server at {server} answered {answer} to listing Compositions{detail}")
        }
    }
}

/// The most a list nests: a Composition as deep as the API server allows (10,000 levels),
/// in the list's `items`.
const MAX_PAGE_DEPTH: usize = crate::go::json::MAX_NESTING_DEPTH + 2;

/// Reads a list page: `items` and `metadata.continue`.
fn parse_page(bytes: &[u8]) -> Result<Page, String> {
    // serde_json's own recursion limit (128) is below what the API server stores: the
    // shape bounds the recursion instead, on the audit's large stack.
    let shape = crate::document::json_shape(bytes, MAX_PAGE_DEPTH);
    if shape.depth > MAX_PAGE_DEPTH {
        return Err(format!("it nests more than {MAX_PAGE_DEPTH} levels deep"));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.disable_recursion_limit();
    let mut list: Value = serde::Deserialize::deserialize(&mut de).map_err(|e| e.to_string())?;
    let next = list
        .pointer("/metadata/continue")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    let items = match list.get_mut("items").map(Value::take) {
        Some(Value::Array(items)) => items,
        Some(Value::Null) | None => Vec::new(),
        Some(_) => return Err("its items are not a list".to_string()),
    };
    Ok(Page { items, next })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_gives_its_items_and_the_next_token() {
        let page = parse_page(
            br#"{"kind":"CompositionList","metadata":{"continue":"abc"},"items":[{"a":1},{"b":2}]}"#,
        );
        let page = page.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            page.items,
            [serde_json::json!({"a": 1}), serde_json::json!({"b": 2})]
        );
        assert_eq!(page.next.as_deref(), Some("abc"));
        let last = parse_page(br#"{"metadata":{"continue":""},"items":null}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(last.items.is_empty());
        assert_eq!(last.next, None);
        assert_eq!(
            parse_page(br#"{"items":{}}"#).err().as_deref(),
            Some("its items are not a list")
        );
    }

    #[test]
    fn a_page_nesting_past_the_api_servers_limit_is_refused_unread() {
        let deep = format!(
            r#"{{"items":[{}{}]}}"#,
            "[".repeat(MAX_PAGE_DEPTH),
            "]".repeat(MAX_PAGE_DEPTH)
        );
        assert_eq!(
            parse_page(deep.as_bytes()).err(),
            Some(format!("it nests more than {MAX_PAGE_DEPTH} levels deep"))
        );
    }

    #[test]
    fn refusals_say_what_to_do() {
        let status = |code: u16, reason: &str, message: &str| kube::core::Status {
            code,
            reason: reason.to_string(),
            message: message.to_string(),
            ..kube::core::Status::default()
        };
        assert_eq!(
            refused("https://k:6443/", &status(403, "Forbidden", "no")),
            "the API server at https://k:6443/ refused to list Compositions: 403 Forbidden (RBAC must allow list on compositions.apiextensions.crossplane.io): no"
        );
        assert_eq!(
            refused("https://k:6443/", &status(404, "NotFound", "")),
            "the API server at https://k:6443/ does not serve compositions.apiextensions.crossplane.io/v1 (is Crossplane installed?): 404 NotFound"
        );
        assert_eq!(
            refused("https://k:6443/", &status(500, "InternalError", "etcd")),
            "the API server at https://k:6443/ answered 500 InternalError to listing Compositions: etcd"
        );
    }
}
