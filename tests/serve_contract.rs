//! The admission contract, over real HTTPS against the real binary: AdmissionReview v1 and
//! v1beta1, allowed, denied, warned and malformed reviews, deadlines, warnings shaped for the
//! API server, Crossplane's upstream cases, metrics and probes, each with the exact answer a
//! user (or the API server) sees.

mod common;
mod webhook;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use webhook::{Client, ScratchDir, Server, composition_review, project_dir, yaml_documents};

/// The mode annotation.
const MODE: &str = "crossplane.io/composition-schema-aware-validation-mode";
/// testdata/example/composition.yaml.
const EXAMPLE: &str = "xnetworks.gcp.platformref.upbound.io";
/// testdata/invalid/composition.yaml.
const BROKEN: &str = "xnetworks-broken.gcp.platformref.upbound.io";

// ---------------------------------------------------------------------------------------------
// Helpers.

fn example_crds() -> Vec<PathBuf> {
    vec![
        project_dir().join("testdata/crds"),
        project_dir().join("testdata/example/definition.yaml"),
    ]
}

/// Only the XRD: the example's composed resources (Network, Subnetwork) have no schema.
fn xrd_only() -> Vec<PathBuf> {
    vec![project_dir().join("testdata/example/definition.yaml")]
}

fn start_with(crds: &[PathBuf], extra: &[&str]) -> Server {
    let refs: Vec<&Path> = crds.iter().map(PathBuf::as_path).collect();
    Server::start(&refs, extra)
}

/// A server with the example's schemas and the default mode (loose).
fn start() -> Server {
    start_with(&example_crds(), &[])
}

fn composition(file: &str) -> Value {
    yaml_documents(&project_dir().join(file))
        .into_iter()
        .find(|d| d["kind"] == "Composition")
        .expect("a Composition")
}

fn example() -> Value {
    composition("testdata/example/composition.yaml")
}

fn broken() -> Value {
    composition("testdata/invalid/composition.yaml")
}

/// `object` with the mode annotation set to `mode`.
fn with_mode(mut object: Value, mode: &str) -> Value {
    object["metadata"]["annotations"][MODE] = json!(mode);
    object
}

/// The response to a review (HTTP 200, envelope and uid checked by [`Client::review`]),
/// without its uid.
async fn answer(client: &Client, review: &Value) -> Value {
    let mut response = client.review(review).await;
    response
        .as_object_mut()
        .expect("response object")
        .remove("uid");
    response
}

/// A CREATE review (v1) of `object`.
fn create(uid: &str, object: Value) -> Value {
    composition_review("v1", uid, "CREATE", object)
}

/// `Composition "<name>": <text>`, as warnings read.
fn warning(name: &str, text: &str) -> String {
    format!("Composition {name:?}: {text}")
}

/// An admission: allowed, with these warnings.
fn allowed(warnings: &[String]) -> Value {
    let mut v = json!({"allowed": true, "status": {}});
    if !warnings.is_empty() {
        v["warnings"] = json!(warnings);
    }
    v
}

/// A Status cause: reason (the error type), field, message (the error without its field).
type Cause<'a> = (&'a str, &'a str, &'a str);

/// A denial of the Composition `name` with `code`, `reason`, `message` and these causes.
fn denied(
    code: u16,
    reason: &str,
    message: &str,
    name: &str,
    causes: &[Cause],
    warnings: &[String],
) -> Value {
    let causes: Vec<Value> = causes
        .iter()
        .map(|(reason, field, message)| json!({"reason": reason, "field": field, "message": message}))
        .collect();
    let mut v = json!({
        "allowed": false,
        "status": {
            "status": "Failure", "code": code, "reason": reason, "message": message,
            "details": {"name": name, "group": "apiextensions.crossplane.io", "kind": "Composition", "causes": causes},
        },
    });
    if !warnings.is_empty() {
        v["warnings"] = json!(warnings);
    }
    v
}

/// A 422 Invalid denial whose message lists the causes as the API server prints an error
/// list (`<field>: <message>`, one bare, several in brackets).
fn invalid(name: &str, causes: &[Cause], warnings: &[String]) -> Value {
    let errors: Vec<String> = causes.iter().map(|(_, f, m)| format!("{f}: {m}")).collect();
    let list = match errors.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let message = format!("Composition.apiextensions.crossplane.io {name:?} is invalid: {list}");
    denied(422, "Invalid", &message, name, causes, warnings)
}

/// A 403 Forbidden denial.
fn forbidden(name: &str, message: &str, causes: &[Cause]) -> Value {
    denied(403, "Forbidden", message, name, causes, &[])
}

/// A 400 BadRequest answer for a review that could not be read, as the whole envelope.
fn bad_request(api_version: &str, uid: &str, message: &str) -> Value {
    json!({
        "apiVersion": api_version, "kind": "AdmissionReview",
        "response": {
            "uid": uid, "allowed": false,
            "status": {"status": "Failure", "code": 400, "reason": "BadRequest", "message": message},
        },
    })
}

/// POSTs raw bytes to `/validate?timeout=10s` and returns the whole body after checking
/// HTTP 200 and the Content-Type.
async fn post_raw(client: &Client, content_type: Option<&str>, body: &[u8]) -> Value {
    let reply = client
        .request("POST", "/validate?timeout=10s", content_type, body.to_vec())
        .await;
    reply.answer_json()
}

/// POSTs a review to `path` (with its own `?timeout=`), checks the envelope, and returns the
/// response without its uid.
async fn answer_at(client: &Client, path: &str, review: &Value) -> Value {
    let reply = client
        .request(
            "POST",
            path,
            Some("application/json"),
            serde_json::to_vec(review).expect("json"),
        )
        .await;
    let mut v = reply.answer_json();
    assert_eq!(v["apiVersion"], review["apiVersion"]);
    assert_eq!(v["kind"], "AdmissionReview");
    assert_eq!(v["response"]["uid"], review["request"]["uid"]);
    let response = v["response"].as_object_mut().expect("response");
    response.remove("uid");
    Value::Object(response.clone())
}

/// A review of a kind other than Composition.
fn other_kind_review(
    uid: &str,
    group: &str,
    version: &str,
    kind: &str,
    resource: &str,
    object: Value,
) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "name": object["metadata"]["name"],
            "namespace": object["metadata"]["namespace"],
            "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin"},
            "object": object,
            "oldObject": null,
            "dryRun": false,
        },
    })
}

// ---------------------------------------------------------------------------------------------
// Expected answers shared by several tests.

/// The causes of testdata/invalid/composition.yaml: logical errors first, then schema errors.
const BROKEN_CAUSES: [Cause; 10] = [
    (
        "FieldValueInvalid",
        "spec.resources[0].patches[0].patchSetName",
        r#"Invalid value: "comon": patchSetName must be the name of a declared patchSet"#,
    ),
    (
        "FieldValueDuplicate",
        "spec.resources[1].name",
        r#"Duplicate value: "network""#,
    ),
    (
        "FieldValueInvalid",
        "spec.resources[0].patches[1].combine.string.fmt",
        r#"Invalid value: "%s-%s": the format uses 2 values but combine.variables lists 1 variable: the value would contain %!s(MISSING)"#,
    ),
    (
        "FieldValueRequired",
        "spec.resources[1].patches[0].fromFieldPath",
        "Required value: fromFieldPath must be set for patch type FromCompositeFieldPath",
    ),
    (
        "FieldValueInvalid",
        "spec.resources[1].patches[1].transforms[0].string.regexp.match",
        r#"Invalid value: "net-(.*": invalid regexp: missing closing )"#,
    ),
    (
        "FieldValueRequired",
        "spec.resources[1].readinessChecks[0].matchString",
        "Required value: cannot be empty for type MatchString",
    ),
    (
        "FieldValueRequired",
        "spec.resources[1].connectionDetails[0].value",
        "Required value: connection detail of type FromValue needs value",
    ),
    (
        "FieldValueInvalid",
        "spec.resources[0].patches[2].toFieldPath",
        r#"Invalid value: "spec.forProvider.autoCreateSubnetwork": field 'autoCreateSubnetwork' is not valid according to the schema; did you mean "autoCreateSubnetworks"?"#,
    ),
    (
        "FieldValueRequired",
        "spec.resources[0].patches[3].transforms",
        "Required value: the fromFieldPath does not have a type compatible with the toFieldPath according to their schemas and no transforms were provided: string != boolean (a convert transform with toType: bool would do)",
    ),
    (
        "FieldValueInvalid",
        "spec.resources[1].readinessChecks[0].fieldPath",
        r#"Invalid value: "status.atProvider.state": field 'state' is not valid according to the schema"#,
    ),
];

/// The 422 answer for testdata/invalid/composition.yaml, with its message written out.
fn broken_denied() -> Value {
    let message = concat!(
        r#"Composition.apiextensions.crossplane.io "xnetworks-broken.gcp.platformref.upbound.io" is invalid: ["#,
        r#"spec.resources[0].patches[0].patchSetName: Invalid value: "comon": patchSetName must be the name of a declared patchSet, "#,
        r#"spec.resources[1].name: Duplicate value: "network", "#,
        r#"spec.resources[0].patches[1].combine.string.fmt: Invalid value: "%s-%s": the format uses 2 values but combine.variables lists 1 variable: the value would contain %!s(MISSING), "#,
        r#"spec.resources[1].patches[0].fromFieldPath: Required value: fromFieldPath must be set for patch type FromCompositeFieldPath, "#,
        r#"spec.resources[1].patches[1].transforms[0].string.regexp.match: Invalid value: "net-(.*": invalid regexp: missing closing ), "#,
        r#"spec.resources[1].readinessChecks[0].matchString: Required value: cannot be empty for type MatchString, "#,
        r#"spec.resources[1].connectionDetails[0].value: Required value: connection detail of type FromValue needs value, "#,
        r#"spec.resources[0].patches[2].toFieldPath: Invalid value: "spec.forProvider.autoCreateSubnetwork": field 'autoCreateSubnetwork' is not valid according to the schema; did you mean "autoCreateSubnetworks"?, "#,
        r#"spec.resources[0].patches[3].transforms: Required value: the fromFieldPath does not have a type compatible with the toFieldPath according to their schemas and no transforms were provided: string != boolean (a convert transform with toType: bool would do), "#,
        r#"spec.resources[1].readinessChecks[0].fieldPath: Invalid value: "status.atProvider.state": field 'state' is not valid according to the schema]"#,
    );
    let expected = denied(422, "Invalid", message, BROKEN, &BROKEN_CAUSES, &[]);
    // The helper that builds messages from causes agrees with the message written out.
    assert_eq!(expected, invalid(BROKEN, &BROKEN_CAUSES, &[]));
    expected
}

/// The example Composition without the schemas of its composed resources.
const MISSING_NETWORK: Cause = (
    "FieldValueNotFound",
    "spec.resources[0].base",
    r#"Not found: "compute.gcp.upbound.io/v1beta1, Kind=Network": no CRD, MRD or XRD defines Network.compute.gcp.upbound.io; checks that need the schema of this resource were skipped"#,
);
const MISSING_SUBNETWORK: Cause = (
    "FieldValueNotFound",
    "spec.resources[1].base",
    r#"Not found: "compute.gcp.upbound.io/v1beta1, Kind=Subnetwork": no CRD, MRD or XRD defines Subnetwork.compute.gcp.upbound.io; checks that need the schema of this resource were skipped"#,
);

fn missing_schemas_forbidden() -> Value {
    forbidden(
        EXAMPLE,
        concat!(
            r#"cannot get the needed CRDs: ["#,
            r#"spec.resources[0].base: Not found: "compute.gcp.upbound.io/v1beta1, Kind=Network": no CRD, MRD or XRD defines Network.compute.gcp.upbound.io; checks that need the schema of this resource were skipped, "#,
            r#"spec.resources[1].base: Not found: "compute.gcp.upbound.io/v1beta1, Kind=Subnetwork": no CRD, MRD or XRD defines Subnetwork.compute.gcp.upbound.io; checks that need the schema of this resource were skipped]"#,
        ),
        &[MISSING_NETWORK, MISSING_SUBNETWORK],
    )
}

/// Loose and warn: each missing schema is one warning, in the short form (without the
/// group/version/kind value, which the rest of the text names).
fn missing_schemas_warnings() -> Vec<String> {
    vec![
        warning(
            EXAMPLE,
            "spec.resources[0].base: Not found: no CRD, MRD or XRD defines Network.compute.gcp.upbound.io; checks that need the schema of this resource were skipped",
        ),
        warning(
            EXAMPLE,
            "spec.resources[1].base: Not found: no CRD, MRD or XRD defines Subnetwork.compute.gcp.upbound.io; checks that need the schema of this resource were skipped",
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// 1. Verdicts and modes.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_composition_is_allowed_in_both_versions() {
    let server = start();
    let client = server.client();
    for version in ["v1", "v1beta1"] {
        let review = composition_review(version, "uid-ok", "CREATE", example());
        let response = client.review(&review).await;
        assert_eq!(
            response,
            json!({"uid": "uid-ok", "allowed": true, "status": {}}),
            "{version}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_composition_is_denied_422_with_every_cause() {
    let server = start();
    let client = server.client();
    for version in ["v1", "v1beta1"] {
        // `Client::review` checks that the envelope's apiVersion echoes the request's.
        let review = composition_review(version, "uid-broken", "CREATE", broken());
        assert_eq!(answer(&client, &review).await, broken_denied(), "{version}");
    }
    // Strict judges schema errors the same way; warn admits them, but logical errors still
    // deny: the same answer in every mode.
    for mode in ["strict", "loose", "warn"] {
        let review = create("uid-broken-mode", with_mode(broken(), mode));
        let mut want = broken_denied();
        if mode == "warn" {
            // Only the logical errors deny; the schema errors become warnings.
            let logical = &BROKEN_CAUSES[..7];
            want = invalid(
                BROKEN,
                logical,
                &[
                    warning(
                        BROKEN,
                        r#"spec.resources[0].patches[2].toFieldPath: Invalid value: field 'autoCreateSubnetwork' is not valid according to the schema; did you mean "autoCreateSubnetworks"?"#,
                    ),
                    warning(
                        BROKEN,
                        "spec.resources[0].patches[3].transforms: Required value: the fromFieldPath does not have a type compatible with…rms were provided: string != boolean (a convert transform with toType: bool would do)",
                    ),
                    warning(
                        BROKEN,
                        "spec.resources[1].readinessChecks[0].fieldPath: Invalid value: field 'state' is not valid according to the schema",
                    ),
                ],
            );
        }
        assert_eq!(answer(&client, &review).await, want, "{mode}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_schemas_warn_in_loose_and_warn_and_forbid_in_strict() {
    let server = start_with(&xrd_only(), &[]);
    let client = server.client();
    // No annotation: the default mode, loose.
    assert_eq!(
        answer(&client, &create("uid-loose", example())).await,
        allowed(&missing_schemas_warnings())
    );
    assert_eq!(
        answer(&client, &create("uid-loose", with_mode(example(), "loose"))).await,
        allowed(&missing_schemas_warnings())
    );
    assert_eq!(
        answer(&client, &create("uid-warn", with_mode(example(), "warn"))).await,
        allowed(&missing_schemas_warnings())
    );
    assert_eq!(
        answer(
            &client,
            &create("uid-strict", with_mode(example(), "strict"))
        )
        .await,
        missing_schemas_forbidden()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mode_flag_is_the_default_of_compositions_without_the_annotation() {
    let server = start_with(&xrd_only(), &["--mode", "strict"]);
    let client = server.client();
    // The same Composition the default (loose) server admits with warnings.
    assert_eq!(
        answer(&client, &create("uid-default", example())).await,
        missing_schemas_forbidden()
    );
    // The annotation still wins over the flag.
    assert_eq!(
        answer(&client, &create("uid-loose", with_mode(example(), "loose"))).await,
        allowed(&missing_schemas_warnings())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warn_mode_admits_schema_errors_with_warnings() {
    let server = start();
    let client = server.client();
    let mut object = example();
    let patches = object["spec"]["resources"][0]["patches"]
        .as_array_mut()
        .expect("patches");
    patches.push(
        json!({"fromFieldPath": "spec.id", "toFieldPath": "spec.forProvider.autoCreateSubnetwork"}),
    );
    patches.push(
        json!({"fromFieldPath": "spec.id", "toFieldPath": "spec.forProvider.autoCreateSubnetworks"}),
    );
    let causes: [Cause; 2] = [
        (
            "FieldValueInvalid",
            "spec.resources[0].patches[2].toFieldPath",
            r#"Invalid value: "spec.forProvider.autoCreateSubnetwork": field 'autoCreateSubnetwork' is not valid according to the schema; did you mean "autoCreateSubnetworks"?"#,
        ),
        (
            "FieldValueRequired",
            "spec.resources[0].patches[3].transforms",
            "Required value: the fromFieldPath does not have a type compatible with the toFieldPath according to their schemas and no transforms were provided: string != boolean (a convert transform with toType: bool would do)",
        ),
    ];
    // Loose (the default) denies them.
    assert_eq!(
        answer(&client, &create("uid-loose", object.clone())).await,
        invalid(EXAMPLE, &causes, &[])
    );
    // Warn admits them, one warning each: the short form leaves out the value, and the
    // longest is cut to 256 characters.
    let warnings = vec![
        warning(
            EXAMPLE,
            r#"spec.resources[0].patches[2].toFieldPath: Invalid value: field 'autoCreateSubnetwork' is not valid according to the schema; did you mean "autoCreateSubnetworks"?"#,
        ),
        warning(
            EXAMPLE,
            "spec.resources[0].patches[3].transforms: Required value: the fromFieldPath does not have a type compatible with the to…rms were provided: string != boolean (a convert transform with toType: bool would do)",
        ),
    ];
    assert_eq!(warnings[1].chars().count(), 256);
    assert_eq!(
        answer(&client, &create("uid-warn", with_mode(object, "warn"))).await,
        allowed(&warnings)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_mode_annotation_is_forbidden() {
    let server = start();
    let client = server.client();
    let field = format!("metadata.annotations[{MODE}]");
    let body = r#"Unsupported value: "Strict": supported values: "strict", "loose", "warn" (case-sensitive)"#;
    // Values are case-sensitive, as upstream's; our message names the field and the values.
    assert_eq!(
        answer(&client, &create("uid-mode", with_mode(example(), "Strict"))).await,
        forbidden(
            EXAMPLE,
            &format!("cannot get validation mode: {field}: {body}"),
            &[("FieldValueNotSupported", &field, body)],
        )
    );
    for bad in ["", "Warn", "off"] {
        let response = answer(&client, &create("uid-mode", with_mode(example(), bad))).await;
        assert_eq!(response["status"]["code"], 403, "{bad:?}");
        assert_eq!(
            response["status"]["message"],
            format!(
                r#"cannot get validation mode: {field}: Unsupported value: {bad:?}: supported values: "strict", "loose", "warn" (case-sensitive)"#
            ),
            "{bad:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Operations, other kinds, dry runs.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_and_connect_are_allowed_without_validation() {
    let server = start();
    let client = server.client();
    for version in ["v1", "v1beta1"] {
        // DELETE carries the old object only; a broken one is still deleted, silently.
        let review = composition_review(
            version,
            "uid-delete",
            "DELETE",
            with_mode(broken(), "strict"),
        );
        assert!(review["request"]["object"].is_null());
        assert_eq!(answer(&client, &review).await, allowed(&[]), "{version}");
        let mut review = composition_review(version, "uid-connect", "CONNECT", broken());
        review["request"]["options"] = Value::Null;
        assert_eq!(answer(&client, &review).await, allowed(&[]), "{version}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_validates_the_new_object_only() {
    let server = start();
    let client = server.client();
    // Fixing a broken Composition: allowed.
    let mut review = composition_review("v1", "uid-fix", "UPDATE", example());
    review["request"]["oldObject"] = broken();
    assert_eq!(answer(&client, &review).await, allowed(&[]));
    // Breaking a valid one: denied with the new object's errors.
    let mut review = composition_review("v1beta1", "uid-break", "UPDATE", broken());
    review["request"]["oldObject"] = example();
    assert_eq!(answer(&client, &review).await, broken_denied());
    // An UPDATE without the new object cannot be judged.
    let mut review = composition_review("v1", "uid-no-object", "UPDATE", example());
    review["request"]["object"] = Value::Null;
    assert_eq!(
        answer(&client, &review).await,
        json!({"allowed": false, "status": {"status": "Failure", "code": 400, "reason": "BadRequest",
               "message": "the AdmissionReview request (UPDATE) has no object"}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_kinds_are_allowed_with_exactly_one_warning() {
    let server = start();
    let client = server.client();
    let config_map = other_kind_review(
        "uid-cm",
        "",
        "v1",
        "ConfigMap",
        "configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "default"}, "data": {"a": "b"}}),
    );
    assert_eq!(
        answer(&client, &config_map).await,
        allowed(&[
            r#"ConfigMap "settings": not validated: composition-webhook checks only apiextensions.crossplane.io Compositions, not v1/ConfigMap; the webhook configuration's rules should not send it"#.to_string()
        ])
    );
    // Another kind of the same group (a rule matching `*`) is not validated either.
    let revision = other_kind_review(
        "uid-rev",
        "apiextensions.crossplane.io",
        "v1",
        "CompositionRevision",
        "compositionrevisions",
        json!({"apiVersion": "apiextensions.crossplane.io/v1", "kind": "CompositionRevision", "metadata": {"name": "rev-1"}, "spec": {}}),
    );
    assert_eq!(
        answer(&client, &revision).await,
        allowed(&[
            r#"CompositionRevision "rev-1": not validated: composition-webhook checks only apiextensions.crossplane.io Compositions, not apiextensions.crossplane.io/v1, Kind=CompositionRevision; the webhook configuration's rules should not send it"#.to_string()
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_is_answered_like_any_request() {
    let server = start();
    let client = server.client();
    for (object, want) in [(example(), allowed(&[])), (broken(), broken_denied())] {
        let mut review = create("uid-dry", object);
        review["request"]["dryRun"] = json!(true);
        assert_eq!(answer(&client, &review).await, want);
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Reviews that cannot be read.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_reviews_are_answered_400_echoing_the_uid_when_present() {
    let server = start();
    let client = server.client();
    let v1 = "admission.k8s.io/v1";
    let v1beta1 = "admission.k8s.io/v1beta1";
    let good = serde_json::to_vec(&create("uid-ct", example())).expect("json");

    // Not JSON at all: no uid to echo.
    assert_eq!(
        post_raw(&client, Some("application/json"), b"not json").await,
        bad_request(
            v1,
            "",
            "the request body is not a valid AdmissionReview: expected ident at line 1 column 2"
        )
    );
    // Broken after the uid: the uid is salvaged.
    assert_eq!(
        post_raw(
            &client,
            Some("application/json"),
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"uid-bad-json","kind":}}"#
        )
        .await,
        bad_request(
            v1,
            "uid-bad-json",
            "the request body is not a valid AdmissionReview: expected value at line 1 column 101"
        )
    );
    // Truncated: the uid and the version are salvaged.
    let truncated = br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"uid-truncated","kind":{"group":"apiextensions.crossplane.io","version":"v1","kind":"Composition"},"object":{"apiVersion":"apiextensions.crossplane.io/v1","kind":"Comp"#;
    assert_eq!(
        post_raw(&client, Some("application/json"), truncated).await,
        bad_request(
            v1beta1,
            "uid-truncated",
            "the request body is not a valid AdmissionReview: EOF while parsing a string at line 1 column 250"
        )
    );
    // A real review cut in half.
    let half = &good[..good.len() / 2];
    assert_eq!(
        post_raw(&client, Some("application/json"), half).await["response"]["uid"],
        "uid-ct"
    );
    // Empty.
    assert_eq!(
        post_raw(&client, Some("application/json"), b"").await,
        bad_request(
            v1,
            "",
            "the request body is empty; expected an AdmissionReview"
        )
    );
    // No request.
    assert_eq!(
        post_raw(
            &client,
            Some("application/json"),
            br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview"}"#
        )
        .await,
        bad_request(v1beta1, "", "the AdmissionReview has no request")
    );
    // An apiVersion this webhook does not answer: the answer is in v1.
    let unsupported = r#"AdmissionReview apiVersion "admission.k8s.io/v2" is not supported: this webhook answers admission.k8s.io/v1 and admission.k8s.io/v1beta1"#;
    let mut v2 = create("uid-v2", example());
    v2["apiVersion"] = json!("admission.k8s.io/v2");
    assert_eq!(
        post_raw(
            &client,
            Some("application/json"),
            &serde_json::to_vec(&v2).expect("json")
        )
        .await,
        bad_request(v1, "uid-v2", unsupported)
    );
    // ... also when its request is not shaped like v1's.
    assert_eq!(
        post_raw(
            &client,
            Some("application/json"),
            br#"{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"uid-v2-short"}}"#
        )
        .await,
        bad_request(v1, "uid-v2-short", unsupported)
    );
    // Not an AdmissionReview.
    let mut wrong_kind = create("uid-kind", example());
    wrong_kind["kind"] = json!("AdmissionRequest");
    assert_eq!(
        post_raw(
            &client,
            Some("application/json"),
            &serde_json::to_vec(&wrong_kind).expect("json")
        )
        .await,
        bad_request(
            v1,
            "uid-kind",
            r#"expected kind AdmissionReview, got "AdmissionRequest""#
        )
    );
    // Not JSON by its Content-Type, whatever the body.
    assert_eq!(
        post_raw(&client, Some("text/plain"), &good).await,
        bad_request(
            v1,
            "uid-ct",
            r#"Content-Type "text/plain" is not supported: send an AdmissionReview as application/json, as the API server does"#
        )
    );
    // JSON with parameters, or no Content-Type at all, is read.
    for content_type in [Some("application/json; charset=utf-8"), None] {
        let v = post_raw(&client, content_type, &good).await;
        assert_eq!(
            v["response"],
            json!({"uid": "uid-ct", "allowed": true, "status": {}}),
            "{content_type:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_methods_and_paths_are_refused_by_the_router() {
    let server = start();
    let client = server.client();
    let good = serde_json::to_vec(&create("uid", example())).expect("json");
    for method in ["GET", "PUT", "DELETE"] {
        let reply = client
            .request(method, "/validate", Some("application/json"), good.clone())
            .await;
        assert_eq!(
            (reply.status, reply.body.as_slice()),
            (405, &b""[..]),
            "{method}"
        );
    }
    for path in ["/", "/mutate", "/validate/extra", "/livez", "/metrics"] {
        let reply = client
            .request("POST", path, Some("application/json"), good.clone())
            .await;
        assert_eq!(
            (reply.status, reply.body.as_slice()),
            (404, &b""[..]),
            "{path}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 4. The API server's deadline.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_time_left_answers_by_the_mode_without_validating() {
    let server = start();
    let client = server.client();
    let why = "validation did not finish within 0ms, the time left before the API server's webhook timeout";
    let strict = json!({
        "allowed": false,
        "status": {
            "status": "Failure", "code": 504, "reason": "Timeout",
            "message": format!("Composition {EXAMPLE:?} was not validated: {why}; strict mode denies what it cannot check. Try again; if it persists, give the webhook more CPU or raise timeoutSeconds in its ValidatingWebhookConfiguration"),
        },
    });
    for _ in 0..3 {
        assert_eq!(
            answer_at(
                &client,
                "/validate?timeout=0s",
                &create("uid-strict", with_mode(example(), "strict"))
            )
            .await,
            strict
        );
    }
    // A broken Composition is not looked at: the same 504, not its 422.
    let mut broken_strict = with_mode(broken(), "strict");
    broken_strict["metadata"]["name"] = json!(EXAMPLE);
    let review = composition_review("v1beta1", "uid-broken", "CREATE", broken_strict);
    assert_eq!(
        answer_at(&client, "/validate?timeout=0s", &review).await,
        strict
    );
    // Loose (the default) and warn admit it, saying it was not validated.
    for (mode, object) in [
        ("loose", broken()),
        ("loose", with_mode(broken(), "loose")),
        ("warn", with_mode(broken(), "warn")),
    ] {
        assert_eq!(
            answer_at(&client, "/validate?timeout=0s", &create("uid-late", object)).await,
            allowed(&[warning(
                BROKEN,
                &format!("admitted without validation ({mode} mode): {why}")
            )]),
            "{mode}"
        );
    }
    // What needs no validation is answered as usual.
    let review = composition_review("v1", "uid-delete", "DELETE", broken());
    assert_eq!(
        answer_at(&client, "/validate?timeout=0s", &review).await,
        allowed(&[])
    );
    // With time left, the same Composition is validated.
    assert_eq!(
        answer_at(&client, "/validate?timeout=1s", &create("uid-1s", broken())).await,
        broken_denied()
    );
    // A timeout that cannot be read is the API server's default (10s).
    assert_eq!(
        answer_at(
            &client,
            "/validate?timeout=soon",
            &create("uid-soon", broken())
        )
        .await,
        broken_denied()
    );
}

// ---------------------------------------------------------------------------------------------
// 5. Many warnings.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_warnings_fit_what_the_api_server_keeps() {
    let server = start();
    let client = server.client();
    const BAD: usize = 70;
    let mut object = with_mode(example(), "warn");
    object["metadata"]["name"] = json!("many");
    let patches = object["spec"]["resources"][0]["patches"]
        .as_array_mut()
        .expect("patches");
    for i in 0..BAD {
        patches.push(json!({"fromFieldPath": "spec.id", "toFieldPath": format!("spec.forProvider.nothing{i:02}")}));
    }
    let response = answer(&client, &create("uid-many", object)).await;
    assert_eq!(
        (&response["allowed"], &response["status"]),
        (&json!(true), &json!({}))
    );
    let warnings: Vec<&str> = response["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .map(|w| w.as_str().expect("string"))
        .collect();
    // Each warning is one line of at most 256 characters, and all of them stay under the
    // 4096 past which the API server would cut every warning to 256.
    for w in &warnings {
        assert!(w.chars().count() <= 256, "{w}");
        assert!(!w.chars().any(char::is_control), "{w:?}");
    }
    let total: usize = warnings.iter().map(|w| w.chars().count()).sum();
    assert!(total < 4096, "{total}");
    // The first ones in order, in the short form, then a count of the rest.
    let kept = warnings.len() - 1;
    assert_eq!(kept, 30);
    for (i, w) in warnings[..kept].iter().enumerate() {
        assert_eq!(
            *w,
            format!(
                r#"Composition "many": spec.resources[0].patches[{}].toFieldPath: Invalid value: field 'nothing{i:02}' is not valid according to the schema"#,
                i + 2
            )
        );
    }
    assert_eq!(
        warnings[kept],
        format!(
            "Composition \"many\": and {} more warnings; run `composition-webhook validate` on the Composition to see all",
            BAD - kept
        )
    );
}

/// A finding that every value of an enum XR field renders is an error through the webhook
/// too, where the bases are rendered into the resources instead of copied: telling it needs a
/// base as it was, so the server reads the review's Composition again for it (the same
/// Composition and schemas give a warning in `tests/rendered.rs` when it cannot be read again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finding_of_every_enum_value_is_an_error_through_the_webhook() {
    let dir = ScratchDir::new("every-value");
    let xrd = json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "CompositeResourceDefinition",
        "metadata": {"name": "xdatabases.example.org"},
        "spec": {"group": "example.org", "names": {"kind": "XDatabase", "plural": "xdatabases"},
            "versions": [{"name": "v1", "served": true, "referenceable": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["tier"], "properties": {
                        "tier": {"type": "string", "enum": ["small", "large"]}}}}}}}]}
    });
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "instances.db.example.org"},
        "spec": {"group": "db.example.org", "scope": "Cluster",
            "names": {"kind": "Instance", "plural": "instances"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"forProvider": {"type": "object",
                        "properties": {"class": {"type": "string", "enum": ["db.t3", "db.m5"]}}}}}}}}}]}
    });
    for (file, doc) in [("xrd.yaml", &xrd), ("crd.yaml", &crd)] {
        std::fs::write(dir.path(file), doc.to_string()).expect("schema file");
    }
    let server = start_with(&[dir.path("xrd.yaml"), dir.path("crd.yaml")], &[]);
    let client = server.client();
    let object = json!({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
        "metadata": {"name": "xdatabases.aws"},
        "spec": {"compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XDatabase"},
            "resources": [{"name": "db",
                "base": {"apiVersion": "db.example.org/v1", "kind": "Instance",
                         "spec": {"forProvider": {}}},
                "patches": [{"fromFieldPath": "spec.tier", "toFieldPath": "spec.forProvider.class"}]}]}
    });
    let cause = (
        "FieldValueNotSupported",
        "spec.resources[0].base.spec.forProvider.class",
        r#"Unsupported value: "small": supported values: "db.t3", "db.m5" (written by spec.resources[0].patches[0]: every value of spec.tier the composite resource's schema allows (spec.tier: "small", "large") renders this)"#,
    );
    assert_eq!(
        answer(&client, &create("uid-every-value", object)).await,
        invalid("xdatabases.aws", &[cause], &[])
    );
}

// ---------------------------------------------------------------------------------------------
// 6. Crossplane's upstream cases through the webhook.

/// One upstream case: its id, file and the document.
struct Case {
    id: String,
    file: PathBuf,
    value: Value,
}

fn upstream_cases(folder: &str) -> Vec<Case> {
    common::cases(folder)
        .into_iter()
        .map(|(id, value, file)| Case { id, file, value })
        .collect()
}

/// A case's CRDs (inline or `$ref`), each with a file name.
fn case_crds(case: &Case) -> CaseCrds {
    case.value["crds"]
        .as_array()
        .expect("crds")
        .iter()
        .enumerate()
        .map(|(i, crd)| {
            let doc = match crd.get("$ref").and_then(Value::as_str) {
                Some(r) => common::read_yaml(&case.file.parent().expect("dir").join(r)),
                None => crd.clone(),
            };
            let name = format!(
                "{i}-{}.yaml",
                doc["metadata"]["name"].as_str().expect("name")
            );
            (name, doc)
        })
        .collect()
}

/// A case's CRDs: file name and document.
type CaseCrds = Vec<(String, Value)>;

/// A server for one set of CRDs, written to `dir`.
struct CaseServer {
    crds: CaseCrds,
    dir: ScratchDir,
    server: Server,
}

/// One server per set of CRDs (cases sharing them share it), with `--mode warn`, upstream's
/// default, for the cases without the annotation.
#[derive(Default)]
struct CaseServers(Vec<CaseServer>);

impl CaseServers {
    /// The server for `case`'s CRDs and the folder its CRD files are in.
    fn for_case(&mut self, case: &Case) -> (&Server, &Path) {
        let crds = case_crds(case);
        let index = match self.0.iter().position(|s| s.crds == crds) {
            Some(i) => i,
            None => {
                let dir = ScratchDir::new("case-crds");
                for (name, doc) in &crds {
                    std::fs::write(
                        dir.path(name),
                        serde_json::to_string_pretty(doc).expect("json"),
                    )
                    .expect("write CRD");
                }
                let server = Server::start(&[dir.0.as_path()], &["--mode", "warn"]);
                self.0.push(CaseServer { crds, dir, server });
                self.0.len() - 1
            }
        };
        let s = &self.0[index];
        (&s.server, s.dir.0.as_path())
    }
}

/// How our answer to a case relates to upstream's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Upstream {
    /// Word for word: verdict, message and warnings.
    Same,
    /// The verdict (allowed, code, reason); the message or warnings say more, by design.
    Verdict,
    /// Another verdict: a documented difference (docs/differences.md, `override_for` in
    /// tests/conformance_schema.rs).
    Differs,
}

/// The upstream answer of a case in a mode (`None`: as annotated).
fn upstream_answer<'a>(case: &'a Value, mode: Option<&str>) -> &'a Value {
    let derived = &case["expected"]["webhook_derived"];
    match mode {
        None if derived.get("as_annotated").is_some() => &derived["as_annotated"],
        None => derived,
        Some(m) => &derived[m],
    }
}

/// Checks our answer against upstream's, as `relation` says.
fn compare_with_upstream(
    what: &str,
    ours: &Value,
    upstream: &Value,
    relation: Upstream,
    problems: &mut Vec<String>,
) {
    let verdict = |v: &Value, status: bool| {
        let (code, reason) = if status {
            (v["status"]["code"].clone(), v["status"]["reason"].clone())
        } else {
            (v["code"].clone(), v["reason"].clone())
        };
        json!({"allowed": v["allowed"], "code": code, "reason": reason})
    };
    let (our_verdict, their_verdict) = (verdict(ours, true), verdict(upstream, false));
    let our_words = json!({
        "message": ours["status"]["message"],
        "warnings": ours.get("warnings").cloned().unwrap_or(json!([])),
    });
    let their_words = json!({
        "message": upstream["message"],
        "warnings": upstream.get("warnings").cloned().unwrap_or(json!([])),
    });
    let same_verdict = our_verdict == their_verdict;
    let same_words = our_words == their_words;
    let ok = match relation {
        Upstream::Same => same_verdict && same_words,
        Upstream::Verdict => same_verdict && !same_words,
        Upstream::Differs => !same_verdict,
    };
    if !ok {
        problems.push(format!(
            "{what}: expected {relation:?} as upstream: ours {our_verdict} {our_words}, upstream {their_verdict} {their_words}"
        ));
    }
}

/// The cause of upstream's webhook-flow Compositions' typo `spec.wrongField`.
const WRONG_FIELD: Cause = (
    "FieldValueInvalid",
    "spec.resources[0].patches[0].fromFieldPath",
    r#"Invalid value: "spec.wrongField": field 'wrongField' is not valid according to the schema"#,
);
/// ... and its warning (short form).
const WRONG_FIELD_WARNING: &str = "spec.resources[0].patches[0].fromFieldPath: Invalid value: field 'wrongField' is not valid according to the schema";

/// Our answer to an upstream case in a mode (`None`: as annotated), and how it relates to
/// upstream's. `crds` is the folder the case's CRD files were written to.
fn case_expectation(id: &str, mode: Option<&str>, crds: &Path) -> (Value, Upstream) {
    use Upstream::*;
    let name = |n: &str| n.to_string();
    // The type-mismatch hint we add to upstream's detail.
    let int64_hint = "Required value: the fromFieldPath does not have a type compatible with the toFieldPath according to their schemas and no transforms were provided: string != integer (a convert transform with toType: int64 would do)";
    match (id, mode) {
        ("e2e/001-valid-composition-is-accepted-strict-mode", None)
        | ("e2e/002-valid-composition-with-a-to-json-transform-is-accepted-strict-mode", None) => {
            (allowed(&[]), Same)
        }
        // Upstream's message, with the convert transform that would fix it added.
        ("e2e/003-invalid-composition-is-rejected-strict-mode", None) => (
            invalid(
                "invalid",
                &[(
                    "FieldValueRequired",
                    "spec.resources[0].patches[2].transforms",
                    int64_hint,
                )],
                &[],
            ),
            Verdict,
        ),
        // Warnings name the Composition without "invalid for schema-aware validation" (every
        // warning is about validation) and are cut to 256 characters.
        ("e2e/004-invalid-composition-is-accepted-warn-mode", None) => (
            allowed(&[warning(
                "valid-with-warnings",
                "spec.resources[0].patches[2].transforms: Required value: the fromFieldPath does not have a type compatible with the toFieldPath accordi…ms were provided: string != integer (a convert transform with toType: int64 would do)",
            )]),
            Verdict,
        ),
        ("webhook-flow/001-logical-errors-win-in-every-mode", Some(_)) => (
            invalid(
                "flow-logical",
                &[(
                    "FieldValueRequired",
                    "spec.resources[0].patches[0].fromFieldPath",
                    "Required value: fromFieldPath must be set for patch type FromCompositeFieldPath",
                )],
                &[],
            ),
            Same,
        ),
        // There is no switch that turns schema checks off (docs/differences.md): strict, as annotated.
        ("webhook-flow/002-feature-flag-disabled-only-logical", None) => {
            (invalid("flow-flag-off", &[WRONG_FIELD], &[]), Differs)
        }
        // Upstream's default mode (warn, our --mode here); our warning in the short form.
        ("webhook-flow/003-no-annotation-means-warn", None) => (
            allowed(&[warning("flow-default-mode", WRONG_FIELD_WARNING)]),
            Verdict,
        ),
        // Our message names the field and the valid values, and the other findings are
        // reported too (judged as strict).
        ("webhook-flow/004-invalid-annotation-value-denied", None) => {
            let field = format!("metadata.annotations[{MODE}]");
            let body = r#"Unsupported value: "Strict": supported values: "strict", "loose", "warn" (case-sensitive)"#;
            (
                forbidden(
                    "flow-bad-mode",
                    &format!(
                        "cannot get validation mode: {field}: {body}; and {}: {}",
                        WRONG_FIELD.1, WRONG_FIELD.2
                    ),
                    &[("FieldValueNotSupported", &field, body), WRONG_FIELD],
                ),
                Verdict,
            )
        }
        // Our not-found findings say where and why: `spec.compositeTypeRef: Not found: ...`.
        (
            "webhook-flow/005-composite-crd-missing"
            | "webhook-flow/008-pipeline-mode-needs-xr-crd",
            Some(m),
        ) => {
            let composition = name(if id.contains("/005") {
                "flow-no-xr"
            } else {
                "flow-pipeline"
            });
            let not_found = r#"Not found: "example.org/v1alpha1, Kind=XThing": no CRD, MRD or XRD defines XThing.example.org; checks that need the schema of the composite resource were skipped"#;
            // Ours only: the pipeline's function cannot be rendered, said once.
            let opaque = id.contains("/008").then(|| {
                warning(
                    &composition,
                    r#"spec.pipeline[0]: Not rendered: function "fn" (step "s"): recognised by its name as none whose effect is known, what it composes cannot be known without running it, so no composed resource was validated"#,
                )
            });
            if m == "strict" {
                let mut answer = forbidden(
                    &composition,
                    &format!("cannot get the needed CRDs: [spec.compositeTypeRef: {not_found}]"),
                    &[("FieldValueNotFound", "spec.compositeTypeRef", not_found)],
                );
                if let Some(w) = opaque {
                    answer["warnings"] = json!([w]);
                }
                (answer, Verdict)
            } else {
                let mut warnings = vec![warning(
                    &composition,
                    "spec.compositeTypeRef: Not found: no CRD, MRD or XRD defines XThing.example.org; checks that need the schema of the composite resource were skipped",
                )];
                warnings.extend(opaque);
                (allowed(&warnings), Verdict)
            }
        }
        ("webhook-flow/006-missing-crd-repeated-per-resource", Some(m)) => {
            let not_found = r#"Not found: "other.example.org/v1, Kind=Missing": no CRD, MRD or XRD defines Missing.other.example.org; checks that need the schema of this resource were skipped"#;
            let missing = [
                ("FieldValueNotFound", "spec.resources[1].base", not_found),
                ("FieldValueNotFound", "spec.resources[2].base", not_found),
            ];
            let short = "Not found: no CRD, MRD or XRD defines Missing.other.example.org; checks that need the schema of this resource were skipped";
            let missing_warnings = [
                warning(
                    "flow-dup-missing",
                    &format!("spec.resources[1].base: {short}"),
                ),
                warning(
                    "flow-dup-missing",
                    &format!("spec.resources[2].base: {short}"),
                ),
            ];
            match m {
                // Richer not-found findings, listed comma-separated; the schema error found
                // with the schemas that exist is reported too.
                "strict" => (
                    forbidden(
                        "flow-dup-missing",
                        &format!(
                            "cannot get the needed CRDs: [spec.resources[1].base: {not_found}, spec.resources[2].base: {not_found}]; and {}: {}",
                            WRONG_FIELD.1, WRONG_FIELD.2
                        ),
                        &[missing[0], missing[1], WRONG_FIELD],
                    ),
                    Verdict,
                ),
                // A missing schema does not hide errors found with the others (quirk 029):
                // loose denies the typo in the XR path, the missing ones stay warnings.
                "loose" => (
                    invalid("flow-dup-missing", &[WRONG_FIELD], &missing_warnings),
                    Differs,
                ),
                _ => {
                    let mut warnings = missing_warnings.to_vec();
                    warnings.push(warning("flow-dup-missing", WRONG_FIELD_WARNING));
                    (allowed(&warnings), Verdict)
                }
            }
        }
        // Built-in kinds are validated against Kubernetes' schemas instead of refused as
        // kinds without a CRD (`"ConfigMap." not found`): the ConfigMap is found, and its
        // render has no namespace, which the API server requires of a namespaced kind (a v1
        // cluster scoped XR gives it none).
        ("webhook-flow/007-core-group-base-has-no-crd", Some(m)) => {
            let cause: Cause = (
                "FieldValueRequired",
                "spec.resources[0].base.metadata.namespace",
                "Required value",
            );
            if m == "warn" {
                (
                    allowed(&[warning(
                        "flow-core-group",
                        "spec.resources[0].base.metadata.namespace: Required value",
                    )]),
                    Verdict,
                )
            } else {
                (invalid("flow-core-group", &[cause], &[]), Differs)
            }
        }
        ("webhook-flow/009-multiple-schema-errors", Some(m)) => {
            let causes: [Cause; 3] = [
                WRONG_FIELD,
                (
                    "FieldValueInvalid",
                    "spec.resources[0].patches[1].toFieldPath",
                    r#"Invalid value: "spec.forProvider.wrong": field 'wrong' is not valid according to the schema"#,
                ),
                (
                    "FieldValueRequired",
                    "spec.resources[0].patches[2].transforms",
                    int64_hint,
                ),
            ];
            if m == "warn" {
                // Short form warnings, the last one cut to 256 characters.
                (
                    allowed(&[
                        warning("flow-many", WRONG_FIELD_WARNING),
                        warning(
                            "flow-many",
                            "spec.resources[0].patches[1].toFieldPath: Invalid value: field 'wrong' is not valid according to the schema",
                        ),
                        warning(
                            "flow-many",
                            "spec.resources[0].patches[2].transforms: Required value: the fromFieldPath does not have a type compatible with the toFieldPath according to thei…ms were provided: string != integer (a convert transform with toType: int64 would do)",
                        ),
                    ]),
                    Verdict,
                )
            } else {
                // Upstream's three errors, the last with the convert transform that fixes it.
                (invalid("flow-many", &causes, &[]), Verdict)
            }
        }
        // Conflicting CRDs: 403 in every mode, naming the files they came from.
        ("webhook-flow/010-two-crds-same-group-kind", Some(_)) => {
            let file = |n: &str| crds.join(n).display().to_string();
            let internal = format!(
                "Internal error: more than one CRD found for Thing.thing.example.org: things.thing.example.org from {}, things2.thing.example.org from {}; checks that need the schema of this resource were skipped",
                file("1-things.thing.example.org.yaml"),
                file("2-things2.thing.example.org.yaml"),
            );
            (
                forbidden(
                    "flow-dup-crd",
                    &format!("cannot get the needed CRDs: [spec.resources[0].base: {internal}]"),
                    &[("InternalError", "spec.resources[0].base", &internal)],
                ),
                Verdict,
            )
        }
        // A version the CRD does not serve is an error of its own (docs/differences.md), besides the
        // typo upstream finds with the CRD's only schema.
        ("webhook-flow/011-unknown-version-single-version-crd", Some(m)) => {
            let version: Cause = (
                "FieldValueInvalid",
                "spec.compositeTypeRef.apiVersion",
                r#"Invalid value: "example.org/v9": CRD xthings.example.org has no version v9; served versions: v1alpha1"#,
            );
            if m == "warn" {
                (
                    allowed(&[
                        warning(
                            "flow-version",
                            "spec.compositeTypeRef.apiVersion: Invalid value: CRD xthings.example.org has no version v9; served versions: v1alpha1",
                        ),
                        warning("flow-version", WRONG_FIELD_WARNING),
                    ]),
                    Verdict,
                )
            } else {
                (
                    invalid("flow-version", &[version, WRONG_FIELD], &[]),
                    Verdict,
                )
            }
        }
        _ => panic!("no expectation for {id} in mode {mode:?}"),
    }
}

/// Runs every case of `folder` (but `skip`) through the webhook in the modes upstream
/// derived an answer for.
async fn run_upstream_cases(folder: &str, skip: &[&str], at_least: usize) {
    let cases = upstream_cases(folder);
    if cases.is_empty() {
        return; // ../shared is not here (outside CI).
    }
    let mut servers = CaseServers::default();
    let mut problems = Vec::new();
    let mut runs = 0;
    for case in cases
        .iter()
        .filter(|c| !skip.iter().any(|s| c.id.starts_with(s)))
    {
        let derived = &case.value["expected"]["webhook_derived"];
        let modes: Vec<Option<&str>> = if derived.get("strict").is_some() {
            vec![Some("strict"), Some("loose"), Some("warn")]
        } else {
            vec![None]
        };
        let (server, crds) = servers.for_case(case);
        let client = server.client();
        for mode in modes {
            let mut object = case.value["composition"].clone();
            if let Some(m) = mode {
                object = with_mode(object, m);
            }
            let ours = answer(&client, &create(&format!("uid-{runs}"), object)).await;
            let (want, relation) = case_expectation(&case.id, mode, crds);
            let what = format!("{} [{}]", case.id, mode.unwrap_or("as annotated"));
            if ours != want {
                problems.push(format!("{what}:\n  got  {ours}\n  want {want}"));
            }
            compare_with_upstream(
                &what,
                &ours,
                upstream_answer(&case.value, mode),
                relation,
                &mut problems,
            );
            // Where upstream lists the causes, ours have the same fields and types.
            if let Some(causes) = upstream_answer(&case.value, mode)["causes"].as_array() {
                let theirs: Vec<Value> = causes
                    .iter()
                    .map(|c| json!([c["type"], c["field"]]))
                    .collect();
                let mine: Vec<Value> = ours["status"]["details"]["causes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| json!([c["reason"], c["field"]]))
                    .collect();
                if mine != theirs {
                    problems.push(format!("{what}: causes {mine:?}, upstream {theirs:?}"));
                }
            }
            runs += 1;
        }
    }
    assert!(runs >= at_least, "only {runs} runs");
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_e2e_cases_through_the_webhook() {
    // 005 is the API server's CEL rule on an immutable field, before any webhook.
    run_upstream_cases("e2e", &["e2e/005-"], 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_webhook_flow_cases_through_the_webhook() {
    run_upstream_cases("webhook-flow", &[], 3 + 8 * 3).await;
}

// ---------------------------------------------------------------------------------------------
// 7. Metrics and probes.

/// The value of `series` (metric name and labels, exactly as exposed), if present.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_what_was_answered_and_probes_answer() {
    let server = start();
    let client = server.client();
    let (status, body) = server.ops_get("/livez").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    let (status, body) = server.ops_get("/readyz").await;
    assert_eq!(
        (status, body.as_str()),
        (
            200,
            "ready: schema catalog loaded: 3 kinds from --crds files\n"
        )
    );

    // Before any review: no review series yet, the catalog size, nothing in flight.
    let (status, before) = server.ops_get("/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(
        sample(&before, "composition_webhook_schema_catalog_kinds"),
        Some(3.0)
    );
    assert_eq!(
        sample(&before, "composition_webhook_reviews_in_flight"),
        Some(0.0)
    );
    assert!(
        !before.contains("composition_webhook_admission_reviews_total{"),
        "{before}"
    );

    // Reviews of every kind of ending.
    client.review(&create("m1", example())).await;
    client
        .review(&composition_review("v1beta1", "m2", "CREATE", example()))
        .await;
    client
        .review(&create("m3", with_mode(example(), "strict")))
        .await;
    client.review(&create("m4", broken())).await;
    let mut update = composition_review("v1", "m5", "UPDATE", broken());
    update["request"]["oldObject"] = example();
    client.review(&update).await;
    client
        .review(&create("m6", with_mode(broken(), "warn")))
        .await;
    client
        .review(&composition_review("v1", "m7", "DELETE", broken()))
        .await;
    client
        .review(&other_kind_review(
            "m8",
            "",
            "v1",
            "ConfigMap",
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
        ))
        .await;
    post_raw(&client, Some("application/json"), b"{").await;
    post_raw(&client, Some("text/plain"), b"{}").await;
    answer_at(
        &client,
        "/validate?timeout=0s",
        &create("m9", with_mode(example(), "strict")),
    )
    .await;

    let (status, text) = server.ops_get("/metrics").await;
    assert_eq!(status, 200);
    let reviews = [
        ("CREATE", "loose", "allowed", 2),
        ("CREATE", "strict", "allowed", 1),
        ("CREATE", "loose", "denied", 1),
        ("UPDATE", "loose", "denied", 1),
        // Logical errors deny in warn mode too; schema errors are warnings there.
        ("CREATE", "warn", "denied", 1),
        ("DELETE", "none", "allowed", 1),
        ("CREATE", "none", "warned", 1),
        ("unknown", "none", "malformed", 2),
        ("CREATE", "strict", "deadline_exceeded", 1),
    ];
    let mut series = 0;
    for (operation, mode, verdict, n) in reviews {
        let labels = format!(r#"operation="{operation}",mode="{mode}",verdict="{verdict}""#);
        assert_eq!(
            sample(
                &text,
                &format!("composition_webhook_admission_reviews_total{{{labels}}}")
            ),
            Some(f64::from(n)),
            "{labels} in\n{text}"
        );
        // The API server's webhook duration buckets, cumulative: every review is under 25s.
        let les: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.starts_with("composition_webhook_admission_review_duration_seconds_bucket{le=\"")
                    && l.contains(&format!("\",{labels}}} "))
            })
            .map(|l| l.split('"').nth(1).expect("le"))
            .collect();
        assert_eq!(
            les,
            [
                "0.005", "0.025", "0.1", "0.5", "1.0", "2.5", "10.0", "25.0", "+Inf"
            ],
            "{labels}"
        );
        for le in ["25.0", "+Inf"] {
            assert_eq!(
                sample(
                    &text,
                    &format!(
                        "composition_webhook_admission_review_duration_seconds_bucket{{le=\"{le}\",{labels}}}"
                    )
                ),
                Some(f64::from(n)),
                "{labels} le={le}"
            );
        }
        assert_eq!(
            sample(
                &text,
                &format!("composition_webhook_admission_review_duration_seconds_count{{{labels}}}")
            ),
            Some(f64::from(n)),
            "{labels}"
        );
        assert!(
            sample(
                &text,
                &format!("composition_webhook_admission_review_duration_seconds_sum{{{labels}}}")
            )
            .is_some_and(|s| s > 0.0 && s < 25.0 * f64::from(n)),
            "{labels}"
        );
        series += 1;
    }
    // No other review series.
    let total_series = text
        .lines()
        .filter(|l| l.starts_with("composition_webhook_admission_reviews_total{"))
        .count();
    assert_eq!(total_series, series, "{text}");

    // Findings of the validated Compositions: testdata/invalid twice (CREATE, UPDATE) as
    // errors, once in warn mode (logical errors, schema findings as warnings).
    let findings = [
        ("logical", "Invalid", "error", 3 * 3),
        ("logical", "Duplicate", "error", 3),
        ("logical", "Required", "error", 3 * 3),
        ("schema", "Invalid", "error", 2 * 2),
        ("schema", "Required", "error", 2),
        ("schema", "Invalid", "warning", 2),
        ("schema", "Required", "warning", 1),
    ];
    for (stage, ty, severity, n) in findings {
        let series = format!(
            r#"composition_webhook_findings_total{{stage="{stage}",type="{ty}",severity="{severity}"}}"#
        );
        assert_eq!(
            sample(&text, &series),
            Some(f64::from(n)),
            "{series} in\n{text}"
        );
    }
    let finding_series = text
        .lines()
        .filter(|l| l.starts_with("composition_webhook_findings_total{"))
        .count();
    assert_eq!(finding_series, findings.len(), "{text}");
    assert_eq!(
        sample(&text, "composition_webhook_schema_catalog_kinds"),
        Some(3.0)
    );
    assert_eq!(
        sample(&text, "composition_webhook_reviews_in_flight"),
        Some(0.0)
    );
    assert!(text.ends_with("# EOF\n"), "{text}");

    // Still live and ready.
    assert_eq!(server.ops_get("/livez").await.0, 200);
    assert_eq!(server.ops_get("/readyz").await.0, 200);
    // Unknown operations paths.
    assert_eq!(server.ops_get("/healthz").await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reviews_get_their_own_answers() {
    // Reviews at once on several connections get their own answers (uids never mixed).
    let server = start();
    let client = server.client();
    let mut tasks = Vec::new();
    for i in 0..24 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let (object, denied) = if i % 2 == 0 {
                (example(), false)
            } else {
                (broken(), true)
            };
            let response = client.review(&create(&format!("uid-{i}"), object)).await;
            (i, response["allowed"] == json!(!denied))
        }));
    }
    let mut results = BTreeMap::new();
    for t in tasks {
        let (i, ok) = t.await.expect("task");
        results.insert(i, ok);
    }
    assert!(results.values().all(|ok| *ok), "{results:?}");
}
