//! Built-in kinds' schemas from the OpenAPI v3 documents a real kube-apiserver v1.28.4
//! serves (`../shared/kube-openapi/v1.28.4`): every kind of the 14 group versions converts
//! to a structural schema and compiles, scopes come from the create paths, and a Deployment
//! and a Service validate as the API server takes them.

mod common;

use composition_webhook::findings::Path as FieldPath;
use composition_webhook::schema::openapi::{Document, Gvk};
use composition_webhook::schema::validation::{CelLimits, compiled, validate_resource};
use serde_json::{Value, json};

fn documents() -> Option<Vec<(String, Document)>> {
    let dir = common::shared_subdir("kube-openapi/v1.28.4")?;
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("dir") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name == "index.json" || !name.ends_with(".json") {
            continue;
        }
        let doc = Document::from_value(common::read_json(&path)).expect(name);
        out.push((name.to_string(), doc));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Some(out)
}

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

fn find<'a>(docs: &'a [(String, Document)], g: &Gvk) -> &'a Document {
    &docs
        .iter()
        .find(|(_, d)| d.kinds().any(|k| k == g))
        .unwrap_or_else(|| panic!("{g:?}"))
        .1
}

fn errors(docs: &[(String, Document)], g: &Gvk, mut object: Value) -> Vec<String> {
    let schema = find(docs, g).schema(g).expect("converts").expect("defined");
    let compiled = compiled(&std::sync::Arc::new(schema)).expect("compiles");
    validate_resource(
        &compiled,
        &mut object,
        &FieldPath::default(),
        &CelLimits::default(),
    )
    .errors
    .iter()
    .map(ToString::to_string)
    .collect()
}

#[test]
fn every_kind_converts_and_compiles() {
    let Some(docs) = documents() else {
        return;
    };
    assert_eq!(docs.len(), 14);
    let mut kinds = 0;
    for (name, doc) in &docs {
        for g in doc.kinds() {
            let schema = doc
                .schema(g)
                .unwrap_or_else(|e| panic!("{name} {g:?}: {e}"))
                .expect("defined");
            compiled(&std::sync::Arc::new(schema)).unwrap_or_else(|e| panic!("{g:?}: {e}"));
            kinds += 1;
        }
    }
    assert!(kinds > 100, "{kinds} kinds");
    let deployment = gvk("apps", "v1", "Deployment");
    assert_eq!(find(&docs, &deployment).namespaced(&deployment), Some(true));
    let namespace = gvk("", "v1", "Namespace");
    assert_eq!(find(&docs, &namespace).namespaced(&namespace), Some(false));
    let role = gvk("rbac.authorization.k8s.io", "v1", "ClusterRole");
    assert_eq!(find(&docs, &role).namespaced(&role), Some(false));
}

/// A Deployment as Crossplane v2's getting-started guide composes one.
fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "app", "namespace": "default", "labels": {"app": "app"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "app"}},
            "template": {
                "metadata": {"labels": {"app": "app"}},
                "spec": {"containers": [{
                    "name": "app", "image": "nginx:1.27",
                    "ports": [{"containerPort": 80}],
                    "resources": {"requests": {"cpu": 0.5, "memory": "64Mi"},
                                  "limits": {"cpu": "500m", "memory": 128}}
                }]}
            }
        }
    })
}

#[test]
fn built_in_kinds_validate_as_the_api_server_takes_them() {
    let Some(docs) = documents() else {
        return;
    };
    let deployment_gvk = gvk("apps", "v1", "Deployment");
    assert_eq!(
        errors(&docs, &deployment_gvk, deployment()),
        Vec::<String>::new()
    );
    let mut typo = deployment();
    let spec = typo["spec"].as_object_mut().expect("spec");
    let replicas = spec.shift_remove("replicas").expect("replicas");
    spec.insert("replica".into(), replicas);
    typo["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = json!("80");
    assert_eq!(
        errors(&docs, &deployment_gvk, typo),
        [
            "spec.replica: Invalid value: \"replica\": unknown field: \"replica\", did you mean \"replicas\"?",
            "spec.template.spec.containers[0].ports[0].containerPort: Invalid value: \"string\": spec.template.spec.containers[0].ports[0].containerPort in body must be of type integer: \"string\"",
        ]
    );
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "app", "namespace": "default"},
        "spec": {"type": "Balanced", "selector": {"app": "app"},
                 "ports": [{"port": 80, "targetPort": "http"}, {"port": 443, "targetPort": 8443}]}});
    assert_eq!(
        errors(&docs, &gvk("", "v1", "Service"), service),
        [
            "spec.type: Unsupported value: \"Balanced\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
        ]
    );
}
