//! The core's [`StepRunner`] over gRPC: a pipeline step's JSON request as a
//! `RunFunctionRequest`, sent by a [`FunctionClient`] per function, its answer back as
//! JSON within bounds. Validation runs on its own threads and is synchronous; each call
//! blocks that thread on a Tokio runtime until the answer or the deadline, whichever
//! comes first.
//!
//! Where a function runs comes from a [`Resolve`]: addresses given offline
//! ([`Addresses`]), or the cluster's FunctionRevisions. A function whose address changes
//! gets a new client (and so a new connection and breaker).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use prost::Message;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::proto::{self, RequestMeta, RunFunctionRequest, RunFunctionResponse};
use super::{AnswerLimits, Config, FunctionClient, RunError};
use crate::render::Calls;
use crate::render::function_steps::{
    FailureKind, Matching, Required, Requirements, ResourceSelector, ResultSeverity, StepAnswer,
    StepFailure, StepRequest, StepResult, StepRunner,
};
use crate::render::structpb::{self, Allowance};

/// Where a function runs now.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// What identifies it (the address, or the revision and its address): a change makes
    /// a new client.
    pub key: String,
    /// How to reach it.
    pub config: Config,
}

/// Tells where functions run.
pub trait Resolve: Send + Sync {
    /// Where `function` runs: `Err(None)` when nothing says, `Err(Some(why))` when it
    /// should be reachable and is not.
    fn resolve(&self, function: &str) -> Result<Resolved, Option<String>>;
}

/// Addresses given by name (`--function-address`, `render.crossplane.io` annotations):
/// insecure gRPC, as functions run with `--insecure` outside a cluster.
#[derive(Debug, Clone, Default)]
pub struct Addresses {
    by_function: BTreeMap<String, String>,
}

impl Addresses {
    /// No address.
    pub fn new() -> Self {
        Addresses::default()
    }

    /// `function` at `address` (`host:port`, or `http://host:port`); a later one wins.
    pub fn insert(&mut self, function: impl Into<String>, address: &str) {
        let address = if address.contains("://") {
            address.to_string()
        } else {
            format!("http://{address}")
        };
        self.by_function.insert(function.into(), address);
    }

    /// Whether none is known.
    pub fn is_empty(&self) -> bool {
        self.by_function.is_empty()
    }
}

impl Resolve for Addresses {
    fn resolve(&self, function: &str) -> Result<Resolved, Option<String>> {
        let address = self.by_function.get(function).ok_or(None)?;
        Ok(Resolved {
            key: address.clone(),
            config: Config::insecure(address.clone()),
        })
    }
}

/// What running functions needs: the caller and the source of what they require.
pub struct FunctionCalls {
    caller: FunctionCaller,
    required: Box<dyn Required + Send + Sync>,
    observed: BTreeMap<String, Map<String, Value>>,
}

impl std::fmt::Debug for FunctionCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FunctionCalls")
            .field("caller", &self.caller)
            .finish_non_exhaustive()
    }
}

impl FunctionCalls {
    /// Calls through `caller`, requirements answered by `required`.
    pub fn new(caller: FunctionCaller, required: Box<dyn Required + Send + Sync>) -> Self {
        FunctionCalls {
            caller,
            required,
            observed: BTreeMap::new(),
        }
    }

    /// The same calls, with these observed composed resources (by name).
    pub fn with_observed(mut self, observed: BTreeMap<String, Map<String, Value>>) -> Self {
        self.observed = observed;
        self
    }

    /// The core's view of them.
    pub fn calls(&self) -> Calls<'_> {
        Calls {
            runner: &self.caller,
            required: self.required.as_ref(),
            observed: None,
            keep_answers: false,
            observed_resources: (!self.observed.is_empty()).then_some(&self.observed),
        }
    }
}

/// The first of several sources that knows where a function runs (`--function-address`
/// before the cluster's FunctionRevisions).
pub struct FirstOf(pub Vec<Arc<dyn Resolve>>);

impl Resolve for FirstOf {
    fn resolve(&self, function: &str) -> Result<Resolved, Option<String>> {
        let mut why = None;
        for r in &self.0 {
            match r.resolve(function) {
                Ok(resolved) => return Ok(resolved),
                Err(Some(w)) => why = why.or(Some(w)),
                Err(None) => {}
            }
        }
        Err(why)
    }
}

/// Every capability Crossplane v2.3.4 announces (`SupportedCapabilities`).
const CAPABILITIES: [proto::Capability; 5] = [
    proto::Capability::Capabilities,
    proto::Capability::RequiredResources,
    proto::Capability::Credentials,
    proto::Capability::Conditions,
    proto::Capability::RequiredSchemas,
];

/// Calls functions for the core, blocking the calling thread.
pub struct FunctionCaller {
    resolve: Arc<dyn Resolve>,
    clients: Mutex<HashMap<String, (String, Arc<FunctionClient>)>>,
    handle: tokio::runtime::Handle,
    /// A runtime of its own (the CLI's), kept alive with the caller.
    _runtime: Option<tokio::runtime::Runtime>,
    limits: AnswerLimits,
    max_call: Duration,
}

impl std::fmt::Debug for FunctionCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FunctionCaller")
            .field("max_call", &self.max_call)
            .finish_non_exhaustive()
    }
}

/// The longest one call may take when the validation has no deadline of its own
/// (`crossplane composition render --timeout` defaults to a minute for a whole render).
pub const DEFAULT_MAX_CALL: Duration = Duration::from_secs(30);

impl FunctionCaller {
    /// A caller on the runtime of `handle` (the server's). Must not be used from that
    /// runtime's own worker threads.
    pub fn new(resolve: Arc<dyn Resolve>, handle: tokio::runtime::Handle) -> Self {
        FunctionCaller {
            resolve,
            clients: Mutex::new(HashMap::new()),
            handle,
            _runtime: None,
            limits: AnswerLimits::DEFAULT,
            max_call: DEFAULT_MAX_CALL,
        }
    }

    /// A caller with a runtime of its own (one worker), for the CLI.
    pub fn with_own_runtime(resolve: Arc<dyn Resolve>) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .thread_name("function-calls")
            .build()?;
        let mut caller = FunctionCaller::new(resolve, runtime.handle().clone());
        caller._runtime = Some(runtime);
        Ok(caller)
    }

    /// The client of `function` at `resolved`, made anew when its address changed.
    fn client(&self, function: &str, resolved: Resolved) -> Result<Arc<FunctionClient>, RunError> {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((key, client)) = clients.get(function)
            && *key == resolved.key
        {
            return Ok(client.clone());
        }
        // The channel spawns its connection task on the runtime.
        let _entered = self.handle.enter();
        let client = Arc::new(FunctionClient::new(function, resolved.config)?);
        clients.insert(function.to_string(), (resolved.key, client.clone()));
        Ok(client)
    }

    /// Runs `future` to its end on the runtime from this (non-runtime) thread.
    fn block<F: std::future::Future>(&self, future: F) -> F::Output {
        match tokio::runtime::Handle::try_current() {
            // Inside a multi-threaded runtime's worker (a test's): give the worker up first.
            Ok(_) => tokio::task::block_in_place(|| self.handle.block_on(future)),
            Err(_) => self.handle.block_on(future),
        }
    }
}

impl StepRunner for FunctionCaller {
    fn address(&self, function: &str) -> Result<String, Option<String>> {
        self.resolve.resolve(function).map(|r| {
            let address = r.config.address;
            address
                .split_once("://")
                .map_or(address.clone(), |(_, rest)| rest.to_string())
        })
    }

    fn run(
        &self,
        function: &str,
        request: &StepRequest<'_>,
        deadline: Option<Instant>,
    ) -> Result<StepAnswer, StepFailure> {
        let resolved = self.resolve.resolve(function).map_err(|why| StepFailure {
            kind: FailureKind::Unreachable,
            message: why.unwrap_or_else(|| format!("no address of function {function} is known")),
        })?;
        let client = self.client(function, resolved).map_err(failure)?;
        let message = to_proto(request).map_err(|e| StepFailure {
            kind: FailureKind::TooLarge,
            message: format!("function {function}: the request cannot be built: {e}"),
        })?;
        // Three quarters of the time left: a function that never answers leaves the rest
        // of the review the time to finish, its step told unrendered.
        let timeout = deadline
            .map(|d| d.saturating_duration_since(Instant::now()).mul_f32(0.75))
            .unwrap_or(self.max_call)
            .min(self.max_call);
        if timeout.is_zero() {
            return Err(StepFailure {
                kind: FailureKind::Deadline,
                message: format!("function {function}: the review's deadline has passed"),
            });
        }
        let response = self.block(client.run(message, timeout)).map_err(failure)?;
        from_proto(function, &response, self.limits)
    }
}

/// A client's error as the core's failure.
fn failure(e: RunError) -> StepFailure {
    let kind = match &e {
        RunError::Deadline { .. } => FailureKind::Deadline,
        RunError::TooLarge { .. } => FailureKind::TooLarge,
        RunError::BadAnswer { .. } => FailureKind::BadAnswer,
        RunError::Failed { .. } | RunError::Unimplemented { .. } => FailureKind::Failed,
        _ => FailureKind::Unreachable,
    };
    StepFailure {
        kind,
        message: e.to_string(),
    }
}

fn resource(
    object: &Map<String, Value>,
    a: &mut Allowance,
) -> Result<proto::Resource, structpb::StructError> {
    Ok(proto::Resource {
        resource: Some(a.encode_object(object)?),
        ..Default::default()
    })
}

/// The request Crossplane builds for a step (`FunctionComposer.Compose`): no credentials,
/// `meta.tag` the hex SHA-256 of the deterministic encoding of the rest, every capability.
pub fn to_proto(r: &StepRequest<'_>) -> Result<RunFunctionRequest, structpb::StructError> {
    // Our own objects, bounded as an answer is: what a function cannot take is not sent.
    let mut a = Allowance::new(structpb::Limits {
        max_values: 1024 * 1024,
        ..structpb::Limits::DEFAULT
    });
    let observed = proto::State {
        composite: Some(resource(r.observed_composite, &mut a)?),
        resources: BTreeMap::new(),
    };
    let mut desired = proto::State {
        composite: match r.desired_composite {
            Some(c) => Some(resource(c, &mut a)?),
            None => None,
        },
        resources: BTreeMap::new(),
    };
    for (name, object) in r.desired_resources {
        desired
            .resources
            .insert(name.clone(), resource(object, &mut a)?);
    }
    let input = match r.input {
        Some(Value::Object(input)) => Some(a.encode_object(input)?),
        _ => None,
    };
    let context = match r.context {
        Some(c) => Some(a.encode_object(c)?),
        None => None,
    };
    let mut resources = |given: &BTreeMap<String, Option<Vec<Value>>>| {
        let mut out = BTreeMap::new();
        for (name, found) in given {
            let mut items = Vec::new();
            for object in found.iter().flatten() {
                if let Value::Object(o) = object {
                    items.push(resource(o, &mut a)?);
                }
            }
            out.insert(name.clone(), proto::Resources { items });
        }
        Ok::<_, structpb::StructError>(out)
    };
    let required_resources = resources(r.required_resources)?;
    let extra_resources = resources(r.extra_resources)?;
    let mut required_schemas = BTreeMap::new();
    for (name, schema) in r.required_schemas {
        let openapi_v3 = match schema {
            Some(Value::Object(s)) => Some(a.encode_object(s)?),
            _ => None,
        };
        required_schemas.insert(name.clone(), proto::Schema { openapi_v3 });
    }
    let mut request = RunFunctionRequest {
        meta: None,
        observed: Some(observed),
        desired: Some(desired),
        input,
        context,
        extra_resources,
        credentials: BTreeMap::new(),
        required_resources,
        required_schemas,
    };
    let tag = hex::encode(Sha256::digest(request.encode_to_vec()));
    request.meta = Some(RequestMeta {
        tag,
        capabilities: CAPABILITIES.iter().map(|c| *c as i32).collect(),
    });
    Ok(request)
}

/// An answer as JSON, within `limits`.
pub fn from_proto(
    function: &str,
    response: &RunFunctionResponse,
    limits: AnswerLimits,
) -> Result<StepAnswer, StepFailure> {
    let bad = |message: String| StepFailure {
        kind: FailureKind::BadAnswer,
        message: format!("function {function} answered what cannot be read: {message}"),
    };
    let desired = super::desired(response, limits).map_err(|e| bad(e.to_string()))?;
    let context = match &response.context {
        Some(c) => {
            let mut context = structpb::from_struct(c, limits.values)
                .map_err(|e| bad(format!("the context: {e}")))?;
            context.values_mut().for_each(structpb::restore_integers);
            Some(context)
        }
        None => None,
    };
    let results = response
        .results
        .iter()
        .map(|r| StepResult {
            severity: match proto::Severity::try_from(r.severity) {
                Ok(proto::Severity::Fatal) => ResultSeverity::Fatal,
                Ok(proto::Severity::Normal) => ResultSeverity::Normal,
                // Crossplane treats an unspecified severity as a warning.
                _ => ResultSeverity::Warning,
            },
            message: crate::server::warnings::truncate(&r.message, MAX_RESULT_MESSAGE),
            reason: r.reason.clone(),
        })
        .take(MAX_RESULTS)
        .collect();
    let requirements = response.requirements.as_ref().map(|q| {
        let selectors = |m: &BTreeMap<String, proto::ResourceSelector>| {
            m.iter()
                .map(|(name, s)| {
                    let matching = match &s.r#match {
                        Some(proto::resource_selector::Match::MatchName(n)) => {
                            Matching::Name(n.clone())
                        }
                        Some(proto::resource_selector::Match::MatchLabels(l)) => {
                            Matching::Labels(l.labels.clone())
                        }
                        None => Matching::Labels(BTreeMap::new()),
                    };
                    let selector = ResourceSelector {
                        api_version: s.api_version.clone(),
                        kind: s.kind.clone(),
                        matching,
                        namespace: s.namespace.clone(),
                    };
                    (name.clone(), selector)
                })
                .take(MAX_SELECTORS)
                .collect()
        };
        Requirements {
            extra_resources: selectors(&q.extra_resources),
            resources: selectors(&q.resources),
            schemas: q
                .schemas
                .iter()
                .map(|(name, s)| (name.clone(), (s.api_version.clone(), s.kind.clone())))
                .take(MAX_SELECTORS)
                .collect(),
        }
    });
    Ok(StepAnswer {
        desired_composite: desired.composite,
        desired_resources: desired.resources,
        results,
        context,
        requirements,
    })
}

/// The requirements of each kind one answer may ask for (each is a lookup).
const MAX_SELECTORS: usize = 64;
/// The results of one answer kept (each a finding).
const MAX_RESULTS: usize = 100;
/// The characters of a result's message kept.
const MAX_RESULT_MESSAGE: usize = 1024;
