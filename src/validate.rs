//! The validation engine: one Composition in, a [`Report`] out.
//!
//! Order: read the model (with the API server's defaults), logical checks, the mode
//! annotation, schema lookups; then the mode gives every finding its severity and the
//! findings give the verdict.

use serde_json::Value;

use crate::budget::{self, Budget, Exceeded};
use crate::checks::{self, schema_aware, schema_aware::lookup::SchemaSource};
use crate::findings::{BadValue, ErrorType, FieldError, Finding, Path, Stage};
use crate::mode::{self, Mode, ModeSource, Verdict};
use crate::model::{Composition, ResourceSet};
use crate::render::function_steps::{StepAnswer, StepFailure, StepRequest, StepRunner};
use crate::render::{Calls, Runtime};
use crate::schema;

/// Engine settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// The mode of Compositions without the mode annotation.
    pub default_mode: Mode,
    /// Also check what the API server checks before a webhook sees a Composition (its name,
    /// the fields the Composition CRD requires): on for files, off for admission requests.
    pub as_api_server: bool,
    /// Render every composed resource from a mock composite resource and validate it
    /// against its CRD (the third level of checks).
    pub rendered: bool,
    /// The Composition CRD whose defaults apply and, with `as_api_server`, which decides what
    /// the API server would refuse: Crossplane v2.3.4's unless chosen otherwise.
    pub composition_api: schema::CompositionApi,
}

impl Options {
    /// The options for a Composition the API server has already accepted (an admission
    /// request, the cluster's Compositions for the audit and change impact): no API-server
    /// checks, since it validated the object against its Composition CRD; and of the
    /// Composition CRD's defaults, which it applied too, only the one an API server without a
    /// default mode lacks: a Crossplane before Pipeline mode (v1.10 and older), whose
    /// Compositions are in Resources mode.
    pub fn admitted(default_mode: Mode, rendered: bool) -> Self {
        Options {
            default_mode,
            as_api_server: false,
            rendered,
            composition_api: schema::CompositionApi::embedded(schema::CrossplaneVersion::V1),
        }
    }
}

impl Default for Options {
    /// Loose by default, checking as the API server would (for files), with rendered
    /// validation.
    fn default() -> Self {
        Options {
            default_mode: Mode::default(),
            as_api_server: true,
            rendered: true,
            composition_api: schema::CompositionApi::default(),
        }
    }
}

/// The result of validating one Composition.
#[derive(Debug, Clone)]
pub struct Report {
    /// `metadata.name` (empty when absent).
    pub name: String,
    /// The mode the findings were judged by (strict when the annotation is invalid).
    pub mode: Mode,
    /// Where the mode came from; `None` when the annotation is invalid.
    pub mode_source: Option<ModeSource>,
    /// Every finding, in stage order, each with its severity.
    pub findings: Vec<Finding>,
    /// Allowed or denied, and how.
    pub verdict: Verdict,
    /// Why validation stopped before its end (the budget, the deadline), if it did.
    pub stopped: Option<Exceeded>,
    /// Function calls tried (each call of a requirements loop, and each function whose
    /// address could not be told): the report then depends on more than the schemas, and
    /// is not kept as a verdict for later.
    pub function_calls: usize,
}

impl Report {
    /// Number of findings of a severity.
    pub fn count(&self, severity: crate::findings::Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }
}

/// How a validation uses the Composition's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Read by reference, its bases copied to be rendered: what needs it as it was has it.
    Keep,
    /// Used up: read into the model by value, its bases rendered into the resources
    /// ([`checks::rendered::check_taking`]). What needs it as it was (an error of the model,
    /// a finding rendered again from other XR values) asks for it again.
    UseUp,
}

/// A report, and whether a part of it needed the JSON that was used up: then the report
/// says less than [`Reading::Keep`]'s would.
struct Validated {
    report: Report,
    read_again: bool,
}

/// Validates Compositions against the schemas of a [`SchemaSource`].
pub struct Validator<'a> {
    schemas: &'a dyn SchemaSource,
    options: Options,
    budget: Budget,
    calls: Option<crate::render::Calls<'a>>,
}

impl<'a> Validator<'a> {
    /// A validator using `schemas`, each validation within the default [`budget::Limits`].
    pub fn new(schemas: &'a dyn SchemaSource, options: Options) -> Self {
        Validator {
            schemas,
            options,
            budget: Budget::default(),
            calls: None,
        }
    }

    /// The same validator, running the pipeline steps of other functions than
    /// patch-and-transform through `calls` where their functions can be reached.
    pub fn with_calls(mut self, calls: crate::render::Calls<'a>) -> Self {
        self.calls = Some(calls);
        self
    }

    /// The same validator, each validation within `budget` (limits, deadline,
    /// cancellation). Within a running budget (the server's, which also covers decoding),
    /// that one counts.
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// Validates a Composition given as JSON (from a file or an AdmissionReview): the
    /// Composition CRD's defaults are applied first, as the API server does; then, for files,
    /// what the API server would refuse (types, enums, required and unknown fields).
    pub fn validate_value(&self, value: &Value) -> Report {
        self.budget
            .run(|| {
                self.validate_defaulted(
                    &mut crate::model::with_api_defaults(value, &self.options.composition_api),
                    Reading::Keep,
                )
                .report
            })
            .0
    }

    /// As [`Validator::validate_value`], taking the JSON by value: the defaults are applied in
    /// place instead of to a copy (the webhook's case, where the object is read for this alone).
    pub fn validate_owned(&self, mut value: Value) -> Report {
        self.budget
            .run(|| {
                schema::apply_defaults(&mut value, self.options.composition_api.schema());
                self.validate_defaulted(&mut value, Reading::Keep).report
            })
            .0
    }

    /// As [`Validator::validate_owned`], using the JSON up: read into the model by value (its
    /// strings moved, not copied) and its bases rendered into the composed resources (a copy
    /// costs as many allocations as reading them did). What needs the JSON as it was, an
    /// error of the model (told with its path and value) or a finding rendered again from
    /// other XR values (to tell whether it holds for every value an enum allows), is rare:
    /// then `reread` gives the same JSON again and the Composition is validated again from
    /// it, as [`Validator::validate_owned`] would. When `reread` gives nothing, such a
    /// finding stays a warning (as for a value only the mock holds), and a model's error is
    /// told without its field.
    pub fn validate_owned_rereading(
        &self,
        mut value: Value,
        reread: impl FnOnce() -> Option<Value>,
    ) -> Report {
        self.budget
            .run(|| {
                let api = self.options.composition_api.schema();
                schema::apply_defaults(&mut value, api);
                let first = self.validate_defaulted(&mut value, Reading::UseUp);
                drop(value);
                if !first.read_again || first.report.stopped.is_some() {
                    return first.report;
                }
                let Some(mut again) = reread() else {
                    return first.report;
                };
                // Not held while the second validation allocates as much again.
                drop(first);
                schema::apply_defaults(&mut again, api);
                self.validate_defaulted(&mut again, Reading::Keep).report
            })
            .0
    }

    /// Validates a Composition to which the Composition CRD's defaults have been applied
    /// (they do not touch `metadata`, read below). The model takes the bases and inputs out of
    /// `defaulted` rather than copying them; [`Reading::UseUp`] takes all of it.
    fn validate_defaulted(&self, defaulted: &mut Value, reading: Reading) -> Validated {
        let api_errors = if self.options.as_api_server {
            api_server_errors(defaulted, &self.options.composition_api)
        } else {
            Vec::new()
        };
        // A value of the wrong type makes the typed model meaningless.
        let wrong_types = api_errors
            .iter()
            .any(|e| e.error_type == ErrorType::TypeInvalid);
        let mut findings: Vec<Finding> = api_errors
            .into_iter()
            .map(|e| Finding::new(Stage::Logical, e))
            .collect();
        // A document that already holds the review's memory (a 3 MiB array) is not copied
        // into the model: its name and mode are read below, and the finding says why.
        if !wrong_types && budget::check().is_ok() {
            if reading == Reading::UseUp {
                return match Composition::from_defaulted_value_owned(std::mem::take(defaulted)) {
                    Ok(mut c) => self.validate_with(&mut c, findings, reading),
                    Err(unread) => {
                        findings.push(Finding::new(
                            Stage::Logical,
                            FieldError::new(
                                ErrorType::TypeInvalid,
                                "",
                                BadValue::Omit,
                                unread.message,
                            ),
                        ));
                        let choice = self.mode_choice(&unread.metadata.annotations, &mut findings);
                        Validated {
                            report: self.finish(unread.metadata.name, choice, findings),
                            read_again: true,
                        }
                    }
                };
            }
            match Composition::from_defaulted_value_mut(defaulted) {
                Ok(mut c) => {
                    // The model has what it reads (the bases moved, the rest copied): the
                    // tree is freed now, not after rendering, which allocates as much again
                    // (a review of configuration-aws-network v0.2.0 held a third less).
                    *defaulted = Value::Null;
                    return self.validate_with(&mut c, findings, reading);
                }
                Err(e) => {
                    let bad = e
                        .value
                        .as_ref()
                        .map(BadValue::from_json)
                        .unwrap_or_default();
                    findings.push(Finding::new(
                        Stage::Logical,
                        FieldError::new(ErrorType::TypeInvalid, e.field, bad, e.message),
                    ));
                }
            }
        }
        let value = &*defaulted;
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        // The mode annotation can still be read when another field cannot.
        let annotations = value
            .pointer("/metadata/annotations")
            .and_then(|a| serde_json::from_value(a.clone()).ok())
            .unwrap_or_default();
        let choice = self.mode_choice(&annotations, &mut findings);
        Validated {
            report: self.finish(name, choice, findings),
            read_again: false,
        }
    }

    /// Runs the checks on a parsed Composition after `earlier` findings (the API server's). A
    /// logical finding at a field an earlier one already reports, or at a related field with
    /// the same words (a CEL rule of the CRD reports at the object it is on, a duplicate in a
    /// list keyed by a field at the item), is the same problem seen twice: it is dropped,
    /// except that its words replace a bare `Required value`.
    /// The patch-and-transform inputs are read in place
    /// ([`checks::patch_and_transform::read_steps`]), after the logical checks.
    fn validate_with(
        &self,
        owned: &mut Composition,
        mut findings: Vec<Finding>,
        reading: Reading,
    ) -> Validated {
        let logical = checks::logical::validate(owned, self.options.as_api_server);
        let (mut steps, step_errors) = checks::patch_and_transform::read_steps(owned);
        let c = &*owned;
        let logical = logical.into_iter().chain(step_errors).chain(
            steps
                .iter_mut()
                .flat_map(checks::patch_and_transform::validate_logical),
        );
        let _ = budget::check();
        for e in logical {
            // A field the API server refuses as unknown is refused whole (v1's
            // `spec.environment` under v2's API): nothing inside it is judged.
            let refused_whole = findings.iter().any(|f| {
                f.error.detail.starts_with("unknown field")
                    && e.field
                        .strip_prefix(f.error.field.as_str())
                        .is_some_and(|rest| rest.starts_with(['.', '[']))
            });
            if refused_whole {
                continue;
            }
            let same = |f: &&mut Finding| {
                let same_words = f.error.detail == e.detail
                    && (!e.detail.is_empty() || f.error.error_type == e.error_type);
                f.error.field == e.field || (same_words && related(&f.error.field, &e.field))
            };
            match findings.iter_mut().find(same) {
                Some(f) if f.error.error_type == e.error_type && f.error.detail.is_empty() => {
                    f.error.detail = e.detail
                }
                Some(_) => {}
                None => findings.push(Finding::new(Stage::Logical, e)),
            }
        }
        let choice = self.mode_choice(&c.metadata.annotations, &mut findings);
        let (schemas, lookup_findings) = schema_aware::lookup::resolve(c, self.schemas);
        findings.extend(lookup_findings);
        findings.extend(checks::functions::check(
            c,
            self.schemas.functions().as_deref(),
        ));
        let namespaced_xr =
            schema_aware::scope::composite_is_namespaced(c, self.schemas) == Some(true);
        let composite = schemas.composite.as_deref();
        // Said of this XR, the migration replaces a v2 API's refusal of the mode.
        if let Some(v2) = resources_mode_for_v2(c, composite) {
            match findings.iter_mut().find(|f| f.error.field == "spec.mode") {
                Some(f) => *f = v2,
                None => findings.push(v2),
            }
        }
        let spec = Path::new("spec");
        let resources = ResourceSet::new(
            &c.spec.resources,
            &c.spec.patch_sets,
            c.spec.environment.as_ref(),
            &spec,
        );
        let mut schema_errors = schema_aware::check(&resources, composite, &schemas.resources);
        if namespaced_xr {
            findings.extend(schema_aware::scope::check(
                &c.spec.resources,
                &spec,
                self.schemas,
            ));
        }
        let mut composed_of_steps = Vec::with_capacity(steps.len());
        for step in &steps {
            let mut lookups = Vec::new();
            composed_of_steps.push(schema_aware::lookup::resolve_bases(
                &step.input.resources,
                &step.at,
                self.schemas,
                &mut lookups,
            ));
            findings.extend(lookups);
            if namespaced_xr {
                findings.extend(schema_aware::scope::check(
                    &step.input.resources,
                    &step.at,
                    self.schemas,
                ));
            }
        }
        let unchecked =
            checks::patch_and_transform::resolve_baseless(&steps, &mut composed_of_steps);
        findings.extend(unchecked.into_iter().filter_map(|(s, i)| {
            let step = steps.get(s)?;
            let name = step.input.resources.get(i)?.name.clone().unwrap_or_default();
            Some(Finding::advisory(
                Stage::Schema,
                FieldError::not_found(
                    step.at.child("resources").index(i).child("base"),
                    name,
                    "no base, and no earlier function-patch-and-transform step composes a resource of this name (another function may): its patches, readiness checks and connection details are not checked against a schema",
                ),
            ))
        }));
        let mut dropped = Vec::new();
        for (step, composed) in steps.iter().zip(&composed_of_steps) {
            let composed = composed.as_slice();
            let set = ResourceSet::new(
                &step.input.resources,
                &step.input.patch_sets,
                step.input.environment.as_ref(),
                &step.at,
            );
            schema_errors.extend(schema_aware::check(&set, composite, composed));
            schema_errors.extend(checks::patch_and_transform::check_connection_secret(
                step, composite,
            ));
            dropped.extend(checks::patch_and_transform::dropped_composite_writes(step));
        }
        // A field with a logical error gets no second report from the schema checks.
        schema_errors.retain(|e| {
            !findings
                .iter()
                .any(|f| f.stage == Stage::Logical && related(&f.error.field, &e.field))
        });
        findings.extend(
            schema_errors
                .into_iter()
                .map(|e| Finding::new(Stage::Schema, e)),
        );
        // A patch already found wrong needs no word on where its write would have gone.
        if !dropped.is_empty() {
            let found: std::collections::BTreeSet<&str> =
                findings.iter().map(|f| f.error.field.as_str()).collect();
            dropped.retain(|d| {
                let patch = d
                    .error
                    .field
                    .strip_suffix(".toFieldPath")
                    .unwrap_or_default();
                !found
                    .range(patch..)
                    .take_while(|f| f.starts_with(patch))
                    .any(|f| f.len() == patch.len() || f[patch.len()..].starts_with(['.', '[']))
            });
        }
        findings.extend(dropped);
        // Rendering a Composition that is wrong by itself would only repeat its errors.
        let logical_errors = findings.iter().any(|f| f.stage == Stage::Logical);
        let name = c.metadata.name.clone();
        let mut read_again = false;
        let counted = self.calls.map(|k| Counted {
            inner: k.runner,
            calls: std::cell::Cell::new(0),
        });
        let calls = self.calls.zip(counted.as_ref()).map(|(k, counted)| Calls {
            runner: counted,
            ..k
        });
        if self.options.rendered && !logical_errors && !budget::spent() {
            let mock = checks::rendered::Composite::Mock(composite);
            let runtime = if self.options.as_api_server {
                runtime_of(&self.options.composition_api)
            } else {
                Runtime::Unknown
            };
            let rendered = match reading {
                Reading::Keep => checks::rendered::check(
                    owned,
                    &steps,
                    mock,
                    self.schemas,
                    &findings,
                    runtime,
                    calls,
                ),
                Reading::UseUp => {
                    let taken = checks::rendered::check_taking(
                        owned,
                        &mut steps,
                        mock,
                        self.schemas,
                        &findings,
                        runtime,
                        calls,
                    );
                    read_again = taken.needed_bases;
                    taken.findings
                }
            };
            findings.extend(rendered);
        }
        let mut report = self.finish(name, choice, findings);
        report.function_calls = counted.map_or(0, |c| c.calls.get());
        Validated { report, read_again }
    }

    /// The mode the annotations choose, its error or its note added to `findings`.
    fn mode_choice(
        &self,
        annotations: &std::collections::BTreeMap<String, String>,
        findings: &mut Vec<Finding>,
    ) -> Result<mode::ModeChoice, mode::ModeError> {
        let choice = mode::mode_from_annotations(annotations, self.options.default_mode);
        match &choice {
            Err(e) => findings.push(e.finding()),
            Ok(c) => findings.extend(c.note()),
        }
        choice
    }

    fn finish(
        &self,
        name: String,
        choice: Result<mode::ModeChoice, mode::ModeError>,
        mut findings: Vec<Finding>,
    ) -> Report {
        // An unusable mode annotation denies anyway; judge the rest strictly.
        let (mode, mode_source) = match choice {
            Ok(c) => (c.mode, Some(c.source)),
            Err(_) => (Mode::Strict, None),
        };
        let stopped = budget::exceeded();
        if let Some(e) = &stopped {
            let finding = stopped_finding(e, &mut findings);
            findings.push(finding);
        }
        findings.sort_by_key(|f| f.stage);
        mode::apply_mode(mode, &mut findings);
        let verdict = mode::verdict(&findings);
        Report {
            name,
            mode,
            mode_source,
            findings,
            verdict,
            stopped,
            function_calls: 0,
        }
    }
}

/// A runner counting the calls tried through it.
struct Counted<'a> {
    inner: &'a dyn StepRunner,
    calls: std::cell::Cell<usize>,
}

impl StepRunner for Counted<'_> {
    fn address(&self, function: &str) -> Result<String, Option<String>> {
        let address = self.inner.address(function);
        if matches!(address, Err(Some(_))) {
            self.calls.set(self.calls.get() + 1);
        }
        address
    }

    fn run(
        &self,
        function: &str,
        request: &StepRequest<'_>,
        deadline: Option<std::time::Instant>,
    ) -> Result<StepAnswer, StepFailure> {
        self.calls.set(self.calls.get() + 1);
        self.inner.run(function, request, deadline)
    }
}

/// Whose runtime renders a file's pipelines: the Composition API given says (v2's has only
/// Pipeline mode).
pub fn runtime_of(api: &schema::CompositionApi) -> Runtime {
    if api.pipeline_only() {
        Runtime::V2
    } else {
        Runtime::V1
    }
}

/// The finding for a validation the budget stopped. A render cut short proves nothing about
/// the resources, so its findings are dropped (rendering is the last stage and does not
/// start on a spent budget); the other stages' are kept (a check that did not run reports
/// nothing).
fn stopped_finding(e: &Exceeded, findings: &mut Vec<Finding>) -> Finding {
    let place = budget::spent_at();
    findings.retain(|f| f.stage != Stage::Rendered);
    let what = if place.is_some() {
        "rendering"
    } else {
        "validation"
    };
    let field = place.unwrap_or_else(|| "spec".to_string());
    let error_type = if e.is_input() {
        ErrorType::TooMany
    } else {
        ErrorType::Forbidden
    };
    Finding::new(
        Stage::Limits,
        FieldError::new(
            error_type,
            field,
            BadValue::Omit,
            format!("{what} {e}; the rest of the Composition was not validated"),
        ),
    )
}

/// What the API server refuses in a Composition before any webhook sees it, as it validates
/// a custom resource of the Composition CRD (`validate_resource`): unknown fields (`kubectl
/// apply` validates fields strictly), types, enums, required fields, the CRD's other
/// constraints and its CEL rules. `metadata` is checked by the logical checks. Where a v2 API
/// refuses a v1 field, the error says where the field went; where another minor added or
/// removed a field this API lacks, which `--crossplane-version` has it.
fn api_server_errors(defaulted: &Value, api: &schema::CompositionApi) -> Vec<FieldError> {
    let compiled = match api.compiled() {
        Ok(compiled) => compiled,
        // Only a given CRD can fail to compile (the embedded ones are tested): its refusals
        // are not known, and denying for that would be a false denial.
        Err(_) => return Vec::new(),
    };
    // Validation prunes and defaults its own copy.
    if budget::reserve_copy(defaulted).is_err() {
        return Vec::new();
    }
    let mut object = defaulted.clone();
    let limits = schema::CelLimits::default();
    let mut errors = schema::validate_resource(
        &compiled,
        &mut object,
        &crate::findings::Path::default(),
        &limits,
    )
    .errors;
    for e in &mut errors {
        let unknown = e.detail.starts_with("unknown field");
        // A v1 field under v2's API: where it went (`spec.mode`'s value is refused by enum).
        let v1_only = api.pipeline_only()
            && match e.error_type {
                ErrorType::NotSupported => e.field == "spec.mode",
                _ => unknown,
            };
        if let Some(hint) = schema::composition_api::moved_in_v2(&e.field).filter(|_| v1_only) {
            e.detail = format!("{}: {hint} ({})", e.detail, api.applied());
        } else if let Some(change) =
            schema::composition_api::change_of(&e.field).filter(|_| unknown)
        {
            // A field another minor added or removed: which one has it.
            e.detail = format!(
                "{}: {} ({})",
                e.detail,
                change.words,
                api.applied_for(&change)
            );
        }
    }
    errors
}

/// A Resources-mode Composition of a Namespaced or Cluster XR (a Crossplane v2 XRD, whose
/// machinery is under `spec.crossplane`): Crossplane v2 runs only pipelines, so nothing would
/// ever be composed. An error that says how to migrate.
fn resources_mode_for_v2(c: &Composition, composite: Option<&schema::Schema>) -> Option<Finding> {
    let v2 = composite
        .and_then(|s| s.property("spec"))
        .and_then(|s| s.property("crossplane"))
        .is_some();
    if !v2 || c.spec.mode != crate::model::MODE_RESOURCES {
        return None;
    }
    let type_ref = &c.spec.composite_type_ref;
    Some(Finding::new(
        Stage::Logical,
        FieldError::new(
            ErrorType::NotSupported,
            "spec.mode",
            BadValue::from_json(&Value::String(c.spec.mode.clone())),
            format!(
                "supported values: \"Pipeline\": {}, {} is a Crossplane v2 composite resource (its XRD's scope is Namespaced or Cluster), and Crossplane v2 composes only through a function pipeline: move spec.resources, spec.patchSets and spec.environment into the input of a function-patch-and-transform step (`crossplane beta convert pipeline-composition` does it)",
                type_ref.api_version, type_ref.kind
            ),
        ),
    ))
}

/// Whether one field is the other or contains it (`a.b` and `a.b[0].c`, not `a.bc`).
fn related(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    long.strip_prefix(short)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}
