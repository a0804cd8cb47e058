//! A pipeline's steps of other functions than patch-and-transform, run for real as
//! Crossplane v2.3.4 runs them (`composition_functions.go`, `FunctionComposer.Compose`;
//! `internal/xfn/required_resources.go`, `FetchingFunctionRunner`), through a
//! [`StepRunner`] the shell provides (gRPC to the function, `crate::runner`). The core
//! knows the protocol only as JSON.
//!
//! Each step gets the same observed state (the composite resource, no composed resources),
//! the desired state and the context the steps before it left; its answer's desired state
//! replaces the running one, its context the running context. A step is called again while
//! it asks for other required resources or schemas than the call before (at most six
//! calls), each answered by a [`Required`] source: resources from files or the cluster,
//! schemas from the schema catalog. Credentials are never sent. A Fatal result stops the
//! pipeline.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{Map, Value};

/// How Crossplane counts a requirements loop: the index runs 0..=5, so a step is called at
/// most six times (`MaxRequirementsIterations`).
pub const MAX_CALLS_PER_STEP: usize = 6;

/// One call of a function, as JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRequest<'a> {
    /// The step's name (`spec.pipeline[i].step`).
    pub step: &'a str,
    /// The observed composite resource (the mock, or a real XR).
    pub observed_composite: &'a Map<String, Value>,
    /// The observed composed resources, by name (`--observed-resources`; none in a review).
    pub observed_resources: &'a BTreeMap<String, Map<String, Value>>,
    /// The desired composite resource the steps before left (only its status counts).
    pub desired_composite: Option<&'a Map<String, Value>>,
    /// The desired composed resources the steps before left, by name.
    pub desired_resources: &'a BTreeMap<String, Map<String, Value>>,
    /// The step's `input`.
    pub input: Option<&'a Value>,
    /// The pipeline's context.
    pub context: Option<&'a Map<String, Value>>,
    /// Required resources answered, by requirement name; `None`: none was found.
    pub required_resources: &'a BTreeMap<String, Option<Vec<Value>>>,
    /// The same for the deprecated `extra_resources` requirements (the request's field 6).
    pub extra_resources: &'a BTreeMap<String, Option<Vec<Value>>>,
    /// Required schemas answered, by requirement name (the kind's OpenAPI v3 schema);
    /// `None`: the kind is not known.
    pub required_schemas: &'a BTreeMap<String, Option<Value>>,
}

/// A result's severity (`Severity` of the protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultSeverity {
    /// Stops the pipeline: Crossplane fails the reconcile.
    Fatal,
    /// A Warning event on the XR (also what Crossplane makes of an unspecified severity).
    Warning,
    /// A Normal event.
    Normal,
}

/// One result of a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepResult {
    /// How bad.
    pub severity: ResultSeverity,
    /// The function's words.
    pub message: String,
    /// The event reason it chose, if any.
    pub reason: Option<String>,
}

/// How a required resource is selected (`ResourceSelector`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResourceSelector {
    /// `apiVersion` of the kind.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// By name or by labels.
    pub matching: Matching,
    /// The namespace; `None` or empty: cluster scoped, or every namespace.
    pub namespace: Option<String>,
}

/// The `match` of a [`ResourceSelector`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Matching {
    /// `match_name`.
    Name(String),
    /// `match_labels` (every object of the kind when empty).
    Labels(BTreeMap<String, String>),
}

/// What a step asks for before it is called again (`Requirements`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requirements {
    /// `extra_resources` (deprecated; answered in the request's field 6).
    pub extra_resources: BTreeMap<String, ResourceSelector>,
    /// `resources`.
    pub resources: BTreeMap<String, ResourceSelector>,
    /// `schemas`: `apiVersion` and kind.
    pub schemas: BTreeMap<String, (String, String)>,
}

/// A function's answer, as JSON, its integral numbers integers again.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepAnswer {
    /// The desired composite resource (only its status counts).
    pub desired_composite: Option<Map<String, Value>>,
    /// The desired composed resources by name.
    pub desired_resources: BTreeMap<String, Map<String, Value>>,
    /// Its results.
    pub results: Vec<StepResult>,
    /// The context for the next step.
    pub context: Option<Map<String, Value>>,
    /// What it asks for; `None` when the answer has no `requirements` (protobuf tells an
    /// empty message from an absent one, and so does Crossplane's loop).
    pub requirements: Option<Requirements>,
}

/// Why a function could not be run (the shell's error, in words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFailure {
    /// What kind of failure.
    pub kind: FailureKind,
    /// The error, naming the function.
    pub message: String,
}

/// The kinds of [`StepFailure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Not reached: connection refused or closed, TLS refused, circuit open.
    Unreachable,
    /// No answer within the deadline.
    Deadline,
    /// The request or the answer exceeded a limit.
    TooLarge,
    /// The answer was unreadable or out of bounds.
    BadAnswer,
    /// The function answered with a gRPC error.
    Failed,
}

/// Calls functions. Implemented by the shell over gRPC; blocking, within `deadline`.
pub trait StepRunner {
    /// Where `function` would be called (`127.0.0.1:9443`, a FunctionRevision), or why it
    /// cannot be: `Err(None)` when nothing says where it runs (the step stays opaque, as
    /// without a runner), `Err(Some(why))` when it should be reachable and is not.
    fn address(&self, function: &str) -> Result<String, Option<String>>;

    /// Calls `function` once; must return by `deadline`.
    fn run(
        &self,
        function: &str,
        request: &StepRequest<'_>,
        deadline: Option<Instant>,
    ) -> Result<StepAnswer, StepFailure>;
}

/// Answers a step's requirements. Read-only.
pub trait Required {
    /// The objects `selector` selects, sorted by namespace and name; `Ok(None)` when a
    /// name matches nothing; `Err(why)` when this source cannot know (no files of that kind,
    /// no access to the cluster).
    fn resources(&self, selector: &ResourceSelector) -> Result<Option<Vec<Value>>, String>;

    /// The OpenAPI v3 schema of `kind` at `api_version`; `None` when not known.
    fn schema(&self, api_version: &str, kind: &str) -> Option<Value>;
}

/// A source that knows no resources and no schemas.
#[derive(Debug, Clone, Copy, Default)]
pub struct NothingRequired;

impl Required for NothingRequired {
    fn resources(&self, _: &ResourceSelector) -> Result<Option<Vec<Value>>, String> {
        Err("no required resources were given".to_string())
    }

    fn schema(&self, _: &str, _: &str) -> Option<Value> {
        None
    }
}

/// Required resources from files: objects matched by `apiVersion`, kind, namespace, name
/// and labels as Crossplane's `ExistingRequiredResourcesFetcher` matches them. A kind of
/// which no object was given is not known (rather than known to have none).
#[derive(Debug, Clone, Default)]
pub struct RequiredObjects {
    objects: Vec<Value>,
}

impl RequiredObjects {
    /// The objects given.
    pub fn new(objects: Vec<Value>) -> Self {
        RequiredObjects { objects }
    }
}

impl Required for RequiredObjects {
    fn resources(&self, s: &ResourceSelector) -> Result<Option<Vec<Value>>, String> {
        let text = |o: &Value, p: &str| {
            o.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let namespace = s.namespace.as_deref().unwrap_or_default();
        let of_kind =
            |o: &&Value| text(o, "/apiVersion") == s.api_version && text(o, "/kind") == s.kind;
        if !self.objects.iter().any(|o| of_kind(&o)) {
            return Err(format!(
                "no {} {} was given with --required-resources",
                s.api_version, s.kind
            ));
        }
        let mut found: Vec<&Value> = self
            .objects
            .iter()
            .filter(of_kind)
            .filter(|o| namespace.is_empty() || text(o, "/metadata/namespace") == namespace)
            .filter(|o| match &s.matching {
                Matching::Name(name) => text(o, "/metadata/name") == *name,
                Matching::Labels(labels) => labels.iter().all(|(k, v)| {
                    o.pointer("/metadata/labels")
                        .and_then(|l| l.get(k))
                        .and_then(Value::as_str)
                        == Some(v.as_str())
                }),
            })
            .collect();
        if found.is_empty() && matches!(s.matching, Matching::Name(_)) {
            return Ok(None);
        }
        found.sort_by_key(|o| (text(o, "/metadata/namespace"), text(o, "/metadata/name")));
        Ok(Some(found.into_iter().cloned().collect()))
    }

    fn schema(&self, _: &str, _: &str) -> Option<Value> {
        None
    }
}

/// What happened to one step run.
#[derive(Debug, Clone, PartialEq)]
pub enum StepOutcome {
    /// It answered (after `calls` calls).
    Answered {
        /// Its results, in order.
        results: Vec<StepResult>,
        /// How many calls the requirements took.
        calls: usize,
        /// Requirements this tool could not answer (`name: why`): what the step composed
        /// may depend on them.
        unanswered: Vec<String>,
    },
    /// It could not be run.
    Failed(StepFailure),
    /// Its requirements never settled within [`MAX_CALLS_PER_STEP`] calls.
    Unsettled,
}

/// The desired state and context a pipeline threads from step to step.
#[derive(Debug, Clone, Default)]
pub struct Thread {
    /// The desired composite resource (`None` until a step returns one).
    pub composite: Option<Map<String, Value>>,
    /// The context (Crossplane starts with an empty Struct).
    pub context: Option<Map<String, Value>>,
    /// A step before asked for what this tool could not answer: what it left (its context,
    /// its resources) and so what every later step makes of it may differ in a cluster.
    pub uncertain: bool,
}

impl Thread {
    /// The state before the first step.
    pub fn new() -> Self {
        Thread {
            composite: None,
            context: Some(Map::new()),
            uncertain: false,
        }
    }
}

/// What every step of a pipeline observes.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The composite resource.
    pub composite: &'a Map<String, Value>,
    /// The composed resources, by name.
    pub resources: &'a BTreeMap<String, Map<String, Value>>,
}

/// Runs one step: the calls its requirements take, each answered by `required`. Returns the
/// last answer (`None` when it failed) and what happened.
#[allow(clippy::too_many_arguments)]
pub fn run_step(
    runner: &dyn StepRunner,
    required: &dyn Required,
    function: &str,
    step: &str,
    input: Option<&Value>,
    observed: Observed<'_>,
    desired: &BTreeMap<String, Map<String, Value>>,
    thread: &Thread,
    deadline: Option<Instant>,
) -> (Option<StepAnswer>, StepOutcome) {
    let mut required_resources = BTreeMap::new();
    let mut extra_resources = BTreeMap::new();
    let mut required_schemas = BTreeMap::new();
    let mut context = thread.context.clone();
    let mut previous: Option<Requirements> = None;
    let mut unanswered = Vec::new();
    for call in 1..=MAX_CALLS_PER_STEP {
        let request = StepRequest {
            step,
            observed_composite: observed.composite,
            observed_resources: observed.resources,
            desired_composite: thread.composite.as_ref(),
            desired_resources: desired,
            input,
            context: context.as_ref(),
            required_resources: &required_resources,
            extra_resources: &extra_resources,
            required_schemas: &required_schemas,
        };
        let answer = match runner.run(function, &request, deadline) {
            Ok(a) => a,
            Err(e) => return (None, StepOutcome::Failed(e)),
        };
        let fatal = answer
            .results
            .iter()
            .any(|r| r.severity == ResultSeverity::Fatal);
        if fatal || answer.requirements == previous {
            let outcome = StepOutcome::Answered {
                results: answer.results.clone(),
                calls: call,
                unanswered,
            };
            return (Some(answer), outcome);
        }
        // Asked for something new: answer it and call again with the context just returned.
        required_resources.clear();
        extra_resources.clear();
        required_schemas.clear();
        unanswered.clear();
        let asked = answer.requirements.clone().unwrap_or_default();
        for (selectors, into) in [
            (&asked.extra_resources, &mut extra_resources),
            (&asked.resources, &mut required_resources),
        ] {
            for (name, selector) in selectors {
                let found = required.resources(selector).unwrap_or_else(|why| {
                    unanswered.push(format!(
                        "{name} ({} {}): {why}",
                        selector.api_version, selector.kind
                    ));
                    None
                });
                into.insert(name.clone(), found);
            }
        }
        for (name, (api_version, kind)) in &asked.schemas {
            let schema = required.schema(api_version, kind);
            if schema.is_none() {
                unanswered.push(format!("schema {name} ({api_version} {kind}): not known"));
            }
            required_schemas.insert(name.clone(), schema);
        }
        context = answer.context.clone();
        previous = answer.requirements;
    }
    (None, StepOutcome::Unsettled)
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use serde_json::json;

    use super::*;

    /// What one request held: its required resources and its context.
    type Seen = (
        BTreeMap<String, Option<Vec<Value>>>,
        Option<Map<String, Value>>,
    );

    /// A runner answering from a script of answers, recording each request's required
    /// resources and context.
    struct Scripted {
        answers: RefCell<Vec<Result<StepAnswer, StepFailure>>>,
        seen: RefCell<Vec<Seen>>,
    }

    impl Scripted {
        fn new(answers: Vec<Result<StepAnswer, StepFailure>>) -> Self {
            Scripted {
                answers: RefCell::new(answers.into_iter().rev().collect()),
                seen: RefCell::default(),
            }
        }
    }

    impl StepRunner for Scripted {
        fn address(&self, _: &str) -> Result<String, Option<String>> {
            Ok("test".into())
        }

        fn run(
            &self,
            _: &str,
            request: &StepRequest<'_>,
            _: Option<Instant>,
        ) -> Result<StepAnswer, StepFailure> {
            self.seen
                .borrow_mut()
                .push((request.required_resources.clone(), request.context.cloned()));
            self.answers
                .borrow_mut()
                .pop()
                .unwrap_or_else(|| Ok(StepAnswer::default()))
        }
    }

    fn asking(name: &str, context: i64) -> StepAnswer {
        let selector = ResourceSelector {
            api_version: "apiextensions.crossplane.io/v1beta1".into(),
            kind: "EnvironmentConfig".into(),
            matching: Matching::Name(name.into()),
            namespace: None,
        };
        StepAnswer {
            requirements: Some(Requirements {
                resources: BTreeMap::from([("env".to_string(), selector)]),
                ..Requirements::default()
            }),
            context: json!({"n": context}).as_object().cloned(),
            ..StepAnswer::default()
        }
    }

    fn run(runner: &Scripted, required: &dyn Required) -> (Option<StepAnswer>, StepOutcome) {
        let observed = Map::new();
        run_step(
            runner,
            required,
            "f",
            "s",
            None,
            Observed {
                composite: &observed,
                resources: &BTreeMap::new(),
            },
            &BTreeMap::new(),
            &Thread::new(),
            None,
        )
    }

    fn config(name: &str) -> Value {
        json!({"apiVersion": "apiextensions.crossplane.io/v1beta1", "kind": "EnvironmentConfig",
               "metadata": {"name": name}, "data": {"region": "eu"}})
    }

    #[test]
    fn a_step_is_called_again_until_it_asks_for_what_it_asked_before() {
        // Crossplane's loop: ask, get, ask the same: done after the second call, with the
        // context the first call returned sent to the second.
        let runner = Scripted::new(vec![Ok(asking("a", 1)), Ok(asking("a", 2))]);
        let required = RequiredObjects::new(vec![config("a"), config("b")]);
        let (answer, outcome) = run(&runner, &required);
        assert_eq!(
            outcome,
            StepOutcome::Answered {
                results: Vec::new(),
                calls: 2,
                unanswered: Vec::new()
            }
        );
        assert_eq!(
            answer.and_then(|a| a.context),
            json!({"n": 2}).as_object().cloned()
        );
        let seen = runner.seen.borrow();
        assert_eq!(seen[0].0, BTreeMap::new());
        assert_eq!(seen[0].1, Some(Map::new()));
        assert_eq!(
            seen[1].0,
            BTreeMap::from([("env".to_string(), Some(vec![config("a")]))])
        );
        assert_eq!(seen[1].1, json!({"n": 1}).as_object().cloned());
    }

    #[test]
    fn requirements_that_never_settle_stop_after_six_calls() {
        let runner = Scripted::new((0..10).map(|i| Ok(asking(&format!("c{i}"), i))).collect());
        let (answer, outcome) = run(&runner, &RequiredObjects::default());
        assert_eq!((answer, outcome), (None, StepOutcome::Unsettled));
        assert_eq!(runner.seen.borrow().len(), MAX_CALLS_PER_STEP);
    }

    #[test]
    fn a_name_that_matches_nothing_is_none_and_a_source_that_cannot_know_is_unanswered() {
        let runner = Scripted::new(vec![Ok(asking("missing", 1)), Ok(asking("missing", 1))]);
        let (_, outcome) = run(&runner, &RequiredObjects::new(vec![config("a")]));
        assert!(
            matches!(outcome, StepOutcome::Answered { unanswered, .. } if unanswered.is_empty())
        );
        assert_eq!(
            runner.seen.borrow()[1].0,
            BTreeMap::from([("env".to_string(), None)])
        );
        let runner = Scripted::new(vec![Ok(asking("a", 1)), Ok(asking("a", 1))]);
        let (_, outcome) = run(&runner, &NothingRequired);
        assert_eq!(
            outcome,
            StepOutcome::Answered {
                results: Vec::new(),
                calls: 2,
                unanswered: vec![
                    "env (apiextensions.crossplane.io/v1beta1 EnvironmentConfig): no required resources were given"
                        .to_string()
                ],
            }
        );
    }

    #[test]
    fn a_fatal_result_ends_the_loop_and_a_failure_is_told() {
        let mut fatal = asking("a", 1);
        fatal.results.push(StepResult {
            severity: ResultSeverity::Fatal,
            message: "no".into(),
            reason: None,
        });
        let runner = Scripted::new(vec![Ok(fatal)]);
        let (_, outcome) = run(&runner, &RequiredObjects::default());
        assert!(matches!(outcome, StepOutcome::Answered { calls: 1, .. }));
        let failure = StepFailure {
            kind: FailureKind::Deadline,
            message: "late".into(),
        };
        let runner = Scripted::new(vec![Err(failure.clone())]);
        assert_eq!(
            run(&runner, &RequiredObjects::default()),
            (None, StepOutcome::Failed(failure))
        );
    }

    #[test]
    fn labels_select_every_match_sorted_by_namespace_and_name() {
        let labelled = |ns: &str, name: &str, env: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"namespace": ns, "name": name, "labels": {"env": env}}})
        };
        let objects = RequiredObjects::new(vec![
            labelled("b", "x", "prod"),
            labelled("a", "y", "prod"),
            labelled("a", "z", "dev"),
        ]);
        let select = |namespace: Option<&str>| ResourceSelector {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            matching: Matching::Labels(BTreeMap::from([("env".into(), "prod".into())])),
            namespace: namespace.map(str::to_string),
        };
        assert_eq!(
            objects.resources(&select(None)),
            Ok(Some(vec![
                labelled("a", "y", "prod"),
                labelled("b", "x", "prod")
            ]))
        );
        assert_eq!(
            objects.resources(&select(Some("b"))),
            Ok(Some(vec![labelled("b", "x", "prod")]))
        );
    }
}
