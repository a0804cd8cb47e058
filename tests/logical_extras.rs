//! The logical checks this project adds to upstream's (see docs/differences.md):
//! exact messages for each.

mod common;

use composition_webhook::checks::logical;
use composition_webhook::model::Composition;
use serde_json::{Value, json};

/// A valid Composition with one resource; `edit` changes it.
fn messages(edit: impl FnOnce(&mut Value)) -> Vec<String> {
    let mut v = json!({
        "apiVersion": "apiextensions.crossplane.io/v1",
        "kind": "Composition",
        "metadata": {"name": "x"},
        "spec": {
            "compositeTypeRef": {"apiVersion": "example.org/v1", "kind": "XThing"},
            "resources": [{
                "name": "a",
                "base": {"apiVersion": "a.example.org/v1", "kind": "A"},
                "patches": [{"fromFieldPath": "spec.a", "toFieldPath": "spec.a"}]
            }]
        }
    });
    edit(&mut v);
    let c = Composition::from_value(&v, &common::v1_api()).expect("valid model");
    logical::validate(&c, true)
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn resource(v: &mut Value) -> &mut Value {
    &mut v["spec"]["resources"][0]
}

#[test]
fn a_valid_composition_has_no_findings() {
    assert_eq!(messages(|_| {}), Vec::<String>::new());
}

#[test]
fn fields_the_crd_requires() {
    assert_eq!(
        messages(|v| {
            v["spec"]["compositeTypeRef"] = json!({"apiVersion": "v1"});
            resource(v)["base"] = json!({"apiVersion": "a/b/c", "kind": 3});
        }),
        [
            r#"spec.compositeTypeRef.apiVersion: Invalid value: "v1": must be group/version: composite resources always belong to an API group"#,
            "spec.compositeTypeRef.kind: Required value: the composite resource's kind is required",
            r#"spec.resources[0].base.apiVersion: Invalid value: "a/b/c": must be group/version, or version for the core group"#,
            "spec.resources[0].base.kind: Invalid value: 3: must be a string",
        ]
    );
    assert_eq!(
        messages(|v| {
            resource(v).as_object_mut().unwrap().remove("base");
        }),
        ["spec.resources[0].base: Required value: every resource needs a base object"]
    );
}

#[test]
fn pipeline_steps_need_names_and_functions() {
    let out = messages(|v| {
        v["spec"]["mode"] = json!("Pipeline");
        v["spec"]["resources"] = json!(null);
        v["spec"]["pipeline"] = json!([
            {"functionRef": {"name": "function-patch-and-transform"},
             "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "step": "pt"}},
            {"step": "two"}
        ]);
    });
    assert_eq!(
        out,
        [
            "spec.pipeline[0].step: Required value: every pipeline step needs a name; `step` is set inside `input` instead: is it indented one level too deep?",
            "spec.pipeline[1].functionRef.name: Required value: every pipeline step must name the Function it runs",
        ]
    );
}

#[test]
fn unknown_mode() {
    assert_eq!(
        messages(|v| v["spec"]["mode"] = json!("pipeline")),
        [r#"spec.mode: Unsupported value: "pipeline": supported values: "Resources", "Pipeline""#]
    );
}

#[test]
fn patch_set_names() {
    assert_eq!(
        messages(|v| {
            v["spec"]["patchSets"] = json!([
                {"name": "a", "patches": []},
                {"name": "a", "patches": []},
                {"patches": []}
            ]);
        }),
        [
            r#"spec.patchSets[1].name: Duplicate value: "a""#,
            "spec.patchSets[2].name: Required value: every patch set needs a name",
        ]
    );
}

#[test]
fn combine_format_against_variables() {
    let combine = |fmt: &str, n: usize| {
        let fmt = fmt.to_string();
        messages(move |v| {
            let vars: Vec<Value> = (0..n)
                .map(|i| json!({"fromFieldPath": format!("spec.v{i}")}))
                .collect();
            resource(v)["patches"] = json!([{
                "type": "CombineFromComposite", "toFieldPath": "spec.name",
                "combine": {"variables": vars, "strategy": "string", "string": {"fmt": fmt}}
            }]);
        })
    };
    let at = "spec.resources[0].patches[0].combine.string.fmt";
    assert_eq!(combine("%s-%s", 2), Vec::<String>::new());
    assert_eq!(combine("%[2]s-%[1]s", 2), Vec::<String>::new());
    assert_eq!(combine("100%% %d", 1), Vec::<String>::new());
    assert_eq!(
        combine("%s-%s-%s", 2),
        [format!(
            r#"{at}: Invalid value: "%s-%s-%s": the format uses 3 values but combine.variables lists 2 variables: the value would contain %!s(MISSING)"#
        )]
    );
    assert_eq!(
        combine("%s", 2),
        [format!(
            r#"{at}: Invalid value: "%s": the format uses 1 value but combine.variables lists 2 variables: the value would end in %!(EXTRA ...)"#
        )]
    );
    assert_eq!(
        combine("%s %y", 2),
        [format!(
            r#"{at}: Invalid value: "%s %y": %y is not a Go format verb (use %s for strings, %d for integers, %v for any value, %% for a percent sign)"#
        )]
    );
    assert_eq!(
        combine("50%", 1),
        [format!(
            r#"{at}: Invalid value: "50%": the format ends with a lone '%' (write %% for a percent sign)"#
        )]
    );
}

#[test]
fn transforms_beyond_upstream() {
    let transform = |t: Value| {
        messages(move |v| {
            resource(v)["patches"][0]["transforms"] = json!([t]);
        })
    };
    let at = "spec.resources[0].patches[0].transforms[0]";
    assert_eq!(
        transform(
            json!({"type": "string", "string": {"type": "Regexp", "regexp": {"match": "a-(\\d+)", "group": 2}}})
        ),
        [format!(
            "{at}.string.regexp.group: Invalid value: 2: the expression has 1 capture group(s); group must be between 0 (the whole match) and 1"
        )]
    );
    assert_eq!(
        transform(
            json!({"type": "string", "string": {"type": "Regexp", "regexp": {"match": "a-(\\d+)", "group": 1}}})
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        transform(
            json!({"type": "string", "string": {"type": "Convert", "convert": "ToUpperCase"}})
        ),
        [format!(
            r#"{at}.string.convert: Unsupported value: "ToUpperCase": supported values: "ToUpper", "ToLower", "ToBase64", "FromBase64", "ToJson", "ToSha1", "ToSha256", "ToSha512", "ToAdler32""#
        )]
    );
    // RE2 has no look-around: Go's regexp rejects it, and so do we.
    assert_eq!(
        transform(
            json!({"type": "match", "match": {"patterns": [{"type": "regexp", "regexp": "a(?=b)", "result": 1}]}})
        ),
        [format!(
            r#"{at}.match.patterns[0].regexp: Invalid value: "a(?=b)": invalid regexp: invalid or unsupported Perl syntax"#
        )]
    );
}

#[test]
fn connection_details() {
    let details = |d: Value| {
        messages(move |v| {
            resource(v)["connectionDetails"] = d;
        })
    };
    let at = "spec.resources[0].connectionDetails";
    assert_eq!(
        details(json!([
            {"fromConnectionSecretKey": "username"},
            {"name": "url", "fromFieldPath": "status.atProvider.url"},
            {"name": "port", "type": "FromValue", "value": "5432"}
        ])),
        Vec::<String>::new()
    );
    assert_eq!(
        details(json!([
            {"name": "a", "type": "FromValue"},
            {"name": "b", "type": "FromFieldPath"},
            {"type": "FromFieldPath", "fromFieldPath": "status.x"},
            {"name": "c", "type": "FromSecret"},
            {"fromConnectionSecretKey": "username"},
            // A fallback: the runtime skips a missing field, so one name twice is legitimate.
            {"name": "username", "fromFieldPath": "status.atProvider.username"}
        ])),
        [
            format!(
                "{at}[0].value: Required value: connection detail of type FromValue needs value"
            ),
            format!(
                "{at}[1].fromFieldPath: Required value: connection detail of type FromFieldPath needs fromFieldPath"
            ),
            format!(
                "{at}[2].name: Required value: connection detail of type FromFieldPath needs a name: the key it gets in the composite resource's connection secret"
            ),
            format!(
                r#"{at}[3].type: Unsupported value: "FromSecret": supported values: "FromConnectionSecretKey", "FromFieldPath", "FromValue""#
            ),
        ]
    );
}

#[test]
fn environment_patch_types() {
    assert_eq!(
        messages(|v| {
            v["spec"]["environment"] = json!({"patches": [
                {"type": "FromEnvironmentFieldPath", "fromFieldPath": "a", "toFieldPath": "b"}
            ]});
        }),
        [
            r#"spec.environment.patches[0].type: Unsupported value: "FromEnvironmentFieldPath": supported values: "FromCompositeFieldPath", "ToCompositeFieldPath", "CombineFromComposite", "CombineToComposite""#
        ]
    );
}

#[test]
fn names_as_the_api_server_checks_them() {
    assert_eq!(
        messages(|v| v["metadata"] = json!({})),
        ["metadata.name: Required value: name or generateName is required"]
    );
    assert_eq!(
        messages(|v| v["metadata"] = json!({"generateName": "x-"})),
        Vec::<String>::new()
    );
    assert_eq!(
        messages(|v| v["metadata"]["name"] = json!("a".repeat(254))),
        [format!(
            r#"metadata.name: Invalid value: "{}": must be no more than 253 characters"#,
            "a".repeat(254)
        )]
    );
    assert_eq!(
        messages(|v| v["metadata"]["name"] = json!("xbuckets.aws.example.org")),
        Vec::<String>::new()
    );
    // What a webhook receives went through the API server: no such checks there.
    let c = Composition::from_value(
        &json!({"metadata": {"name": "Bad_Name"}, "spec": {"resources": [{}]}}),
        &common::v1_api(),
    )
    .unwrap();
    assert_eq!(logical::validate(&c, false), []);
}

#[test]
fn field_path_syntax_needs_no_schema() {
    assert_eq!(
        messages(|v| {
            let r = resource(v);
            r["patches"] = json!([
                {"fromFieldPath": "spec..x", "toFieldPath": "metadata.labels[foo"},
                {"type": "CombineFromComposite", "toFieldPath": "spec.name",
                 "combine": {"strategy": "string", "string": {"fmt": "%s"}, "variables": [{"fromFieldPath": ".a"}]}}
            ]);
            r["readinessChecks"] = json!([{"type": "NonEmpty", "fieldPath": "status.[0]"}]);
            r["connectionDetails"] = json!([{"name": "u", "fromFieldPath": "status]"}]);
        }),
        [
            r#"spec.resources[0].patches[0].fromFieldPath: Invalid value: "spec..x": unexpected '.' at position 5"#,
            r#"spec.resources[0].patches[0].toFieldPath: Invalid value: "metadata.labels[foo": unterminated '[' at position 15"#,
            r#"spec.resources[0].patches[1].combine.variables[0].fromFieldPath: Invalid value: ".a": unexpected '.' at position 0"#,
            r#"spec.resources[0].readinessChecks[0].fieldPath: Invalid value: "status.[0]": unexpected '[' at position 7"#,
            r#"spec.resources[0].connectionDetails[0].fromFieldPath: Invalid value: "status]": unexpected ']' at position 6"#,
        ]
    );
    // Wildcards, quoted and dotted keys are fine.
    assert_eq!(
        messages(|v| {
            resource(v)["patches"] = json!([
                {"fromFieldPath": "spec.items[*].id", "toFieldPath": "metadata.annotations['a.b/c']"}
            ]);
        }),
        Vec::<String>::new()
    );
}

#[test]
fn combine_needs_variables_and_its_string_configuration() {
    let combine = |c: Value| {
        messages(move |v| {
            resource(v)["patches"] =
                json!([{"type": "CombineFromComposite", "toFieldPath": "spec.name", "combine": c}]);
        })
    };
    assert_eq!(
        combine(json!({"strategy": "string", "variables": [], "string": {"fmt": "x"}})),
        [
            "spec.resources[0].patches[0].combine.variables: Required value: a combine needs at least one variable"
        ]
    );
    assert_eq!(
        combine(json!({"strategy": "string", "variables": [{"fromFieldPath": "spec.a"}]})),
        [
            "spec.resources[0].patches[0].combine.string: Required value: string combine strategy requires configuration"
        ]
    );
}

/// Expressions Go's `regexp` accepts are accepted, whatever Rust's `regex` crate thinks;
/// expressions Go rejects are rejected with Go's reason.
#[test]
fn regular_expressions_follow_go() {
    let check = |re: &str| {
        let re = re.to_string();
        messages(move |v| {
            resource(v)["patches"][0]["transforms"] = json!([
                {"type": "match", "match": {"patterns": [{"type": "regexp", "regexp": re, "result": 1}]}}
            ]);
        })
    };
    for valid in [
        r"^[\w.-]{1,253}$",
        r"(?i)^[\w\s]{1,256}$",
        r"^arn:aws:iam::(\d+):role/(.*)$",
        r"^(?P<region>[a-z]{2}-[a-z]+-\d)$",
        r"\Q1.2\E\d+",
        "a{,5}",
        "(?P<x>a)(?P<x>b)",
        "[a-z&&[^aeiou]]",
    ] {
        assert_eq!(check(valid), Vec::<String>::new(), "{valid} is valid in Go");
    }
    let at = "spec.resources[0].patches[0].transforms[0].match.patterns[0].regexp";
    for (invalid, reason) in [
        ("a{1001}", "invalid repeat count"),
        ("a**", "invalid nested repetition operator"),
        ("x{2}{3}", "invalid nested repetition operator"),
        ("(?x) a b", "invalid or unsupported Perl syntax"),
        (r"(a)\1", "invalid escape sequence"),
    ] {
        assert_eq!(
            check(invalid),
            [format!(
                "{at}: Invalid value: {}: invalid regexp: {reason}",
                composition_webhook::findings::go_quote(invalid)
            )],
            "{invalid}"
        );
    }
}

#[test]
fn regexp_groups_are_counted_as_go_counts_them() {
    let group = |re: &str, g: i64| {
        let re = re.to_string();
        messages(move |v| {
            resource(v)["patches"][0]["transforms"] = json!([
                {"type": "string", "string": {"type": "Regexp", "regexp": {"match": re, "group": g}}}
            ]);
        })
    };
    assert_eq!(group(r"^(?P<a>\w+)-(\d+)(?:x)$", 2), Vec::<String>::new());
    assert_eq!(
        group(r"^(?P<a>\w+)-(\d+)(?:x)$", 3),
        [
            "spec.resources[0].patches[0].transforms[0].string.regexp.group: Invalid value: 3: the expression has 2 capture group(s); group must be between 0 (the whole match) and 2"
        ]
    );
}
