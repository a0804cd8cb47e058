//! Scope rules of Crossplane v2: a namespaced composite resource (XR) composes only
//! namespaced resources.
//!
//! Crossplane v2.3.4 `internal/controller/apiextensions/composite/composition_functions.go`
//! (`FunctionComposer.Compose`): for a namespaced XR, a desired composed resource without a
//! namespace whose kind the REST mapper says is cluster scoped fails the whole composition
//! with `errFmtNamespacedXRClusterResource`. A resource with a namespace is not checked (its
//! namespace is then replaced by the XR's, `RenderComposedResourceMetadata`). Cluster and
//! LegacyCluster XRs may compose cluster scoped resources or namespaced ones in any namespace
//! (the comments of `RenderComposedResourceMetadata` and `ObserveComposedResources`): nothing
//! is checked for them.

use crate::findings::{FieldError, Finding, Path, Stage};
use crate::model::{ComposedTemplate, Composition};
use crate::schema::{Scope, split_api_version};

use super::lookup::{SchemaSource, is_builtin_group};

/// Whether the Composition's XR is namespaced; `None` when its definition is unknown.
pub fn composite_is_namespaced(c: &Composition, source: &dyn SchemaSource) -> Option<bool> {
    let type_ref = &c.spec.composite_type_ref;
    let (group, version) = split_api_version(&type_ref.api_version)?;
    let info = source.resolve(group, &type_ref.kind, version).ok()?;
    Some(info.scope == Scope::Namespaced)
}

/// One error per template of a namespaced XR whose base is of a cluster scoped kind and
/// has no namespace; `at` holds the `resources` list.
pub fn check(templates: &[ComposedTemplate], at: &Path, source: &dyn SchemaSource) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (i, t) in templates.iter().enumerate() {
        if crate::budget::step().is_err() {
            break;
        }
        let (Some(api_version), Some(kind)) = (t.base_api_version(), t.base_kind()) else {
            continue;
        };
        let Some((group, version)) = split_api_version(api_version) else {
            continue;
        };
        if has_namespace(t) || !cluster_scoped(source, group, kind, version) {
            continue;
        }
        let name = t.name.as_deref().unwrap_or_default();
        let object_name = t
            .base
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or_default();
        let mut detail = format!(
            "{kind} is cluster scoped and a namespaced composite resource composes only namespaced resources: Crossplane fails with \"cannot apply cluster scoped composed resource {name:?} (a {kind} named {object_name}) for a namespaced composite resource.\""
        );
        if let Some(equivalent) = namespaced_equivalent(source, group, kind, version) {
            detail.push_str(&format!(
                "; {kind} of {equivalent} is namespaced: use apiVersion {equivalent}"
            ));
        }
        let base = at.child("resources").index(i).child("base");
        findings.push(Finding::new(
            Stage::Schema,
            FieldError::invalid(base.child("apiVersion"), api_version, detail),
        ));
    }
    findings
}

/// The template sets its namespace (in its base or by a patch): Crossplane skips the check.
fn has_namespace(t: &ComposedTemplate) -> bool {
    t.base
        .pointer("/metadata/namespace")
        .and_then(|n| n.as_str())
        .is_some_and(|n| !n.is_empty())
        || t.patches
            .iter()
            .any(|p| p.to_field_path.as_deref() == Some("metadata.namespace"))
}

fn cluster_scoped(source: &dyn SchemaSource, group: &str, kind: &str, version: &str) -> bool {
    if is_builtin_group(group) {
        return BUILTIN_CLUSTER_SCOPED.contains(&(group, kind));
    }
    // Unknown kinds are reported by the lookups.
    source
        .resolve(group, kind, version)
        .is_ok_and(|info| info.scope == Scope::Cluster)
}

/// The namespaced kind of the same name that Crossplane v2 providers offer, as `apiVersion`,
/// when the schemas know it. Upjet names the namespaced root group `aws.m.upbound.io` for
/// `aws.upbound.io` (provider-upjet-aws v2.6.0 `config/registry_namespaced.go`,
/// `WithRootGroup`), service groups follow: `s3.aws.m.upbound.io` for `s3.aws.upbound.io`.
/// So `m` goes before the last two labels (provider-kubernetes does the same:
/// `kubernetes.m.crossplane.io`).
fn namespaced_equivalent(
    source: &dyn SchemaSource,
    group: &str,
    kind: &str,
    version: &str,
) -> Option<String> {
    let labels: Vec<&str> = group.split('.').collect();
    if labels.len() < 3 {
        return None;
    }
    let (head, domain) = labels.split_at(labels.len() - 2);
    let m_group = format!("{}.m.{}", head.join("."), domain.join("."));
    let info = source.resolve(&m_group, kind, version).ok()?;
    if info.scope != Scope::Namespaced {
        return None;
    }
    let v = if info.served_versions.iter().any(|v| v == version) {
        version.to_string()
    } else {
        info.served_versions.first()?.clone()
    };
    Some(format!("{m_group}/{v}"))
}

/// Cluster scoped kinds built into Kubernetes (`kubectl api-resources --namespaced=false`,
/// Kubernetes 1.33), by group and kind.
const BUILTIN_CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("resource.k8s.io", "DeviceClass"),
];
