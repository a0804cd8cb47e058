//! Validating values against structural schemas as kube-apiserver does for custom resources.
//!
//! One validator, [`validate_resource`]: the whole create pipeline of the API server for a
//! custom resource (apiextensions-apiserver's `customResourceStrategy`), with one set of
//! messages. It checks Compositions from files against the Composition CRD,
//! function-patch-and-transform inputs against their CRD, and composed resources rendered
//! from a Composition against their provider CRDs. It needs a [`CompiledSchema`], built once
//! per schema ([`compiled`] caches it).
//!
//! The pipeline, in the API server's order:
//!
//! 1. unknown fields are reported (as `kubectl apply`'s strict field validation refuses them)
//!    and pruned (`prune.rs`);
//! 2. `null`s of non-nullable fields without a default are dropped;
//! 3. defaults are applied ([`apply_defaults`]); built-in
//!    kinds' `resource.Quantity` fields are decoded as the API server decodes them
//!    (`quantity.rs`);
//! 4. kube-openapi schema validation, here a JSON Schema (`convert.rs`) checked by the
//!    `jsonschema` crate with the Kubernetes formats (`formats.rs`), its errors worded as
//!    apiextensions words them (`errors.rs`);
//! 5. embedded resources (`embedded.rs`) and list types (`list_type.rs`);
//! 6. `x-kubernetes-validations` CEL rules with `kube-cel` (`cel/`), unless a blocking
//!    error exists, bounded by [`CelLimits`].
//!
//! Deliberate differences from the API server are listed where they happen; the main ones:
//! the numeric formats (`int32`, ...) are not checked (the API server does not either), a
//! `null` never satisfies an `enum` (as in kube-openapi), composite `anyOf`/`oneOf`/`allOf`/
//! `not` messages are reported at the root instead of the API server's `<nil>` field, and
//! CEL runtime errors not known to cel-go's wording keep cel-rust's.

mod cache;
mod cel;
mod convert;
mod embedded;
mod errors;
mod formats;
mod list_type;
pub mod names;
mod object_meta;
mod prune;
mod quantity;
mod words;

use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use thiserror::Error;

use super::{Schema, apply_defaults};
use crate::findings::{ErrorType, FieldError, Path, PathAt};

pub use cache::compiled;
pub use formats::go_duration_seconds;
pub use names::NameRule;
pub use object_meta::ObjectMetaRules;
pub use words::{closest, json_type_name};

/// The note the API server adds when a blocking error keeps CEL rules from running.
pub const CEL_NOT_CHECKED: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// Why a schema could not be compiled for validation.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CompileError {
    /// The JSON Schema converted from the structural schema was refused by the validator.
    #[error("the schema cannot be compiled for validation: {message}")]
    JsonSchema {
        /// The validator's reason.
        message: String,
    },
}

/// Bounds on CEL evaluation for one resource.
///
/// `kube-cel` has no runtime cost budget, so evaluation is bounded here: at most
/// `max_evaluations` rule evaluations (a rule on a list's items counts once per item), and no
/// new evaluation starts once `deadline` has passed since CEL evaluation began. A single
/// evaluation is bounded separately, see [`validate_resource`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CelLimits {
    /// Most rule evaluations for one resource.
    pub max_evaluations: usize,
    /// Time after which no further rule is evaluated.
    pub deadline: Duration,
}

impl Default for CelLimits {
    /// 10,000 evaluations and 1 s: far above what a rendered composed resource needs.
    fn default() -> Self {
        CelLimits {
            max_evaluations: 10_000,
            deadline: Duration::from_secs(1),
        }
    }
}

/// What [`validate_resource`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceValidation {
    /// Every error, in pipeline order (unknown fields, schema, embedded resources, list
    /// types, CEL rules).
    pub errors: Vec<FieldError>,
    /// `errors[rules_from..]` come from `x-kubernetes-validations` rules (they run last).
    pub rules_from: usize,
    /// For each of `errors[rules_from..]`, the fields its rule is about (`has(self.a.b)`
    /// under the rule's node: `spec.a.b`), as error paths; empty when the rule is about its
    /// node's own value.
    pub rule_fields: Vec<Vec<String>>,
    /// What was not checked and why (CEL rules skipped, limits reached, schema parts that
    /// could not be compiled).
    pub notes: Vec<String>,
}

/// A CRD version's schema compiled for validation (JSON Schema validator + CEL programs).
///
/// `Send + Sync`: share it between threads in an `Arc` (as [`compiled`] does). Holds its own copy of the structural schema (for pruning, defaulting and the walks that
/// are not JSON Schema), so it does not keep the caller's `Arc<Schema>` alive: the
/// [`compiled`] cache relies on that.
pub struct CompiledSchema {
    schema: Schema,
    /// Nodes (by address, inside `schema`) whose subtree has a `set`/`map` list type: the
    /// list-type walk visits only those.
    list_type_nodes: Subtrees,
    /// Nodes whose subtree has an embedded resource: the embedded walk visits only those.
    embedded_nodes: Subtrees,
    /// Nodes whose subtree has a built-in kind's `resource.Quantity`.
    quantity_nodes: Subtrees,
    /// The JSON Schema the validator was built from, for putting its errors in the API
    /// server's words: made again on the first error, since most schemas never have one
    /// and it is as large as the schema (10 MiB for the corpus' 125 kinds).
    json: OnceLock<Value>,
    validator: jsonschema::Validator,
    cel: cel::CelProgram,
    notes: Vec<String>,
}

impl fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledSchema")
            .field("cel_rules", &self.cel.rule_count())
            .field("notes", &self.notes)
            .finish_non_exhaustive()
    }
}

impl CompiledSchema {
    /// Compiles `schema`: converts it to JSON Schema and builds the validator, and compiles
    /// its CEL rules.
    ///
    /// Parts the API server would have refused when the CRD was created (a pattern the regex
    /// engine rejects, a CEL rule that does not parse) do not fail the compilation: they are
    /// left out and reported in every [`ResourceValidation::notes`].
    ///
    /// # Errors
    ///
    /// [`CompileError::JsonSchema`] when the validator refuses the converted schema.
    pub fn compile(schema: &Schema) -> Result<Self, CompileError> {
        let converted = convert::to_json_schema(schema);
        let validator = errors::build_validator(&converted)?;
        let cel = cel::CelProgram::compile(schema);
        let mut notes = converted.notes;
        notes.extend(cel.notes().iter().cloned());
        let schema = schema.clone();
        // Children live on the heap, so their addresses stay valid when `schema` moves; the
        // root's does not, and the walks always visit the root.
        let list_type_nodes = Subtrees::of(&schema, |s| {
            matches!(s.list_type.as_deref(), Some("set" | "map"))
        });
        let embedded_nodes = Subtrees::of(&schema, |s| s.embedded_resource);
        let quantity_nodes = Subtrees::of(&schema, |s| s.quantity);
        Ok(CompiledSchema {
            schema,
            list_type_nodes,
            embedded_nodes,
            quantity_nodes,
            json: OnceLock::new(),
            validator,
            cel,
            notes,
        })
    }

    /// The structural schema this was compiled from.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The JSON Schema the validator was built from (converted again on first use).
    fn json(&self) -> &Value {
        self.json
            .get_or_init(|| convert::to_json_schema(&self.schema).json)
    }

    /// How many CEL rules are evaluated on create (transition rules and rules that failed to
    /// compile are not counted).
    pub fn cel_rule_count(&self) -> usize {
        self.cel.rule_count()
    }
}

/// Validates `object` as the API server validates a custom resource of this schema on create:
/// report unknown fields (as `kubectl apply`'s strict field validation would refuse them) and
/// prune them, drop nulls of non-nullable fields without default, apply defaults, then schema
/// validation, embedded-resource and list-type checks, then CEL rules unless a blocking error
/// exists.
///
/// `object` is left pruned and defaulted. Errors are reported under `root` (e.g.
/// `spec.resources[0].base`), while the detail text names the path inside the resource as the
/// API server would (`spec.resources[0].base.spec.size: Invalid value: ...: spec.size in body
/// must be of type integer: "string"`).
///
/// CEL evaluation is bounded by `limits` (evaluations and time); a single evaluation is
/// bounded because its cost is estimated before it runs: the rule only sees its node's value,
/// and a node holding `n` JSON values with comprehensions (`all`, `exists`, `map`, ...) nested
/// `d` deep costs about `n^d` steps (`n` for `d = 0`: converting the value). Rules whose
/// estimate exceeds the API server's per-call limit (1,000,000) are not evaluated, with a
/// note. Rendered objects are small, so this rarely triggers.
pub fn validate_resource(
    compiled: &CompiledSchema,
    object: &mut Value,
    root: &Path,
    limits: &CelLimits,
) -> ResourceValidation {
    validate_with(compiled, object, Vec::new(), root, limits, Defaults::Apply)
}

/// [`validate_resource`] of an object that was given its defaults before it was pruned (a
/// function-patch-and-transform input, read with its defaults before pruning): it is not
/// defaulted again. Pruning removes only unknown members and nulls that have no default, so
/// defaulting again would change nothing.
pub fn validate_defaulted_resource(
    compiled: &CompiledSchema,
    object: &mut Value,
    root: &Path,
    limits: &CelLimits,
) -> ResourceValidation {
    validate_with(
        compiled,
        object,
        Vec::new(),
        root,
        limits,
        Defaults::Applied,
    )
}

/// Whether [`validate_with`] applies the schema's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defaults {
    Apply,
    /// Applied before pruning ([`validate_defaulted_resource`]).
    Applied,
}

/// [`validate_resource`] after `errors` found before it (the metadata's).
fn validate_with(
    compiled: &CompiledSchema,
    object: &mut Value,
    errors: Vec<FieldError>,
    root: &Path,
    limits: &CelLimits,
    defaults: Defaults,
) -> ResourceValidation {
    let mut result = ResourceValidation {
        errors,
        rules_from: 0,
        rule_fields: Vec::new(),
        notes: compiled.notes.clone(),
    };
    let schema = &compiled.schema;
    prune::prune_unknown_fields(object, schema, root, &mut result.errors);
    prune::prune_nulls(object, schema);
    if defaults == Defaults::Apply {
        apply_defaults(object, schema);
    }
    quantity::validate(
        object,
        schema,
        &compiled.quantity_nodes,
        root,
        &mut result.errors,
    );
    errors::schema_errors(compiled, object, root, &mut result.errors);
    embedded::validate(
        object,
        schema,
        &compiled.embedded_nodes,
        root,
        &mut result.errors,
    );
    list_type::validate(
        object,
        schema,
        &compiled.list_type_nodes,
        root,
        &mut result.errors,
    );
    result.rules_from = result.errors.len();
    if compiled.cel.has_rules() {
        if result.errors.iter().any(is_blocking) {
            result.notes.push(CEL_NOT_CHECKED.to_string());
        } else {
            compiled.cel.validate(object, root, limits, &mut result);
        }
    }
    result
}

/// Validates a rendered object as the API server validates one of its kind on create: its
/// `metadata` ([`ObjectMetaRules`]), then, when its CRD's schema is known, everything
/// [`validate_resource`] checks. Metadata errors come first and, as on the API server, a
/// blocking one (a missing namespace) keeps the CEL rules from running.
pub fn validate_object(
    compiled: Option<&CompiledSchema>,
    object: &mut Value,
    meta: &ObjectMetaRules,
    root: &Path,
    limits: &CelLimits,
) -> ResourceValidation {
    let meta_errors = object_meta::validate(object, meta, root);
    let Some(compiled) = compiled else {
        return ResourceValidation {
            rules_from: meta_errors.len(),
            errors: meta_errors,
            ..ResourceValidation::default()
        };
    };
    validate_with(compiled, object, meta_errors, root, limits, Defaults::Apply)
}

/// The schema nodes whose subtree (the node included) has some property, by address: walks
/// for rare features skip the subtrees without them instead of visiting every value.
#[derive(Debug, Default)]
pub(crate) struct Subtrees(AddressSet);

/// A set of node addresses (the walks look up every object and array they meet).
type AddressSet = std::collections::HashSet<usize, crate::hashing::ByAddress>;

impl Subtrees {
    fn of(schema: &Schema, has: fn(&Schema) -> bool) -> Self {
        let mut set = AddressSet::default();
        mark(schema, has, &mut set, 0);
        Subtrees(set)
    }

    /// Whether `node`'s subtree has the property.
    pub(crate) fn contains(&self, node: &Schema) -> bool {
        self.0.contains(&(node as *const Schema as usize))
    }

    /// Calls `visit` on `value` (with `schema`, at `path`) and, parents first, on every value
    /// below it whose schema node is in the set. A visit builds the path it is at
    /// ([`PathAt::path`]) only for a finding.
    pub(crate) fn walk(
        &self,
        value: &Value,
        schema: &Schema,
        path: &Path,
        visit: &mut dyn FnMut(&Value, &Schema, &PathAt<'_>),
    ) {
        let root = PathAt::Root(path);
        // No node has the property (most schemas): nothing below the root to visit.
        if self.0.is_empty() {
            visit(value, schema, &root);
            return;
        }
        self.walk_at(value, schema, &root, 0, visit);
    }

    fn walk_at(
        &self,
        value: &Value,
        schema: &Schema,
        path: &PathAt<'_>,
        depth: usize,
        visit: &mut dyn FnMut(&Value, &Schema, &PathAt<'_>),
    ) {
        if depth > crate::schema::structural::MAX_SCHEMA_DEPTH {
            return;
        }
        visit(value, schema, path);
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    // Structural schemas have properties or additionalProperties, not both.
                    if let Some(prop) = schema.properties.get(key) {
                        if self.contains(prop) {
                            self.walk_at(child, prop, &PathAt::Child(path, key), depth + 1, visit);
                        }
                    } else if let Some(add) = schema
                        .additional_properties_schema()
                        .filter(|s| self.contains(s))
                    {
                        self.walk_at(child, add, &PathAt::Key(path, key), depth + 1, visit);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item) = schema.items_schema().filter(|s| self.contains(s)) {
                    for (i, child) in items.iter().enumerate() {
                        self.walk_at(child, item, &PathAt::Index(path, i), depth + 1, visit);
                    }
                }
            }
            _ => {}
        }
    }
}

fn mark(schema: &Schema, has: fn(&Schema) -> bool, set: &mut AddressSet, depth: usize) -> bool {
    if depth > crate::schema::structural::MAX_SCHEMA_DEPTH {
        return false;
    }
    let mut found = has(schema);
    for child in schema.properties.values() {
        found |= mark(child, has, set, depth + 1);
    }
    if let Some(add) = schema.additional_properties_schema() {
        found |= mark(add, has, set, depth + 1);
    }
    if let Some(items) = schema.items_schema() {
        found |= mark(items, has, set, depth + 1);
    }
    if found {
        set.insert(schema as *const Schema as usize);
    }
    found
}

/// `hasBlockingErr`: errors after which the API server does not run CEL rules.
fn is_blocking(error: &FieldError) -> bool {
    matches!(
        error.error_type,
        ErrorType::NotSupported
            | ErrorType::Required
            | ErrorType::TooLong
            | ErrorType::TooMany
            | ErrorType::TypeInvalid
    )
}

/// Joins a relative kube-openapi style path (`spec.size`, `[0].name`) under `root`.
fn under(root: &Path, relative: &str) -> String {
    crate::findings::join_path(root.as_str(), relative)
}

/// The errors of `value` validated against `schema` at `root`, as kubectl prints them: what
/// the tests of the validation's parts compare.
#[cfg(test)]
pub(super) fn shown_errors(schema: &Schema, mut value: Value, root: &str) -> Vec<String> {
    let compiled = CompiledSchema::compile(schema).expect("compiles");
    validate_resource(
        &compiled,
        &mut value,
        &Path::new(root),
        &CelLimits::default(),
    )
    .errors
    .iter()
    .map(ToString::to_string)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    fn messages(value: Value, schema: &Schema) -> Vec<String> {
        shown_errors(schema, value, "")
    }

    /// The cases of the lightweight walker this validator replaced (`legacy.rs`), with the
    /// messages that changed and why.
    #[test]
    fn the_former_walkers_cases() {
        let s = Schema::from_value(&json!({
            "type": "object",
            "required": ["spec"],
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "properties": {
                        "size": {"type": "integer"},
                        "acl": {"type": "string", "enum": ["private", "public-read"]},
                        "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                        "port": {"x-kubernetes-int-or-string": true},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "maybe": {"type": "string", "nullable": true},
                        "replicas": {"type": "integer", "enum": [1, 3]}
                    }
                }
            }
        }))
        .expect("schema");
        assert_eq!(
            messages(json!({"spec": {"size": 1.0}}), &s),
            Vec::<String>::new()
        );
        assert_eq!(
            messages(
                json!({"spec": {"size": "x", "acl": "foo", "tags": {"a.b/c": 1}, "port": true,
                      "free": {"any": [1]}, "aclx": 1, "maybe": null, "replicas": 2}}),
                &s
            ),
            [
                // Unknown fields first: the API server's strict field validation refuses them
                // while decoding, before the schema is validated (the walker reported them
                // where it met them, last here).
                r#"spec.aclx: Invalid value: "aclx": unknown field: "aclx", did you mean "acl"?"#,
                r#"spec.size: Invalid value: "string": spec.size in body must be of type integer: "string""#,
                r#"spec.acl: Unsupported value: "foo": supported values: "private", "public-read""#,
                // A map value's path is kube-openapi's, `spec.tags.a.b/c`, in the field as in
                // the detail (apiextensions' `kubeOpenAPIResultToFieldErrors` takes the field
                // from the detail's path); the walker wrote `spec.tags[a.b/c]`.
                r#"spec.tags.a.b/c: Invalid value: "integer": spec.tags.a.b/c in body must be of type string: "integer""#,
                r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#,
                // Non-string enum values are quoted, as `field.NotSupported` quotes them
                // (the walker printed `1, 3`).
                r#"spec.replicas: Unsupported value: 2: supported values: "1", "3""#,
            ]
        );
        assert_eq!(
            messages(json!({"spec": {"size": null}}), &s),
            ["spec.size: Required value"]
        );
        assert_eq!(messages(json!({}), &s), ["spec: Required value"]);
        assert_eq!(
            messages(json!({"spec": []}), &s),
            [r#"spec: Invalid value: "array": spec in body must be of type object: "array""#]
        );
    }

    /// Under a root, the field is the full path and the detail the path inside the object,
    /// as for any object the API server validates (the walker repeated the full path).
    #[test]
    fn details_name_the_path_inside_the_object() {
        let s = Schema::from_value(&json!({
            "type": "object",
            "properties": {"resources": {"type": "array", "items": {
                "type": "object", "properties": {"name": {"type": "string"}}}}}
        }))
        .expect("schema");
        let compiled = CompiledSchema::compile(&s).expect("compiles");
        let root = Path::new("spec").child("pipeline").index(0).child("input");
        let found = validate_resource(
            &compiled,
            &mut json!({"resources": [{"name": 3}]}),
            &root,
            &CelLimits::default(),
        );
        assert_eq!(
            found
                .errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                r#"spec.pipeline[0].input.resources[0].name: Invalid value: "integer": resources[0].name in body must be of type string: "integer""#
            ]
        );
    }

    #[test]
    fn compiled_schema_is_send_and_sync() {
        fn assert<T: Send + Sync>() {}
        assert::<CompiledSchema>();
    }
}
