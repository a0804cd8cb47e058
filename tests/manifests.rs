//! deploy/ and crds/ as a cluster admin relies on them:
//!
//! - every object deserializes into its typed struct (k8s-openapi's, or cert-manager's
//!   fields as modelled here) with no field left over, so `readinesProbe` fails;
//! - every kustomization lists files that exist, and every file is listed;
//! - each install (deploy/ and each overlay) is rendered as kustomize does, checked against
//!   `kubectl kustomize` where kubectl is installed, and agrees with the binary: its settings
//!   parse with the binary's own flags and environment variables, and ports, paths, names,
//!   rules, the certificate wiring and RBAC match what the binary serves and calls;
//! - deploy/local-test.sh's Compositions get the verdicts the script expects.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use composition_webhook::cluster::function_endpoints;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, Namespace, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn documents(path: &Path) -> Vec<Value> {
    composition_webhook::document::load_path(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .map(|d| d.value)
        .collect()
}

/// Every manifest under `dir`, recursively, as the CLI finds them.
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    composition_webhook::document::collect_files(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

// ---------------------------------------------------------------------------------------
// Typed, with nothing left over

/// `value` as a `T`, failing on any field `T` does not have.
fn typed<T: DeserializeOwned>(value: &Value) -> Result<T, String> {
    let mut unknown = Vec::new();
    let result: Result<T, _> = serde_ignored::deserialize(value.clone(), |path| {
        // serde_ignored marks each Option level with `?`.
        unknown.push(path.to_string().replace(".?", ""))
    });
    if !unknown.is_empty() {
        return Err(format!("unknown fields: {}", unknown.join(", ")));
    }
    result.map_err(|e| e.to_string())
}

/// As [`typed`]; a patch (`partial`) may lack required fields.
fn check_typed<T: DeserializeOwned>(value: &Value, partial: bool) -> Result<(), String> {
    match typed::<T>(value) {
        Ok(_) => Ok(()),
        Err(e) if partial && e.starts_with("missing field") => Ok(()),
        Err(e) => Err(e),
    }
}

/// cert-manager's `Issuer` (cert-manager.io/v1), the fields deploy/ may use.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct Issuer {
    api_version: String,
    kind: String,
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: IssuerSpec,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct IssuerSpec {
    self_signed: Option<BTreeMap<String, Value>>,
    ca: Option<BTreeMap<String, String>>,
}

/// cert-manager's `Certificate` (cert-manager.io/v1), the fields deploy/ may use.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Certificate {
    #[allow(dead_code)]
    api_version: String,
    #[allow(dead_code)]
    kind: String,
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: CertificateSpec,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct CertificateSpec {
    secret_name: String,
    dns_names: Vec<String>,
    issuer_ref: IssuerRef,
    common_name: Option<String>,
    duration: Option<String>,
    renew_before: Option<String>,
    is_ca: Option<bool>,
    usages: Option<Vec<String>>,
    private_key: Option<PrivateKey>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct IssuerRef {
    name: String,
    kind: Option<String>,
    group: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct PrivateKey {
    algorithm: Option<String>,
    size: Option<u32>,
    encoding: Option<String>,
    rotation_policy: Option<String>,
}

/// Checks `value` against the typed struct of its kind.
fn check_object(value: &Value, partial: bool) -> Result<(), String> {
    let api_version = value["apiVersion"].as_str().unwrap_or_default();
    let kind = value["kind"].as_str().unwrap_or_default();
    match (api_version, kind) {
        ("v1", "Namespace") => check_typed::<Namespace>(value, partial),
        ("v1", "ServiceAccount") => check_typed::<ServiceAccount>(value, partial),
        ("v1", "Service") => check_typed::<Service>(value, partial),
        ("apps/v1", "Deployment") => check_typed::<Deployment>(value, partial),
        ("policy/v1", "PodDisruptionBudget") => check_typed::<PodDisruptionBudget>(value, partial),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
            check_typed::<ClusterRole>(value, partial)
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            check_typed::<ClusterRoleBinding>(value, partial)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => check_typed::<Role>(value, partial),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
            check_typed::<RoleBinding>(value, partial)
        }
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
            check_typed::<ValidatingWebhookConfiguration>(value, partial)
        }
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            check_typed::<CustomResourceDefinition>(value, partial)
        }
        ("cert-manager.io/v1", "Issuer") => check_typed::<Issuer>(value, partial),
        ("cert-manager.io/v1", "Certificate") => check_typed::<Certificate>(value, partial),
        _ => Err(format!("no typed struct for {api_version} {kind}")),
    }
}

// ---------------------------------------------------------------------------------------
// Kustomizations

/// A kustomization.yaml, the fields deploy/ may use.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Kustomization {
    api_version: String,
    kind: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    components: Vec<String>,
    #[serde(default)]
    patches: Vec<PatchRef>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchRef {
    path: String,
}

fn kustomization(dir: &Path) -> Kustomization {
    let file = dir.join("kustomization.yaml");
    let docs = documents(&file);
    assert_eq!(docs.len(), 1, "{}", file.display());
    let k: Kustomization = serde_json::from_value(docs[0].clone())
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let expected = match k.kind.as_str() {
        "Kustomization" => "kustomize.config.k8s.io/v1beta1",
        "Component" => "kustomize.config.k8s.io/v1alpha1",
        other => panic!("{}: kind {other}", file.display()),
    };
    assert_eq!(k.api_version, expected, "{}", file.display());
    k
}

fn kustomization_dirs() -> Vec<PathBuf> {
    yaml_files(&root().join("deploy"))
        .into_iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "kustomization.yaml"))
        .map(|f| f.parent().expect("dir").to_path_buf())
        .collect()
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The files deploy/ holds that kustomize reads: (resources, patches).
fn listed_files() -> (BTreeSet<PathBuf>, BTreeSet<PathBuf>) {
    let (mut resources, mut patches) = (BTreeSet::new(), BTreeSet::new());
    for dir in kustomization_dirs() {
        let k = kustomization(&dir);
        for r in &k.resources {
            let path = dir.join(r);
            assert!(
                path.exists(),
                "{}: resource {r} does not exist",
                dir.display()
            );
            if path.is_dir() {
                let kind = kustomization(&path).kind;
                assert_eq!(kind, "Kustomization", "{}: resource {r}", dir.display());
            } else {
                resources.insert(canonical(&path));
            }
        }
        for c in &k.components {
            let path = dir.join(c);
            assert!(
                path.is_dir(),
                "{}: component {c} is not a directory",
                dir.display()
            );
            assert_eq!(
                kustomization(&path).kind,
                "Component",
                "{}: {c}",
                dir.display()
            );
        }
        for p in &k.patches {
            let path = dir.join(&p.path);
            assert!(
                path.is_file(),
                "{}: patch {} does not exist",
                dir.display(),
                p.path
            );
            patches.insert(canonical(&path));
        }
    }
    (resources, patches)
}

#[test]
fn every_kustomization_lists_files_that_exist_and_every_manifest_is_listed() {
    let (resources, patches) = listed_files();
    let local_test = root().join("deploy/local-test");
    let script = std::fs::read_to_string(root().join("deploy/local-test.sh")).expect("script");
    for file in yaml_files(&root().join("deploy")) {
        if file.file_name().is_some_and(|n| n == "kustomization.yaml") {
            continue;
        }
        if file.starts_with(&local_test) {
            let rel = file.strip_prefix(root()).expect("in the project");
            assert!(
                script.contains(&rel.display().to_string()),
                "{} is not used by local-test.sh",
                rel.display()
            );
            continue;
        }
        let file = canonical(&file);
        assert!(
            resources.contains(&file) || patches.contains(&file),
            "{} is in no kustomization",
            file.display()
        );
    }
}

#[test]
fn every_object_in_deploy_and_crds_is_typed_with_no_unknown_field() {
    let (_, patches) = listed_files();
    let mut files = yaml_files(&root().join("deploy"));
    // The OpenAPI documents of built-in kinds are API server answers, not manifests.
    let openapi = root().join("crds/upstream/kube-openapi");
    files.extend(
        yaml_files(&root().join("crds"))
            .into_iter()
            .filter(|f| !f.starts_with(&openapi)),
    );
    let mut checked = 0;
    let mut errors = Vec::new();
    for file in files {
        if file.file_name().is_some_and(|n| n == "kustomization.yaml")
            || file.starts_with(root().join("deploy/local-test"))
        {
            continue;
        }
        let partial = patches.contains(&canonical(&file));
        for doc in documents(&file) {
            checked += 1;
            if let Err(e) = check_object(&doc, partial) {
                errors.push(format!("{}: {e}", file.display()));
            }
        }
    }
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(checked >= 22, "{checked} objects");
}

#[test]
fn a_misspelt_field_fails_the_typed_check() {
    let mut deployment = documents(&root().join("deploy/base/deployment.yaml")).remove(0);
    let container = &mut deployment["spec"]["template"]["spec"]["containers"][0];
    let probe = container
        .as_object_mut()
        .expect("container")
        .remove("readinessProbe")
        .expect("readinessProbe");
    container["readinesProbe"] = probe;
    let error = check_object(&deployment, false).expect_err("a typo");
    assert_eq!(
        error,
        "unknown fields: spec.template.spec.containers.0.readinesProbe"
    );
    let mut certificate =
        documents(&root().join("deploy/components/cert-manager/certificate.yaml")).remove(1);
    certificate["spec"]["dnsName"] = Value::String("x".into());
    let error = check_object(&certificate, false).expect_err("a typo");
    assert!(error.contains("unknown field `dnsName`"), "{error}");
}

// ---------------------------------------------------------------------------------------
// Rendering, as kustomize does for what deploy/ uses

/// The objects `dir`'s kustomization renders: resources, then each component's resources
/// and patches, then its own patches (strategic merge: maps merge, lists of named items
/// merge by name with the patch's items first, other lists and values are replaced).
fn render(dir: &Path) -> Vec<Value> {
    let k = kustomization(dir);
    let mut objects = Vec::new();
    for r in &k.resources {
        let path = dir.join(r);
        if path.is_dir() {
            objects.extend(render(&path));
        } else {
            objects.extend(documents(&path));
        }
    }
    for c in &k.components {
        let component = dir.join(c);
        let ck = kustomization(&component);
        for r in &ck.resources {
            objects.extend(documents(&component.join(r)));
        }
        apply_patches(&mut objects, &component, &ck.patches);
    }
    apply_patches(&mut objects, dir, &k.patches);
    objects
}

fn apply_patches(objects: &mut [Value], dir: &Path, patches: &[PatchRef]) {
    for p in patches {
        for patch in documents(&dir.join(&p.path)) {
            let target = objects
                .iter_mut()
                .find(|o| {
                    o["kind"] == patch["kind"] && o["metadata"]["name"] == patch["metadata"]["name"]
                })
                .unwrap_or_else(|| panic!("{}: no object to patch", p.path));
            strategic_merge(target, &patch);
        }
    }
}

fn strategic_merge(target: &mut Value, patch: &Value) {
    let named = |items: &[Value]| items.iter().all(|i| i.get("name").is_some());
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (key, value) in p {
                match t.get_mut(key) {
                    Some(existing) => strategic_merge(existing, value),
                    None => {
                        t.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (Value::Array(t), Value::Array(p)) if named(t) && named(p) => {
            let mut merged = Vec::new();
            for item in p {
                match t.iter().position(|i| i["name"] == item["name"]) {
                    Some(at) => {
                        let mut existing = t.remove(at);
                        strategic_merge(&mut existing, item);
                        merged.push(existing);
                    }
                    None => merged.push(item.clone()),
                }
            }
            merged.append(t);
            *t = merged;
        }
        (t, p) => *t = p.clone(),
    }
}

/// `kubectl kustomize dir`, when kubectl is installed.
fn kubectl_kustomize(dir: &Path) -> Option<Vec<Value>> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    Some(
        composition_webhook::document::parse_documents("kustomize", &text)
            .expect("kustomize output")
            .into_iter()
            .map(|d| d.value)
            .collect(),
    )
}

fn key(o: &Value) -> String {
    format!("{}/{}", o["kind"], o["metadata"]["name"])
}

/// The installs: deploy/ and each overlay, with the mode and certificates each promises.
const INSTALLS: [(&str, &str, Certificates); 5] = [
    ("deploy", "loose", Certificates::SelfSigned),
    ("deploy/overlays/strict", "strict", Certificates::SelfSigned),
    ("deploy/overlays/warn", "warn", Certificates::SelfSigned),
    (
        "deploy/overlays/cert-manager",
        "loose",
        Certificates::CertManager,
    ),
    (
        "deploy/overlays/change-impact",
        "loose",
        Certificates::SelfSigned,
    ),
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Certificates {
    SelfSigned,
    CertManager,
}

#[test]
fn every_overlay_is_an_install_that_agrees_with_the_binary() {
    let mut compared = 0;
    for (dir, mode, certificates) in INSTALLS {
        let objects = render(&root().join(dir));
        for o in &objects {
            check_object(o, false).unwrap_or_else(|e| panic!("{dir}: {}: {e}", key(o)));
        }
        if let Some(rendered) = kubectl_kustomize(&root().join(dir)) {
            let ours: BTreeMap<String, &Value> = objects.iter().map(|o| (key(o), o)).collect();
            let theirs: BTreeMap<String, &Value> = rendered.iter().map(|o| (key(o), o)).collect();
            assert_eq!(
                ours.keys().collect::<Vec<_>>(),
                theirs.keys().collect::<Vec<_>>(),
                "{dir}"
            );
            for (k, o) in &ours {
                assert_eq!(o, &theirs[k], "{dir}: {k} renders differently with kubectl");
            }
            compared += 1;
        }
        Install::new(dir, &objects).check(mode, certificates);
    }
    if compared == 0 {
        eprintln!("kubectl is not installed: the renders were not compared with kubectl kustomize");
    }
}

/// A rendered install's objects, by kind.
struct Install<'a> {
    dir: &'a str,
    objects: &'a [Value],
}

impl<'a> Install<'a> {
    fn new(dir: &'a str, objects: &'a [Value]) -> Self {
        Install { dir, objects }
    }

    fn all<T: DeserializeOwned>(&self, kind: &str) -> Vec<T> {
        self.objects
            .iter()
            .filter(|o| o["kind"] == kind)
            .map(|o| typed::<T>(o).unwrap_or_else(|e| panic!("{}: {kind}: {e}", self.dir)))
            .collect()
    }

    fn one<T: DeserializeOwned>(&self, kind: &str) -> T {
        let mut all = self.all::<T>(kind);
        assert_eq!(all.len(), 1, "{}: one {kind}", self.dir);
        all.remove(0)
    }

    fn check(&self, mode: &str, certificates: Certificates) {
        let dir = self.dir;
        let namespace: Namespace = self.one("Namespace");
        let ns = namespace.metadata.name.clone().expect("namespace name");
        let deployment: Deployment = self.one("Deployment");
        let service: Service = self.one("Service");
        let config: ValidatingWebhookConfiguration = self.one("ValidatingWebhookConfiguration");
        let account: ServiceAccount = self.one("ServiceAccount");
        let pdb: PodDisruptionBudget = self.one("PodDisruptionBudget");
        for namespaced in [
            &deployment.metadata,
            &service.metadata,
            &account.metadata,
            &pdb.metadata,
        ] {
            assert_eq!(namespaced.namespace.as_deref(), Some(ns.as_str()), "{dir}");
        }

        // The pod: two replicas kept apart, locked down, probed on the operations port.
        let spec = &deployment.spec;
        assert_eq!(spec.replicas, Some(2), "{dir}");
        let pod_labels = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .expect("pod labels");
        let selects =
            |selector: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>| {
                selector
                    .as_ref()
                    .and_then(|s| s.match_labels.as_ref())
                    .is_some_and(|m| m.iter().all(|(k, v)| pod_labels.get(k) == Some(v)))
            };
        assert!(selects(&Some(spec.selector.clone())), "{dir}");
        let pdb_spec = pdb.spec.as_ref().expect("PDB spec");
        assert!(
            selects(&pdb_spec.selector),
            "{dir}: the PDB selects the pods"
        );
        assert_eq!(pdb_spec.min_available, Some(IntOrString::Int(1)), "{dir}");
        let pod = spec.template.spec.as_ref().expect("pod spec");
        let spread = pod.topology_spread_constraints.as_ref().expect("spread");
        assert!(
            spread
                .iter()
                .any(|c| c.topology_key == "kubernetes.io/hostname" && selects(&c.label_selector)),
            "{dir}: replicas spread over nodes"
        );
        assert_eq!(
            pod.service_account_name.as_deref(),
            account.metadata.name.as_deref(),
            "{dir}"
        );
        let pod_security = pod.security_context.as_ref().expect("pod securityContext");
        assert_eq!(pod_security.run_as_non_root, Some(true), "{dir}");
        assert_eq!(
            pod_security
                .seccomp_profile
                .as_ref()
                .map(|p| p.type_.as_str()),
            Some("RuntimeDefault"),
            "{dir}"
        );
        assert_eq!(pod.containers.len(), 1, "{dir}");
        let container = &pod.containers[0];
        let security = container
            .security_context
            .as_ref()
            .expect("securityContext");
        assert_eq!(security.allow_privilege_escalation, Some(false), "{dir}");
        assert_eq!(security.read_only_root_filesystem, Some(true), "{dir}");
        assert_eq!(
            security.capabilities.as_ref().and_then(|c| c.drop.clone()),
            Some(vec!["ALL".to_string()]),
            "{dir}"
        );
        let resources = container.resources.as_ref().expect("resources");
        for set in [&resources.requests, &resources.limits] {
            let set = set.as_ref().expect("requests and limits");
            assert!(
                set.contains_key("cpu") && set.contains_key("memory"),
                "{dir}"
            );
        }

        // Its settings, read by the binary's own flags.
        let serve = serve_settings(container, &ns);
        let port_of = |name: &str| {
            container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("{dir}: port {name}"))
                .container_port
        };
        let admission = serve.address("address");
        let operations = serve.address("operations_address");
        assert_eq!(
            admission.port(),
            composition_webhook::server::DEFAULT_PORT,
            "{dir}"
        );
        assert_eq!(i32::from(admission.port()), port_of("https"), "{dir}");
        assert_eq!(
            operations.port(),
            composition_webhook::server::DEFAULT_OPERATIONS_PORT,
            "{dir}"
        );
        assert_eq!(i32::from(operations.port()), port_of("ops"), "{dir}");
        for (probe, path) in [
            (&container.readiness_probe, "/readyz"),
            (&container.liveness_probe, "/livez"),
        ] {
            let get = probe
                .as_ref()
                .and_then(|p| p.http_get.as_ref())
                .expect("HTTP probe");
            assert_eq!(get.path.as_deref(), Some(path), "{dir}");
            assert_eq!(get.port, IntOrString::String("ops".into()), "{dir}");
        }
        assert_eq!(serve.value("mode"), mode, "{dir}");
        assert!(
            serve.values("crds").is_empty() && serve.value("kubeconfig").is_empty(),
            "{dir}: schemas come from the cluster, in-cluster"
        );

        // The Service reaches the admission port.
        let service_spec = service.spec.as_ref().expect("service spec");
        let service_port = &service_spec.ports.as_ref().expect("ports")[0];
        assert_eq!(
            service_port.target_port,
            Some(IntOrString::String("https".into())),
            "{dir}"
        );
        let selector = service_spec.selector.clone().expect("selector");
        assert!(
            selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)),
            "{dir}"
        );

        // The webhook: Compositions, create and update, through the Service to /validate.
        let webhooks = config.webhooks.as_ref().expect("webhooks");
        let impact = dir.ends_with("change-impact");
        assert_eq!(webhooks.len(), 1 + usize::from(impact), "{dir}");
        let named = |name: &str| {
            webhooks
                .iter()
                .find(|w| w.name == name)
                .unwrap_or_else(|| panic!("{dir}: webhook {name}"))
        };
        let webhook = named("compositions.composition-webhook.crossplane.io");
        assert_eq!(
            webhook.admission_review_versions,
            ["v1", "v1beta1"],
            "{dir}"
        );
        assert_eq!(webhook.side_effects, "None", "{dir}");
        assert_eq!(webhook.failure_policy.as_deref(), Some("Fail"), "{dir}");
        assert_eq!(webhook.match_policy.as_deref(), Some("Equivalent"), "{dir}");
        assert_eq!(webhook.timeout_seconds, Some(10), "{dir}");
        let rules = webhook.rules.as_ref().expect("rules");
        assert_eq!(rules.len(), 1, "{dir}");
        let rule = &rules[0];
        assert_eq!(
            rule.api_groups.as_deref(),
            Some(&[composition_webhook::model::APIEXTENSIONS_GROUP.to_string()][..]),
            "{dir}"
        );
        assert_eq!(rule.api_versions.as_deref(), Some(&["v1".to_string()][..]));
        assert_eq!(
            rule.resources.as_deref(),
            Some(&["compositions".to_string()][..])
        );
        assert_eq!(
            rule.operations.as_deref(),
            Some(&["CREATE".to_string(), "UPDATE".to_string()][..])
        );
        let target = webhook
            .client_config
            .service
            .as_ref()
            .expect("service reference");
        assert_eq!(Some(&target.name), service.metadata.name.as_ref(), "{dir}");
        assert_eq!(target.namespace, ns, "{dir}");
        assert_eq!(target.port, Some(service_port.port), "{dir}");
        assert_eq!(
            target.path.as_deref(),
            Some(composition_webhook::server::VALIDATE_PATH),
            "{dir}"
        );
        let dns_name = format!("{}.{ns}.svc", target.name);

        // Change impact: a second webhook for UPDATEs of definitions, never blocking them.
        if impact {
            let definitions = named("definitions.composition-webhook.crossplane.io");
            assert_eq!(
                definitions.failure_policy.as_deref(),
                Some("Ignore"),
                "{dir}"
            );
            assert_eq!(definitions.side_effects, "None", "{dir}");
            assert_eq!(definitions.timeout_seconds, Some(5), "{dir}");
            assert_eq!(
                definitions.client_config.service.as_ref(),
                Some(target),
                "{dir}"
            );
            let rules: Vec<(String, String, String, Vec<String>)> = definitions
                .rules
                .iter()
                .flatten()
                .map(|r| {
                    let one = |v: &Option<Vec<String>>| v.clone().unwrap_or_default().join(",");
                    (
                        one(&r.api_groups),
                        one(&r.api_versions),
                        one(&r.resources),
                        r.operations.clone().unwrap_or_default(),
                    )
                })
                .collect();
            let update = || vec!["UPDATE".to_string()];
            let rule =
                |g: &str, v: &str, r: &str| (g.to_string(), v.to_string(), r.to_string(), update());
            assert_eq!(
                rules,
                [
                    rule("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
                    rule(
                        "apiextensions.crossplane.io",
                        "v1",
                        "compositeresourcedefinitions"
                    ),
                    rule(
                        "apiextensions.crossplane.io",
                        "v1alpha1",
                        "managedresourcedefinitions"
                    ),
                ],
                "{dir}"
            );
        }

        // RBAC: read CRDs, MRDs, MRAPs, XRDs, Functions and FunctionRevisions; self-signed, get and patch this
        // configuration only.
        let roles: Vec<ClusterRole> = self.all("ClusterRole");
        let bindings: Vec<ClusterRoleBinding> = self.all("ClusterRoleBinding");
        let binds_the_account = |subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>| {
            subjects.iter().flatten().any(|s| {
                s.kind == "ServiceAccount"
                    && Some(&s.name) == account.metadata.name.as_ref()
                    && s.namespace.as_deref() == Some(ns.as_str())
            })
        };
        let mut granted: Vec<PolicyRule> = Vec::new();
        for binding in &bindings {
            assert!(
                binds_the_account(&binding.subjects),
                "{dir}: {:?} binds the webhook's service account",
                binding.metadata.name
            );
            let role = roles
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(binding.role_ref.name.as_str()))
                .unwrap_or_else(|| panic!("{dir}: role {}", binding.role_ref.name));
            granted.extend(role.rules.iter().flatten().cloned());
        }
        assert_eq!(roles.len(), bindings.len(), "{dir}: every role is bound");
        let rule = |group: &str, resource: &str, names: Option<&str>, verbs: &[&str]| PolicyRule {
            api_groups: Some(vec![group.into()]),
            resources: Some(vec![resource.into()]),
            resource_names: names.map(|n| vec![n.to_string()]),
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            non_resource_urls: None,
        };
        let mut wanted = vec![
            rule(
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                None,
                &["get", "list", "watch"],
            ),
            rule(
                "apiextensions.crossplane.io",
                "compositeresourcedefinitions",
                None,
                &["get", "list", "watch"],
            ),
            rule(
                "apiextensions.crossplane.io",
                "managedresourcedefinitions",
                None,
                &["get", "list", "watch"],
            ),
            rule(
                "apiextensions.crossplane.io",
                "managedresourceactivationpolicies",
                None,
                &["get", "list", "watch"],
            ),
            rule(
                "pkg.crossplane.io",
                "functions",
                None,
                &["get", "list", "watch"],
            ),
            // Calls to the cluster's functions: where each answers.
            rule(
                "pkg.crossplane.io",
                function_endpoints::REVISIONS_PLURAL,
                None,
                &["get", "list", "watch"],
            ),
            // What their steps most often require, read to answer them.
            rule(
                "apiextensions.crossplane.io",
                "environmentconfigs",
                None,
                &["get", "list"],
            ),
        ];

        // The audit: read Compositions, record Events, keep the ClusterPolicyReport.
        assert!(serve.flag("audit"), "{dir}: the audit is on");
        assert_eq!(serve.flag("change_impact"), impact, "{dir}: change impact");
        assert!(
            !serve.flag("deny_breaking_changes"),
            "{dir}: warnings, not denials"
        );
        wanted.extend([
            rule(
                "apiextensions.crossplane.io",
                "compositions",
                None,
                &["get", "list", "watch"],
            ),
            rule("events.k8s.io", "events", None, &["create", "patch"]),
            rule(
                "wgpolicyk8s.io",
                "clusterpolicyreports",
                None,
                &["get", "create", "patch", "update"],
            ),
        ]);

        let config_name = config.metadata.name.clone().expect("name");
        match certificates {
            Certificates::SelfSigned => {
                assert!(serve.flag("self_signed"), "{dir}");
                assert_eq!(serve.values("self_signed_dns_names"), [dns_name], "{dir}");
                assert_eq!(serve.value("webhook_configuration"), config_name, "{dir}");
                wanted.push(rule(
                    "admissionregistration.k8s.io",
                    "validatingwebhookconfigurations",
                    Some(&config_name),
                    &["get", "patch"],
                ));
                assert!(self.all::<Certificate>("Certificate").is_empty(), "{dir}");
            }
            Certificates::CertManager => {
                assert!(!serve.flag("self_signed"), "{dir}");
                let certificate: Certificate = self.one("Certificate");
                let _: Issuer = self.one("Issuer");
                assert!(
                    certificate.spec.dns_names.contains(&dns_name),
                    "{dir}: {:?}",
                    certificate.spec.dns_names
                );
                let annotation = config
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("cert-manager.io/inject-ca-from"))
                    .expect("CA injection annotation");
                assert_eq!(
                    annotation,
                    &format!(
                        "{}/{}",
                        certificate
                            .metadata
                            .namespace
                            .as_deref()
                            .unwrap_or_default(),
                        certificate.metadata.name.as_deref().unwrap_or_default()
                    ),
                    "{dir}"
                );
                assert_eq!(certificate.metadata.namespace.as_deref(), Some(ns.as_str()));
                // The Secret is mounted where the certificate flags point.
                let volume = pod
                    .volumes
                    .iter()
                    .flatten()
                    .find(|v| {
                        v.secret.as_ref().and_then(|s| s.secret_name.as_deref())
                            == Some(certificate.spec.secret_name.as_str())
                    })
                    .expect("the certificate's Secret as a volume");
                let mount = container
                    .volume_mounts
                    .iter()
                    .flatten()
                    .find(|m| m.name == volume.name)
                    .expect("mounted");
                assert_eq!(
                    serve.value("tls_cert_file"),
                    format!("{}/tls.crt", mount.mount_path),
                    "{dir}"
                );
                assert_eq!(
                    serve.value("tls_key_file"),
                    format!("{}/tls.key", mount.mount_path),
                    "{dir}"
                );
            }
        }
        granted.sort_by_key(|r| format!("{r:?}"));
        wanted.sort_by_key(|r| format!("{r:?}"));
        assert_eq!(granted, wanted, "{dir}: RBAC");

        // The audit's Lease: in the namespace the binary looks in, create, and get and update
        // of the Lease it holds only, bound to the webhook's service account.
        let lease = serve.value("audit_lease");
        assert_eq!(lease, "composition-webhook-audit", "{dir}");
        assert_eq!(serve.value("audit_lease_namespace"), ns, "{dir}");
        let roles: Vec<Role> = self.all("Role");
        let bindings: Vec<RoleBinding> = self.all("RoleBinding");
        assert_eq!(
            (roles.len(), bindings.len()),
            (2, 2),
            "{dir}: the Lease's and the client certificate's Roles and RoleBindings"
        );
        let named = |name: &str| {
            let role = roles
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("{dir}: Role {name}"))
                .clone();
            let binding = bindings
                .iter()
                .find(|b| b.metadata.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("{dir}: RoleBinding {name}"))
                .clone();
            (role, binding)
        };
        let (role, binding) = named("composition-webhook-audit-lease");
        for meta in [&role.metadata, &binding.metadata] {
            assert_eq!(meta.namespace.as_deref(), Some(ns.as_str()), "{dir}");
        }
        assert_eq!(
            (binding.role_ref.kind.as_str(), Some(&binding.role_ref.name)),
            ("Role", role.metadata.name.as_ref()),
            "{dir}"
        );
        assert!(
            binds_the_account(&binding.subjects),
            "{dir}: the Lease's RoleBinding binds the webhook's service account"
        );
        assert_eq!(
            role.rules.unwrap_or_default(),
            [
                rule("coordination.k8s.io", "leases", None, &["create"]),
                rule(
                    "coordination.k8s.io",
                    "leases",
                    Some(&lease),
                    &["get", "update"]
                ),
            ],
            "{dir}: the Lease's RBAC"
        );

        // Calls to the cluster's functions: get, list and watch of the client certificate
        // Secret alone, in Crossplane's namespace (the binary's default), bound to the
        // webhook's service account.
        let (role, binding) = named("composition-webhook-function-calls");
        for meta in [&role.metadata, &binding.metadata] {
            assert_eq!(
                meta.namespace.as_deref(),
                Some(function_endpoints::DEFAULT_NAMESPACE),
                "{dir}"
            );
        }
        assert_eq!(
            (binding.role_ref.kind.as_str(), Some(&binding.role_ref.name)),
            ("Role", role.metadata.name.as_ref()),
            "{dir}"
        );
        assert!(
            binds_the_account(&binding.subjects),
            "{dir}: the client certificate's RoleBinding binds the webhook's service account"
        );
        assert_eq!(
            role.rules.unwrap_or_default(),
            [rule(
                "",
                function_endpoints::SECRETS_PLURAL,
                Some(function_endpoints::CLIENT_SECRET),
                &["get", "list", "watch"]
            )],
            "{dir}: the client certificate's RBAC"
        );
    }
}

/// A container's `serve` settings as the binary reads them: its arguments, then each
/// `COMPOSITION_WEBHOOK_*` variable as the flag that reads it (`$(VAR)` expanded as the
/// kubelet does, from variables defined earlier).
struct ServeSettings(clap::ArgMatches);

fn serve_settings(container: &Container, namespace: &str) -> ServeSettings {
    let command = composition_webhook::cli::command();
    let serve = command
        .find_subcommand("serve")
        .expect("serve subcommand")
        .clone();
    let flags: BTreeMap<String, clap::Arg> = serve
        .get_arguments()
        .filter_map(|a| {
            a.get_env()
                .map(|e| (e.to_string_lossy().into_owned(), a.clone()))
        })
        .collect();
    let mut argv = vec!["composition-webhook".to_string()];
    argv.extend(container.args.iter().flatten().cloned());
    assert_eq!(argv.get(1).map(String::as_str), Some("serve"));
    let mut defined: BTreeMap<String, String> = BTreeMap::new();
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (Some(v), None) => expand(v, &defined),
            (None, Some(from)) => {
                let field = from.field_ref.as_ref().expect("fieldRef");
                assert_eq!(field.field_path, "metadata.namespace");
                namespace.to_owned()
            }
            other => panic!("{}: {other:?}", var.name),
        };
        defined.insert(var.name.clone(), value.clone());
        if !var.name.starts_with("COMPOSITION_WEBHOOK_") {
            continue;
        }
        let flag = flags
            .get(&var.name)
            .unwrap_or_else(|| panic!("{} is not a variable the binary reads", var.name));
        let long = flag.get_long().expect("long flag");
        if flag.get_action().takes_values() {
            argv.push(format!("--{long}={value}"));
        } else {
            assert_eq!(value, "true", "{}", var.name);
            argv.push(format!("--{long}"));
        }
    }
    let matches = command
        .try_get_matches_from(&argv)
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    ServeSettings(matches.subcommand_matches("serve").expect("serve").clone())
}

/// `$(NAME)` replaced by an earlier variable's value; an unknown name fails the test, since
/// the kubelet would leave it as it is.
fn expand(value: &str, defined: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("$(") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find(')').expect("closing )") + start;
        let name = &rest[start + 2..end];
        out.push_str(
            defined
                .get(name)
                .unwrap_or_else(|| panic!("$({name}) in {value:?} is not defined before it")),
        );
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

impl ServeSettings {
    fn values(&self, id: &str) -> Vec<String> {
        self.0
            .get_raw(id)
            .into_iter()
            .flatten()
            .map(|v| v.to_string_lossy().into_owned())
            .collect()
    }

    fn value(&self, id: &str) -> String {
        self.values(id).join(",")
    }

    fn flag(&self, id: &str) -> bool {
        self.0.get_flag(id)
    }

    fn address(&self, id: &str) -> std::net::SocketAddr {
        *self.0.get_one::<std::net::SocketAddr>(id).expect(id)
    }
}

// ---------------------------------------------------------------------------------------
// deploy/local-test.sh's Compositions

#[test]
fn local_test_compositions_get_the_verdicts_the_script_expects() {
    // The local test's Compositions are Pipelines: the same for Crossplane v1's and v2's
    // API servers.
    for version in ["v1", "v2"] {
        local_test_verdicts(version);
    }
}

fn local_test_verdicts(version: &str) {
    let validate = |file: &str, mode: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_composition-webhook"))
            .current_dir(root())
            .args([
                "validate",
                "--crossplane-version",
                version,
                "--crds",
                "testdata/crds",
                "--crds",
                "testdata/example/definition.yaml",
                "--mode",
                mode,
                "--output",
                "json",
                file,
            ])
            .output()
            .expect("run validate");
        let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
        let findings: Vec<String> = report["compositions"][0]["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .map(|f| {
                format!(
                    "{}: {}",
                    f["severity"].as_str().unwrap_or(""),
                    f["message"].as_str().unwrap_or("")
                )
            })
            .collect();
        (out.status.code(), findings)
    };
    assert_eq!(
        validate("deploy/local-test/valid.yaml", "loose"),
        (Some(0), vec![])
    );
    let (code, findings) = validate("deploy/local-test/invalid.yaml", "loose");
    assert_eq!(code, Some(1));
    assert_eq!(
        findings,
        [
            "error: spec.pipeline[0].input.resources[0].patches[1].toFieldPath: Invalid value: \"spec.forProvider.autoCreateSubnetwork\": field 'autoCreateSubnetwork' is not valid according to the schema; did you mean \"autoCreateSubnetworks\"?",
            "error: spec.pipeline[0].input.resources[0].patches[2].transforms: Required value: the fromFieldPath does not have a type compatible with the toFieldPath according to their schemas and no transforms were provided: string != boolean (a convert transform with toType: bool would do)",
        ]
    );
    let missing = "spec.pipeline[0].input.resources[1].base: Not found: \"compute.gcp.upbound.io/v1beta1, Kind=Subnetworkk\": no CRD, MRD or XRD defines Subnetworkk.compute.gcp.upbound.io; checks that need the schema of this resource were skipped";
    assert_eq!(
        validate("deploy/local-test/missing-schema.yaml", "loose"),
        (Some(0), vec![format!("warning: {missing}")])
    );
    let (code, _) = validate("deploy/local-test/missing-schema.yaml", "strict");
    assert_eq!(code, Some(1));
    // Only labelled Compositions reach the script's webhook.
    for file in ["valid", "invalid", "missing-schema"] {
        let doc = documents(&root().join(format!("deploy/local-test/{file}.yaml"))).remove(0);
        assert_eq!(
            doc["metadata"]["labels"]["composition-webhook.crossplane.io/local-test"],
            "true"
        );
    }
}
