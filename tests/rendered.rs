//! Rendered-resource validation: the design document's examples, upstream's cases of the
//! never-merged mock helper (`render-prototype/`) and of `crossplane beta validate`
//! (`crank-validate/`), and what a user sees for each way a rendered resource can be wrong.

mod common;

use std::path::Path;

use composition_webhook::checks::rendered::CEL_LIMITS;
use composition_webhook::checks::schema_aware::lookup::SchemaSource;
use composition_webhook::findings::Path as FieldPath;
use composition_webhook::findings::{Finding, Severity, Stage};
use composition_webhook::mode::Mode;
use composition_webhook::render::mock;
use composition_webhook::schema::validation::{compiled, validate_resource};
use composition_webhook::schema::{Catalog, Schema, apply_defaults, split_api_version};
use composition_webhook::validate::{Options, Report, Validator};
use serde_json::{Value, json};

/// The report on `composition`, the same whether it is read by reference (files) or used up
/// and read again only when needed (the webhook's way, `validate_owned_rereading`).
fn validate(catalog: &Catalog, composition: &Value, mode: Mode) -> Report {
    let validator = Validator::new(
        catalog,
        Options {
            default_mode: mode,
            ..common::v1_options()
        },
    );
    let report = validator.validate_value(composition);
    let used_up =
        validator.validate_owned_rereading(composition.clone(), || Some(composition.clone()));
    assert_eq!(
        format!(
            "{:?}",
            (&used_up.findings, &used_up.verdict, &used_up.stopped)
        ),
        format!("{:?}", (&report.findings, &report.verdict, &report.stopped)),
        "used up and read again"
    );
    report
}

fn messages(report: &Report, stage: Option<Stage>) -> Vec<String> {
    report
        .findings
        .iter()
        .filter(|f| stage.is_none_or(|s| f.stage == s))
        .map(|f| format!("{}: {}", f.severity.name(), f.message()))
        .collect()
}

#[test]
fn design_doc_invalid_example_yields_all_five_errors() {
    let Some((_, case, file)) = common::cases("design-doc")
        .into_iter()
        .find(|(id, _, _)| id.ends_with("002-invalid-example"))
    else {
        return;
    };
    let catalog = common::case_catalog(case["crds"].as_array().expect("crds"), &file);
    let report = validate(&catalog, &case["composition"], Mode::Loose);
    assert_eq!(
        messages(&report, None),
        [
            "error: spec.resources[0].patches[1].toFieldPath: Invalid value: \"spec.forProvider.allocatedstorage\": field 'allocatedstorage' is not valid according to the schema; did you mean \"allocatedStorage\"?",
            "error: spec.resources[0].patches[2].transforms: Required value: the fromFieldPath does not have a type compatible with the toFieldPath according to their schemas and no transforms were provided: integer != boolean",
            "error: spec.resources[0].patches[3].fromFieldPath: Invalid value: \"spec.parameters.wrongParameter\": field 'wrongParameter' is not valid according to the schema",
            "error: spec.resources[0].base.spec.forProvider.engin: Invalid value: \"engin\": unknown field: \"engin\", did you mean \"engine\"?",
            "error: spec.resources[0].base.spec.forProvider.region: Required value",
        ]
    );
    assert_eq!(report.verdict.code, Some(422));
}

#[test]
fn design_doc_valid_example_passes() {
    let Some((_, case, file)) = common::cases("design-doc")
        .into_iter()
        .find(|(id, _, _)| id.ends_with("001-valid-example"))
    else {
        return;
    };
    let catalog = common::case_catalog(case["crds"].as_array().expect("crds"), &file);
    for mode in [Mode::Strict, Mode::Loose, Mode::Warn] {
        let report = validate(&catalog, &case["composition"], mode);
        assert_eq!(messages(&report, None), Vec::<String>::new(), "{mode}");
        assert!(report.verdict.allowed);
    }
}

/// Upstream's mock helper fills required fields with zero values; ours fills the same
/// fields with the same values where the fields have no constraints (all of upstream's
/// cases), except strings: never upstream's `""` (which renders names such as
/// `-controlplane`), the field's name as a DNS label instead.
#[test]
fn render_prototype_cases() {
    fn blank_strings(v: &Value) -> Value {
        match v {
            Value::String(s) => {
                assert!(!s.is_empty(), "a mock string is never empty");
                json!("")
            }
            Value::Array(a) => Value::Array(a.iter().map(blank_strings).collect()),
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), blank_strings(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    let all = common::cases("render-prototype");
    for (id, case, _) in &all {
        let schema_value = &case["input"]["schema"];
        let schema =
            (!schema_value.is_null()).then(|| Schema::from_value(schema_value).expect("schema"));
        let expected = &case["expected"]["upstream_asserted"];
        match mock::required_fields(schema.as_ref(), &mock::Hints::default()) {
            Ok(v) => {
                assert_eq!(expected["error"], json!(false), "{id}");
                assert_eq!(blank_strings(&v), expected["object"], "{id}");
            }
            Err(e) => {
                assert_eq!(expected["error"], json!(true), "{id}: {e}");
            }
        }
    }
    assert!(all.is_empty() || all.len() == 9);
}

/// The messages of `crossplane beta validate` for a resource, from its derived output lines.
fn crank_lines(case: &Value) -> Vec<String> {
    case["expected"]["stdout_derived"]
        .as_array()
        .map(|lines| {
            lines
                .iter()
                .filter_map(Value::as_str)
                .filter(|l| l.starts_with("[x]"))
                .filter_map(|l| l.split_once(" : ").map(|(_, m)| m.to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// `crossplane beta validate` cases: each resource validated against its CRD as the API
/// server would; defaults applied as upstream's `applyDefaults`.
#[test]
fn crank_validate_cases() {
    let all = common::cases("crank-validate");
    for (id, case, file) in &all {
        let input = &case["input"];
        let expected = &case["expected"]["upstream_asserted"];
        if let Some(resources) = input["resources"].as_array() {
            let catalog = common::case_catalog(input["crds"].as_array().expect("crds"), file);
            let mut missing = 0;
            let mut found = Vec::new();
            for r in resources {
                let (group, version) =
                    split_api_version(r["apiVersion"].as_str().expect("apiVersion"))
                        .expect("group/version");
                let kind = r["kind"].as_str().expect("kind");
                let Some(schema) = catalog
                    .resolve(group, kind, version)
                    .ok()
                    .and_then(|i| i.schema)
                else {
                    missing += 1;
                    continue;
                };
                let mut object = r.clone();
                let result = validate_resource(
                    &compiled(&schema).expect("compiles"),
                    &mut object,
                    &FieldPath::default(),
                    &CEL_LIMITS,
                );
                found.extend(result.errors.iter().map(ToString::to_string));
            }
            let error_on_missing = input["errorOnMissingSchemas"] == json!(true);
            let ours_fails = !found.is_empty() || (error_on_missing && missing > 0);
            assert_eq!(ours_fails, !expected["error"].is_null(), "{id}: {found:?}");
            assert_eq!(found, crank_lines(case), "{id}");
        } else if let Some(errors) = expected["errors"].as_array() {
            let schema = Schema::from_value(&input["structural_schema"]).expect("schema");
            let mut object = input["resource"].clone();
            let result = validate_resource(
                &compiled(&std::sync::Arc::new(schema)).expect("compiles"),
                &mut object,
                &FieldPath::default(),
                &CEL_LIMITS,
            );
            let found: Vec<String> = result.errors.iter().map(ToString::to_string).collect();
            let want: Vec<String> = errors
                .iter()
                .map(|e| e["message"].as_str().expect("message").to_string())
                .collect();
            assert_eq!(found, want, "{id}");
        } else {
            // applyDefaults: the resource with its CRD's defaults, or unchanged without one.
            let mut object = input["resource"].clone();
            let gvk = &input["gvk"];
            let crd = input["crds"].as_array().and_then(|crds| {
                crds.iter().find(|c| {
                    c["spec"]["names"]["kind"] == gvk["kind"] && c["spec"]["group"] == gvk["group"]
                })
            });
            if let Some(crd) = crd {
                let version = crd["spec"]["versions"]
                    .as_array()
                    .and_then(|vs| vs.iter().find(|v| v["name"] == gvk["version"]))
                    .expect("version");
                let schema =
                    Schema::from_value(&version["schema"]["openAPIV3Schema"]).expect("schema");
                apply_defaults(&mut object, &schema);
            }
            assert_eq!(object, expected["resource"], "{id}");
        }
    }
    assert!(all.is_empty() || all.len() == 14);
}

fn xrd(spec_properties: Value, required: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "CompositeResourceDefinition",
        "metadata": {"name": "xdatabases.example.org"},
        "spec": {"group": "example.org", "names": {"kind": "XDatabase", "plural": "xdatabases"},
            "claimNames": {"kind": "Database", "plural": "databases"},
            "versions": [{"name": "v1", "served": true, "referenceable": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": required,
                             "properties": spec_properties}}}}}]}
    })
}

fn crd(spec_properties: Value, required: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "instances.db.example.org"},
        "spec": {"group": "db.example.org", "scope": "Cluster",
            "names": {"kind": "Instance", "plural": "instances"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "forProvider": {"type": "object", "required": required,
                                        "properties": spec_properties}}}}}}}]}
    })
}

fn composition(resources: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "xdatabases.aws"},
        "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XDatabase"},
                 "resources": resources}
    })
}

fn catalog(docs: &[Value]) -> Catalog {
    let mut c = Catalog::new();
    for d in docs {
        c.add_document(d, "test").expect("schema");
    }
    c
}

fn rendered(report: &Report) -> Vec<String> {
    messages(report, Some(Stage::Rendered))
}

#[test]
fn mock_values_and_optional_sources_give_warnings_not_errors() {
    let catalog = catalog(&[
        xrd(
            json!({"region": {"type": "string"}, "size": {"type": "string"},
                   "name": {"type": "string"}, "zone": {"type": "string", "default": "a"}}),
            json!(["name"]),
        ),
        crd(
            json!({"region": {"type": "string"}, "id": {"type": "string", "pattern": "^[0-9]+$"},
                   "zone": {"type": "string", "enum": ["a", "b"]}, "engine": {"type": "string"}}),
            json!(["region", "id", "zone", "engine"]),
        ),
    ]);
    let c = composition(json!([{"name": "db",
    "base": {"apiVersion": "db.example.org/v1", "kind": "Instance",
             "spec": {"forProvider": {"engine": "pg"}}},
    "patches": [
        {"fromFieldPath": "spec.region", "toFieldPath": "spec.forProvider.region"},
        {"fromFieldPath": "spec.name", "toFieldPath": "spec.forProvider.id"},
        {"fromFieldPath": "spec.zone", "toFieldPath": "spec.forProvider.zone"}
    ]}]));
    let report = validate(&catalog, &c, Mode::Strict);
    assert_eq!(
        rendered(&report),
        [
            "warning: spec.resources[0].base.spec.forProvider.id: Invalid value: \"name\": spec.forProvider.id in body should match '^[0-9]+$' (the value comes from spec.resources[0].patches[1]: spec.name is \"name\" in the mock composite resource, a real one may hold another)",
            "warning: spec.resources[0].base.spec.forProvider.region: Required value: set only by spec.resources[0].patches[0] from spec.region, which the mock composite resource does not have (optional, no default); a composite resource without it renders an invalid resource",
        ]
    );
    assert!(report.verdict.allowed, "{:?}", report.findings);
}

#[test]
fn base_errors_are_errors_in_strict_and_loose_and_warnings_in_warn() {
    let catalog = catalog(&[
        xrd(json!({}), json!([])),
        crd(
            json!({"engine": {"type": "string"}, "size": {"type": "integer"},
                   "tier": {"type": "string", "enum": ["small", "large"]}}),
            json!(["engine"]),
        ),
    ]);
    let c = composition(json!([{"name": "db",
        "base": {"apiVersion": "db.example.org/v1", "kind": "Instance",
                 "spec": {"forProvider": {"size": "10", "tier": "medium", "engin": "pg"}}}}]));
    let expected = [
        "spec.resources[0].base.spec.forProvider.engin: Invalid value: \"engin\": unknown field: \"engin\", did you mean \"engine\"?",
        "spec.resources[0].base.spec.forProvider.engine: Required value",
        "spec.resources[0].base.spec.forProvider.size: Invalid value: \"string\": spec.forProvider.size in body must be of type integer: \"string\"",
        "spec.resources[0].base.spec.forProvider.tier: Unsupported value: \"medium\": supported values: \"small\", \"large\"",
    ];
    for (mode, severity) in [
        (Mode::Strict, Severity::Error),
        (Mode::Loose, Severity::Error),
        (Mode::Warn, Severity::Warning),
    ] {
        let report = validate(&catalog, &c, mode);
        let found: Vec<&Finding> = report
            .findings
            .iter()
            .filter(|f| f.stage == Stage::Rendered)
            .collect();
        let mut got: Vec<String> = found.iter().map(|f| f.message()).collect();
        got.sort();
        assert_eq!(got, expected, "{mode}");
        assert!(found.iter().all(|f| f.severity == severity), "{mode}");
        assert_eq!(report.verdict.allowed, mode == Mode::Warn);
    }
    // The flag turns the level off.
    let report = Validator::new(
        &catalog,
        Options {
            rendered: false,
            ..common::v1_options()
        },
    )
    .validate_value(&c);
    assert!(rendered(&report).is_empty());
}

#[test]
fn other_functions_are_named_once_and_not_guessed() {
    let catalog = catalog(&[
        xrd(json!({}), json!([])),
        crd(json!({"engine": {"type": "string"}}), json!(["engine"])),
    ]);
    let c = json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "xdatabases.fn"},
        "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XDatabase"},
            "mode": "Pipeline",
            "pipeline": [
                {"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                 "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                    "resources": [{"name": "db", "base": {"apiVersion": "db.example.org/v1",
                        "kind": "Instance", "spec": {"forProvider": {}}}}]}},
                {"step": "templates", "functionRef": {"name": "function-go-templating"}},
                {"step": "ready", "functionRef": {"name": "function-auto-ready"}}
            ]}
    });
    let report = validate(&catalog, &c, Mode::Strict);
    assert_eq!(
        rendered(&report),
        [
            "warning: spec.pipeline[1]: Not rendered: function \"function-go-templating\" (step \"templates\"): recognised by its name as none whose effect is known, what it does to composed resources cannot be known without running it, so only the patch-and-transform steps were rendered, and rendered findings of the steps before it are warnings",
            "warning: spec.pipeline[0].input.resources[0].base.spec.forProvider.engine: Required value",
        ]
    );
    assert!(report.verdict.allowed);
}

/// Functions that cannot change what patch-and-transform composed keep its errors errors:
/// function-auto-ready sets readiness, function-environment-configs writes the context (and
/// gives no note); function-cel-filter can only remove resources, so a finding is a warning
/// only for a resource one of its filters may remove, and says which. The filter's input is
/// the shape of crossplane-contrib/function-cel-filter's `example/composition.yaml` (names
/// are Go regexps, anchored as its `fn.go` anchors them).
#[test]
fn functions_that_change_no_composed_resource_keep_errors_errors() {
    let catalog = catalog(&[
        xrd(json!({}), json!([])),
        crd(json!({"engine": {"type": "string"}}), json!(["engine"])),
    ]);
    let composition = |after: Value| {
        let mut pipeline = vec![
            json!({"step": "environment", "functionRef": {"name": "function-environment-configs"}}),
            json!({"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
             "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                "resources": [{"name": "db-main", "base": {"apiVersion": "db.example.org/v1",
                    "kind": "Instance", "spec": {"forProvider": {}}}}]}}),
        ];
        pipeline.push(after);
        pipeline.push(json!({"step": "ready", "functionRef": {"name": "function-auto-ready"}}));
        json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": "xdatabases.fn"},
            "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XDatabase"},
                "mode": "Pipeline", "pipeline": pipeline}
        })
    };
    let filter = |name: &str| {
        json!({"step": "filter", "functionRef": {"name": "function-cel-filter"},
            "input": {"apiVersion": "cel.fn.crossplane.io/v1beta1", "kind": "Filters",
                "filters": [{"name": name, "expression": "observed.composite.resource.spec.widgets == 42"}]}})
    };
    // A filter for other resources: the error stays an error, and nothing is noted.
    let report = validate(&catalog, &composition(filter("db")), Mode::Loose);
    assert_eq!(
        rendered(&report),
        ["error: spec.pipeline[1].input.resources[0].base.spec.forProvider.engine: Required value"]
    );
    assert!(!report.verdict.allowed);
    // A filter whose pattern matches this resource: a warning that names it.
    let report = validate(&catalog, &composition(filter("db-.*")), Mode::Loose);
    assert_eq!(
        rendered(&report),
        [
            "warning: spec.pipeline[1].input.resources[0].base.spec.forProvider.engine: Required value: function \"function-cel-filter\" (step \"filter\") may remove this resource (recognised by its name), so this is a warning"
        ]
    );
    assert!(report.verdict.allowed);
}

/// With the installed Functions known, a step is recognised by its Function's package, not
/// its name: a Function named `filter` that installs function-auto-ready changes no composed
/// resource (no note, the error stays an error); one named `render` that installs
/// function-cel-filter may remove the resource, and the warning names its package.
#[test]
fn functions_are_recognised_by_their_packages_when_the_functions_are_known() {
    use composition_webhook::checks::functions::WithFunctions;
    use composition_webhook::model::function::{FunctionPackage, FunctionSet};
    use std::sync::Arc;

    let catalog = catalog(&[
        xrd(json!({}), json!([])),
        crd(json!({"engine": {"type": "string"}}), json!(["engine"])),
    ]);
    let composition = |step: Value| {
        json!({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": "xdatabases.fn"},
            "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XDatabase"},
                "mode": "Pipeline", "pipeline": [
                    {"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                     "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                        "resources": [{"name": "db-main", "base": {"apiVersion": "db.example.org/v1",
                            "kind": "Instance", "spec": {"forProvider": {}}}}]}},
                    step]}
        })
    };
    let mut set = FunctionSet::new();
    for (name, package) in [
        (
            "function-patch-and-transform",
            "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.10.8",
        ),
        (
            "filter",
            "xpkg.upbound.io/upbound/function-auto-ready:v0.2.1",
        ),
        (
            "render",
            "xpkg.crossplane.io/crossplane-contrib/function-cel-filter:v0.1.1",
        ),
    ] {
        set.insert(FunctionPackage::new(name, package));
    }
    let known = WithFunctions {
        schemas: &catalog,
        functions: Some(Arc::new(set)),
    };
    let with = |source: &dyn SchemaSource, step: Value| {
        Validator::new(
            source,
            Options {
                default_mode: Mode::Loose,
                ..common::v1_options()
            },
        )
        .validate_value(&composition(step))
    };
    let auto_ready = json!({"step": "ready", "functionRef": {"name": "filter"}});
    // By name `filter` is a function whose effect is not known.
    assert_eq!(
        rendered(&with(&catalog, auto_ready.clone())),
        [
            "warning: spec.pipeline[1]: Not rendered: function \"filter\" (step \"ready\"): recognised by its name as none whose effect is known, what it does to composed resources cannot be known without running it, so only the patch-and-transform steps were rendered, and rendered findings of the steps before it are warnings",
            "warning: spec.pipeline[0].input.resources[0].base.spec.forProvider.engine: Required value",
        ]
    );
    let report = with(&known, auto_ready);
    assert_eq!(
        rendered(&report),
        ["error: spec.pipeline[0].input.resources[0].base.spec.forProvider.engine: Required value"]
    );
    assert!(!report.verdict.allowed);
    let cel_filter = json!({"step": "filter", "functionRef": {"name": "render"},
        "input": {"apiVersion": "cel.fn.crossplane.io/v1beta1", "kind": "Filters",
            "filters": [{"name": "db-.*", "expression": "false"}]}});
    let report = with(&known, cel_filter);
    assert_eq!(
        rendered(&report),
        [
            "warning: spec.pipeline[0].input.resources[0].base.spec.forProvider.engine: Required value: function \"render\" (step \"filter\", function-cel-filter from package xpkg.crossplane.io/crossplane-contrib/function-cel-filter:v0.1.1) may remove this resource, so this is a warning"
        ]
    );
    assert!(report.verdict.allowed);
}

/// The mock XR of every corpus XRD is itself valid against the XR's CRD, and the same on
/// every run.
#[test]
fn corpus_mock_composites_are_valid() {
    let Some(dir) = common::shared_subdir("corpus") else {
        return;
    };
    let manifest = common::read_json(&dir.join("manifest.json"));
    let mut checked = 0;
    for entry in manifest["compositions"].as_array().into_iter().flatten() {
        let (Some(xrd_file), Some(type_ref)) = (
            entry["xrd_file"].as_str(),
            entry["compositeTypeRef"].as_str(),
        ) else {
            continue;
        };
        let Some((api_version, kind)) = type_ref.split_once(", kind=") else {
            continue;
        };
        let path = dir.join(xrd_file);
        let text = std::fs::read_to_string(&path).expect("xrd file");
        let docs = composition_webhook::document::parse_documents(xrd_file, &text).expect("yaml");
        let mut catalog = Catalog::new();
        for d in &docs {
            let _ = catalog.add_document(&d.value, xrd_file);
        }
        let (group, version) = split_api_version(api_version).expect("group/version");
        let Some(schema) = catalog
            .resolve(group, kind, version)
            .ok()
            .and_then(|i| i.schema)
        else {
            continue;
        };
        let of = mock::Of {
            api_version,
            kind,
            composition: "c",
            secrets_namespace: Some("crossplane-system"),
            hints: &mock::Hints::default(),
        };
        let mut xr = mock::composite(Some(&schema), &of).expect("mock");
        let again = mock::composite(Some(&schema), &of).expect("mock");
        assert_eq!(xr, again);
        let result = validate_resource(
            &compiled(&schema).expect("compiles"),
            &mut xr,
            &FieldPath::default(),
            &CEL_LIMITS,
        );
        let errors: Vec<String> = result.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            Vec::<String>::new(),
            "the mock {kind} of {xrd_file}"
        );
        checked += 1;
    }
    assert!(checked >= 100, "{checked} mock composites checked");
}

/// The resource-level suite of testdata/rendered/violations.yaml again, each resource now a
/// Composition's base: the same messages, reported at `spec.resources[0].base.<path>`.
#[test]
fn violations_suite_through_compositions() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/rendered/violations.yaml");
    let text = std::fs::read_to_string(&path).expect("violations.yaml");
    let docs =
        composition_webhook::document::parse_documents("violations.yaml", &text).expect("yaml");
    let suite = &docs[0].value;
    let mut checked = 0;
    for case in suite["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().unwrap_or_default();
        // Cases about the validator's own knobs (root, limits, results) stay resource-level.
        if case.get("root").is_some() || case.get("limits").is_some() {
            continue;
        }
        let schema = match &case["schema"] {
            Value::String(s) => suite["schemas"][s.as_str()].clone(),
            inline => inline.clone(),
        };
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.test.example.org"},
            "spec": {"group": "test.example.org", "scope": "Cluster",
                "names": {"kind": "Thing", "plural": "things"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                              "schema": {"openAPIV3Schema": schema}}]}
        });
        let mut base = case["object"].clone();
        let Some(obj) = base.as_object_mut() else {
            continue;
        };
        // Rendering sets metadata; a case about metadata stays resource-level.
        if obj.contains_key("metadata") || obj.contains_key("apiVersion") {
            continue;
        }
        obj.insert("apiVersion".into(), json!("test.example.org/v1"));
        obj.insert("kind".into(), json!("Thing"));
        let catalog = catalog(&[xrd(json!({}), json!([])), crd]);
        let c = composition(json!([{"name": "thing", "base": base}]));
        let report = validate(&catalog, &c, Mode::Loose);
        let got: Vec<String> = report
            .findings
            .iter()
            .filter(|f| f.stage == Stage::Rendered)
            .map(|f| f.message())
            .collect();
        let want: Vec<String> = case["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .filter_map(Value::as_str)
            .map(|m| {
                // A message about the whole object has no field of its own.
                if m.starts_with("Invalid value") {
                    format!("spec.resources[0].base: {m}")
                } else {
                    format!("spec.resources[0].base.{m}")
                }
            })
            .collect();
        assert_eq!(got, want, "{name}");
        checked += 1;
    }
    assert!(checked >= 40, "{checked} cases through Compositions");
}

// How a rendered finding's severity is decided (issue 17): value-independent findings are
// errors, findings that depend on a value the XR's schema allows to differ are warnings.

/// An XRD of `XDatabase` with these `spec` properties, all of `required` required.
fn xrd_of(spec_properties: Value, required: Value) -> Value {
    xrd(spec_properties, required)
}

/// A CRD of `Instance` (db.example.org/v1) with this whole `spec` schema and scope.
fn crd_of(spec: Value, scope: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "instances.db.example.org"},
        "spec": {"group": "db.example.org", "scope": scope,
            "names": {"kind": "Instance", "plural": "instances"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": spec}}}}]}
    })
}

fn instance(spec: Value) -> Value {
    json!({"apiVersion": "db.example.org/v1", "kind": "Instance", "spec": spec})
}

/// Item 1: an unknown field does not depend on the value written into it, and a finding
/// that every value of an enum or boolean XR field gives holds for every XR: errors.
#[test]
fn value_independent_findings_are_errors() {
    let catalog = catalog(&[
        xrd_of(
            json!({"params": {"type": "object", "required": ["engine", "storageGb"],
                              "properties": {"engine": {"type": "string"},
                                             "storageGb": {"type": "integer"}}},
                   "tier": {"type": "string", "enum": ["small", "large"]},
                   "ha": {"type": "boolean"},
                   "name": {"type": "string"}}),
            json!(["params", "tier", "ha", "name"]),
        ),
        crd_of(
            json!({"type": "object", "properties": {"forProvider": {"type": "object",
                "properties": {"engine": {"type": "string"}, "storage": {"type": "integer"},
                               "class": {"type": "string", "enum": ["db.t3", "db.m5"]},
                               "multiAz": {"type": "string", "enum": ["yes", "no"]},
                               "id": {"type": "string", "pattern": "^[0-9]+$"}}}}}),
            "Cluster",
        ),
    ]);
    let c = composition(json!([{"name": "db",
    "base": instance(json!({"forProvider": {}})),
    "patches": [
        {"fromFieldPath": "spec.params", "toFieldPath": "spec.forProvider"},
        {"fromFieldPath": "spec.tier", "toFieldPath": "spec.forProvider.class"},
        {"fromFieldPath": "spec.ha", "toFieldPath": "spec.forProvider.multiAz",
         "transforms": [{"type": "convert", "convert": {"toType": "string"}}]},
        {"fromFieldPath": "spec.name", "toFieldPath": "spec.forProvider.id"}
    ]}]));
    let report = validate(&catalog, &c, Mode::Loose);
    assert_eq!(
        rendered(&report),
        [
            "error: spec.resources[0].base.spec.forProvider.storageGb: Invalid value: \"storageGb\": unknown field: \"storageGb\", did you mean \"storage\"? (spec.resources[0].patches[0] writes it from spec.params: the field is unknown whatever the value)",
            "error: spec.resources[0].base.spec.forProvider.class: Unsupported value: \"small\": supported values: \"db.t3\", \"db.m5\" (written by spec.resources[0].patches[1]: every value of spec.tier the composite resource's schema allows (spec.tier: \"small\", \"large\") renders this)",
            "error: spec.resources[0].base.spec.forProvider.multiAz: Unsupported value: \"false\": supported values: \"yes\", \"no\" (written by spec.resources[0].patches[2]: every value of spec.ha the composite resource's schema allows (spec.ha: false, true) renders this)",
            "warning: spec.resources[0].base.spec.forProvider.id: Invalid value: \"name\": spec.forProvider.id in body should match '^[0-9]+$' (the value comes from spec.resources[0].patches[3]: spec.name is \"name\" in the mock composite resource, a real one may hold another)",
        ]
    );
    assert_eq!(report.verdict.code, Some(422));

    // The webhook renders the bases into the resources instead of copying them; the two
    // findings rendered again from every value of `spec.tier` and `spec.ha` need the bases
    // as they were: the Composition is read again, once, for the same report.
    let validator = Validator::new(
        &catalog,
        Options {
            default_mode: Mode::Loose,
            ..common::v1_options()
        },
    );
    let mut rereads = 0;
    let taking = validator.validate_owned_rereading(c.clone(), || {
        rereads += 1;
        Some(c.clone())
    });
    assert_eq!(rereads, 1);
    assert_eq!(rendered(&taking), rendered(&report));
    assert_eq!(taking.verdict, report.verdict);
    // Not read again, they are judged as a value only the mock holds: warnings.
    let unread = validator.validate_owned_rereading(c.clone(), || None);
    assert_eq!(
        rendered(&unread),
        [
            "error: spec.resources[0].base.spec.forProvider.storageGb: Invalid value: \"storageGb\": unknown field: \"storageGb\", did you mean \"storage\"? (spec.resources[0].patches[0] writes it from spec.params: the field is unknown whatever the value)",
            "warning: spec.resources[0].base.spec.forProvider.class: Unsupported value: \"small\": supported values: \"db.t3\", \"db.m5\" (the value comes from spec.resources[0].patches[1]: spec.tier is \"small\" in the mock composite resource, a real one may hold another)",
            "warning: spec.resources[0].base.spec.forProvider.multiAz: Unsupported value: \"false\": supported values: \"yes\", \"no\" (the value comes from spec.resources[0].patches[2]: spec.ha is false in the mock composite resource, a real one may hold another)",
            "warning: spec.resources[0].base.spec.forProvider.id: Invalid value: \"name\": spec.forProvider.id in body should match '^[0-9]+$' (the value comes from spec.resources[0].patches[3]: spec.name is \"name\" in the mock composite resource, a real one may hold another)",
        ]
    );
}

/// Item 2: upjet's "spec.forProvider.policy is a required parameter" rule sits on `spec`;
/// only a patch that writes `forProvider.policy` (or `initProvider.policy`, or a parent of
/// them) explains its failure, not one that writes `spec.deletionPolicy`.
#[test]
fn a_rule_error_is_attributed_by_the_field_the_rule_requires() {
    // The rule as provider-upjet-aws v1.6.0 generates it for a required parameter.
    let rule = "!('*' in self.managementPolicies || 'Create' in self.managementPolicies || 'Update' in self.managementPolicies) || has(self.forProvider.policy) || (has(self.initProvider) && has(self.initProvider.policy))";
    let catalog = catalog(&[
        xrd_of(
            json!({"deletion": {"type": "string"}, "policy": {"type": "string"}}),
            json!([]),
        ),
        crd_of(
            json!({"type": "object",
                "x-kubernetes-validations": [{"rule": rule,
                    "message": "spec.forProvider.policy is a required parameter"}],
                "properties": {
                    "deletionPolicy": {"type": "string"},
                    "managementPolicies": {"type": "array", "items": {"type": "string"},
                                           "default": ["*"]},
                    "initProvider": {"type": "object", "properties": {"policy": {"type": "string"}}},
                    "forProvider": {"type": "object", "properties": {"policy": {"type": "string"}}}}}),
            "Cluster",
        ),
    ]);
    let c = composition(json!([
        {"name": "no-policy", "base": instance(json!({"forProvider": {}})),
         "patches": [{"fromFieldPath": "spec.deletion", "toFieldPath": "spec.deletionPolicy"}]},
        {"name": "patched-policy", "base": instance(json!({"forProvider": {}})),
         "patches": [{"fromFieldPath": "spec.deletion", "toFieldPath": "spec.deletionPolicy"},
                     {"fromFieldPath": "spec.policy", "toFieldPath": "spec.forProvider.policy"}]}
    ]));
    let report = validate(&catalog, &c, Mode::Loose);
    assert_eq!(
        rendered(&report),
        [
            "error: spec.resources[0].base.spec: Invalid value: \"object\": spec.forProvider.policy is a required parameter",
            "warning: spec.resources[1].base.spec: Invalid value: \"object\": spec.forProvider.policy is a required parameter (set only by spec.resources[1].patches[1] from spec.policy, which the mock composite resource does not have (optional, no default); a composite resource without it renders an invalid resource)",
        ]
    );
}

/// Item 3: metadata is validated as the API server validates it, for every kind: label
/// keys and values, annotation keys, names by the kind's rule, the namespace of a
/// namespaced kind. A base's own metadata is an error; a name a mock value makes invalid is
/// a warning. function-patch-and-transform renders a base's metadata as it is (v0.10.8
/// `fn.go`: `json.Unmarshal(t.Base.Raw, dcd.Resource)`).
#[test]
fn metadata_is_validated_as_the_api_server_does() {
    let catalog = catalog(&[
        xrd_of(json!({"id": {"type": "string"}}), json!(["id"])),
        crd_of(json!({"type": "object"}), "Namespaced"),
    ]);
    let c = pipeline(json!([
        {"name": "labels", "base": {"apiVersion": "db.example.org/v1", "kind": "Instance",
            "metadata": {"namespace": "team-a", "labels": {"app/": "x", "tier": "-web"},
                         "annotations": {"a b": "c"}}}},
        {"name": "named", "base": {"apiVersion": "db.example.org/v1", "kind": "Instance",
            "metadata": {"namespace": "team-a"}},
         "patches": [{"type": "FromCompositeFieldPath", "fromFieldPath": "spec.id", "toFieldPath": "metadata.name",
             "transforms": [{"type": "string", "string": {"type": "Format", "fmt": "-%s"}}]}]},
        {"name": "no-namespace", "base": {"apiVersion": "db.example.org/v1", "kind": "Instance"}},
        // Kinds without a CRD: their own name rules (a Service's is a DNS-1035 label; an
        // RBAC role's only refuses '/' and '%').
        {"name": "service", "base": {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "db.primary", "namespace": "team-a"}}},
        {"name": "role", "base": {"apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole", "metadata": {"name": "system:db-reader"}}}
    ]));
    let report = validate(&catalog, &c, Mode::Loose);
    let at = "spec.pipeline[0].input.resources";
    assert_eq!(
        rendered(&report),
        [
            format!(
                "error: {at}[0].base.metadata.labels: Invalid value: \"app/\": name part must be non-empty"
            ),
            format!(
                "error: {at}[0].base.metadata.labels: Invalid value: \"app/\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            ),
            format!(
                "error: {at}[0].base.metadata.labels: Invalid value: \"-web\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ),
            format!(
                "error: {at}[0].base.metadata.annotations: Invalid value: \"a b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            ),
            format!(
                "warning: {at}[1].base.metadata.name: Invalid value: \"-id\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*') (the value comes from {at}[1].patches[0]: spec.id is \"id\" in the mock composite resource, a real one may hold another)"
            ),
            format!("error: {at}[2].base.metadata.namespace: Required value"),
            format!(
                "error: {at}[3].base.metadata.name: Invalid value: \"db.primary\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ),
        ]
    );
}

/// Crossplane v1's Resources mode renders a base into the new resource's empty reference
/// and keeps the reference's name and namespace (v1.17.0 `composition_pt.go`:
/// `composed.New(composed.FromReference(ta.Reference))`, then `RenderFromJSON`): a base's
/// `metadata.name` and `metadata.namespace` are ignored, said at the base, and a namespaced
/// kind needs a patch for its namespace. Issue 47, part 6.
#[test]
fn resources_mode_ignores_a_bases_name_and_namespace() {
    let catalog = catalog(&[
        xrd_of(json!({"ns": {"type": "string"}}), json!(["ns"])),
        crd_of(json!({"type": "object"}), "Namespaced"),
    ]);
    let c = composition(json!([
        {"name": "based", "base": {"apiVersion": "db.example.org/v1", "kind": "Instance",
            "metadata": {"name": "db.primary", "namespace": "team-a"}}},
        {"name": "patched", "base": {"apiVersion": "db.example.org/v1", "kind": "Instance"},
         "patches": [{"fromFieldPath": "spec.ns", "toFieldPath": "metadata.namespace"}]}
    ]));
    let report = validate(&catalog, &c, Mode::Loose);
    assert_eq!(
        rendered(&report),
        [
            "warning: spec.resources[0].base.metadata.name: Invalid value: \"db.primary\": Crossplane v1's Resources mode ignores a base's metadata.name (a new resource is named from its generateName): set it with a patch to metadata.name",
            "warning: spec.resources[0].base.metadata.namespace: Invalid value: \"team-a\": Crossplane v1's Resources mode ignores a base's metadata.namespace (a new resource has no namespace): set it with a patch to metadata.namespace",
            "error: spec.resources[0].base.metadata.namespace: Required value",
        ]
    );
    assert!(!report.verdict.allowed);
}

fn pipeline(resources: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "xdatabases.fn"},
        "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XDatabase"},
            "mode": "Pipeline",
            "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                    "resources": resources}}]}
    })
}

/// Item 4: the mock holds what the patches expect of its fields (a key of the map transform
/// that reads it, never `""`), so a map transform renders as with a real XR, and a finding
/// about a mock value says which value was the mock's.
#[test]
fn mock_values_satisfy_the_patches_that_read_them() {
    let catalog = catalog(&[
        xrd_of(json!({"size": {"type": "string"}}), json!(["size"])),
        crd_of(
            json!({"type": "object", "properties": {"forProvider": {"type": "object",
                "required": ["instanceClass"],
                "properties": {"instanceClass": {"type": "string"}}}}}),
            "Cluster",
        ),
    ]);
    let c = composition(
        json!([{"name": "db", "base": instance(json!({"forProvider": {}})),
        "patches": [{"fromFieldPath": "spec.size", "toFieldPath": "spec.forProvider.instanceClass",
            "transforms": [{"type": "map", "map": {"small": "db.t3.small", "large": "db.m5.large"}}]}]}]),
    );
    let report = validate(&catalog, &c, Mode::Strict);
    assert_eq!(messages(&report, None), Vec::<String>::new());
    let xr = composition_webhook::checks::rendered::composite_value(
        &composition_webhook::model::Composition::from_value(&c, &common::v1_api()).expect("model"),
        &[],
        composition_webhook::checks::rendered::Composite::Mock(
            catalog
                .resolve("example.org", "XDatabase", "v1")
                .ok()
                .and_then(|i| i.schema)
                .as_deref(),
        ),
    );
    assert_eq!(xr["spec"]["size"], "small");
}

/// Item 6: a template whose patch has a schema error is still validated: its base and its
/// other patches; only what the faulty patch writes is not reported again.
#[test]
fn a_faulty_patch_does_not_hide_its_templates_base() {
    let catalog = catalog(&[
        xrd_of(json!({"id": {"type": "string"}}), json!(["id"])),
        crd_of(
            json!({"type": "object",
                "x-kubernetes-validations": [{"rule": "has(self.forProvider.ipCidrRange)",
                    "message": "ipCidrRange is a required parameter"}],
                "properties": {"forProvider": {"type": "object",
                    "properties": {"region": {"type": "string"}, "ipCidrRange": {"type": "string"},
                                   "routingMode": {"type": "string"}}}}}),
            "Cluster",
        ),
    ]);
    let c = composition(json!([{"name": "net",
        "base": instance(json!({"forProvider": {"routingMod": "REGIONAL"}})),
        "patches": [{"fromFieldPath": "spec.id", "toFieldPath": "spec.forProvider.regio"}]}]));
    let report = validate(&catalog, &c, Mode::Loose);
    assert_eq!(
        messages(&report, None),
        [
            "error: spec.resources[0].patches[0].toFieldPath: Invalid value: \"spec.forProvider.regio\": field 'regio' is not valid according to the schema; did you mean \"region\"?",
            "error: spec.resources[0].base.spec.forProvider.routingMod: Invalid value: \"routingMod\": unknown field: \"routingMod\", did you mean \"routingMode\"?",
            "error: spec.resources[0].base.spec: Invalid value: \"object\": ipCidrRange is a required parameter",
        ]
    );
}

/// Item 7: all errors of a resource at once. The API server with strict field validation
/// stops at the unknown fields; Crossplane's client (no field validation: the API server
/// warns and drops them) fails on the rest. Both are reported: the unknown fields (data the
/// user loses) and the errors of the object without them, its CEL rules included.
#[test]
fn unknown_fields_and_the_errors_of_the_object_without_them() {
    let catalog = catalog(&[
        xrd_of(json!({}), json!([])),
        crd_of(
            json!({"type": "object", "properties": {"forProvider": {"type": "object",
                "x-kubernetes-validations": [{"rule": "self.size <= 100",
                    "message": "size must be at most 100"}],
                "properties": {"region": {"type": "string", "pattern": "^[a-z]+-[a-z]+-[0-9]$"},
                               "size": {"type": "integer"}}}}}),
            "Cluster",
        ),
    ]);
    let c = composition(json!([{"name": "db",
        "base": instance(json!({"forProvider": {"regon": "eu-west-1", "region": "EU", "size": 500}}))}]));
    let report = validate(&catalog, &c, Mode::Loose);
    assert_eq!(
        rendered(&report),
        [
            "error: spec.resources[0].base.spec.forProvider.regon: Invalid value: \"regon\": unknown field: \"regon\", did you mean \"region\"?",
            "error: spec.resources[0].base.spec.forProvider.region: Invalid value: \"EU\": spec.forProvider.region in body should match '^[a-z]+-[a-z]+-[0-9]$'",
            "error: spec.resources[0].base.spec.forProvider: Invalid value: \"object\": size must be at most 100",
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Function steps run for real (`render::render_calling`), through a runner whose answers
// the test writes: how an answer replaces the desired resources, as Crossplane's
// `FunctionComposer` does.

use std::collections::BTreeMap;

use composition_webhook::checks::patch_and_transform::read_steps;
use composition_webhook::model::{Composition, PatchAndTransformStep};
use composition_webhook::render::{self, function_steps as fs};
use serde_json::Map;

fn model(v: Value) -> Composition {
    let api = composition_webhook::schema::CompositionApi::default();
    Composition::from_defaulted_value(&composition_webhook::model::with_api_defaults(&v, &api))
        .expect("model")
}

/// A function answering what `answer` makes of the desired resources it is sent.
struct Answering<F>(F);

impl<F> fs::StepRunner for Answering<F>
where
    F: Fn(&BTreeMap<String, Map<String, Value>>) -> fs::StepAnswer,
{
    fn address(&self, function: &str) -> Result<String, Option<String>> {
        if function == "fn" {
            Ok("test".into())
        } else {
            Err(None)
        }
    }

    fn run(
        &self,
        _: &str,
        request: &fs::StepRequest<'_>,
        _: Option<std::time::Instant>,
    ) -> Result<fs::StepAnswer, fs::StepFailure> {
        Ok((self.0)(request.desired_resources))
    }
}

/// A pipeline: a patch-and-transform step composing `bucket` (its region from the XR),
/// a step of `fn`, then a patch-and-transform step composing `after`.
fn function_pipeline() -> (Composition, Vec<PatchAndTransformStep>) {
    let pt = |name: &str| {
        json!({"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
        "resources": [{"name": name, "base": {"apiVersion": "s3.aws/v1", "kind": "Bucket",
            "spec": {"forProvider": {}}},
            "patches": [{"fromFieldPath": "spec.region", "toFieldPath": "spec.forProvider.region"}]}]})
    };
    let mut c = model(json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "c"},
        "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XDb"},
            "mode": "Pipeline",
            "pipeline": [
                {"step": "first", "functionRef": {"name": "function-patch-and-transform"}, "input": pt("bucket")},
                {"step": "mine", "functionRef": {"name": "fn"}},
                {"step": "last", "functionRef": {"name": "function-patch-and-transform"}, "input": pt("after")}]}
    }));
    let (steps, errors) = read_steps(&mut c);
    assert!(errors.is_empty(), "{errors:?}");
    (c, steps)
}

fn function_xr() -> Value {
    json!({"apiVersion": "example.org/v1", "kind": "XDb",
        "metadata": {"name": "x", "namespace": "team", "uid": "u"},
        "spec": {"region": "eu"}})
}

fn composed(r: &render::Rendered) -> Vec<(String, bool)> {
    r.resources
        .iter()
        .map(|r| (r.name.clone().unwrap_or_default(), r.made_by.is_some()))
        .collect()
}

#[test]
fn a_functions_answer_replaces_what_the_steps_before_it_left() {
    let (c, steps) = function_pipeline();
    fn calls(runner: &dyn fs::StepRunner) -> render::Calls<'_> {
        render::Calls {
            runner,
            required: &fs::NothingRequired,
            observed: None,
            keep_answers: false,
            observed_resources: None,
        }
    }
    // Passed on unchanged, `bucket` keeps its template's record; what is new is the
    // function's, with Crossplane's metadata and the XR's namespace.
    let adds = Answering(|desired: &BTreeMap<String, Map<String, Value>>| {
        let mut resources = desired.clone();
        let extra = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "elsewhere"}});
        resources.insert(
            "extra".into(),
            extra.as_object().cloned().unwrap_or_default(),
        );
        fs::StepAnswer {
            desired_resources: resources,
            ..Default::default()
        }
    });
    let r = render::render_calling(
        &c,
        &steps,
        &function_xr(),
        None,
        render::Runtime::V2,
        Some(calls(&adds)),
    );
    assert_eq!(
        composed(&r),
        [
            ("bucket".into(), false),
            ("extra".into(), true),
            ("after".into(), false)
        ]
    );
    assert_eq!(r.resources[0].patches.len(), 1);
    let extra = &r.resources[1];
    assert_eq!(extra.at.as_str(), "spec.pipeline[1]");
    assert_eq!(extra.root().as_str(), "spec.pipeline[1].resources[extra]");
    let meta = &extra.object.as_ref().expect("an object")["metadata"];
    assert_eq!(meta["namespace"], "team");
    assert_eq!(
        meta["annotations"][render::ANNOTATION_RESOURCE_NAME],
        "extra"
    );
    assert_eq!(meta["ownerReferences"][0]["uid"], "u");
    assert_eq!(
        extra.ignored,
        [render::Ignored {
            key: "namespace",
            value: json!("elsewhere"),
            by: render::IgnoredBy::XrNamespace(json!("team")),
        }]
    );
    assert!(r.opaque_steps.is_empty());

    // Changed, `bucket` is the function's; left out, it is not composed.
    let changes = Answering(|desired: &BTreeMap<String, Map<String, Value>>| {
        let mut bucket = desired.get("bucket").cloned().unwrap_or_default();
        bucket.insert("spec".into(), json!({"forProvider": {"region": "us"}}));
        fs::StepAnswer {
            desired_resources: BTreeMap::from([("bucket".to_string(), bucket)]),
            ..Default::default()
        }
    });
    let r = render::render_calling(
        &c,
        &steps,
        &function_xr(),
        None,
        render::Runtime::V2,
        Some(calls(&changes)),
    );
    assert_eq!(
        composed(&r),
        [("bucket".into(), true), ("after".into(), false)]
    );
    assert!(r.resources[0].patches.is_empty());
    let drops = Answering(|_: &BTreeMap<String, Map<String, Value>>| fs::StepAnswer::default());
    let r = render::render_calling(
        &c,
        &steps,
        &function_xr(),
        None,
        render::Runtime::V2,
        Some(calls(&drops)),
    );
    assert_eq!(composed(&r), [("after".into(), false)]);
}

#[test]
fn a_fatal_result_stops_the_pipeline_and_an_unknown_function_stays_opaque() {
    let (mut c, steps) = function_pipeline();
    let fatal = Answering(|_: &BTreeMap<String, Map<String, Value>>| fs::StepAnswer {
        results: vec![fs::StepResult {
            severity: fs::ResultSeverity::Fatal,
            message: "no".into(),
            reason: None,
        }],
        ..Default::default()
    });
    let calls = render::Calls {
        runner: &fatal,
        required: &fs::NothingRequired,
        observed: None,
        keep_answers: false,
        observed_resources: None,
    };
    let r = render::render_calling(
        &c,
        &steps,
        &function_xr(),
        None,
        render::Runtime::V2,
        Some(calls),
    );
    // Crossplane composes nothing after the fatal step.
    assert_eq!(composed(&r), [("bucket".into(), false)]);
    assert_eq!(r.function_runs.len(), 1);
    // A function the runner does not know is not run.
    c.spec.pipeline[1].function_ref.name = "other".into();
    let r = render::render_calling(
        &c,
        &steps,
        &function_xr(),
        None,
        render::Runtime::V2,
        Some(calls),
    );
    assert!(r.function_runs.is_empty());
    assert_eq!(r.opaque_steps.len(), 1);
    assert_eq!(
        composed(&r),
        [("bucket".into(), false), ("after".into(), false)]
    );
}

#[test]
fn what_a_step_composes_without_its_credentials_or_after_such_a_step_depends_on_them() {
    let (mut c, steps) = function_pipeline();
    // A second step of `fn`, last.
    let mut second = c.spec.pipeline[1].clone();
    second.step = "again".into();
    c.spec.pipeline.push(second);
    let mut with_credentials = model(json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "c"},
        "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XDb"},
            "mode": "Pipeline",
            "pipeline": [{"step": "mine", "functionRef": {"name": "fn"},
                "credentials": [{"name": "cloud", "source": "Secret",
                    "secretRef": {"namespace": "crossplane-system", "name": "cloud"}}]}]}
    }));
    c.spec.pipeline[1] = with_credentials.spec.pipeline.remove(0);
    let adds = Answering(|desired: &BTreeMap<String, Map<String, Value>>| {
        let mut resources = desired.clone();
        let n = resources.len();
        resources.insert(
            format!("extra-{n}"),
            json!({"apiVersion": "v1", "kind": "ConfigMap"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        fs::StepAnswer {
            desired_resources: resources,
            ..Default::default()
        }
    });
    let calls = render::Calls {
        runner: &adds,
        required: &fs::NothingRequired,
        observed: None,
        keep_answers: false,
        observed_resources: None,
    };
    let r = render::render_calling(
        &c,
        &steps,
        &function_xr(),
        None,
        render::Runtime::V2,
        Some(calls),
    );
    assert_eq!(r.function_runs.len(), 2);
    assert_eq!(r.function_runs[0].credentials_withheld, ["cloud"]);
    assert!(r.function_runs.iter().all(|run| run.depends));
    let depends: Vec<(String, bool)> = r
        .resources
        .iter()
        .filter_map(|r| Some((r.name.clone()?, r.made_by.as_ref()?.depends)))
        .collect();
    assert_eq!(
        depends,
        [("extra-1".to_string(), true), ("extra-3".to_string(), true)]
    );
}
