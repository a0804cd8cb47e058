//! Schema-aware checks as a user sees them: exact fields and messages for the improvements
//! over upstream (ObjectMeta, int-or-string, `[*]`, numeric keys, precise type flow,
//! omitted toFieldPath) and for function-patch-and-transform pipeline steps.

mod common;

use composition_webhook::findings::Stage;
use composition_webhook::schema::Catalog;
use composition_webhook::validate::Validator;
use serde_json::{Value, json};

fn crd(group: &str, kind: &str, version: &str, schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}s.{group}", kind.to_lowercase())},
        "spec": {"group": group, "names": {"kind": kind, "plural": format!("{}s", kind.to_lowercase())},
                 "scope": "Cluster",
                 "versions": [{"name": version, "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": schema}}]}
    })
}

fn catalog(with_xr: bool) -> Catalog {
    let mut c = Catalog::new();
    if with_xr {
        let xr = crd(
            "example.org",
            "XThing",
            "v1",
            json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer"}, "name": {"type": "string"},
                "enabled": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "ratio": {"type": "number"}}},
            "status": {"type": "object", "properties": {"count": {"type": "integer"}}}}}),
        );
        c.add_document(&xr, "xr").expect("xr");
    }
    let thing = crd(
        "thing.example.org",
        "Thing",
        "v1beta1",
        json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"forProvider": {"type": "object", "properties": {
            "count": {"type": "integer"}, "name": {"type": "string"}, "enabled": {"type": "boolean"},
            "allocatedStorage": {"type": "integer"},
            "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "rules": {"type": "array", "items": {"type": "object", "properties": {"cidr": {"type": "string"}}}},
            "tagString": {"type": "string"}}}}},
        "status": {"type": "object", "properties": {"atProvider": {"type": "object", "properties": {
            "replicas": {"type": "number"}, "phase": {"type": "string"}}}}}}}),
    );
    c.add_document(&thing, "thing").expect("thing");
    c
}

fn composition(patches: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "c"},
        "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XThing"},
                 "resources": [{"name": "thing",
                                "base": {"apiVersion": "thing.example.org/v1beta1", "kind": "Thing"},
                                "patches": patches}]}
    })
}

/// `field: message body` of every non-Crds finding.
fn messages(catalog: &Catalog, c: &Value) -> Vec<String> {
    let v = Validator::new(catalog, common::v1_options());
    v.validate_value(c)
        .findings
        .iter()
        .filter(|f| f.stage != Stage::Crds)
        .map(|f| f.error.to_string())
        .collect()
}

fn patch(from: &str, to: &str) -> Value {
    json!({"fromFieldPath": from, "toFieldPath": to})
}

#[test]
fn object_meta_numeric_keys_wildcards_and_int_or_string_are_accepted() {
    let c = composition(json!([
        patch("spec.name", "metadata.finalizers[0]"),
        patch("spec.name", "metadata.ownerReferences[0].name"),
        patch("spec.name", "metadata.labels[123]"),
        patch("spec.name", "metadata.annotations[example.org/owner]"),
        patch("spec.name", "spec.forProvider.rules[*].cidr"),
        patch("spec.name", "spec.forProvider.labels[*]"),
        patch("spec.size", "spec.forProvider.port"),
        patch("spec.name", "spec.forProvider.port"),
        {"type": "ToCompositeFieldPath", "fromFieldPath": "metadata.generation", "toFieldPath": "status.count"},
    ]));
    assert_eq!(messages(&catalog(true), &c), Vec::<String>::new());
}

#[test]
fn wrong_paths_and_types_name_the_field_and_suggest() {
    let c = composition(json!([
        patch("spec.size", "spec.forProvider.alocatedStorage"),
        patch("spec.name", "metadata.finalizer[0]"),
        patch("spec.enabled", "spec.forProvider.port"),
        patch("spec.name", "spec.forProvider.name[0]"),
        {"type": "ToCompositeFieldPath", "fromFieldPath": "metadata.ownerReferences[0].controller", "toFieldPath": "status.count"},
    ]));
    let p = "spec.resources[0].patches";
    assert_eq!(
        messages(&catalog(true), &c),
        [
            format!(
                r#"{p}[0].toFieldPath: Invalid value: "spec.forProvider.alocatedStorage": field 'alocatedStorage' is not valid according to the schema; did you mean "allocatedStorage"?"#
            ),
            format!(
                r#"{p}[1].toFieldPath: Invalid value: "metadata.finalizer[0]": field 'finalizer' is not valid according to the schema; did you mean "finalizers"?"#
            ),
            format!(
                "{p}[2].transforms: Required value: the fromFieldPath does not have a type compatible with the toFieldPath according to their schemas and no transforms were provided: boolean != integer or string"
            ),
            format!(
                r#"{p}[3].toFieldPath: Invalid value: "spec.forProvider.name[0]": trying to access a 'string' by index (spec.forProvider.name is not an array)"#
            ),
            format!(
                "{p}[4].transforms: Required value: the fromFieldPath does not have a type compatible with the toFieldPath according to their schemas and no transforms were provided: boolean != integer"
            ),
        ]
    );
}

#[test]
fn type_flow_is_precise() {
    let math = |t: &str| json!({"type": "math", "math": {"type": t, "multiply": 2, "clampMin": 1}});
    let c = composition(json!([
        // integer * 2 stays an integer.
        {"fromFieldPath": "spec.size", "toFieldPath": "spec.forProvider.count", "transforms": [math("Multiply")]},
        // A float times 2 is not an integer: the message names the produced type.
        {"fromFieldPath": "spec.ratio", "toFieldPath": "spec.forProvider.count", "transforms": [math("Multiply")]},
        // Join works on arrays.
        {"fromFieldPath": "spec.tags", "toFieldPath": "spec.forProvider.tagString",
         "transforms": [{"type": "string", "string": {"type": "Join", "join": {"separator": ","}}}]},
        // A map whose values are all strings produces a string.
        {"fromFieldPath": "spec.name", "toFieldPath": "spec.forProvider.count",
         "transforms": [{"type": "map", "map": {"a": "1", "b": "2"}}]},
        // The runtime writes to the fromFieldPath when toFieldPath is omitted.
        {"fromFieldPath": "spec.size"},
        // Join on a string is refused.
        {"fromFieldPath": "spec.name", "toFieldPath": "spec.forProvider.tagString",
         "transforms": [{"type": "string", "string": {"type": "Join", "join": {"separator": ","}}}]},
    ]));
    let p = "spec.resources[0].patches";
    let got = messages(&catalog(true), &c);
    assert_eq!(
        got,
        [
            format!(
                r#"{p}[1].transforms: Invalid value: [{{"type":"math","math":{{"type":"Multiply","multiply":2,"clampMin":1}}}}]: the provided transforms do not output a type compatible with the toFieldPath according to the schema: number != integer"#
            ),
            format!(
                r#"{p}[3].transforms: Invalid value: [{{"type":"map","map":{{"a":"1","b":"2"}}}}]: the provided transforms do not output a type compatible with the toFieldPath according to the schema: string != integer"#
            ),
            format!(
                r#"{p}[4].toFieldPath: Invalid value: "spec.size": toFieldPath is not set, so the value is written to the fromFieldPath in the composed resource: field 'size' is not valid according to the schema"#
            ),
            format!(
                r#"{p}[5].transforms[0]: Invalid value: {{"type":"string","string":{{"type":"Join","join":{{"separator":","}}}}}}: string transform join type can only be used with arrays as input, got string"#
            ),
        ]
    );
}

#[test]
fn a_missing_xr_schema_skips_only_the_checks_that_need_it() {
    let c = composition(json!([
        patch("spec.size", "spec.forProvider.nope"),
        patch("spec.whatever", "spec.forProvider.count"),
    ]));
    let schemas = catalog(false);
    let v = Validator::new(&schemas, common::v1_options());
    let r = v.validate_value(&c);
    let got: Vec<String> = r.findings.iter().map(|f| f.message()).collect();
    assert_eq!(
        got,
        [
            r#"spec.compositeTypeRef: Not found: "example.org/v1, Kind=XThing": no CRD, MRD or XRD defines XThing.example.org; checks that need the schema of the composite resource were skipped"#,
            r#"spec.resources[0].patches[0].toFieldPath: Invalid value: "spec.forProvider.nope": field 'nope' is not valid according to the schema"#,
        ]
    );
    assert_eq!(r.verdict.code, Some(422), "loose: the schema error denies");
}

#[test]
fn patch_and_transform_steps_are_validated_like_resources() {
    let c = json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "c"},
        "spec": {
            "compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XThing"},
            "mode": "Pipeline",
            "pipeline": [
                {"step": "other", "functionRef": {"name": "function-go-templating"},
                 "input": {"apiVersion": "gotemplating.fn.crossplane.io/v1beta1", "kind": "GoTemplate",
                           "anything": {"goes": true}}},
                {"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                 "input": {
                    "apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                    "patchSets": [{"name": "common", "patches": [patch("spec.name", "spec.forProvider.nme")]}],
                    "resources": [{
                        "name": "thing",
                        "base": {"apiVersion": "thing.example.org/v1beta1", "kind": "Thing"},
                        "patches": [
                            {"type": "PatchSet", "patchSetName": "common"},
                            patch("spec.size", "spec.forProvider.enabled"),
                            {"fromFieldPath": "spec.name", "toFieldPath": "spec.forProvider.name",
                             "transforms": [{"type": "string", "string": {"type": "Regexp", "regexp": {"match": "("}}}]}
                        ],
                        "readinessChecks": [{"type": "MatchString", "fieldPath": "status.atProvider.replicas", "matchString": "x"}]
                    }],
                    "unknownTopLevel": 1
                 }}
            ]
        }
    });
    let at = "spec.pipeline[1].input";
    assert_eq!(
        messages(&catalog(true), &c),
        [
            format!(
                r#"{at}.unknownTopLevel: Invalid value: "unknownTopLevel": unknown field: "unknownTopLevel""#
            ),
            format!(
                r#"{at}.resources[0].patches[2].transforms[0].string.regexp.match: Invalid value: "(": invalid regexp: missing closing )"#
            ),
            format!(
                r#"{at}.resources[0].patches[0].patchSets[0].patches[0].toFieldPath: Invalid value: "spec.forProvider.nme": field 'nme' is not valid according to the schema; did you mean "name"?"#
            ),
            format!(
                "{at}.resources[0].patches[1].transforms: Required value: the fromFieldPath does not have a type compatible with the toFieldPath according to their schemas and no transforms were provided: integer != boolean"
            ),
            format!(
                r#"{at}.resources[0].readinessChecks[0].fieldPath: Invalid value: "status.atProvider.replicas": expected field path to be of type string: MatchString compares a string, but the schema says number"#
            ),
        ]
    );
}

/// A Pipeline Composition with one function-patch-and-transform step whose one resource
/// has `patches`.
fn pt_composition(patches: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "c"},
        "spec": {
            "compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XThing"},
            "mode": "Pipeline",
            "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                    "resources": [{"name": "thing",
                        "base": {"apiVersion": "thing.example.org/v1beta1", "kind": "Thing"},
                        "patches": patches}]}}]
        }
    })
}

fn string_patch(from: &str, string: Value) -> Value {
    json!({"fromFieldPath": from, "toFieldPath": "spec.forProvider.name",
           "transforms": [{"type": "string", "string": string}]})
}

/// P&T v0.10.8's `transforms.go` and `validate.go` have string Join and Replace and convert
/// ToAdler32, which its input CRD's enums lack; its runtime is the authority.
#[test]
fn patch_and_transform_runtime_transforms_are_accepted() {
    let c = pt_composition(json!([
        string_patch(
            "spec.name",
            json!({"type": "Replace", "replace": {"search": "-", "replace": "_"}})
        ),
        string_patch(
            "spec.tags",
            json!({"type": "Join", "join": {"separator": ","}})
        ),
        string_patch(
            "spec.name",
            json!({"type": "Convert", "convert": "ToAdler32"})
        ),
        // Replace formats any input with %v, so an integer is fine.
        string_patch(
            "spec.size",
            json!({"type": "Replace", "replace": {"search": "1", "replace": "one"}})
        ),
    ]));
    assert_eq!(messages(&catalog(true), &c), Vec::<String>::new());
}

/// `validate.go`'s own messages; P&T reads its input with no CRD defaults, so an omitted
/// string or math type is an error there (function-patch-and-transform PR #131's report).
#[test]
fn patch_and_transform_transform_parameters_are_checked_as_validate_go() {
    let c = pt_composition(json!([
        string_patch("spec.name", json!({"type": "Replace"})),
        string_patch("spec.name", json!({"type": "Replace", "replace": {"search": "", "replace": "x"}})),
        string_patch("spec.name", json!({"fmt": "%s-eks"})),
        {"fromFieldPath": "spec.size", "toFieldPath": "spec.forProvider.count",
         "transforms": [{"type": "math", "math": {"multiply": 2}}]},
    ]));
    let at = "spec.pipeline[0].input.resources[0].patches";
    assert_eq!(
        messages(&catalog(true), &c),
        [
            format!(
                "{at}[0].transforms[0].string.replace: Required value: replace transform requires a replace"
            ),
            format!(
                "{at}[1].transforms[0].string.replace.search: Required value: replace transform requires a search"
            ),
            format!(
                "{at}[2].transforms[0].string.type: Required value: string transform type is required"
            ),
            format!(
                "{at}[3].transforms[0].math.type: Required value: math transform type is required"
            ),
        ]
    );
}

/// Crossplane core v1.17 (Resources mode) has no Replace: its CRD's enum is the authority
/// there, as before.
#[test]
fn core_resources_keep_v1_transforms() {
    let c = composition(json!([string_patch(
        "spec.name",
        json!({"type": "Replace", "replace": {"search": "-", "replace": "_"}})
    )]));
    let out = messages(&catalog(true), &c);
    assert!(
        out.iter().any(|m| m.starts_with(
            r#"spec.resources[0].patches[0].transforms[0].string.type: Unsupported value: "Replace""#
        )),
        "{out:?}"
    );
}

/// A P&T template without `base` patches the resource an earlier P&T step's template of the
/// same name composed (P&T's README, "use P&T with other functions"): its patches are
/// checked against that resource's schema, as rendering starts from that resource.
#[test]
fn templates_without_base_use_the_earlier_resource_schema() {
    let step = |name: &str, template: Value| {
        json!({"step": name, "functionRef": {"name": "function-patch-and-transform"},
               "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                         "resources": [template]}})
    };
    let c = json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "c"},
        "spec": {
            "compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XThing"},
            "mode": "Pipeline",
            "pipeline": [
                step("first", json!({"name": "thing",
                    "base": {"apiVersion": "thing.example.org/v1beta1", "kind": "Thing"}})),
                step("second", json!({"name": "thing",
                    "patches": [patch("spec.name", "spec.forProvider.name"),
                                patch("spec.name", "spec.forProvider.nme")]})),
                step("third", json!({"name": "other",
                    "patches": [patch("spec.name", "spec.forProvider.anything")]})),
            ]
        }
    });
    let catalog = catalog(true);
    let v = Validator::new(&catalog, common::v1_options());
    let report = v.validate_value(&c);
    let out: Vec<(String, bool)> = report
        .findings
        .iter()
        .filter(|f| f.stage != Stage::Crds)
        .map(|f| (f.error.to_string(), f.advisory))
        .collect();
    assert_eq!(
        out,
        [
            (
                r#"spec.pipeline[2].input.resources[0].base: Not found: "other": no base, and no earlier function-patch-and-transform step composes a resource of this name (another function may): its patches, readiness checks and connection details are not checked against a schema"#.to_string(),
                true
            ),
            (
                r#"spec.pipeline[1].input.resources[0].patches[1].toFieldPath: Invalid value: "spec.forProvider.nme": field 'nme' is not valid according to the schema; did you mean "name"?"#.to_string(),
                false
            ),
        ]
    );
}

/// function-patch-and-transform v0.10.8's own `example/` Compositions (copied unchanged to
/// testdata/patch-and-transform/) validate with no errors; the multistep one's template
/// without `base` (composed by function-go-templating) is a warning.
#[test]
fn patch_and_transform_examples_validate() {
    use composition_webhook::findings::Severity;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/patch-and-transform");
    let read = |name: &str| -> Value {
        let text = std::fs::read_to_string(dir.join(name)).expect("testdata file");
        serde_saphyr::from_str(&text).expect("YAML")
    };
    let mut catalog = Catalog::new();
    catalog
        .add_document(&read("definition.yaml"), "definition.yaml")
        .expect("XRD");
    let v = Validator::new(&catalog, common::v1_options());
    for (file, warnings) in [("composition.yaml", 1), ("multistep-composition.yaml", 3)] {
        let report = v.validate_value(&read(file));
        let errors: Vec<String> = report
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .map(|f| f.error.to_string())
            .collect();
        assert_eq!(errors, Vec::<String>::new(), "{file}");
        assert_eq!(
            report.findings.len(),
            warnings,
            "{file}: {:?}",
            report.findings
        );
    }
}

/// The Object CRD of provider-kubernetes at 5263ca4838a2 (in the corpus): v1alpha1 served
/// and `deprecated: true` without a `deprecationWarning`, v1alpha2 served and the storage
/// version. `None` when ../shared is absent outside CI.
fn provider_kubernetes_objects() -> Option<Value> {
    let corpus = common::shared_subdir("corpus")?;
    Some(common::read_yaml(&corpus.join(
        "crds/kubernetes.crossplane.io/provider-kubernetes@5263ca4838a2/kubernetes.crossplane.io_objects.yaml",
    )))
}

/// `(message, severity)` of every finding at an `apiVersion`, the field deprecation warnings
/// are at, validated in strict mode with rendering on or off.
fn at_api_versions(catalog: &Catalog, c: &Value, rendered: bool) -> Vec<(String, bool)> {
    use composition_webhook::findings::Severity;
    use composition_webhook::mode::Mode;
    let options = composition_webhook::validate::Options {
        default_mode: Mode::Strict,
        rendered,
        ..common::v1_options()
    };
    Validator::new(catalog, options)
        .validate_value(c)
        .findings
        .iter()
        .filter(|f| f.error.field.ends_with("apiVersion"))
        .map(|f| (f.message(), f.severity == Severity::Warning))
        .collect()
}

/// A resource of a deprecated version gets the API server's own warning (its default text:
/// the served, non-deprecated version to use instead) at the template's `base.apiVersion`, a
/// warning even in strict mode, once, with and without rendering; in Resources mode and in
/// a function-patch-and-transform step alike. The version to use has none.
#[test]
fn a_deprecated_version_is_the_api_servers_warning_at_the_template() {
    let Some(objects) = provider_kubernetes_objects() else {
        return;
    };
    let mut catalog = catalog(true);
    catalog
        .add_document(&objects, "kubernetes.crossplane.io_objects.yaml")
        .expect("CRD");
    let object = |version: &str| {
        json!({"apiVersion": format!("kubernetes.crossplane.io/{version}"), "kind": "Object",
               "spec": {"forProvider": {"manifest": {"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": "n"}}}}})
    };
    let resources = json!([{"name": "old", "base": object("v1alpha1")},
                           {"name": "new", "base": object("v1alpha2")}]);
    let warning = |at: &str| {
        (
            format!(
                r#"{at}.base.apiVersion: Invalid value: "kubernetes.crossplane.io/v1alpha1": kubernetes.crossplane.io/v1alpha1 Object is deprecated; use kubernetes.crossplane.io/v1alpha2 Object"#
            ),
            true,
        )
    };
    let in_resources = json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "c"},
        "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XThing"},
                 "resources": resources}
    });
    let in_pipeline = json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "c"},
        "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XThing"},
                 "mode": "Pipeline",
                 "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                     "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                               "resources": resources}}]}
    });
    for rendered in [true, false] {
        assert_eq!(
            at_api_versions(&catalog, &in_resources, rendered),
            [warning("spec.resources[0]")],
            "rendered: {rendered}"
        );
        assert_eq!(
            at_api_versions(&catalog, &in_pipeline, rendered),
            [warning("spec.pipeline[0].input.resources[0]")],
            "rendered: {rendered}"
        );
    }
}

/// The other cases of the API server's text, for a CRD's resources and for the composite
/// resource of an XRD: a version's own `deprecationWarning`, exactly; a deprecated version
/// with no served, non-deprecated version above it (no suggestion); a version not deprecated
/// (nothing); a template without `base` (nothing: it names no version) and one whose kind
/// has no schema (its missing schema alone).
#[test]
fn deprecation_warnings_are_the_api_servers_text() {
    let version = |name: &str, served: bool, deprecated: Option<&str>| {
        let mut v = json!({"name": name, "served": served, "storage": false,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                      "x-kubernetes-preserve-unknown-fields": true}}});
        if let Some(text) = deprecated {
            v["deprecated"] = json!(true);
            if !text.is_empty() {
                v["deprecationWarning"] = json!(text);
            }
        }
        v
    };
    let gadgets = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.org"},
        "spec": {"group": "example.org", "names": {"kind": "Gadget", "plural": "gadgets"},
                 "scope": "Cluster",
                 "versions": [version("v1alpha1", true, Some("example.org/v1alpha1 Gadget goes away in v3.0; migrate with `gadgetctl convert`")),
                              version("v1beta1", true, Some("")),
                              version("v1", true, None),
                              version("v2alpha1", true, Some(""))]}
    });
    // Every version above v1beta1 is deprecated or not served: nothing to suggest.
    let widgets = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.org"},
        "spec": {"group": "example.org", "names": {"kind": "Widget", "plural": "widgets"},
                 "scope": "Cluster",
                 "versions": [version("v1alpha1", true, None),
                              version("v1beta1", true, Some("")),
                              version("v1", false, None),
                              version("v2", true, Some(""))]}
    });
    let xrd = json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "CompositeResourceDefinition",
        "metadata": {"name": "xthings.example.org"},
        "spec": {"group": "example.org", "names": {"kind": "XThing", "plural": "xthings"},
                 "versions": [{"name": "v1alpha1", "served": true, "referenceable": true, "deprecated": true,
                               "schema": {"openAPIV3Schema": {"type": "object"}}},
                              {"name": "v1", "served": true, "referenceable": false,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]}
    });
    let mut catalog = Catalog::new();
    for (doc, source) in [(&gadgets, "gadgets"), (&widgets, "widgets"), (&xrd, "xrd")] {
        catalog.add_document(doc, source).expect("definition");
    }
    let base = |api_version: &str, kind: &str| json!({"apiVersion": api_version, "kind": kind});
    let c = json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "c"},
        "spec": {
            "compositeTypeRef": {"apiVersion": "example.org/v1alpha1", "kind": "XThing"},
            "mode": "Pipeline",
            "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                    "resources": [
                        {"name": "a", "base": base("example.org/v1alpha1", "Gadget")},
                        {"name": "b", "base": base("example.org/v1beta1", "Gadget")},
                        {"name": "c", "base": base("example.org/v1", "Gadget")},
                        {"name": "d", "base": base("example.org/v2alpha1", "Gadget")},
                        {"name": "e", "base": base("example.org/v1beta1", "Widget")},
                        {"name": "f", "base": base("example.org/v1alpha1", "Widget")},
                        {"name": "z"},
                        {"name": "g", "base": base("example.org/v1", "Missing")}
                    ]}}]
        }
    });
    let at = "spec.pipeline[0].input.resources";
    let expected: Vec<(String, bool)> = [
        r#"spec.compositeTypeRef.apiVersion: Invalid value: "example.org/v1alpha1": example.org/v1alpha1 XThing is deprecated; use example.org/v1 XThing"#.to_string(),
        format!(r#"{at}[0].base.apiVersion: Invalid value: "example.org/v1alpha1": example.org/v1alpha1 Gadget goes away in v3.0; migrate with `gadgetctl convert`"#),
        format!(r#"{at}[1].base.apiVersion: Invalid value: "example.org/v1beta1": example.org/v1beta1 Gadget is deprecated; use example.org/v1 Gadget"#),
        // Alpha is below GA whatever the major version: v1 is above v2alpha1.
        format!(r#"{at}[3].base.apiVersion: Invalid value: "example.org/v2alpha1": example.org/v2alpha1 Gadget is deprecated; use example.org/v1 Gadget"#),
        format!(r#"{at}[4].base.apiVersion: Invalid value: "example.org/v1beta1": example.org/v1beta1 Widget is deprecated"#),
    ]
    .into_iter()
    .map(|m| (m, true))
    .collect();
    for rendered in [true, false] {
        assert_eq!(
            at_api_versions(&catalog, &c, rendered),
            expected,
            "rendered: {rendered}"
        );
    }
}
