//! Rendered-resource validation: render every composed resource from a composite resource
//! (a minimal mock built from the XR schema, or a real one) and validate each as the API
//! server would on create: its metadata (names, labels, annotations, ...) whatever its kind,
//! the rest against its CRD. Findings are reported at the template's base
//! (`spec.resources[0].base.spec.forProvider.region`) so the user sees which template is
//! wrong.
//!
//! How a finding's severity is decided (docs/checks.md has the table):
//! - it holds for every composite resource (XR) the XR's schema allows: an error. That is a
//!   finding no patch is involved in (the base), an unknown field (unknown whatever value a
//!   patch writes into it), a required field no patch writes, and a finding a patch's value
//!   causes for every value its XR field can hold (an enum or a boolean, rendered with each);
//! - it depends on an XR value the schema allows to be absent or different: a warning, with
//!   the reason. That is a required field set only by a patch whose source the mock does not
//!   have (an optional XR field without default, the environment), a constraint broken by a
//!   value patched from the mock (the note says which value was the mock's), a patch that
//!   fails at run time on a mock value.
//!
//! A finding about a field that a patch with a logical or schema error writes is the same
//! problem seen again, and is dropped; the base and the other patches are still validated.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::checks::schema_aware::lookup::{BuiltInOrigin, SchemaSource};
use crate::fieldpath::{self, Segment};
use crate::findings::{
    BadValue, ErrorType, FieldError, Finding, PatchAt, Path, Severity, Stage, Unknown,
};
use crate::model::function::FunctionSet;
use crate::model::{Composition, PatchAndTransformStep};
use crate::render::function_steps::{self, ResultSeverity, StepOutcome};
use crate::render::patch::Outcome;
use crate::render::{
    self, FunctionRole, PatchRecord, Rendered, RenderedResource, Runtime, mock, paved,
};
use crate::schema::validation::{self, CelLimits, CompiledSchema, NameRule, ObjectMetaRules};
use crate::schema::{Schema, Scope, split_api_version};

/// The CEL budget of one rendered resource.
pub const CEL_LIMITS: CelLimits = CelLimits {
    max_evaluations: 10_000,
    deadline: Duration::from_millis(200),
};

/// The most combinations of XR values a finding is rendered again with to tell whether it
/// holds for every value (`2 enums of 8 values` is 64).
const MAX_VARIANTS: usize = 64;

/// Which composite resource the resources are rendered from.
#[derive(Debug, Clone, Copy)]
pub enum Composite<'a> {
    /// A mock built from the XR schema (`None` when the schema is missing: then the mock has
    /// only what Crossplane sets).
    Mock(Option<&'a Schema>),
    /// A real composite resource (`render --xr`).
    Real(&'a Value),
}

/// What the Composition's patches expect of the XR's string fields (the mock holds it).
pub fn hints(c: &Composition, steps: &[PatchAndTransformStep]) -> mock::Hints {
    let sets = std::iter::once((
        c.spec.resources.as_slice(),
        c.spec.patch_sets.as_slice(),
        c.spec.environment.as_ref(),
    ))
    .chain(steps.iter().map(|s| {
        (
            s.input.resources.as_slice(),
            s.input.patch_sets.as_slice(),
            s.input.environment.as_ref(),
        )
    }));
    let mut patches = Vec::new();
    for (resources, patch_sets, environment) in sets {
        patches.extend(resources.iter().flat_map(|t| &t.patches));
        patches.extend(patch_sets.iter().flat_map(|s| &s.patches));
        patches.extend(environment.iter().flat_map(|e| &e.patches));
    }
    mock::Hints::of(patches)
}

/// The composite resource to render from.
pub fn composite_value(
    c: &Composition,
    steps: &[PatchAndTransformStep],
    composite: Composite<'_>,
) -> Value {
    match composite {
        Composite::Real(v) => v.clone(),
        Composite::Mock(schema) => {
            let hints = hints(c, steps);
            let of = mock_of(c, &hints);
            mock::composite(schema, &of)
                // A non-object XR schema is reported by the schema checks; render from the
                // bare mock then.
                .or_else(|_| mock::composite(None, &of))
                .unwrap_or_default()
        }
    }
}

/// Renders `c` and validates every rendered resource: its metadata whatever its kind, the
/// rest when `source` has its definition (looked up once per kind). `earlier` are the
/// logical and schema findings (to drop repeats of them).
pub fn check(
    c: &Composition,
    steps: &[PatchAndTransformStep],
    composite: Composite<'_>,
    source: &dyn SchemaSource,
    earlier: &[Finding],
    runtime: Runtime,
    calls: Option<render::Calls<'_>>,
) -> Vec<Finding> {
    let xr = composite_value(c, steps, composite);
    let prepared = CallContext::new(c, steps, composite, source, calls);
    let calls = prepared.calls();
    let observed = prepared.observed();
    let rendered =
        render::render_calling(c, steps, &xr, source.functions().as_deref(), runtime, calls);
    Ctx::new(c, steps, composite, &xr, source, earlier, false, runtime)
        .observing(observed)
        .check(rendered)
}

/// The composite resource functions observe, when it is not the one rendered from: the
/// mock with its optional fields filled ([`mock::composite_full`]).
pub fn observed_value(
    c: &Composition,
    steps: &[PatchAndTransformStep],
    composite: Composite<'_>,
) -> Option<Value> {
    let Composite::Mock(schema) = composite else {
        return None;
    };
    let hints = hints(c, steps);
    mock::composite_full(schema, &mock_of(c, &hints)).ok()
}

/// What running a render's function steps needs beside the render: the composite resource
/// they observe ([`observed_value`]) and their required schemas from `source`
/// ([`SchemasFrom`]).
pub struct CallContext<'a> {
    calls: Option<render::Calls<'a>>,
    observed: Option<Value>,
    schemas: Option<SchemasFrom<'a>>,
}

impl<'a> CallContext<'a> {
    /// For `calls` (none: nothing is prepared) rendering `c` from `composite`.
    pub fn new(
        c: &Composition,
        steps: &[PatchAndTransformStep],
        composite: Composite<'_>,
        source: &'a dyn SchemaSource,
        calls: Option<render::Calls<'a>>,
    ) -> Self {
        CallContext {
            observed: calls.and_then(|_| observed_value(c, steps, composite)),
            schemas: calls.map(|k| SchemasFrom {
                inner: k.required,
                source,
            }),
            calls,
        }
    }

    /// The calls, observing [`CallContext::observed`], schemas answered from the source.
    pub fn calls(&self) -> Option<render::Calls<'_>> {
        self.calls
            .zip(self.schemas.as_ref())
            .map(|(k, schemas)| render::Calls {
                observed: self.observed.as_ref(),
                required: schemas,
                ..k
            })
    }

    /// The composite resource the functions observe, when not the one rendered from.
    pub fn observed(&self) -> Option<&Value> {
        self.observed.as_ref()
    }
}

/// A step's requirements answered by `inner`, its required schemas from the schemas the
/// validation uses (the catalog's, the cluster's): the kind's `openAPIV3Schema`.
pub struct SchemasFrom<'a> {
    /// Answers the rest.
    pub inner: &'a dyn function_steps::Required,
    /// Where schemas come from.
    pub source: &'a dyn SchemaSource,
}

impl function_steps::Required for SchemasFrom<'_> {
    fn resources(
        &self,
        selector: &function_steps::ResourceSelector,
    ) -> Result<Option<Vec<Value>>, String> {
        self.inner.resources(selector)
    }

    fn schema(&self, api_version: &str, kind: &str) -> Option<Value> {
        let (group, version) = split_api_version(api_version).unwrap_or(("", api_version));
        match self
            .source
            .resolve(group, kind, version)
            .ok()
            .and_then(|i| i.schema)
        {
            Some(schema) => Some(schema.to_value()),
            None => self.inner.schema(api_version, kind),
        }
    }
}

/// What the mock XR of `c` is of.
fn mock_of<'a>(c: &'a Composition, hints: &'a mock::Hints) -> mock::Of<'a> {
    let type_ref = &c.spec.composite_type_ref;
    mock::Of {
        api_version: &type_ref.api_version,
        kind: &type_ref.kind,
        composition: &c.metadata.name,
        secrets_namespace: c.spec.write_connection_secrets_to_namespace.as_deref(),
        hints,
    }
}

/// What [`check_taking`] found.
#[derive(Debug)]
pub struct Taken {
    /// The findings: [`check`]'s, unless `needed_bases`.
    pub findings: Vec<Finding>,
    /// Whether a finding needed the template rendered again from other XR values, which
    /// takes its base: then `findings` judged it without them (a warning where [`check`]
    /// may say it holds for every value), and [`check`] of the Composition as it was read
    /// gives the findings.
    pub needed_bases: bool,
}

/// [`check`] that renders the bases into their resources instead of copying them: `c` and
/// `steps` are left without their bases ([`render::TakenBases`]). For a Composition nothing
/// reads after this check (the webhook's).
pub fn check_taking(
    c: &mut Composition,
    steps: &mut [PatchAndTransformStep],
    composite: Composite<'_>,
    source: &dyn SchemaSource,
    earlier: &[Finding],
    runtime: Runtime,
    calls: Option<render::Calls<'_>>,
) -> Taken {
    // The mock reads the patches and the XR's schema, not the bases.
    let xr = composite_value(c, steps, composite);
    let prepared = CallContext::new(c, steps, composite, source, calls);
    let calls = prepared.calls();
    let observed = prepared.observed();
    let bases = render::TakenBases::take(c, steps);
    let (c, steps) = (&*c, &*steps);
    let rendered = render::render_taking(
        c,
        steps,
        bases,
        &xr,
        source.functions().as_deref(),
        runtime,
        calls,
    );
    let ctx =
        Ctx::new(c, steps, composite, &xr, source, earlier, true, runtime).observing(observed);
    let findings = ctx.check(rendered);
    Taken {
        findings,
        needed_bases: ctx.needed_bases.get(),
    }
}

/// [`check`] of what was already rendered from `xr` (the value [`composite_value`] gives
/// for `composite`), its functions having observed `observed` ([`observed_value`]) when
/// they ran: `render` prints the resources and validates the same render.
#[allow(clippy::too_many_arguments)]
pub fn check_rendered(
    c: &Composition,
    steps: &[PatchAndTransformStep],
    composite: Composite<'_>,
    xr: &Value,
    rendered: Rendered,
    source: &dyn SchemaSource,
    earlier: &[Finding],
    runtime: Runtime,
    observed: Option<&Value>,
) -> Vec<Finding> {
    Ctx::new(c, steps, composite, xr, source, earlier, false, runtime)
        .observing(observed)
        .check(rendered)
}

impl<'a> Ctx<'a> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        c: &'a Composition,
        steps: &'a [PatchAndTransformStep],
        composite: Composite<'a>,
        xr: &'a Value,
        source: &'a dyn SchemaSource,
        earlier: &'a [Finding],
        bases_taken: bool,
        runtime: Runtime,
    ) -> Self {
        Ctx {
            runtime: Runtime::of(c, xr, runtime),
            c,
            steps,
            xr,
            mock: match composite {
                Composite::Mock(schema) => Some(schema),
                Composite::Real(_) => None,
            },
            source,
            functions: source.functions(),
            earlier,
            variants: RefCell::new(HashMap::default()),
            kinds: RefCell::default(),
            bases_taken,
            needed_bases: Cell::new(false),
            observed: None,
        }
    }

    /// The same context, the functions having observed `observed` instead of the XR
    /// rendered from.
    fn observing(mut self, observed: Option<&'a Value>) -> Self {
        self.observed = observed;
        self
    }

    /// The findings of a render.
    fn check(&self, mut rendered: Rendered) -> Vec<Finding> {
        let mut findings = Vec::new();
        findings.extend(opaque_note(&rendered));
        findings.extend(
            rendered
                .function_runs
                .iter()
                .flat_map(|r| self.function_run(r)),
        );
        // An environment patch not rendered leaves the environment unknown: said, not judged.
        for (at, why) in &rendered.environment_not_rendered {
            findings.push(not_rendered(at, why));
        }
        let resources = std::mem::take(&mut rendered.resources);
        for resource in resources {
            if crate::budget::step().is_err() {
                break;
            }
            // Findings of a step that a later, unrendered function may change are warnings; so
            // are those of a resource a later filter may remove, with the filter named.
            let later = if !rendered.changed_later(&resource.at).is_empty() {
                Later::Changed
            } else {
                let filters = rendered.removed_later(&resource.at, resource.name.as_deref());
                match filters.as_slice() {
                    [] => Later::Unchanged,
                    steps => {
                        let (names, by_name) = named(steps);
                        Later::MayBeRemoved(names, by_name)
                    }
                }
            };
            findings.extend(self.check_resource(resource, &later));
        }
        findings
    }
}

/// What the steps after a rendered resource's can do to it.
enum Later {
    /// Nothing that is not rendered.
    Unchanged,
    /// A function that is not rendered may change it.
    Changed,
    /// A filter may remove it: the filters named (see [`named`]).
    MayBeRemoved(String, bool),
}

/// The functions of `steps` as notes name them (`"fn" (step "s")`, each with its package
/// when it was recognised by it), and whether every one was recognised by its name (the
/// note then says so once).
fn named(steps: &[&render::OpaqueStep]) -> (String, bool) {
    let by_name = steps.iter().all(|o| o.package.is_none());
    let names = steps
        .iter()
        .map(|o| match (&o.package, by_name) {
            (Some(p), _) => format!("{:?} (step {:?}, {})", o.function, o.step, p.describe()),
            (None, true) => format!("{:?} (step {:?})", o.function, o.step),
            (None, false) => format!(
                "{:?} (step {:?}, recognised by its name)",
                o.function, o.step
            ),
        })
        .collect::<Vec<_>>()
        .join(", ");
    (names, by_name)
}

/// A warning that this tool did not render something Crossplane runs, at `at`.
fn not_rendered(at: &str, why: &str) -> Finding {
    finding(
        FieldError::new(
            ErrorType::NotRendered,
            at,
            BadValue::Omit,
            format!("{why}; what it writes is not validated"),
        ),
        true,
    )
}

/// A warning that the runtime does not keep a base's `metadata.<key>`.
fn ignored(root: &Path, i: &render::Ignored) -> Finding {
    let key = i.key;
    let detail = match &i.by {
        render::IgnoredBy::ResourcesMode => {
            let how = if key == "name" {
                "a new resource is named from its generateName"
            } else {
                "a new resource has no namespace"
            };
            format!(
                "Crossplane v1's Resources mode ignores a base's metadata.{key} ({how}): set it with a patch to metadata.{key}"
            )
        }
        render::IgnoredBy::XrNamespace(xr) => format!(
            "Crossplane v2 creates a namespaced composite resource's resources in its namespace ({}): this one is replaced, with a Warning event \"cannot create composed resource ... in namespace ..., using XR namespace ... instead\"",
            BadValue::from_json(xr)
        ),
    };
    finding(
        FieldError::new(
            ErrorType::Invalid,
            root.child("metadata").child(key).as_str(),
            BadValue::from_json(&i.value),
            detail,
        ),
        true,
    )
}

/// One note naming the functions whose effect is not rendered (those that may compose or
/// change resources: not readiness, context or filter functions).
fn opaque_note(rendered: &Rendered) -> Option<Finding> {
    let opaque: Vec<_> = rendered
        .opaque_steps
        .iter()
        .filter(|o| o.role == FunctionRole::Opaque)
        // A function that was tried has its own finding.
        .filter(|o| !rendered.function_runs.iter().any(|r| r.at == o.at))
        .collect();
    let first = opaque.first()?;
    let (names, by_name) = named(&opaque);
    let recognised = if by_name {
        "recognised by its name as none whose effect is known"
    } else {
        "none whose effect is known"
    };
    let detail = if rendered.resources.is_empty() {
        format!(
            "function {names}: {recognised}, what it \
             composes cannot be known without running it, so no composed resource was validated"
        )
    } else {
        format!(
            "function {names}: {recognised}, what it \
             does to composed resources cannot be known without running it, so only the patch-and-transform steps were rendered, and rendered \
             findings of the steps before it are warnings"
        )
    };
    Some(Finding::advisory(
        Stage::Rendered,
        FieldError::new(
            ErrorType::NotRendered,
            first.at.as_str(),
            BadValue::Omit,
            detail,
        ),
    ))
}

/// How one kind of rendered resource is validated: its metadata always, the rest against
/// its compiled schema when its CRD is known.
struct Validation {
    compiled: Option<Arc<CompiledSchema>>,
    meta: ObjectMetaRules,
    /// Where a built-in kind's schema comes from.
    built_in: Option<BuiltInOrigin>,
    root: Path,
}

impl Validation {
    /// Validates `object` in place (pruned and defaulted).
    fn run(&self, object: &mut Value) -> validation::ResourceValidation {
        // The API server ignores status on create (the status subresource sets it).
        if let Some(o) = object.as_object_mut() {
            o.remove("status");
        }
        validation::validate_object(
            self.compiled.as_deref(),
            object,
            &self.meta,
            &self.root,
            &CEL_LIMITS,
        )
    }
}

/// One template rendered again from an XR whose patched fields hold other values.
#[derive(Debug)]
struct Variant {
    /// The patches that failed.
    failed: Vec<PatchAt>,
    /// The errors of the rendered resource, by field and type.
    errors: Vec<(String, ErrorType)>,
}

/// A template (`spec.resources[0]`) and the XR fields varied to render it again.
type VariantKey = (String, Vec<String>);

/// What checking one render needs.
struct Ctx<'a> {
    c: &'a Composition,
    steps: &'a [PatchAndTransformStep],
    /// The composite resource rendered from.
    xr: &'a Value,
    /// `Some` (with the XR's schema, if known) when `xr` is the mock.
    mock: Option<Option<&'a Schema>>,
    source: &'a dyn SchemaSource,
    /// The Functions the source knows, to render again as the first render did.
    functions: Option<Arc<FunctionSet>>,
    earlier: &'a [Finding],
    /// Renders from other XR values, by template and XR fields varied.
    variants: RefCell<Variants>,
    /// Each rendered kind's compiled schema and CRD scope, by `apiVersion` and kind
    /// (nested, so a lookup needs no owned key).
    kinds: RefCell<ByName<ByName<KindRules>>>,
    /// The bases were rendered into the resources ([`check_taking`]): `c` has none left to
    /// render again from.
    bases_taken: bool,
    /// A finding needed a render again, which the bases taken did not allow.
    needed_bases: Cell<bool>,
    /// Whose runtime sets the metadata.
    runtime: Runtime,
    /// The composite resource the functions observed, when not `xr`.
    observed: Option<&'a Value>,
}

/// A map by a name a Composition chose (an `apiVersion`, a kind).
type ByName<V> = HashMap<String, V, crate::hashing::ByInput>;

/// Renders from other XR values (`None`: none could be made), by template and the XR fields
/// varied, which a Composition chose.
type Variants = HashMap<VariantKey, Option<Arc<Vec<Variant>>>, crate::hashing::ByInput>;

/// How a rendered kind is validated: its compiled schema (when its definition is known and
/// compiles), its scope, its name rule, and where a built-in kind's schema comes from.
#[derive(Clone)]
struct KindRules {
    compiled: Option<Arc<CompiledSchema>>,
    scope: Option<Scope>,
    name: NameRule,
    built_in: Option<BuiltInOrigin>,
}

/// The verdict on one rendered finding.
enum Verdict {
    /// The same problem as an earlier finding, or about a field left unknown.
    Drop,
    /// Holds for every XR: an error, with an optional note.
    Error(Option<String>),
    /// Depends on the XR: a warning, with why.
    Warning(String),
}

impl Ctx<'_> {
    /// The findings of one rendered resource, validated in place.
    fn check_resource(&self, mut resource: RenderedResource, later: &Later) -> Vec<Finding> {
        let mut findings: Vec<Finding> = resource
            .ignored
            .iter()
            .map(|i| ignored(&resource.root(), i))
            .collect();
        let object = resource.object.take();
        // What a function composed had no base whose kind the schema stage looked up.
        if resource.made_by.is_some()
            && let Some(o) = &object
            && let (Some(api_version), Some(kind)) = (
                crate::json::field(o, "apiVersion").and_then(Value::as_str),
                crate::json::field(o, "kind").and_then(Value::as_str),
            )
        {
            crate::checks::schema_aware::lookup::lookup(
                self.source,
                api_version,
                kind,
                &resource.root(),
                "this resource",
                &mut findings,
            );
        }
        let validation = object.as_ref().and_then(|o| self.validation(o, &resource));
        for record in &resource.patches {
            if let Outcome::NotRendered(message) = &record.outcome {
                // Not an error of the Composition: say what was not checked.
                findings.push(not_rendered(&record.at.to_string(), message));
            }
            if let Outcome::Failed(message) = &record.outcome
                && !has_patch_finding(self.earlier, record, &resource.at)
            {
                findings.push(self.failed_patch(record, message, &resource, validation.as_ref()));
            }
        }
        let (Some(mut object), Some(validation)) = (object, validation) else {
            return findings;
        };
        // Validation walks the object and may copy parts of it (defaults, CEL).
        if crate::budget::reserve_copy(&object).is_err() {
            return findings;
        }
        let result = validation.run(&mut object);
        let root = validation.root.as_str();
        for (i, error) in result.errors.into_iter().enumerate() {
            if crate::budget::step().is_err() {
                break;
            }
            // What the error is about: the fields its rule tests, else its own field.
            let rule = i.checked_sub(result.rules_from);
            let targets: Vec<Vec<String>> = match rule.and_then(|r| result.rule_fields.get(r)) {
                Some(fields) if !fields.is_empty() => {
                    fields.iter().map(|f| relative(f, root)).collect()
                }
                _ => vec![relative(&error.field, root)],
            };
            let unknown = is_unknown_field(&error);
            let scoped = self.scope_unknown() && is_meta(&error.field, root, "namespace");
            let Some(mut f) = self.judge(error, &targets, rule.is_some(), &resource, &validation)
            else {
                continue;
            };
            // v1 replaces a base's generateName, v2 keeps it: which runs it is not known.
            if self.runtime == Runtime::Unknown && is_meta(&f.error.field, root, "generateName") {
                f = Finding::depending(Stage::Rendered, f.error, &Unknown::CrossplaneMajor);
            }
            // Where a resource lives follows the XR's scope: without its XRD, not known.
            if scoped {
                let t = &self.c.spec.composite_type_ref;
                let group = split_api_version(&t.api_version).map_or("", |(g, _)| g);
                let kind = format!("{}.{group}", t.kind);
                f = Finding::depending(Stage::Rendered, f.error, &Unknown::CompositeScope(kind));
            }
            // An embedded schema of one Kubernetes version does not know later versions'
            // fields: not a reason to deny.
            // A near miss of a known field (`replica`) is a typo all the same.
            if let (
                true,
                Some(BuiltInOrigin {
                    source,
                    exact: false,
                }),
            ) = (unknown, &validation.built_in)
                && f.severity == Severity::Error
                && !f.error.detail.contains("did you mean")
            {
                append(
                    &mut f.error,
                    &format!(
                        "unknown to {source}; an API server of a later Kubernetes version may know it"
                    ),
                );
                f = Finding::advisory(Stage::Rendered, f.error);
            }
            if let Some(by) = &resource.made_by {
                append(
                    &mut f.error,
                    &format!(
                        "composed by function {:?} in step {:?}",
                        by.function, by.step
                    ),
                );
                if by.depends {
                    f = Finding::advisory(Stage::Rendered, f.error);
                }
            }
            findings.push(match later {
                Later::Unchanged => f,
                Later::Changed => Finding::advisory(Stage::Rendered, f.error),
                Later::MayBeRemoved(filters, by_name) => {
                    let mut error = f.error;
                    let recognised = if *by_name {
                        " (recognised by its name)"
                    } else {
                        ""
                    };
                    append(
                        &mut error,
                        &format!(
                            "function {filters} may remove this resource{recognised}, so this is a warning"
                        ),
                    );
                    Finding::advisory(Stage::Rendered, error)
                }
            });
        }
        findings
    }

    /// Whether the XR's scope is unknown: rendered from a mock without the XR's schema.
    fn scope_unknown(&self) -> bool {
        matches!(self.mock, Some(None))
    }

    /// How a rendered object of this kind is validated; `None` when it has no kind.
    fn validation(&self, object: &Value, resource: &RenderedResource) -> Option<Validation> {
        let api_version = crate::json::field(object, "apiVersion")?.as_str()?;
        let kind = crate::json::field(object, "kind")?.as_str()?;
        let (group, version) = split_api_version(api_version).unwrap_or(("", api_version));
        let cached = self
            .kinds
            .borrow()
            .get(api_version)
            .and_then(|kinds| kinds.get(kind))
            .cloned();
        let rules = match cached {
            Some(c) => c,
            None => {
                // The CRD's scope decides whether a namespace is required.
                let info = self.source.resolve(group, kind, version).ok();
                let schema = info.as_ref().and_then(|i| i.schema.clone());
                let built_in = info.as_ref().and_then(|i| i.built_in.clone());
                let rules = KindRules {
                    // A missing CRD is reported by the schema lookups; a schema that does
                    // not compile leaves the metadata to check.
                    compiled: schema.and_then(|s| validation::compiled(&s).ok()),
                    // Custom resources' names are subdomains; built-in kinds have their own.
                    name: if info.is_some() && built_in.is_none() {
                        NameRule::DnsSubdomain
                    } else {
                        NameRule::of(group, kind)
                    },
                    scope: info.map(|i| i.scope),
                    built_in,
                };
                self.kinds
                    .borrow_mut()
                    .entry(api_version.to_string())
                    .or_default()
                    .insert(kind.to_string(), rules.clone());
                rules
            }
        };
        Some(Validation {
            compiled: rules.compiled,
            meta: ObjectMetaRules {
                namespaced: rules.scope.map(|s| s == Scope::Namespaced),
                name: rules.name,
            },
            built_in: rules.built_in,
            root: resource.root(),
        })
    }

    /// The finding of a patch that fails at run time.
    fn failed_patch(
        &self,
        record: &PatchRecord,
        message: &str,
        resource: &RenderedResource,
        validation: Option<&Validation>,
    ) -> Finding {
        let at = record.at.to_string();
        let from = record.from();
        let Some(_) = self.mock else {
            let e = FieldError::invalid(
                at.as_str(),
                from.as_str(),
                format!("rendering fails: {message}"),
            );
            return finding(e, false);
        };
        let every = self.for_every_value(&resource.at, &record.sources(), validation, |v| {
            v.failed.contains(&record.at)
        });
        let e = match &every {
            Some(values) => FieldError::invalid(
                at.as_str(),
                from.as_str(),
                format!(
                    "rendering fails for every value the composite resource's schema allows ({values}): {message}"
                ),
            ),
            None => FieldError::invalid(
                at.as_str(),
                from.as_str(),
                format!(
                    "rendering from the mock composite resource fails{}: {message}",
                    self.mock_values(&record.sources())
                        .map(|v| format!(" ({v})"))
                        .unwrap_or_default()
                ),
            ),
        };
        finding(e, every.is_none())
    }

    /// The finding for one rendered error, or `None` when it repeats an earlier one.
    fn judge(
        &self,
        mut error: FieldError,
        targets: &[Vec<String>],
        from_rule: bool,
        resource: &RenderedResource,
        validation: &Validation,
    ) -> Option<Finding> {
        match self.verdict(&error, targets, from_rule, resource, validation) {
            Verdict::Drop => None,
            Verdict::Error(note) => {
                if let Some(note) = note {
                    append(&mut error, &note);
                }
                Some(finding(error, false))
            }
            Verdict::Warning(why) => {
                append(&mut error, &why);
                Some(finding(error, true))
            }
        }
    }

    fn verdict(
        &self,
        error: &FieldError,
        targets: &[Vec<String>],
        from_rule: bool,
        resource: &RenderedResource,
        validation: &Validation,
    ) -> Verdict {
        if resource.made_by.is_some() {
            return self.function_verdict(error);
        }
        // The patches that write what the error is about (or an object holding it, or a
        // field inside it).
        let related: Vec<&PatchRecord> = resource
            .patches
            .iter()
            .filter(|r| {
                r.to().is_some_and(|to| {
                    let to = tokens(to);
                    targets.iter().any(|t| related(&to, t))
                })
            })
            .collect();
        // A patch with its own error already explains what it writes; one this tool could not
        // render leaves its fields unknown.
        if related.iter().any(|r| {
            matches!(r.outcome, Outcome::NotRendered(_))
                || has_patch_finding(self.earlier, r, &resource.at)
        }) {
            return Verdict::Drop;
        }
        // With `policy.fromFieldPath: Required` the runtime does not create the resource until
        // the source exists: the field is never missing on the API server.
        if related
            .iter()
            .any(|r| matches!(r.outcome, Outcome::Skipped { required: true, .. }))
        {
            return Verdict::Drop;
        }
        let absent = error.error_type == ErrorType::Required || from_rule;
        if absent
            && let Some(r) = related
                .iter()
                .find(|r| matches!(r.outcome, Outcome::Skipped { .. }))
        {
            return Verdict::Warning(self.set_only_by(r));
        }
        let mut written: Vec<&&PatchRecord> = related
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Written(_)))
            .collect();
        // A patch that writes the field (or an object holding it) replaces what earlier
        // patches wrote there.
        if let Some(last) = written.iter().rposition(|r| {
            r.to()
                .is_some_and(|to| targets.iter().any(|t| under(t, &tokens(to))))
        }) {
            written.drain(..last);
        }
        if written.is_empty() {
            // The base alone: every XR renders it.
            return Verdict::Error(None);
        }
        if self.mock.is_none() {
            return Verdict::Error(None);
        }
        let at = written
            .iter()
            .map(|r| r.at.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let mut sources: Vec<&str> = written.iter().flat_map(|r| r.sources()).collect();
        sources.sort();
        sources.dedup();
        let from = sources.join(", ");
        if is_unknown_field(error) {
            return Verdict::Error(Some(format!(
                "{at} writes it from {from}: the field is unknown whatever the value"
            )));
        }
        if written.iter().all(|r| !r.from_environment)
            && let Some(values) =
                self.for_every_value(&resource.at, &sources, Some(validation), |v| {
                    v.errors
                        .iter()
                        .any(|(f, t)| *f == error.field && *t == error.error_type)
                })
        {
            return Verdict::Error(Some(format!(
                "written by {at}: every value of {from} the composite resource's schema allows ({values}) renders this"
            )));
        }
        let held = self
            .mock_values(&sources)
            .map(|v| format!(": {v} in the mock composite resource, a real one may hold another"))
            .unwrap_or_else(|| " of the mock composite resource".to_string());
        Verdict::Warning(format!("the value comes from {at}{held}"))
    }

    /// The verdict on an error of a resource a function composed: from a real XR, or of a
    /// value the mock does not hold, it holds; a value the mock holds (which the function
    /// may have copied from it) may differ in a real XR.
    fn function_verdict(&self, error: &FieldError) -> Verdict {
        if self.mock.is_none() || is_unknown_field(error) {
            return Verdict::Error(None);
        }
        let observed = self.observed.unwrap_or(self.xr);
        match mock_leaf(observed, &error.bad_value) {
            Some(at) => Verdict::Warning(format!(
                "the value is the mock composite resource's {at}: a real one may hold another"
            )),
            None => Verdict::Error(None),
        }
    }

    /// The findings of a function step run (or tried).
    fn function_run(&self, run: &render::FunctionRun) -> Vec<Finding> {
        let named = format!("function {:?} (step {:?})", run.function, run.step);
        let at = run.at.as_str();
        let mut out = Vec::new();
        match &run.outcome {
            StepOutcome::Failed(failure) => {
                let place = if run.address.is_empty() {
                    String::new()
                } else {
                    format!(" at {}", run.address)
                };
                out.push(Finding::new(
                    Stage::Crds,
                    FieldError::new(
                        ErrorType::NotFound,
                        at,
                        BadValue::Omit,
                        format!(
                            "{named} could not be run{place}: {}; what it composes is not validated",
                            failure.message
                        ),
                    ),
                ));
            }
            StepOutcome::Unsettled => out.push(Finding::advisory(
                Stage::Rendered,
                FieldError::new(
                    ErrorType::Invalid,
                    at,
                    BadValue::Omit,
                    format!(
                        "{named}: requirements didn't stabilize after the maximum number of iterations ({})",
                        function_steps::MAX_CALLS_PER_STEP - 1
                    ),
                ),
            )),
            StepOutcome::Answered {
                results,
                unanswered,
                ..
            } => {
                if !run.credentials_withheld.is_empty() {
                    out.push(Finding::advisory(
                        Stage::Rendered,
                        FieldError::new(
                            ErrorType::NotRendered,
                            run.at.child("credentials").as_str(),
                            BadValue::Omit,
                            format!(
                                "{named} was called without its credentials ({}): this tool never sends a Secret's data, which Crossplane does; what it composed may depend on them, so its findings are warnings",
                                run.credentials_withheld.join(", ")
                            ),
                        ),
                    ));
                }
                if !unanswered.is_empty() {
                    out.push(Finding::advisory(
                        Stage::Rendered,
                        FieldError::new(
                            ErrorType::NotRendered,
                            at,
                            BadValue::Omit,
                            format!(
                                "{named} asked for what this tool could not answer ({}): what it composed may depend on it, so its findings are warnings",
                                unanswered.join("; ")
                            ),
                        ),
                    ));
                }
                for r in results {
                    let words = match r.severity {
                        ResultSeverity::Normal => continue,
                        ResultSeverity::Warning => format!("{named} returned a warning: {}", r.message),
                        ResultSeverity::Fatal => format!(
                            "pipeline step {:?} returned a fatal result: {}",
                            run.step, r.message
                        ),
                    };
                    let held =
                        r.severity == ResultSeverity::Fatal && self.mock.is_none() && !run.depends;
                    let detail = match (r.severity, held) {
                        (ResultSeverity::Fatal, true) => {
                            format!("{words} (Crossplane stops the pipeline there)")
                        }
                        (ResultSeverity::Fatal, false) if run.depends => format!(
                            "{words} (Crossplane stops the pipeline there; the function, or one before it, lacked what it asked for, so this is a warning)"
                        ),
                        (ResultSeverity::Fatal, false) => format!(
                            "{words} (Crossplane stops the pipeline there; the function ran on the mock composite resource, which a real one differs from, so this is a warning)"
                        ),
                        _ => words,
                    };
                    let e = FieldError::new(ErrorType::Invalid, at, BadValue::Omit, detail);
                    out.push(finding(e, !held));
                }
            }
        }
        out
    }

    /// Why a field set only by the skipped patch `r` is missing.
    fn set_only_by(&self, r: &PatchRecord) -> String {
        let from = r.from();
        let why = if r.from_environment {
            format!(
                "from the environment's {}, which is empty when rendered without \
                 EnvironmentConfigs",
                from
            )
        } else if from.starts_with("status.") {
            format!(
                "from {}, which the composite resource gets only later, in its status; until \
                 then the resource is invalid (policy.fromFieldPath: Required would wait for it)",
                from
            )
        } else if self.mock.is_some() {
            format!(
                "from {}, which the mock composite resource does not have (optional, no \
                 default); a composite resource without it renders an invalid resource",
                from
            )
        } else {
            format!("from {}, which this composite resource does not have", from)
        };
        format!("set only by {} {why}", r.at)
    }

    /// The mock's values at `sources` (`spec.id is "id"`), if it has them.
    fn mock_values(&self, sources: &[&str]) -> Option<String> {
        let shown: Vec<String> = sources
            .iter()
            .filter_map(|s| {
                let path = fieldpath::parse(s).ok()?;
                let v = paved::get(self.xr, path.as_slice()).ok()?;
                Some(format!("{s} is {}", short(v)))
            })
            .collect();
        (!shown.is_empty()).then(|| shown.join(", "))
    }

    /// When the XR's schema allows only a few values at each of `sources` (enums, booleans)
    /// and `holds` is true of the template at `at` rendered from every combination of
    /// them, the values (`spec.size: "small", "large"`).
    fn for_every_value(
        &self,
        at: &Path,
        sources: &[&str],
        validation: Option<&Validation>,
        holds: impl Fn(&Variant) -> bool,
    ) -> Option<String> {
        let schema = self.mock??;
        if sources.is_empty() {
            return None;
        }
        let key = (
            at.as_str().to_string(),
            sources.iter().map(|s| s.to_string()).collect(),
        );
        let cached = self.variants.borrow().get(&key).cloned();
        let variants = match cached {
            Some(v) => v,
            None => {
                let v = self
                    .render_variants(at, sources, schema, validation)
                    .map(Arc::new);
                self.variants.borrow_mut().insert(key, v.clone());
                v
            }
        }?;
        if !variants.iter().all(holds) {
            return None;
        }
        let described: Vec<String> = sources
            .iter()
            .filter_map(|s| {
                let values = domain(schema, s)?;
                Some(format!(
                    "{s}: {}",
                    values.iter().map(short).collect::<Vec<_>>().join(", ")
                ))
            })
            .collect();
        Some(described.join("; "))
    }

    /// The template at `at` rendered and validated from the mock with every combination of
    /// the values the XR's schema allows at `sources`; `None` when one of them is open-ended
    /// or there are too many.
    fn render_variants(
        &self,
        at: &Path,
        sources: &[&str],
        schema: &Schema,
        validation: Option<&Validation>,
    ) -> Option<Vec<Variant>> {
        let mut fields = Vec::new();
        let mut combinations: usize = 1;
        for s in sources {
            let values = domain(schema, s)?;
            combinations = combinations.checked_mul(values.len())?;
            fields.push((fieldpath::parse(s).ok()?, values));
        }
        if combinations > MAX_VARIANTS {
            return None;
        }
        if self.bases_taken {
            self.needed_bases.set(true);
            return None;
        }
        let mut out = Vec::with_capacity(combinations);
        for n in 0..combinations {
            crate::budget::step().ok()?;
            crate::budget::reserve_copy(self.xr).ok()?;
            let mut xr = self.xr.clone();
            let mut rest = n;
            for (path, values) in &fields {
                let value = values[rest % values.len()].clone();
                rest /= values.len();
                paved::set(&mut xr, path.as_slice(), value).ok()?;
            }
            let rendered = render::render(
                self.c,
                self.steps,
                &xr,
                self.functions.as_deref(),
                self.runtime,
            );
            let resource = rendered.resources.into_iter().find(|r| r.at == *at)?;
            let failed = resource
                .patches
                .iter()
                .filter(|r| matches!(r.outcome, Outcome::Failed(_)))
                .map(|r| r.at)
                .collect();
            let errors = match (resource.object, validation) {
                (Some(mut object), Some(v)) => {
                    // As for the first render: validation may copy parts of the object.
                    crate::budget::reserve_copy(&object).ok()?;
                    v.run(&mut object)
                        .errors
                        .into_iter()
                        .map(|e| (e.field, e.error_type))
                        .collect()
                }
                _ => Vec::new(),
            };
            out.push(Variant { failed, errors });
        }
        Some(out)
    }
}

/// The values the XR's schema allows at `source`, when they are few: an enum's, or a
/// boolean's two.
fn domain(schema: &Schema, source: &str) -> Option<Vec<Value>> {
    let path = fieldpath::parse(source).ok()?;
    let mut node = schema;
    for segment in path.as_slice() {
        node = match segment {
            Segment::Field(f) if f != "*" => node
                .property(f)
                .or_else(|| node.additional_properties_schema())?,
            Segment::Index(_) => node.items_schema()?,
            Segment::Field(_) => return None,
        };
    }
    if !node.enum_values.is_empty() {
        let values: Vec<Value> = node
            .enum_values
            .iter()
            .filter(|v| !v.is_null())
            .cloned()
            .collect();
        return (!values.is_empty()).then_some(values);
    }
    (node.type_.as_deref() == Some("boolean")).then(|| vec![Value::Bool(false), Value::Bool(true)])
}

/// A value as a note shows it: JSON, cut short.
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(57).collect::<String>())
    } else {
        s
    }
}

/// Whether `field` is the rendered resource's `metadata.<key>` (under `root`).
fn is_meta(field: &str, root: &str, key: &str) -> bool {
    let rest = field.strip_prefix(root).unwrap_or(field);
    let rest = rest.strip_prefix('.').unwrap_or(rest);
    rest.strip_prefix("metadata.") == Some(key)
}

/// Whether an error is an unknown field the pruning reported.
fn is_unknown_field(error: &FieldError) -> bool {
    error.error_type == ErrorType::Invalid && error.detail.starts_with("unknown field: ")
}

/// The first leaf of `xr`'s `spec` whose value is `bad` (`spec.region`), if any.
fn mock_leaf(xr: &Value, bad: &BadValue) -> Option<String> {
    fn walk(v: &Value, at: &Path, bad: &BadValue) -> Option<String> {
        match v {
            Value::Object(o) => o.iter().find_map(|(k, v)| walk(v, &at.child(k), bad)),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .find_map(|(i, v)| walk(v, &at.index(i), bad)),
            leaf => (BadValue::from_json(leaf) == *bad).then(|| at.as_str().to_string()),
        }
    }
    if *bad == BadValue::Omit {
        return None;
    }
    walk(crate::json::field(xr, "spec")?, &Path::new("spec"), bad)
}

fn finding(error: FieldError, advisory: bool) -> Finding {
    if advisory {
        Finding::advisory(Stage::Rendered, error)
    } else {
        Finding::new(Stage::Rendered, error)
    }
}

fn append(error: &mut FieldError, note: &str) {
    if error.detail.is_empty() {
        error.detail = note.to_string();
    } else {
        error.detail = format!("{} ({note})", error.detail);
    }
}

/// Whether an earlier logical or schema finding is at `at` or inside it.
fn has_finding(earlier: &[Finding], at: &str) -> bool {
    earlier.iter().any(|f| {
        matches!(f.stage, Stage::Logical | Stage::Schema)
            && f.error
                .field
                .strip_prefix(at)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
    })
}

/// Whether an earlier logical or schema finding is about the patch of `record`, as used by
/// the template at `template`: at the patch itself, or, for a patch set's patch, where the
/// schema checks report it (`<template>.patches[j].patchSets[k].patches[l]`). One rule for
/// both: a patch reported once is not reported again at the base it writes.
fn has_patch_finding(earlier: &[Finding], record: &PatchRecord, template: &Path) -> bool {
    if has_finding(earlier, &record.at.to_string()) {
        return true;
    }
    let crate::findings::PatchHolder::PatchSet(k) = record.at.holder else {
        return false;
    };
    let used = format!("].patchSets[{k}].patches[{}]", record.at.index);
    let prefix = format!("{template}.patches[");
    earlier.iter().any(|f| {
        matches!(f.stage, Stage::Logical | Stage::Schema)
            && f.error.field.strip_prefix(&prefix).is_some_and(|rest| {
                rest.find(&used).is_some_and(|i| {
                    let after = &rest[i + used.len()..];
                    rest[..i].bytes().all(|b| b.is_ascii_digit())
                        && (after.is_empty() || after.starts_with(['.', '[']))
                })
            })
    })
}

/// `field` relative to `root`, as path tokens.
fn relative(field: &str, root: &str) -> Vec<String> {
    let rest = if root.is_empty() {
        field
    } else {
        field.strip_prefix(root).unwrap_or(field)
    };
    tokens(rest)
}

/// A field path as tokens, the same for Kubernetes' `a.b[key][0]` and Crossplane's
/// `a.b.key[0]` spellings.
fn tokens(path: &str) -> Vec<String> {
    path.replace('[', ".")
        .replace(']', "")
        .split('.')
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_matches(|c| c == '\'' || c == '"').to_string())
        .collect()
}

/// Whether one path contains the other.
fn related(a: &[String], b: &[String]) -> bool {
    under(a, b) || under(b, a)
}

/// Whether `path` is `parent` or inside it; a `*` segment of a patch's `toFieldPath`
/// stands for every element or key.
fn under(path: &[String], parent: &[String]) -> bool {
    path.len() >= parent.len()
        && path
            .iter()
            .zip(parent)
            .all(|(a, b)| a == b || a == "*" || b == "*")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_compare_across_spellings() {
        assert_eq!(
            tokens("metadata.labels[app]"),
            tokens("metadata.labels.app")
        );
        assert_eq!(tokens("spec.l[0].x"), ["spec", "l", "0", "x"]);
        assert_eq!(
            relative("spec.resources[0].base.spec.a", "spec.resources[0].base"),
            ["spec", "a"]
        );
        assert!(related(&tokens("spec.a"), &tokens("spec.a.b")));
        assert!(!related(&tokens("spec.a"), &tokens("spec.ab")));
        assert!(under(
            &tokens("spec.rules[1].port"),
            &tokens("spec.rules[*].port")
        ));
        assert!(!under(
            &tokens("spec.rules[1]"),
            &tokens("spec.rules[*].port")
        ));
    }
}
