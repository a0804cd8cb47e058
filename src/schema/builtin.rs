//! The schemas of built-in kinds (Deployment, Service, ConfigMap, ...) for validation
//! without a cluster: the OpenAPI v3 documents a real kube-apiserver v1.28.4 serves for 14
//! group versions, embedded unchanged (`crds/upstream/kube-openapi/v1.28.4/`, fetched with
//! `kubectl get --raw /openapi/v3/<path>`; to regenerate, fetch the same paths from an API
//! server of another version and replace the files and [`KUBERNETES_VERSION`]).
//!
//! A document is parsed the first time one of its kinds is needed, and each kind's schema
//! converted once ([`super::openapi`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::Scope;
use super::openapi::{Document, Gvk};
use super::structural::Schema;

/// The Kubernetes version the embedded documents come from.
pub const KUBERNETES_VERSION: &str = "v1.28.4";

macro_rules! document {
    ($group:literal, $version:literal, $file:literal) => {
        (
            $group,
            $version,
            include_str!(concat!("../../crds/upstream/kube-openapi/v1.28.4/", $file)),
        )
    };
}

/// Each embedded group version: group, version, document text.
const DOCUMENTS: [(&str, &str, &str); 14] = [
    document!("", "v1", "api__v1.json"),
    document!(
        "admissionregistration.k8s.io",
        "v1",
        "apis__admissionregistration.k8s.io__v1.json"
    ),
    document!(
        "apiextensions.k8s.io",
        "v1",
        "apis__apiextensions.k8s.io__v1.json"
    ),
    document!("apps", "v1", "apis__apps__v1.json"),
    document!("autoscaling", "v2", "apis__autoscaling__v2.json"),
    document!("batch", "v1", "apis__batch__v1.json"),
    document!(
        "certificates.k8s.io",
        "v1",
        "apis__certificates.k8s.io__v1.json"
    ),
    document!(
        "coordination.k8s.io",
        "v1",
        "apis__coordination.k8s.io__v1.json"
    ),
    document!("discovery.k8s.io", "v1", "apis__discovery.k8s.io__v1.json"),
    document!(
        "networking.k8s.io",
        "v1",
        "apis__networking.k8s.io__v1.json"
    ),
    document!("policy", "v1", "apis__policy__v1.json"),
    document!(
        "rbac.authorization.k8s.io",
        "v1",
        "apis__rbac.authorization.k8s.io__v1.json"
    ),
    document!(
        "scheduling.k8s.io",
        "v1",
        "apis__scheduling.k8s.io__v1.json"
    ),
    document!("storage.k8s.io", "v1", "apis__storage.k8s.io__v1.json"),
];

/// A built-in kind's schema.
#[derive(Debug, Clone)]
pub struct BuiltIn {
    /// The schema of the requested version.
    pub schema: Arc<Schema>,
    /// Namespaced or cluster-scoped.
    pub scope: Scope,
    /// The versions of the group the embedded documents have.
    pub versions: Vec<String>,
}

/// The embedded built-in kinds.
#[derive(Debug, Default)]
pub struct BuiltIns {
    documents: [OnceLock<Option<Document>>; 14],
    schemas: Mutex<HashMap<Gvk, Option<BuiltIn>, crate::hashing::ByInput>>,
}

impl BuiltIns {
    /// The process' embedded built-in kinds (documents parsed on first need).
    pub fn embedded() -> &'static BuiltIns {
        static BUILT_INS: OnceLock<BuiltIns> = OnceLock::new();
        BUILT_INS.get_or_init(BuiltIns::default)
    }

    /// Whether `group` has an embedded document (at some version).
    pub fn has_group(group: &str) -> bool {
        DOCUMENTS.iter().any(|(g, _, _)| *g == group)
    }

    /// The schema of `group`, `kind` at `version`, if the embedded documents define it.
    pub fn resolve(&self, group: &str, kind: &str, version: &str) -> Option<BuiltIn> {
        let gvk = Gvk {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
        };
        if let Some(found) = self
            .schemas
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&gvk)
        {
            return found.clone();
        }
        // Only the kinds the documents define are kept (a schema, or `None` for one that
        // does not convert): any other is a Composition's choice, and kept it would grow the
        // process' cache with every kind a Composition names.
        let (found, defined) = self.convert(&gvk);
        if defined {
            self.schemas
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(gvk, found.clone());
        }
        found
    }

    /// The kind's schema, and whether the embedded documents define the kind.
    fn convert(&self, gvk: &Gvk) -> (Option<BuiltIn>, bool) {
        let Some((i, _)) = DOCUMENTS
            .iter()
            .enumerate()
            .find(|(_, (g, v, _))| *g == gvk.group && *v == gvk.version)
        else {
            return (None, false);
        };
        let Some(doc) = self.documents[i]
            .get_or_init(|| {
                let value = serde_json::from_str(DOCUMENTS[i].2).ok()?;
                Document::from_value(value).ok()
            })
            .as_ref()
        else {
            // A document that does not read defines no kind (any kind name would be kept).
            return (None, false);
        };
        let schema = match doc.schema(gvk) {
            Ok(Some(schema)) => schema,
            Ok(None) => return (None, false),
            Err(_) => return (None, true),
        };
        let versions = DOCUMENTS
            .iter()
            .filter(|(g, _, _)| *g == gvk.group)
            .map(|(_, v, _)| v.to_string())
            .collect();
        let built_in = BuiltIn {
            schema: Arc::new(schema),
            scope: match doc.namespaced(gvk) {
                Some(false) => Scope::Cluster,
                _ => Scope::Namespaced,
            },
            versions,
        };
        (Some(built_in), true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_documents_serve_their_kinds() {
        let b = BuiltIns::embedded();
        let d = b.resolve("apps", "Deployment", "v1").expect("Deployment");
        assert_eq!(d.scope, Scope::Namespaced);
        assert!(d.schema.descend(&["spec", "replicas"]).is_some());
        let ns = b.resolve("", "Namespace", "v1").expect("Namespace");
        assert_eq!(ns.scope, Scope::Cluster);
        assert!(b.resolve("apps", "Deployment", "v1beta1").is_none());
        assert!(b.resolve("example.org", "Widget", "v1").is_none());
        assert!(BuiltIns::has_group("rbac.authorization.k8s.io"));
    }

    /// Kinds the documents do not define (a Composition names any it likes) are not kept:
    /// the cache holds only the embedded kinds looked up.
    #[test]
    fn keeps_only_the_kinds_the_documents_define() {
        let b = BuiltIns::default();
        for n in 0..100 {
            assert!(b.resolve("apps", &format!("Widget{n}"), "v1").is_none());
            assert!(
                b.resolve(&format!("g{n}.example.org"), "Widget", "v1")
                    .is_none()
            );
        }
        assert!(b.resolve("apps", "Deployment", "v1").is_some());
        assert!(b.resolve("apps", "Deployment", "v1").is_some());
        let kept = b.schemas.lock().unwrap_or_else(PoisonError::into_inner);
        assert_eq!(kept.len(), 1);
    }
}
