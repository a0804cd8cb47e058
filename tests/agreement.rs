//! Issue 47's Crossplane v2 cases through `validate`, `audit` (files) and `serve`: one table,
//! the same verdict, the same errors, warnings at the same fields. Each case says where its
//! material came from; the messages are exact.

mod webhook;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// One case: the Composition, the schemas it is validated with, and what every way of
/// running the engine must answer.
struct Case {
    name: &'static str,
    schemas: &'static [&'static str],
    /// Function packages (`pkg.crossplane.io/v1` Functions), by Function name.
    functions: &'static [(&'static str, &'static str)],
    composition: Value,
    /// `None` when allowed, else the HTTP code of the denial.
    denied: Option<u16>,
    errors: &'static [&'static str],
    /// The fields the warnings are at.
    warnings: &'static [&'static str],
}

/// The namespaced XR type of Crossplane v2.3.4's e2e tests (`basic-namespaced`), with
/// `spec.coolField`.
const TEST_XRD: &str = "testdata/v2/basic-namespaced.definition.yaml";
/// provider-upjet-aws v2.6.0's S3 Buckets, cluster scoped and namespaced (`*.m.upbound.io`).
const BUCKETS: &str = "testdata/v2/crds";
/// The namespaced Bucket's MRD as Crossplane v2 creates it (Inactive).
const BUCKET_MRD: &str = "testdata/mrap/bucket.mrd.yaml";
/// A ManagedResourceActivationPolicy activating it by name.
const POLICY: &str = "testdata/mrap/exact/policy.yaml";

/// A Composition of the `Test` XR whose one function-patch-and-transform step has these
/// templates; `annotations` are the Composition's.
fn pt(name: &str, annotations: Value, resources: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "compositeTypeRef": {"apiVersion": "example.org/v1alpha1", "kind": "Test"},
            "mode": "Pipeline",
            "pipeline": [{"step": "patch-and-transform",
                "functionRef": {"name": "function-patch-and-transform"},
                "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                    "resources": resources}}]
        }
    })
}

/// The namespaced S3 Bucket of provider-upjet-aws v2.6.0 (P&T v0.10.8's example, moved to
/// `s3.aws.m.upbound.io` as the v2.3 docs compose it), with `patches`.
fn bucket(patches: Value) -> Value {
    json!({"name": "bucket",
        "base": {"apiVersion": "s3.aws.m.upbound.io/v1beta1", "kind": "Bucket",
            "spec": {"forProvider": {"region": "us-east-2"}}},
        "patches": patches})
}

/// A ConfigMap (a built-in namespaced kind v2 composes directly) with `metadata`.
fn config_map(metadata: Value) -> Value {
    json!({"name": "config",
        "base": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
            "data": {"region": "us-east-2"}}})
}

const STRICT: &str = "strict";

fn mode(m: &str) -> Value {
    json!({"crossplane.io/composition-schema-aware-validation-mode": m})
}

fn cases() -> Vec<Case> {
    let missing_xrd = |name: &str, m: &str| {
        pt(
            name,
            mode(m),
            json!([bucket(json!([])), config_map(json!({"name": "settings"}))]),
        )
    };
    vec![
        // Part 1: the XRD not among the schemas (applied in the same `kubectl apply`): the
        // XR's scope is unknown, so the namespace the rendered Bucket and ConfigMap lack is a
        // warning that says so; strict denies for the missing XRD only.
        Case {
            name: "missing-xrd-loose",
            schemas: &[BUCKETS],
            functions: &[],
            composition: missing_xrd("missing-xrd-loose", "loose"),
            denied: None,
            errors: &[],
            warnings: &[
                "spec.compositeTypeRef",
                "spec.pipeline[0].input.resources[0].base.metadata.namespace",
                "spec.pipeline[0].input.resources[1].base.metadata.namespace",
            ],
        },
        Case {
            name: "missing-xrd-strict",
            schemas: &[BUCKETS],
            functions: &[],
            composition: missing_xrd("missing-xrd-strict", STRICT),
            denied: Some(403),
            errors: &[
                "spec.compositeTypeRef: Not found: \"example.org/v1alpha1, Kind=Test\": no CRD, MRD or XRD defines Test.example.org; checks that need the schema of the composite resource were skipped",
            ],
            warnings: &[
                "spec.pipeline[0].input.resources[0].base.metadata.namespace",
                "spec.pipeline[0].input.resources[1].base.metadata.namespace",
            ],
        },
        // Part 2: an Inactive MRD that a ManagedResourceActivationPolicy activates serves its
        // kind (strict allows); without the policy strict denies, naming what activates it.
        Case {
            name: "mrd-activated",
            schemas: &[TEST_XRD, BUCKET_MRD, POLICY],
            functions: &[],
            composition: pt(
                "mrd-activated",
                mode(STRICT),
                json!([bucket(json!([{"fromFieldPath": "spec.coolField",
                    "toFieldPath": "spec.forProvider.tags[cool]"}]))]),
            ),
            denied: None,
            errors: &[],
            warnings: &[],
        },
        Case {
            name: "mrd-inactive",
            schemas: &[TEST_XRD, BUCKET_MRD],
            functions: &[],
            composition: pt(
                "mrd-inactive",
                mode(STRICT),
                json!([bucket(json!([{"fromFieldPath": "spec.coolField",
                    "toFieldPath": "spec.forProvider.tags[cool]"}]))]),
            ),
            denied: Some(403),
            errors: &[
                "spec.pipeline[0].input.resources[0].base: Not found: \"s3.aws.m.upbound.io/v1beta1, Kind=Bucket\": MRD buckets.s3.aws.m.upbound.io is Inactive: Bucket has no CRD until a ManagedResourceActivationPolicy activates it (spec.activate: its name or \"*.aws.m.upbound.io\")",
            ],
            warnings: &[],
        },
        // Part 3: a function-patch-and-transform input sent to a Function whose package is
        // function-go-templating, which answers Fatal ("source is required") every time.
        Case {
            name: "input-of-another-function",
            schemas: &[TEST_XRD, BUCKETS],
            functions: &[(
                "function-patch-and-transform",
                "xpkg.upbound.io/crossplane-contrib/function-go-templating:v0.11.0",
            )],
            composition: pt(
                "input-of-another-function",
                json!({}),
                json!([bucket(json!([]))]),
            ),
            denied: Some(422),
            errors: &[
                "spec.pipeline[0].functionRef.name: Invalid value: \"function-patch-and-transform\": the input is function-patch-and-transform's (pt.fn.crossplane.io Resources), but this Function's package is function-go-templating, which does not read it",
            ],
            warnings: &[],
        },
        // Part 5: v2.3.4 applies the desired XR through its status subresource: a
        // ToCompositeFieldPath into `spec` never arrives (P&T's docs example patching the XR,
        // crossplane/docs#932).
        Case {
            name: "write-to-xr-spec",
            schemas: &[TEST_XRD, BUCKETS],
            functions: &[],
            composition: pt(
                "write-to-xr-spec",
                json!({}),
                json!([bucket(json!([{"type": "ToCompositeFieldPath",
                    "fromFieldPath": "status.atProvider.arn", "toFieldPath": "spec.coolField"}]))]),
            ),
            denied: None,
            errors: &[],
            warnings: &["spec.pipeline[0].input.resources[0].patches[0].toFieldPath"],
        },
        // Part 6: v2 puts a namespaced XR's resources in its namespace: a base's invalid
        // namespace is replaced, not refused (composition_functions.go's Warning event); a
        // base's generateName is kept.
        Case {
            name: "base-namespace-replaced",
            schemas: &[TEST_XRD],
            functions: &[],
            composition: pt(
                "base-namespace-replaced",
                json!({}),
                json!([config_map(
                    json!({"namespace": "Not_Valid", "generateName": "settings-"})
                )]),
            ),
            denied: None,
            errors: &[],
            warnings: &["spec.pipeline[0].input.resources[0].base.metadata.namespace"],
        },
        // Part 6: a base's ownerReferences are kept and the XR's controller reference
        // appended: an entry without a uid is refused by the API server.
        Case {
            name: "owner-reference-without-uid",
            schemas: &[TEST_XRD],
            functions: &[],
            composition: pt(
                "owner-reference-without-uid",
                json!({}),
                json!([config_map(json!({"ownerReferences": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "parent"}]}))]),
            ),
            denied: Some(422),
            errors: &[
                "spec.pipeline[0].input.resources[0].base.metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty",
            ],
            warnings: &[],
        },
        // Part 6: an unknown field a PatchSet's patch writes is reported at the patch only,
        // as one the template's own patch writes.
        Case {
            name: "patch-set-typo",
            schemas: &[TEST_XRD, BUCKETS],
            functions: &[],
            composition: {
                let mut c = pt(
                    "patch-set-typo",
                    json!({}),
                    json!([bucket(
                        json!([{"type": "PatchSet", "patchSetName": "tags"}])
                    )]),
                );
                c["spec"]["pipeline"][0]["input"]["patchSets"] = json!([{"name": "tags",
                    "patches": [{"fromFieldPath": "spec.coolField",
                        "toFieldPath": "spec.forProvider.tagz[cool]"}]}]);
                c
            },
            denied: Some(422),
            errors: &[
                "spec.pipeline[0].input.resources[0].patches[0].patchSets[0].patches[0].toFieldPath: Invalid value: \"spec.forProvider.tagz[cool]\": field 'tagz' is not valid according to the schema; did you mean \"tags\"?",
            ],
            warnings: &[],
        },
    ]
}

/// `validate` or `audit` of `file` with `--output json`: the verdict, errors and warnings of
/// its one Composition.
fn offline(command: &str, case: &Case, file: &Path, functions: Option<&Path>) -> Verdict {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_composition-webhook"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg(command)
        .args(["--output", "json"])
        .args(case.schemas.iter().flat_map(|s| ["--crds", s]))
        .env_remove("COMPOSITION_WEBHOOK_MODE")
        .env_remove("COMPOSITION_WEBHOOK_CROSSPLANE_VERSION");
    if let Some(f) = functions {
        cmd.arg("--functions").arg(f);
    }
    let out = cmd.arg(file).output().expect("run");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{command} {}: {e}: {}",
            case.name,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let c = &v["compositions"][0];
    let of = |severity: &str| -> Vec<String> {
        c["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["severity"] == severity)
            .map(|f| f["message"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    Verdict {
        allowed: c["allowed"] == true,
        code: c["code"].as_u64(),
        errors: of("error"),
        warnings: of("warning").iter().map(|w| field_of(w)).collect(),
    }
}

/// The field a finding's message is at (before the first `": "`).
fn field_of(message: &str) -> String {
    message.split(": ").next().unwrap_or_default().to_string()
}

#[derive(Debug, PartialEq)]
struct Verdict {
    allowed: bool,
    code: Option<u64>,
    errors: Vec<String>,
    warnings: Vec<String>,
}

/// The Functions file of a case, in `dir`.
fn functions_file(dir: &webhook::ScratchDir, case: &Case) -> Option<PathBuf> {
    if case.functions.is_empty() {
        return None;
    }
    let docs: Vec<String> = case
        .functions
        .iter()
        .map(|(name, package)| {
            format!(
                "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: {name}\nspec:\n  package: {package}\n"
            )
        })
        .collect();
    let path = dir.path(&format!("{}-functions.yaml", case.name));
    std::fs::write(&path, docs.join("---\n")).expect("write functions");
    Some(path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_audit_and_serve_agree_on_issue_47s_cases() {
    let dir = webhook::ScratchDir::new("agreement");
    let api = composition_webhook::schema::CompositionApi::default();
    for case in cases() {
        let file = dir.path(&format!("{}.json", case.name));
        std::fs::write(&file, serde_json::to_vec(&case.composition).expect("json")).expect("write");
        let functions = functions_file(&dir, &case);
        let expected = Verdict {
            allowed: case.denied.is_none(),
            code: case.denied.map(u64::from),
            errors: case.errors.iter().map(|e| e.to_string()).collect(),
            warnings: case.warnings.iter().map(|w| w.to_string()).collect(),
        };
        let validated = offline("validate", &case, &file, functions.as_deref());
        assert_eq!(validated, expected, "validate {}", case.name);
        let audited = offline("audit", &case, &file, functions.as_deref());
        assert_eq!(audited, expected, "audit {}", case.name);

        let schemas: Vec<PathBuf> = case
            .schemas
            .iter()
            .map(|s| webhook::project_dir().join(s))
            .collect();
        let refs: Vec<&Path> = schemas.iter().map(PathBuf::as_path).collect();
        let functions_arg = functions.as_ref().map(|f| f.display().to_string());
        let extra: Vec<&str> = match &functions_arg {
            Some(f) => vec!["--functions", f.as_str()],
            None => Vec::new(),
        };
        let server = webhook::Server::start(&refs, &extra);
        let sent = composition_webhook::model::with_api_defaults(&case.composition, &api);
        let review = webhook::composition_review("v1", case.name, "CREATE", sent);
        let r = server.client().review(&review).await;
        let response = &r;
        let causes: Vec<String> = response["status"]["details"]["causes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|c| {
                        format!(
                            "{}: {}",
                            c["field"].as_str().unwrap_or(""),
                            c["message"].as_str().unwrap_or("")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        // The API server shows warnings shortened (no bad value, the middle elided): the
        // fields they name are the same.
        let warnings: Vec<String> = response["warnings"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|w| field_of(w.split_once("\": ").map_or(w, |(_, rest)| rest)))
                    .collect()
            })
            .unwrap_or_default();
        let served = Verdict {
            allowed: response["allowed"] == true,
            code: response["status"]["code"].as_u64(),
            errors: causes,
            warnings,
        };
        assert_eq!(served, expected, "serve {}: {r}", case.name);
    }
}
