//! Rendering composed resources from a composite resource (XR) as Crossplane's runtime does:
//! each template's base, the metadata Crossplane adds, then the patches from the XR and the
//! environment with their transforms. Resources-mode Compositions and the
//! function-patch-and-transform steps of a pipeline render alike; other functions cannot be
//! rendered without running them, and are listed instead.
//!
//! - [`mock`]: the minimal mock XR built from the XR schema;
//! - [`patch`]: one patch at run time; [`paved`]: field paths in JSON values;
//! - [`transform`]: the transforms at run time;
//! - [`pattern`]: example strings for `pattern` constraints;
//! - [`structpb`]: `google.protobuf.Struct` to JSON and back, what functions send and answer.

pub mod function_steps;
pub mod mock;
pub mod patch;
pub mod pattern;
pub mod paved;
pub mod structpb;
pub mod transform;

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use crate::findings::{PatchAt, PatchHolder, Path};
use crate::json::{field, member, member_mut};
use crate::model::function::{FunctionPackage, FunctionSet, KnownFunction, Recognition};
use crate::model::{self, ComposedTemplate, Composition, PatchAndTransformStep};
use patch::{Direction, Outcome};

/// Label Crossplane puts on composed resources (and the XR) naming the XR.
pub const LABEL_COMPOSITE: &str = "crossplane.io/composite";
/// Label naming the claim of the XR.
pub const LABEL_CLAIM_NAME: &str = "crossplane.io/claim-name";
/// Label naming the claim's namespace.
pub const LABEL_CLAIM_NAMESPACE: &str = "crossplane.io/claim-namespace";
/// Annotation naming the template a composed resource was rendered from.
pub const ANNOTATION_RESOURCE_NAME: &str = "crossplane.io/composition-resource-name";

/// What one patch did to a rendered resource.
#[derive(Debug, Clone, PartialEq)]
pub struct PatchRecord<'a> {
    /// Where the patch is written in the Composition (`spec.resources[0].patches[1]`, or
    /// `spec.patchSets[0].patches[2]` for a patch set's).
    pub at: PatchAt,
    /// The patch.
    pub patch: &'a model::Patch,
    /// Whether the source is the environment rather than the XR.
    pub from_environment: bool,
    /// What happened.
    pub outcome: Outcome,
}

/// One composed resource rendered from a template.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedResource<'a> {
    /// The template (`spec.resources[0]`, `spec.pipeline[1].input.resources[0]`).
    pub at: Path,
    /// The template's name.
    pub name: Option<String>,
    /// The rendered object; `None` when the template has no base and no earlier step
    /// rendered a resource of that name.
    pub object: Option<Value>,
    /// Every patch of the template, patch sets expanded, in order.
    pub patches: Vec<PatchRecord<'a>>,
    /// Why the runtime does not send this resource to the API server, if it does not.
    pub not_sent: Option<NotSent>,
    /// The base's `metadata` fields the runtime does not keep, with the values the base
    /// gave them.
    pub ignored: Vec<Ignored>,
    /// The function step that composed it (or changed what a template rendered), when a
    /// function ran: then `at` is the step (`spec.pipeline[1]`) and `patches` is empty.
    pub made_by: Option<MadeBy>,
}

impl RenderedResource<'_> {
    /// Where the object's fields are told in findings: the template's base
    /// (`spec.pipeline[0].input.resources[0].base`), or the resource a function answered
    /// (`spec.pipeline[1].resources[vpc]`).
    pub fn root(&self) -> Path {
        match (&self.made_by, &self.name) {
            (Some(_), Some(name)) => self.at.child("resources").key(name),
            _ if self.at.as_str().is_empty() => Path::default(),
            _ => self.at.child("base"),
        }
    }
}

/// The function step that composed a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadeBy {
    /// The step's name.
    pub step: String,
    /// The function (`functionRef.name`).
    pub function: String,
    /// It asked for required resources or schemas this tool could not give: what it
    /// composed may depend on them.
    pub depends: bool,
}

/// A function step that was run (or tried).
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionRun {
    /// `spec.pipeline[i]`.
    pub at: Path,
    /// The step name.
    pub step: String,
    /// The function's name.
    pub function: String,
    /// Where it was called.
    pub address: String,
    /// What happened.
    pub outcome: function_steps::StepOutcome,
    /// The answer, with [`Calls::keep_answers`] (`render --steps`).
    pub answer: Option<function_steps::StepAnswer>,
    /// What it answered may depend on what this tool could not give it or a step before
    /// it: required resources or schemas, credentials.
    pub depends: bool,
    /// The names of its credentials of source `Secret`, which Crossplane sends (the Secret's
    /// data) and this tool never does.
    pub credentials_withheld: Vec<String>,
}

/// What a render needs to run the steps of functions other than patch-and-transform.
#[derive(Clone, Copy)]
pub struct Calls<'a> {
    /// Calls the functions.
    pub runner: &'a dyn function_steps::StepRunner,
    /// Answers their requirements.
    pub required: &'a dyn function_steps::Required,
    /// The composite resource the functions observe, when not the one rendered from (a
    /// mock with its optional fields filled: [`mock::composite_full`]).
    pub observed: Option<&'a Value>,
    /// Keep each step's answer in its [`FunctionRun`], to print it.
    pub keep_answers: bool,
    /// The observed composed resources, by their `crossplane.io/composition-resource-name`
    /// (`--observed-resources`); `None`: none, as for a new XR.
    pub observed_resources: Option<&'a BTreeMap<String, Map<String, Value>>>,
}

impl std::fmt::Debug for Calls<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Calls").finish_non_exhaustive()
    }
}

/// A field of a base's `metadata` that the runtime does not keep.
#[derive(Debug, Clone, PartialEq)]
pub struct Ignored {
    /// `name` or `namespace`.
    pub key: &'static str,
    /// What the base says.
    pub value: Value,
    /// Who drops it.
    pub by: IgnoredBy,
}

/// Why a base's `metadata` field is not kept.
#[derive(Debug, Clone, PartialEq)]
pub enum IgnoredBy {
    /// Crossplane v1's Resources mode renders a base into the new resource's empty
    /// reference (`composition_pt.go`, `RenderFromJSON`): only patches set the name and
    /// namespace.
    ResourcesMode,
    /// Crossplane v2 puts a namespaced XR's resources in its namespace, the one given
    /// (`composition_functions.go`: a Warning event "cannot create composed resource ...
    /// in namespace ..., using XR namespace ... instead").
    XrNamespace(Value),
}

/// Why the runtime does not send a rendered resource: a patch from the XR or the
/// environment failed (Crossplane v1.17's `PTComposer` and function-patch-and-transform's
/// `RunFunction` skip the template then: "cannot render FromComposite or environment
/// patches for composed resource"). A patch with `policy.fromFieldPath: Required` whose
/// source is absent fails that way on purpose: the resource waits for the field.
#[derive(Debug, Clone, PartialEq)]
pub struct NotSent {
    /// The patch that failed (`spec.resources[0].patches[1]`).
    pub patch: String,
    /// What failed, in words.
    pub why: String,
    /// Whether an earlier step's resource of the same name is sent instead, unpatched by
    /// this template (a template without a base).
    pub earlier_kept: bool,
}

impl NotSent {
    /// The reason, as `render` prints it.
    pub fn describe(&self) -> String {
        if self.earlier_kept {
            format!(
                "this template's patches are not applied (the runtime keeps the resource as the earlier step composed it): {} {}",
                self.patch, self.why
            )
        } else {
            format!(
                "not sent: the runtime does not create or update this resource while {} {}",
                self.patch, self.why
            )
        }
    }
}

impl PatchRecord<'_> {
    /// The source field paths, one per combine variable.
    pub fn sources(&self) -> Vec<&str> {
        let p = self.patch;
        match &p.combine {
            Some(c) if p.from_field_path.is_none() => c
                .variables
                .iter()
                .map(|v| v.from_field_path.as_str())
                .collect(),
            _ => p.from_field_path.iter().map(String::as_str).collect(),
        }
    }

    /// The source field path(s), for messages.
    pub fn from(&self) -> String {
        self.sources().join(", ")
    }

    /// The destination as written (`toFieldPath`, or `fromFieldPath` by default).
    pub fn to(&self) -> Option<&str> {
        self.patch
            .to_field_path
            .as_deref()
            .or(self.patch.from_field_path.as_deref())
    }

    /// Why this patch keeps its resource from being sent, if it does.
    fn stops_resource(&self) -> Option<String> {
        match &self.outcome {
            Outcome::Skipped {
                source,
                required: true,
            } => Some(if source.starts_with("status.") {
                format!(
                    "requires {source} (policy.fromFieldPath: Required), which the composite resource gets only later, in its status"
                )
            } else {
                format!(
                    "requires {source} (policy.fromFieldPath: Required), which the composite resource does not have"
                )
            }),
            Outcome::Failed(message) => Some(format!("fails: {message}")),
            _ => None,
        }
    }
}

/// A function pipeline step whose effect cannot be rendered.
#[derive(Debug, Clone, PartialEq)]
pub struct OpaqueStep {
    /// `spec.pipeline[i]`.
    pub at: Path,
    /// The step name.
    pub step: String,
    /// The function's name (`functionRef.name`).
    pub function: String,
    /// What it can do to composed resources, as far as its package or name tells.
    pub role: FunctionRole,
    /// The Function it was recognised by; `None` when recognised by its name.
    pub package: Option<FunctionPackage>,
}

/// What a function that is not rendered can do to the composed resources, recognised by the
/// package of its Function object when the Functions are known, else by the Function's name
/// (`functionRef.name`, which the package's name usually is).
#[derive(Debug, Clone, PartialEq)]
pub enum FunctionRole {
    /// function-auto-ready: sets readiness, which is not validated.
    Readiness,
    /// function-environment-configs, function-extra-resources: write the pipeline's
    /// context, never a composed resource.
    ContextOnly,
    /// function-cel-filter: may remove the desired composed resources whose names match
    /// these patterns (Go regexps, anchored as the function anchors them), nothing more.
    Filter(Vec<String>),
    /// Anything else (function-go-templating, function-kcl, ...): may change or add any
    /// composed resource.
    Opaque,
}

impl FunctionRole {
    /// The role of `function` (a `functionRef.name`) with its step's `input`, recognised by
    /// the name.
    pub fn of(function: &str, input: Option<&Value>) -> Self {
        Self::of_function(KnownFunction::from_name(function), input)
    }

    /// The role of the known `function` with its step's `input`.
    pub fn of_function(function: KnownFunction, input: Option<&Value>) -> Self {
        match function {
            KnownFunction::AutoReady => FunctionRole::Readiness,
            KnownFunction::EnvironmentConfigs | KnownFunction::ExtraResources => {
                FunctionRole::ContextOnly
            }
            KnownFunction::CelFilter => {
                let names = input
                    .and_then(|i| i.get("filters"))
                    .and_then(Value::as_array)
                    .map(|filters| {
                        filters
                            .iter()
                            .filter_map(|f| f.get("name").and_then(Value::as_str))
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                FunctionRole::Filter(names)
            }
            _ => FunctionRole::Opaque,
        }
    }
}

/// Everything a render produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rendered<'a> {
    /// The XR after environment patches that write to it.
    pub composite: Value,
    /// The composed resources, in template order (a later step's template of the same name
    /// replaces an earlier one).
    pub resources: Vec<RenderedResource<'a>>,
    /// Pipeline steps of other functions than patch-and-transform; `after` those of them
    /// that run after a rendered step (and may change what it rendered).
    pub opaque_steps: Vec<OpaqueStep>,
    /// Environment patches this tool could not run (`spec.environment.patches[0]`, why):
    /// what they write is unknown.
    pub environment_not_rendered: Vec<(String, String)>,
    /// The function steps run (or tried), in order.
    pub function_runs: Vec<FunctionRun>,
}

impl Rendered<'_> {
    /// The steps after the one that rendered `at` whose functions may change or add
    /// composed resources in ways not rendered.
    pub fn changed_later(&self, at: &Path) -> Vec<&OpaqueStep> {
        self.later(at)
            .filter(|o| o.role == FunctionRole::Opaque)
            .collect()
    }

    /// The steps after the one that rendered `at` whose filters may remove the composed
    /// resource named `name`.
    pub fn removed_later(&self, at: &Path, name: Option<&str>) -> Vec<&OpaqueStep> {
        let Some(name) = name else {
            return Vec::new();
        };
        self.later(at)
            .filter(|o| match &o.role {
                FunctionRole::Filter(patterns) => patterns.iter().any(|p| {
                    // Anchored as function-cel-filter anchors it; a pattern Go refuses
                    // makes the function fail, which removes nothing.
                    crate::go::regexp::match_string(&format!("^{p}$"), name).unwrap_or(false)
                }),
                _ => false,
            })
            .collect()
    }

    fn later<'s>(&'s self, at: &Path) -> impl Iterator<Item = &'s OpaqueStep> {
        let step_of = |p: &str| -> Option<usize> {
            let rest = p.strip_prefix("spec.pipeline[")?;
            rest.split(']').next()?.parse().ok()
        };
        let step = step_of(at.as_str());
        self.opaque_steps
            .iter()
            .filter(move |o| step.is_some_and(|s| step_of(o.at.as_str()).is_some_and(|o| o > s)))
    }
}

/// Which Crossplane's runtime sets a composed resource's metadata (`composition_render.go`,
/// `RenderComposedResourceMetadata`, which differs between v1 and v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Runtime {
    /// Crossplane v1: `generateName` always the XR's name and `-`; in Resources mode a
    /// base's `name` and `namespace` are dropped (only patches set them).
    V1,
    /// Crossplane v2: a `name` or `generateName` of the resource is kept; a namespaced XR's
    /// resources go to its namespace whatever they say.
    V2,
    /// Not known (a pipeline of a cluster scoped XR, where no Composition API says which
    /// Crossplane runs it): rendered as v2 does, findings that differ under v1 are warnings.
    #[default]
    Unknown,
}

impl Runtime {
    /// The runtime that renders `c` from `xr`: v1 for Resources mode, v2 for a v2 XR
    /// (`spec.crossplane`, or a namespace), else `given`.
    pub fn of(c: &Composition, xr: &Value, given: Runtime) -> Runtime {
        if c.spec.pipeline.is_empty() {
            return Runtime::V1;
        }
        let v2_xr = field(xr, "spec")
            .and_then(|s| field(s, "crossplane"))
            .is_some()
            || field(xr, "metadata")
                .and_then(|m| field(m, "namespace"))
                .and_then(Value::as_str)
                .is_some_and(|ns| !ns.is_empty());
        if v2_xr { Runtime::V2 } else { given }
    }
}

/// Renders the composed resources of `c` for the XR `xr` (a mock or a real one), with the
/// patch-and-transform `steps` of a pipeline (from
/// [`crate::checks::patch_and_transform::read_steps`]); the other steps' functions are
/// recognised by their packages among `functions`, else by their names.
pub fn render<'a>(
    c: &'a Composition,
    steps: &'a [PatchAndTransformStep],
    xr: &Value,
    functions: Option<&FunctionSet>,
    runtime: Runtime,
) -> Rendered<'a> {
    render_from(c, steps, None, xr, functions, runtime, None)
}

/// [`render`], running the steps of other functions through `calls`: each function that
/// can be reached composes for real, what it answers replacing what the steps before left.
pub fn render_calling<'a>(
    c: &'a Composition,
    steps: &'a [PatchAndTransformStep],
    xr: &Value,
    functions: Option<&FunctionSet>,
    runtime: Runtime,
    calls: Option<Calls<'_>>,
) -> Rendered<'a> {
    render_from(c, steps, None, xr, functions, runtime, calls)
}

/// The bases of a Composition's templates and of its patch-and-transform steps' templates,
/// taken out of them ([`TakenBases::take`]) so that [`render_taking`] renders each into its
/// resource without a copy. A render copies every base it patches, as many allocations as
/// reading it did; a Composition validated once, whose bases nothing reads after its render,
/// need not keep them.
#[derive(Debug, Default)]
pub struct TakenBases {
    /// `spec.resources[i].base`, by `i`.
    spec: Vec<Value>,
    /// Of each step of `steps` (in that order), `input.resources[i].base`, by `i`.
    steps: Vec<Vec<Value>>,
}

impl TakenBases {
    /// Takes every base out of `c` and `steps`, leaving `null` in its place.
    pub fn take(c: &mut Composition, steps: &mut [PatchAndTransformStep]) -> Self {
        let take = |templates: &mut [ComposedTemplate]| {
            templates
                .iter_mut()
                .map(|t| std::mem::take(&mut t.base))
                .collect()
        };
        TakenBases {
            spec: take(&mut c.spec.resources),
            steps: steps
                .iter_mut()
                .map(|s| take(&mut s.input.resources))
                .collect(),
        }
    }
}

/// [`render`] of a Composition whose bases were taken out of it (`c` and `steps` as they are
/// after [`TakenBases::take`]): each base rendered into its resource, not copied.
pub fn render_taking<'a>(
    c: &'a Composition,
    steps: &'a [PatchAndTransformStep],
    bases: TakenBases,
    xr: &Value,
    functions: Option<&FunctionSet>,
    runtime: Runtime,
    calls: Option<Calls<'_>>,
) -> Rendered<'a> {
    render_from(c, steps, Some(bases), xr, functions, runtime, calls)
}

fn render_from<'a>(
    c: &'a Composition,
    steps: &'a [PatchAndTransformStep],
    mut taken: Option<TakenBases>,
    xr: &Value,
    functions: Option<&FunctionSet>,
    runtime: Runtime,
    calls: Option<Calls<'_>>,
) -> Rendered<'a> {
    let runtime = Runtime::of(c, xr, runtime);
    let templates =
        c.spec.resources.len() + steps.iter().map(|s| s.input.resources.len()).sum::<usize>();
    let mut out = Rendered {
        composite: xr.clone(),
        resources: Vec::with_capacity(templates),
        opaque_steps: Vec::new(),
        environment_not_rendered: Vec::new(),
        function_runs: Vec::new(),
    };
    let mut thread = function_steps::Thread::new();
    if c.spec.pipeline.is_empty() {
        let set = Templates {
            resources: &c.spec.resources,
            patch_sets: &c.spec.patch_sets,
            environment: c.spec.environment.as_ref(),
            step: None,
        };
        let bases = taken.as_mut().map(|t| t.spec.as_mut_slice());
        render_set(&set, bases, &Path::new("spec"), runtime, &mut out);
        return out;
    }
    for (i, step) in c.spec.pipeline.iter().enumerate() {
        let at = Path::new("spec").child("pipeline").index(i);
        let input_at = at.child("input");
        match steps.iter().position(|s| s.at == input_at) {
            Some(n) => {
                let s = &steps[n];
                let set = Templates {
                    resources: &s.input.resources,
                    patch_sets: &s.input.patch_sets,
                    environment: s.input.environment.as_ref(),
                    step: Some(i),
                };
                let bases = taken
                    .as_mut()
                    .and_then(|t| t.steps.get_mut(n))
                    .map(Vec::as_mut_slice);
                render_set(&set, bases, &input_at, runtime, &mut out);
            }
            None => {
                let recognised = Recognition::of(&step.function_ref.name, functions);
                if let Some(calls) = calls {
                    match run_function(calls, i, step, runtime, &mut thread, &mut out) {
                        Ran::Composed => continue,
                        Ran::Fatal => break,
                        Ran::NotRun => {}
                    }
                }
                out.opaque_steps.push(OpaqueStep {
                    at,
                    step: step.step.clone(),
                    function: step.function_ref.name.clone(),
                    role: FunctionRole::of_function(recognised.function, step.input.as_ref()),
                    package: recognised.package,
                })
            }
        }
    }
    out
}

/// What one set of templates is rendered from: the Composition's `spec`, or the input of a
/// pipeline step. As a [`ResourceSet`](model::ResourceSet), without its path, which the
/// render's records, borrowing the patches for as long as the Composition, do not hold.
struct Templates<'a> {
    resources: &'a [ComposedTemplate],
    patch_sets: &'a [model::PatchSet],
    environment: Option<&'a model::EnvironmentConfiguration>,
    /// The pipeline step whose input this is; `None` for `spec`.
    step: Option<usize>,
}

/// Renders the templates of `set`, held at `at` (`spec`, `spec.pipeline[i].input`); with
/// `taken`, the set's bases taken out of its templates (by index), moved instead of copied.
fn render_set<'a>(
    set: &Templates<'a>,
    mut taken: Option<&mut [Value]>,
    at: &Path,
    runtime: Runtime,
    out: &mut Rendered<'a>,
) {
    let environment = environment(
        set.environment,
        at,
        &mut out.composite,
        &mut out.environment_not_rendered,
    );
    let stamp = Stamp::of(&out.composite);
    // Each patch's paths parsed once per set, by the patch's address: a patch set's patches
    // are applied to every template that uses it.
    let mut parsed: HashMap<*const model::Patch, patch::ParsedPaths, crate::hashing::ByAddress> =
        HashMap::default();
    for (i, template) in set.resources.iter().enumerate() {
        if crate::budget::step().is_err() {
            return;
        }
        let template_at = at.child("resources").index(i);
        // A template without a base patches the resource an earlier step rendered.
        let earlier = template.name.as_deref().and_then(|n| {
            out.resources
                .iter()
                .position(|r| r.name.as_deref() == Some(n))
        });
        let base = match taken.as_deref_mut() {
            Some(bases) => bases
                .get_mut(i)
                .filter(|b| b.is_object())
                .map(std::mem::take),
            None => None,
        };
        let start = match base {
            // Taken: moved, nothing copied.
            Some(base) => Some(base),
            None => {
                let start = if taken.is_none() && template.base.is_object() {
                    Some(&template.base)
                } else {
                    earlier.and_then(|e| out.resources[e].object.as_ref())
                };
                if start.is_some_and(|s| crate::budget::reserve_copy(s).is_err()) {
                    return;
                }
                start.cloned()
            }
        };
        let mut rendered = RenderedResource {
            at: template_at,
            name: template.name.clone(),
            object: None,
            patches: Vec::with_capacity(template.patches.len()),
            not_sent: None,
            ignored: Vec::new(),
            made_by: None,
        };
        if let Some(mut object) = start {
            // Crossplane v1's Resources mode reads a new resource's name and namespace from
            // its (empty) reference, not from the base (`RenderFromJSON`).
            if set.step.is_none() && runtime == Runtime::V1 {
                rendered.ignored = forget_name_and_namespace(&mut object);
            } else if let Some(xr_ns) = &stamp.namespace
                && let Some(ns) = field(&object, "metadata")
                    .and_then(|m| field(m, "namespace"))
                    .filter(|ns| ns.as_str().is_some_and(|s| !s.is_empty()) && *ns != xr_ns)
            {
                rendered.ignored.push(Ignored {
                    key: "namespace",
                    value: ns.clone(),
                    by: IgnoredBy::XrNamespace(xr_ns.clone()),
                });
            }
            metadata(&mut object, &stamp, template.name.as_deref(), runtime);
            for (patch_at, p) in expand_patches(set, i, template) {
                // Each record holds a few strings: a patch set of a thousand patches used by
                // a thousand templates is a million of them.
                let cost = crate::budget::step().and_then(|()| crate::budget::reserve(256));
                if cost.is_err() {
                    break;
                }
                // Only the patches that run at render need their paths.
                let paths = match patch::direction(p.effective_type()) {
                    Some((Direction::In, _)) => Some(
                        &*parsed
                            .entry(std::ptr::from_ref(p))
                            .or_insert_with(|| patch::ParsedPaths::of(p)),
                    ),
                    _ => None,
                };
                let (outcome, from_environment) =
                    apply(p, paths, &out.composite, &environment, &mut object);
                crate::budget::spent_in(|| patch_at.to_string());
                rendered.patches.push(PatchRecord {
                    at: patch_at,
                    patch: p,
                    from_environment,
                    outcome,
                });
            }
            // What a patch sets (or sets with a real XR, where the mock lacks its source)
            // is not lost.
            rendered.ignored.retain(|i| {
                i.by != IgnoredBy::ResourcesMode
                    || field(&object, "metadata")
                        .and_then(|m| field(m, i.key))
                        .is_none()
                        && !rendered.patches.iter().any(|r| {
                            r.patch
                                .to_field_path
                                .as_deref()
                                .and_then(|to| to.strip_prefix("metadata."))
                                == Some(i.key)
                        })
            });
            // Crossplane sets the namespace after the function (or the patches) ran.
            if let Some(ns) = &stamp.namespace
                && let Some(meta) = object
                    .as_object_mut()
                    .and_then(|o| member_mut(o, "metadata"))
                    .and_then(Value::as_object_mut)
            {
                meta.insert("namespace".into(), ns.clone());
            }
            rendered.not_sent = rendered.patches.iter().find_map(|r| {
                r.stops_resource().map(|why| NotSent {
                    patch: r.at.to_string(),
                    why,
                    earlier_kept: earlier.is_some(),
                })
            });
            // function-patch-and-transform keeps what the earlier step composed.
            let kept = rendered
                .not_sent
                .as_ref()
                .filter(|n| n.earlier_kept)
                .and_then(|_| earlier.and_then(|e| out.resources[e].object.clone()));
            rendered.object = Some(kept.unwrap_or(object));
        }
        match earlier {
            Some(e) => out.resources[e] = rendered,
            None => out.resources.push(rendered),
        }
    }
}

/// What running a function step did to the render.
enum Ran {
    /// It answered: its desired resources replaced the running ones.
    Composed,
    /// It answered Fatal: the pipeline stops there.
    Fatal,
    /// It was not run (no address, or it failed): the step is opaque.
    NotRun,
}

/// Runs the function of `spec.pipeline[i]` on the render so far, when `calls` can reach it:
/// the desired resources it answers replace those of the steps before (one it passes on
/// unchanged keeps its template's record), and its context and desired composite resource
/// go on to the next step.
fn run_function(
    calls: Calls<'_>,
    i: usize,
    step: &model::PipelineStep,
    runtime: Runtime,
    thread: &mut function_steps::Thread,
    out: &mut Rendered<'_>,
) -> Ran {
    use function_steps::{FailureKind, ResultSeverity, StepFailure, StepOutcome};
    let at = Path::new("spec").child("pipeline").index(i);
    let function = &step.function_ref.name;
    let run = |address: String, outcome| FunctionRun {
        at: at.clone(),
        step: step.step.clone(),
        function: function.clone(),
        address,
        outcome,
        answer: None,
        depends: false,
        credentials_withheld: Vec::new(),
    };
    let address = match calls.runner.address(function) {
        Ok(address) => address,
        Err(None) => return Ran::NotRun,
        Err(Some(why)) => {
            let failure = StepFailure {
                kind: FailureKind::Unreachable,
                message: why,
            };
            out.function_runs
                .push(run(String::new(), StepOutcome::Failed(failure)));
            return Ran::NotRun;
        }
    };
    let Some(observed) = calls.observed.unwrap_or(&out.composite).as_object() else {
        return Ran::NotRun;
    };
    // The desired composed resources so far, as the function gets them.
    let mut desired = BTreeMap::new();
    for r in &out.resources {
        if let (Some(name), Some(Value::Object(object))) = (&r.name, &r.object) {
            if crate::budget::reserve_copy(r.object.as_ref().unwrap_or(&Value::Null)).is_err() {
                return Ran::NotRun;
            }
            desired.insert(name.clone(), object.clone());
        }
    }
    if crate::budget::check().is_err() {
        return Ran::NotRun;
    }
    let none = BTreeMap::new();
    let observed_resources = calls.observed_resources.unwrap_or(&none);
    let (answer, outcome) = function_steps::run_step(
        calls.runner,
        calls.required,
        function,
        &step.step,
        step.input.as_ref(),
        function_steps::Observed {
            composite: observed,
            resources: observed_resources,
        },
        &desired,
        thread,
        crate::budget::deadline(),
    );
    let fatal = matches!(&outcome, StepOutcome::Answered { results, .. }
        if results.iter().any(|r| r.severity == ResultSeverity::Fatal));
    // Credentials are never sent: a function that needs them answers without.
    let withheld: Vec<String> = step
        .credentials
        .iter()
        .filter(|c| c.source == model::CREDENTIAL_SOURCE_SECRET)
        .map(|c| c.name.clone())
        .collect();
    let depends = thread.uncertain
        || !withheld.is_empty()
        || matches!(&outcome, StepOutcome::Answered { unanswered, .. }
        if !unanswered.is_empty());
    thread.uncertain = depends;
    let mut record = run(address, outcome);
    record.depends = depends;
    record.credentials_withheld = withheld;
    if calls.keep_answers {
        record.answer = answer.clone();
    }
    out.function_runs.push(record);
    let Some(answer) = answer else {
        return Ran::NotRun;
    };
    if fatal {
        return Ran::Fatal;
    }
    thread.context = answer.context;
    thread.composite = answer.desired_composite;
    let stamp = Stamp::of(&out.composite);
    let made_by = MadeBy {
        step: step.step.clone(),
        function: function.clone(),
        depends,
    };
    let mut answered = answer.desired_resources;
    let mut resources = Vec::with_capacity(answered.len());
    for r in std::mem::take(&mut out.resources) {
        let Some(name) = r.name.clone() else {
            resources.push(r);
            continue;
        };
        // Left out of the answer: Crossplane does not compose it.
        let Some(object) = answered.remove(&name) else {
            continue;
        };
        if desired.get(&name) == Some(&object) {
            resources.push(r);
        } else {
            resources.push(composed_by(&at, &made_by, name, object, &stamp, runtime));
        }
    }
    for (name, object) in answered {
        resources.push(composed_by(&at, &made_by, name, object, &stamp, runtime));
    }
    // An observed resource's name, namespace and generateName are kept, whatever a step says.
    for r in resources.iter_mut().filter(|r| r.made_by.is_some()) {
        let observed = r.name.as_ref().and_then(|n| observed_resources.get(n));
        if let (Some(observed), Some(meta)) = (
            observed
                .and_then(|o| member(o, "metadata"))
                .and_then(Value::as_object),
            r.object
                .as_mut()
                .and_then(Value::as_object_mut)
                .and_then(|o| member_mut(o, "metadata"))
                .and_then(Value::as_object_mut),
        ) {
            for key in ["name", "namespace", "generateName"] {
                if let Some(v) = member(observed, key) {
                    meta.insert(key.into(), v.clone());
                }
            }
        }
    }
    out.resources = resources;
    Ran::Composed
}

/// A resource a function answered, with the metadata Crossplane sets after the pipeline.
fn composed_by<'a>(
    at: &Path,
    made_by: &MadeBy,
    name: String,
    object: Map<String, Value>,
    stamp: &Stamp,
    runtime: Runtime,
) -> RenderedResource<'a> {
    let mut object = Value::Object(object);
    let mut ignored = Vec::new();
    if let Some(xr_ns) = &stamp.namespace
        && let Some(ns) = field(&object, "metadata")
            .and_then(|m| field(m, "namespace"))
            .filter(|ns| ns.as_str().is_some_and(|s| !s.is_empty()) && *ns != xr_ns)
    {
        ignored.push(Ignored {
            key: "namespace",
            value: ns.clone(),
            by: IgnoredBy::XrNamespace(xr_ns.clone()),
        });
    }
    metadata(&mut object, stamp, Some(&name), runtime);
    RenderedResource {
        at: at.clone(),
        name: Some(name),
        object: Some(object),
        patches: Vec::new(),
        not_sent: None,
        ignored,
        made_by: Some(made_by.clone()),
    }
}

/// The environment of a render: the default data, then the environment patches between
/// the XR and the environment (which may also write the XR). No EnvironmentConfig is read.
fn environment(
    env: Option<&model::EnvironmentConfiguration>,
    at: &Path,
    composite: &mut Value,
    not_rendered: &mut Vec<(String, String)>,
) -> Value {
    let Some(env) = env else {
        return Value::Object(Map::new());
    };
    let mut data = Value::Object(env.default_data.clone().unwrap_or_default());
    for (j, p) in env.patches.iter().enumerate() {
        if crate::budget::step().is_err() {
            break;
        }
        let outcome = match patch::direction(p.effective_type()) {
            Some((Direction::In, _)) => patch::apply(p, composite, &mut data),
            Some((Direction::Out, _)) => patch::apply(p, &data, composite),
            None => continue,
        };
        if let Outcome::NotRendered(why) = outcome {
            let at = at.child("environment").child("patches").index(j);
            not_rendered.push((at.as_str().to_string(), why));
        }
    }
    data
}

/// A template's patches with patch sets expanded, each with where it is written.
fn expand_patches<'a>(
    set: &Templates<'a>,
    i: usize,
    template: &'a ComposedTemplate,
) -> Vec<(PatchAt, &'a model::Patch)> {
    let mut out = Vec::with_capacity(template.patches.len());
    for (j, p) in template.patches.iter().enumerate() {
        if p.effective_type() != model::PATCH_SET {
            let at = PatchAt {
                step: set.step,
                holder: PatchHolder::Resource(i),
                index: j,
            };
            out.push((at, p));
            continue;
        }
        if crate::budget::steps(1).is_err() {
            break;
        }
        let name = p.patch_set_name.as_deref().unwrap_or_default();
        if let Some((k, ps)) = set
            .patch_sets
            .iter()
            .enumerate()
            .find(|(_, s)| s.name == name)
        {
            for (l, q) in ps.patches.iter().enumerate() {
                let at = PatchAt {
                    step: set.step,
                    holder: PatchHolder::PatchSet(k),
                    index: l,
                };
                out.push((at, q));
            }
        }
    }
    out
}

/// What applying `p` did, and whether it read the environment.
fn apply(
    p: &model::Patch,
    paths: Option<&patch::ParsedPaths>,
    composite: &Value,
    environment: &Value,
    object: &mut Value,
) -> (Outcome, bool) {
    match patch::direction(p.effective_type()) {
        Some((Direction::In, env)) => {
            let source = if env { environment } else { composite };
            let outcome = match paths {
                Some(paths) => patch::apply_parsed(p, paths, source, object),
                None => patch::apply(p, source, object),
            };
            (outcome, env)
        }
        Some((Direction::Out, env)) => (Outcome::NotRun, env),
        None => (
            Outcome::Failed(format!("patch type {} is unsupported", p.effective_type())),
            false,
        ),
    }
}

/// What Crossplane sets on every composed resource from the XR, built once per set of
/// templates (an environment patch may write the XR's labels between sets).
struct Stamp {
    /// `generateName`: the XR's name and `-`.
    generate_name: Value,
    /// A namespaced XR's namespace.
    namespace: Option<Value>,
    /// The composite and claim labels.
    labels: Vec<(&'static str, Value)>,
    /// `ownerReferences`: the XR as controller.
    owner_references: Value,
}

impl Stamp {
    fn of(xr: &Value) -> Self {
        let xr_meta = field(xr, "metadata");
        let xr_name = xr_meta
            .and_then(|m| field(m, "name"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let xr_labels = xr_meta.and_then(|m| field(m, "labels"));
        let label = |key| {
            xr_labels
                .and_then(|l| field(l, key))
                .and_then(Value::as_str)
        };
        let mut labels = vec![(
            LABEL_COMPOSITE,
            Value::String(label(LABEL_COMPOSITE).unwrap_or(xr_name).to_string()),
        )];
        for key in [LABEL_CLAIM_NAME, LABEL_CLAIM_NAMESPACE] {
            if let Some(v) = label(key) {
                labels.push((key, Value::String(v.to_string())));
            }
        }
        // Built directly: `json!` would copy each interpolated value again through serde.
        let mut owner = Map::with_capacity(6);
        owner.insert(
            "apiVersion".into(),
            field(xr, "apiVersion").cloned().unwrap_or(Value::Null),
        );
        owner.insert(
            "kind".into(),
            field(xr, "kind").cloned().unwrap_or(Value::Null),
        );
        owner.insert("name".into(), Value::String(xr_name.to_string()));
        // An XR read from a file may have no uid; the API server would refuse a null one.
        owner.insert(
            "uid".into(),
            xr_meta
                .and_then(|m| field(m, "uid"))
                .filter(|u| u.is_string())
                .cloned()
                .unwrap_or_else(|| Value::String(mock::MOCK_UID.to_string())),
        );
        owner.insert("controller".into(), Value::Bool(true));
        owner.insert("blockOwnerDeletion".into(), Value::Bool(true));
        Stamp {
            generate_name: Value::String(format!("{xr_name}-")),
            // A namespaced XR's composed resources live in its namespace (Crossplane v2.3.4
            // `RenderComposedResourceMetadata`); a cluster scoped XR's keep theirs.
            namespace: xr_meta
                .and_then(|m| field(m, "namespace"))
                .and_then(Value::as_str)
                .filter(|ns| !ns.is_empty())
                .map(|ns| Value::String(ns.to_string())),
            labels,
            owner_references: Value::Array(vec![Value::Object(owner)]),
        }
    }
}

/// The members a stamp may add to a composed resource's metadata: `generateName`,
/// `namespace`, `labels`, `annotations` and `ownerReferences`.
const STAMPED_METADATA: usize = 5;

/// What Crossplane sets on every composed resource: `generateName` from the XR's name (v1:
/// always; v2: when the resource has neither a name nor one), a namespaced XR's namespace,
/// the composite and claim labels, the template name annotation, and the XR as controller
/// among the resource's own owner references (`meta.AddControllerReference`: an entry with
/// the XR's uid is replaced, others are kept).
fn metadata(object: &mut Value, stamp: &Stamp, template: Option<&str>, runtime: Runtime) {
    let Some(obj) = object.as_object_mut() else {
        return;
    };
    if !member(obj, "metadata").is_some_and(Value::is_object) {
        // After apiVersion and kind, where kubectl prints it.
        let at = ["apiVersion", "kind"]
            .iter()
            .filter(|k| obj.contains_key(**k))
            .count();
        obj.shift_remove("metadata");
        obj.shift_insert(
            at.min(obj.len()),
            "metadata".into(),
            // Room for what is stamped, not grown into member by member.
            Value::Object(Map::with_capacity(STAMPED_METADATA)),
        );
    }
    let Some(meta) = member_mut(obj, "metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let named = |key: &str| {
        member(meta, key)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
    };
    if runtime == Runtime::V1 || !(named("name") || named("generateName")) {
        meta.insert("generateName".into(), stamp.generate_name.clone());
    }
    if let Some(ns) = &stamp.namespace {
        meta.insert("namespace".into(), ns.clone());
    }
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::with_capacity(stamp.labels.len())));
    if let Some(labels) = labels.as_object_mut() {
        for (key, value) in &stamp.labels {
            labels.insert((*key).into(), value.clone());
        }
    }
    if let Some(name) = template {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::with_capacity(1)));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(
                ANNOTATION_RESOURCE_NAME.into(),
                Value::String(name.to_string()),
            );
        }
    }
    let controller = stamp.owner_references.as_array().and_then(|a| a.first());
    match (meta.get_mut("ownerReferences"), controller) {
        (Some(Value::Array(refs)), Some(controller)) => {
            let uid = field(controller, "uid");
            match refs.iter_mut().find(|r| field(r, "uid") == uid) {
                Some(same) => *same = controller.clone(),
                None => refs.push(controller.clone()),
            }
        }
        _ => {
            meta.insert("ownerReferences".into(), stamp.owner_references.clone());
        }
    }
}

/// Drops a base's `metadata.name` and `metadata.namespace` (Crossplane v1's Resources mode),
/// returning those it held.
fn forget_name_and_namespace(object: &mut Value) -> Vec<Ignored> {
    let Some(meta) = object
        .as_object_mut()
        .and_then(|o| member_mut(o, "metadata"))
        .and_then(Value::as_object_mut)
    else {
        return Vec::new();
    };
    ["name", "namespace"]
        .into_iter()
        .filter_map(|key| {
            meta.shift_remove(key).map(|value| Ignored {
                key,
                value,
                by: IgnoredBy::ResourcesMode,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn composition(v: Value) -> Composition {
        let v1 = crate::schema::CompositionApi::embedded(crate::schema::CrossplaneVersion::V1);
        Composition::from_defaulted_value(&crate::model::with_api_defaults(&v, &v1)).expect("model")
    }

    #[test]
    fn renders_resources_mode() {
        let c = composition(json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": "c"},
            "spec": {
                "compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XDb"},
                "patchSets": [{"name": "common", "patches": [
                    {"fromFieldPath": "spec.region", "toFieldPath": "spec.forProvider.region"}]}],
                "resources": [{"name": "db", "base": {"apiVersion": "rds.aws/v1", "kind": "Instance",
                    "spec": {"forProvider": {"engine": "pg"}}},
                    "patches": [{"type": "PatchSet", "patchSetName": "common"},
                                {"fromFieldPath": "spec.missing", "toFieldPath": "spec.forProvider.size"},
                                {"type": "ToCompositeFieldPath", "fromFieldPath": "status.id",
                                 "toFieldPath": "status.id"}]}]
            }
        }));
        let xr = json!({"apiVersion": "example.org/v1", "kind": "XDb",
            "metadata": {"name": "xdb-mock", "uid": "u", "labels": {"crossplane.io/composite": "xdb-mock"}},
            "spec": {"region": "eu-west-1"}});
        let r = render(&c, &[], &xr, None, Runtime::Unknown);
        let db = &r.resources[0];
        let object = db.object.as_ref().expect("rendered");
        assert_eq!(
            object["spec"]["forProvider"],
            json!({"engine": "pg", "region": "eu-west-1"})
        );
        assert_eq!(object["metadata"]["generateName"], "xdb-mock-");
        assert_eq!(object["metadata"]["labels"][LABEL_COMPOSITE], "xdb-mock");
        assert_eq!(
            object["metadata"]["annotations"][ANNOTATION_RESOURCE_NAME],
            "db"
        );
        assert_eq!(object["metadata"]["ownerReferences"][0]["uid"], "u");
        assert_eq!(db.patches[0].at.to_string(), "spec.patchSets[0].patches[0]");
        assert!(matches!(db.patches[1].outcome, Outcome::Skipped { .. }));
        assert_eq!(db.patches[2].outcome, Outcome::NotRun);
    }

    #[test]
    fn a_function_is_what_its_package_is_when_the_functions_are_known() {
        let c = composition(json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": "c"},
            "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XDb"},
                "mode": "Pipeline",
                "pipeline": [{"step": "ready", "functionRef": {"name": "render"}}]}
        }));
        let xr = json!({"apiVersion": "example.org/v1", "kind": "XDb",
            "metadata": {"name": "x", "uid": "u"}});
        let by_name = render(&c, &[], &xr, None, Runtime::Unknown);
        assert_eq!(by_name.opaque_steps[0].role, FunctionRole::Opaque);
        assert_eq!(by_name.opaque_steps[0].package, None);
        let mut functions = FunctionSet::new();
        functions.insert(FunctionPackage::new(
            "render",
            "xpkg.upbound.io/upbound/function-auto-ready:v0.2.1",
        ));
        let by_package = render(&c, &[], &xr, Some(&functions), Runtime::Unknown);
        assert_eq!(by_package.opaque_steps[0].role, FunctionRole::Readiness);
        assert_eq!(
            by_package.opaque_steps[0]
                .package
                .as_ref()
                .map(|p| p.function),
            Some(KnownFunction::AutoReady)
        );
    }

    #[test]
    fn renders_pipelines_and_the_environment() {
        let pt = |resources: Value| {
            json!({"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                   "environment": {"patches": [{"type": "FromCompositeFieldPath",
                       "fromFieldPath": "spec.size", "toFieldPath": "size"}]},
                   "resources": resources})
        };
        let c = composition(json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": "c"},
            "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XDb"},
                "mode": "Pipeline",
                "pipeline": [
                    {"step": "first", "functionRef": {"name": "function-patch-and-transform"},
                     "input": pt(json!([{"name": "db", "base": {"apiVersion": "rds.aws/v1",
                         "kind": "Instance", "spec": {"forProvider": {"engine": "pg"}}}}]))},
                    {"step": "templates", "functionRef": {"name": "function-go-templating"}},
                    {"step": "second", "functionRef": {"name": "function-patch-and-transform"},
                     "input": pt(json!([{"name": "db", "patches": [
                         {"type": "FromEnvironmentFieldPath", "fromFieldPath": "size",
                          "toFieldPath": "spec.forProvider.size"}]}]))}
                ]}
        }));
        // The inputs as the checks read them (valid, so read whole).
        let steps: Vec<PatchAndTransformStep> = c
            .spec
            .pipeline
            .iter()
            .enumerate()
            .filter_map(|(i, step)| {
                let input = model::PatchAndTransformInput::from_value(step.input.as_ref()?).ok()?;
                let at = Path::new("spec").child("pipeline").index(i).child("input");
                Some(PatchAndTransformStep { at, input })
            })
            .collect();
        assert_eq!(steps.len(), 2);
        let xr = json!({"apiVersion": "example.org/v1", "kind": "XDb",
            "metadata": {"name": "x", "uid": "u"}, "spec": {"size": "large"}});
        let r = render(&c, &steps, &xr, None, Runtime::Unknown);
        // The second step's template has no base: it patches what the first rendered.
        assert_eq!(r.resources.len(), 1);
        let db = &r.resources[0];
        assert_eq!(db.at.as_str(), "spec.pipeline[2].input.resources[0]");
        let object = db.object.as_ref().expect("rendered");
        assert_eq!(
            object["spec"]["forProvider"],
            json!({"engine": "pg", "size": "large"})
        );
        assert_eq!(r.opaque_steps.len(), 1);
        assert_eq!(r.opaque_steps[0].function, "function-go-templating");
        assert!(
            r.changed_later(&Path::new("spec.pipeline[0].input.resources[0]"))
                .len()
                == 1
        );
        assert!(r.changed_later(&db.at).is_empty());
    }
}
