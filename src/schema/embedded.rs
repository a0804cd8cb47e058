//! Crossplane's own Composition CRDs, one per supported minor, and function-patch-and-transform's
//! input CRD, embedded at build time.
//!
//! `crds/upstream/apiextensions.crossplane.io_compositions.yaml` is Crossplane v1.17.0's
//! `cluster/crds` file, and `crds/upstream/<tag>/apiextensions.crossplane.io_compositions.yaml`
//! that tag's (v1.14.9, v1.15.6, v1.16.5, v1.20.11, v2.0.8, v2.1.8, v2.3.4), unchanged; minors
//! whose latest patch has a byte-identical file share it (v1.18 and v1.19 v1.20.11's, v2.2
//! v2.3.4's; `testdata/README.md` has the table). Their schema `default:` values are what the
//! API server applies to a Composition before any webhook sees it; [`composition_crd_schema_of`]
//! lets the validator apply the same defaults to Compositions read from files (see
//! `composition_api`).
//!
//! `crds/upstream/pt.fn.crossplane.io_resources.yaml` is function-patch-and-transform
//! v0.10.8's `package/input` CRD, unchanged: the schema of its `Resources` input. Nothing
//! applies that CRD (the function decodes its input with `json.Unmarshal`), and where it
//! disagrees with the function's code the code wins: `runtime_view` adjusts it as read.

use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::composition_api::ApiRelease;
use super::crd::Crd;
use super::structural::Schema;
use super::validation::{CompileError, CompiledSchema};

/// The embedded Crossplane v1.17.0 Composition CRD file's text.
pub const COMPOSITION_CRD_YAML: &str =
    include_str!("../../crds/upstream/apiextensions.crossplane.io_compositions.yaml");

/// The embedded Crossplane v2.3.4 Composition CRD file's text.
pub const COMPOSITION_CRD_V2_YAML: &str =
    include_str!("../../crds/upstream/v2.3.4/apiextensions.crossplane.io_compositions.yaml");

/// The embedded function-patch-and-transform input CRD's text.
pub const PATCH_AND_TRANSFORM_CRD_YAML: &str =
    include_str!("../../crds/upstream/pt.fn.crossplane.io_resources.yaml");

/// The embedded Composition CRD files, each with the release it was copied from.
const COMPOSITION_CRDS: [(&str, &str); 8] = [
    (
        "v1.14.9",
        include_str!("../../crds/upstream/v1.14.9/apiextensions.crossplane.io_compositions.yaml"),
    ),
    (
        "v1.15.6",
        include_str!("../../crds/upstream/v1.15.6/apiextensions.crossplane.io_compositions.yaml"),
    ),
    (
        "v1.16.5",
        include_str!("../../crds/upstream/v1.16.5/apiextensions.crossplane.io_compositions.yaml"),
    ),
    ("v1.17.0", COMPOSITION_CRD_YAML),
    (
        "v1.20.11",
        include_str!("../../crds/upstream/v1.20.11/apiextensions.crossplane.io_compositions.yaml"),
    ),
    (
        "v2.0.8",
        include_str!("../../crds/upstream/v2.0.8/apiextensions.crossplane.io_compositions.yaml"),
    ),
    (
        "v2.1.8",
        include_str!("../../crds/upstream/v2.1.8/apiextensions.crossplane.io_compositions.yaml"),
    ),
    ("v2.3.4", COMPOSITION_CRD_V2_YAML),
];

/// The index in [`COMPOSITION_CRDS`] of a release's file: minors whose CRDs are byte for byte
/// the same share one.
fn file_of(release: ApiRelease) -> usize {
    match release {
        ApiRelease::V1_14 => 0,
        ApiRelease::V1_15 => 1,
        ApiRelease::V1_16 => 2,
        ApiRelease::V1_17 => 3,
        ApiRelease::V1_18 | ApiRelease::V1_19 | ApiRelease::V1_20 => 4,
        ApiRelease::V2_0 => 5,
        ApiRelease::V2_1 => 6,
        ApiRelease::V2_2 | ApiRelease::V2_3 => 7,
    }
}

/// The embedded Composition CRD file's text of `release`.
pub fn composition_crd_yaml(release: ApiRelease) -> &'static str {
    COMPOSITION_CRDS[file_of(release)].1
}

/// Parses an embedded Composition CRD (YAML -> CRD), reporting what went wrong.
fn parse_composition_crd(release: ApiRelease) -> Result<Crd, String> {
    parse_crd(composition_crd_yaml(release))
}

/// The stale enums of P&T v0.10.8's input CRD, and what its code (`IsValid`, the `switch`es
/// of `validate.go` and `transforms.go`) accepts in their place.
const STALE_ENUMS: [(&[&str], &[&str]); 2] = [
    (
        &["Format", "Convert", "TrimPrefix", "TrimSuffix", "Regexp"],
        &["Join", "Replace"],
    ),
    (
        &[
            "ToUpper",
            "ToLower",
            "ToBase64",
            "FromBase64",
            "ToJson",
            "ToSha1",
            "ToSha256",
            "ToSha512",
        ],
        &["ToAdler32"],
    ),
];

/// P&T's input CRD as its runtime reads the input (see the module comment):
/// - string transform types gain `Join` and `Replace`, conversions `ToAdler32`;
/// - `math.type` and `string.type` lose their defaults (no API server applies them; an empty
///   type fails `validate.go` with its own message, so they leave `required` too), as do
///   match pattern types (the runtime only matches `literal` and `regexp`) and
///   `matchCondition.type`/`status` (`validate.go` rejects them empty).
///
/// Defaults the code also applies (patch type, `fallbackTo`, readiness checks) stay.
fn runtime_view(v: &mut Value) {
    let Some(object) = v.as_object_mut() else {
        if let Some(items) = v.as_array_mut() {
            items.iter_mut().for_each(runtime_view);
        }
        return;
    };
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        for (stale, missing) in STALE_ENUMS {
            if values
                .iter()
                .map(Value::as_str)
                .eq(stale.iter().map(|s| Some(*s)))
            {
                values.extend(missing.iter().map(|m| Value::from(*m)));
            }
        }
    }
    if let Some(Value::Object(props)) = object.get_mut("properties") {
        for (name, drop_required) in [("math", true), ("string", true), ("matchCondition", true)] {
            if let Some(Value::Object(inner)) = props.get_mut(name) {
                strip_type_default(inner, name == "matchCondition", drop_required);
            }
        }
        if let Some(Value::Object(patterns)) = props.get_mut("patterns")
            && let Some(Value::Object(items)) = patterns.get_mut("items")
        {
            strip_type_default(items, false, false);
        }
    }
    object.values_mut().for_each(runtime_view);
}

/// Removes the default of an object schema's `type` (and `status`, for a match condition),
/// and with `drop_required` their `required` entries.
fn strip_type_default(
    schema: &mut serde_json::Map<String, Value>,
    with_status: bool,
    drop_required: bool,
) {
    let fields: &[&str] = if with_status {
        &["type", "status"]
    } else {
        &["type"]
    };
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        for f in fields {
            if let Some(Value::Object(p)) = props.get_mut(*f) {
                p.remove("default");
            }
        }
    }
    if drop_required && let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|r| !r.as_str().is_some_and(|r| fields.contains(&r)));
    }
}

fn parse_crd(text: &str) -> Result<Crd, String> {
    parse_crd_with(text, |_| ())
}

/// Parses a CRD, with `adjust` applied to its YAML first.
fn parse_crd_with(text: &str, adjust: fn(&mut Value)) -> Result<Crd, String> {
    // Crossplane's CRD is about 30 levels deep; the default budget depth (64) would do,
    // but allow headroom in case the embedded file is updated.
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! { max_depth: 512 },
    };
    let mut value: Value =
        serde_saphyr::from_str_with_options(text, options).map_err(|e| format!("YAML: {e}"))?;
    adjust(&mut value);
    Crd::from_value(&value).map_err(|e| e.to_string())
}

/// Crossplane's Composition CRD (`compositions.apiextensions.crossplane.io`) of `version` (a
/// `CrossplaneVersion` or an [`ApiRelease`]), parsed once per file.
///
/// # Panics
///
/// Panics if the embedded file does not parse. It is a build-time constant, and the
/// `embedded_composition_crds_parse` test guards it.
pub fn composition_crd(version: impl Into<ApiRelease>) -> &'static Crd {
    static CRDS: [OnceLock<Crd>; COMPOSITION_CRDS.len()] = [const { OnceLock::new() }; 8];
    let release = version.into();
    let file = file_of(release);
    CRDS[file].get_or_init(|| match parse_composition_crd(release) {
        Ok(crd) => crd,
        Err(e) => panic!(
            "embedded Composition CRD {} does not parse: {e}",
            COMPOSITION_CRDS[file].0
        ),
    })
}

/// The `v1` schema of the Composition CRD of `version`, used to apply the API server's
/// defaults and find what it refuses.
///
/// # Panics
///
/// Panics if the embedded file has no `v1` schema (guarded by a test, see [`composition_crd`]).
pub fn composition_crd_schema_of(version: impl Into<ApiRelease>) -> Arc<Schema> {
    let release = version.into();
    match composition_crd(release).schema_for("v1").schema {
        Some(schema) => schema.clone(),
        None => panic!(
            "embedded Composition CRD {} has no v1 schema",
            COMPOSITION_CRDS[file_of(release)].0
        ),
    }
}

/// The `v1beta1` schema of function-patch-and-transform's `Resources` input, parsed once.
///
/// # Panics
///
/// Panics if the embedded file does not parse or has no `v1beta1` schema (a build-time
/// constant, guarded by the `embedded_patch_and_transform_crd_parses` test).
pub fn patch_and_transform_input_schema() -> &'static Schema {
    static CRD: OnceLock<Crd> = OnceLock::new();
    let crd =
        CRD.get_or_init(
            || match parse_crd_with(PATCH_AND_TRANSFORM_CRD_YAML, runtime_view) {
                Ok(crd) => crd,
                Err(e) => panic!("embedded patch-and-transform input CRD does not parse: {e}"),
            },
        );
    match crd.schema_for("v1beta1").schema {
        Some(schema) => schema,
        None => panic!("embedded patch-and-transform input CRD has no v1beta1 schema"),
    }
}

/// [`patch_and_transform_input_schema`] compiled for validation, once.
///
/// # Errors
///
/// The [`CompileError`] of the embedded schema: never, as the
/// `embedded_patch_and_transform_crd_parses` test guards.
pub fn patch_and_transform_input_validator() -> Result<&'static CompiledSchema, CompileError> {
    static COMPILED: OnceLock<Result<CompiledSchema, CompileError>> = OnceLock::new();
    COMPILED
        .get_or_init(|| CompiledSchema::compile(patch_and_transform_input_schema()))
        .as_ref()
        .map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::defaults::apply_defaults;
    use serde_json::json;

    /// The v1.17.0 schema, which most tests here default with.
    fn composition_crd_schema() -> Arc<Schema> {
        composition_crd_schema_of(ApiRelease::V1_17)
    }

    #[test]
    fn embedded_composition_crds_parse() {
        for version in ApiRelease::ALL {
            let crd = parse_composition_crd(version).expect("embedded CRD parses");
            assert_eq!(crd.name, "compositions.apiextensions.crossplane.io");
            assert_eq!(crd.group, "apiextensions.crossplane.io");
            assert_eq!(crd.names.kind, "Composition");
            assert!(crd.all_problems().next().is_none());
            let v1 = crd.version("v1").expect("v1");
            assert!(v1.served && v1.storage && v1.schema.is_some());
            assert!(
                composition_crd_schema_of(version)
                    .descend(&["spec", "mode"])
                    .is_some()
            );
            // What the API server refuses in a file is found with it compiled: v2's CEL
            // rules on create (credentials, required resources, the pipeline), not the
            // transition rule that keeps `compositeTypeRef` immutable (v1.17 on).
            let compiled = crate::schema::validation::compiled(&composition_crd_schema_of(version))
                .expect("compiles");
            let rules = if version >= ApiRelease::V2_0 { 3 } else { 0 };
            assert_eq!(compiled.cel_rule_count(), rules, "{version}");
        }
    }

    /// Each file is the release's its minor names, or for minors that share one, the newest
    /// sharing minor's.
    #[test]
    fn each_minor_has_its_releases_file() {
        for release in ApiRelease::ALL {
            let (tag, _) = COMPOSITION_CRDS[file_of(release)];
            let newest_sharing = ApiRelease::ALL
                .into_iter()
                .rfind(|r| file_of(*r) == file_of(release))
                .unwrap_or(release);
            assert_eq!(tag, newest_sharing.release(), "{release}");
        }
        assert_ne!(
            composition_crd_yaml(ApiRelease::V2_0),
            composition_crd_yaml(ApiRelease::V2_1),
            "v2.1.8's file differs from v2.0.8's in its controller-gen annotation"
        );
    }

    #[test]
    fn embedded_patch_and_transform_crd_parses() {
        let crd = parse_crd(PATCH_AND_TRANSFORM_CRD_YAML).expect("embedded CRD parses");
        assert_eq!(crd.name, "resources.pt.fn.crossplane.io");
        assert_eq!(crd.names.kind, "Resources");
        let schema = patch_and_transform_input_schema();
        assert!(schema.descend(&["resources", "[]", "patches"]).is_some());
        let compiled = patch_and_transform_input_validator().expect("compiles");
        assert!(
            std::ptr::eq(
                compiled,
                patch_and_transform_input_validator().expect("compiles")
            ),
            "compiled once"
        );
        assert_eq!(compiled.cel_rule_count(), 0);
    }

    #[test]
    fn api_server_defaults_for_a_resources_composition() {
        let mut c = json!({
            "apiVersion": "apiextensions.crossplane.io/v1",
            "kind": "Composition",
            "metadata": {"name": "example"},
            "spec": {
                "compositeTypeRef": {"apiVersion": "example.org/v1alpha1", "kind": "XThing"},
                "patchSets": [{"name": "common", "patches": [{"fromFieldPath": "spec.a"}]}],
                "environment": {
                    "policy": {},
                    "environmentConfigs": [{"selector": {"matchLabels": [{"key": "k", "valueFromFieldPath": "spec.k"}]}}],
                    "patches": [{"fromFieldPath": "spec.x", "toFieldPath": "x"}]
                },
                "resources": [
                    {"base": {}},
                    {
                        "base": {"apiVersion": "v1", "kind": "ConfigMap"},
                        "readinessChecks": [{"type": "MatchCondition", "matchCondition": {}}],
                        "patches": [{
                            "fromFieldPath": "spec.a",
                            "toFieldPath": "data.a",
                            "transforms": [
                                {"type": "string", "string": {"fmt": "%s"}},
                                {"type": "math", "math": {"multiply": 2}},
                                {"type": "match", "match": {"patterns": [{"literal": "a", "result": "b"}]}}
                            ]
                        }]
                    }
                ]
            }
        });
        apply_defaults(&mut c, &composition_crd_schema());
        let spec = &c["spec"];
        assert_eq!(spec["mode"], json!("Resources"));
        assert_eq!(
            spec["publishConnectionDetailsWithStoreConfigRef"],
            json!({"name": "default"})
        );
        let default_check = json!([{"type": "MatchCondition", "matchCondition": {"type": "Ready", "status": "True"}}]);
        assert_eq!(spec["resources"][0]["readinessChecks"], default_check);
        // The base itself is preserve-unknown-fields: nothing is defaulted inside it.
        assert_eq!(spec["resources"][0]["base"], json!({}));
        // An explicit check keeps its type; the empty matchCondition gets its defaults.
        assert_eq!(
            spec["resources"][1]["readinessChecks"][0]["matchCondition"],
            json!({"type": "Ready", "status": "True"})
        );
        let patch = &spec["resources"][1]["patches"][0];
        assert_eq!(patch["type"], json!("FromCompositeFieldPath"));
        assert_eq!(patch["transforms"][0]["string"]["type"], json!("Format"));
        assert_eq!(patch["transforms"][1]["math"]["type"], json!("Multiply"));
        assert_eq!(
            patch["transforms"][2]["match"]["fallbackTo"],
            json!("Value")
        );
        assert_eq!(
            patch["transforms"][2]["match"]["patterns"][0]["type"],
            json!("literal")
        );
        assert_eq!(
            spec["patchSets"][0]["patches"][0]["type"],
            json!("FromCompositeFieldPath")
        );
        let env = &spec["environment"];
        assert_eq!(env["policy"]["resolution"], json!("Required"));
        assert_eq!(env["patches"][0]["type"], json!("FromCompositeFieldPath"));
        let config = &env["environmentConfigs"][0];
        assert_eq!(config["type"], json!("Reference"));
        assert_eq!(config["selector"]["mode"], json!("Single"));
        assert_eq!(
            config["selector"]["sortByFieldPath"],
            json!("metadata.name")
        );
        assert_eq!(
            config["selector"]["matchLabels"][0]["type"],
            json!("FromCompositeFieldPath")
        );
        assert_eq!(
            config["selector"]["matchLabels"][0]["fromFieldPathPolicy"],
            json!("Required")
        );
        // Nothing else was invented.
        assert!(spec.get("writeConnectionSecretsToNamespace").is_none());
        assert!(spec.get("pipeline").is_none());
    }

    #[test]
    fn pipeline_mode_is_kept() {
        let mut c = json!({"spec": {"mode": "Pipeline", "compositeTypeRef": {"apiVersion": "a/v1", "kind": "K"},
            "pipeline": [{"step": "s", "functionRef": {"name": "f"}}]}});
        apply_defaults(&mut c, &composition_crd_schema());
        assert_eq!(c["spec"]["mode"], json!("Pipeline"));
        assert!(c["spec"].get("resources").is_none());
    }
}
