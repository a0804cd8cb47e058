//! What the watches keep of each CRD, MRD and XRD: names, versions and resourceVersion, never the
//! schema. Deserializing into these types skips the schemas (serde ignores unknown fields
//! without building them), so listing 1,000 large provider CRDs holds a few hundred bytes
//! of each; a schema is fetched (`GET`) and parsed only when a Composition needs its kind.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::ClusterResourceScope;
use serde::{Deserialize, Deserializer};

use crate::schema::MrdState;

/// The kinds of definition the webhook watches, in the order they win for one kind: a CRD,
/// else an MRD (Crossplane creates the CRD once the MRD is active), else an XRD (until
/// Crossplane has generated the XR's CRD).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// `customresourcedefinitions.apiextensions.k8s.io`.
    Crd,
    /// `managedresourcedefinitions.apiextensions.crossplane.io` (Crossplane v2.0+).
    Mrd,
    /// `compositeresourcedefinitions.apiextensions.crossplane.io`.
    Xrd,
}

impl Source {
    /// Every source, in order.
    pub const ALL: [Source; 3] = [Source::Crd, Source::Mrd, Source::Xrd];

    /// The API group.
    pub fn group(self) -> &'static str {
        match self {
            Source::Crd => "apiextensions.k8s.io",
            Source::Mrd | Source::Xrd => "apiextensions.crossplane.io",
        }
    }

    /// The version watched and fetched.
    pub const fn version(self) -> &'static str {
        match self {
            Source::Mrd => "v1alpha1",
            Source::Crd | Source::Xrd => "v1",
        }
    }

    /// Whether an API server may not serve it (Crossplane not installed, or before v2):
    /// then there is nothing to wait for.
    pub const fn optional(self) -> bool {
        !matches!(self, Source::Crd)
    }

    /// The kind.
    pub fn kind(self) -> &'static str {
        match self {
            Source::Crd => "CustomResourceDefinition",
            Source::Mrd => "ManagedResourceDefinition",
            Source::Xrd => "CompositeResourceDefinition",
        }
    }

    /// The resource (plural), as RBAC rules and metrics name it.
    pub const fn plural(self) -> &'static str {
        match self {
            Source::Crd => "customresourcedefinitions",
            Source::Mrd => "managedresourcedefinitions",
            Source::Xrd => "compositeresourcedefinitions",
        }
    }

    /// The collection's path on the API server.
    pub fn path(self) -> String {
        format!(
            "/apis/{}/{}/{}",
            self.group(),
            self.version(),
            self.plural()
        )
    }

    /// Its `source` label in metrics: `crd`, `mrd` or `xrd`.
    pub const fn metric_name(self) -> &'static str {
        match self {
            Source::Crd => "crd",
            Source::Mrd => "mrd",
            Source::Xrd => "xrd",
        }
    }

    /// How messages name one object of it: `CRD x`, `MRD x` or `XRD x`.
    pub fn label(self) -> &'static str {
        match self {
            Source::Crd => "CRD",
            Source::Mrd => "MRD",
            Source::Xrd => "XRD",
        }
    }
}

/// The metadata the watch keeps: name, uid and resourceVersion (not the managed fields or a
/// `last-applied-configuration` annotation, which can be as large as the CRD).
pub(super) fn slim_metadata<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Slim {
        name: Option<String>,
        uid: Option<String>,
        resource_version: Option<String>,
    }
    let s = Slim::deserialize(d)?;
    Ok(ObjectMeta {
        name: s.name,
        uid: s.uid,
        resource_version: s.resource_version,
        ..ObjectMeta::default()
    })
}

/// The names a definition gives its kind.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Names {
    /// The kind.
    #[serde(default)]
    pub kind: String,
}

/// One version of a definition, without its schema.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct VersionSummary {
    /// The version's name.
    #[serde(default)]
    pub name: String,
    /// Whether it is served.
    #[serde(default)]
    pub served: bool,
}

/// The part of a definition's spec the index needs.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SpecSummary {
    /// The API group of the defined kind.
    #[serde(default)]
    pub group: String,
    /// Its names.
    #[serde(default)]
    pub names: Names,
    /// Its versions.
    #[serde(default)]
    pub versions: Vec<VersionSummary>,
    /// An MRD's `spec.state`.
    #[serde(default)]
    pub state: Option<String>,
}

macro_rules! summary {
    ($name:ident, $source:expr, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug, Clone, Deserialize)]
        pub struct $name {
            /// Name, uid and resourceVersion.
            #[serde(deserialize_with = "slim_metadata", default)]
            pub metadata: ObjectMeta,
            /// Group, kind and versions.
            #[serde(default)]
            pub spec: SpecSummary,
        }

        impl kube::Resource for $name {
            type DynamicType = ();
            type Scope = ClusterResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($source.kind())
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($source.group())
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($source.version())
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($source.plural())
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }

        impl $name {
            /// The index's record of it.
            pub fn summary(&self) -> Summary {
                Summary::new($source, &self.metadata, &self.spec)
            }
        }
    };
}

summary!(
    CrdSummary,
    Source::Crd,
    "A CustomResourceDefinition as the watch keeps it."
);
summary!(
    MrdSummary,
    Source::Mrd,
    "A ManagedResourceDefinition as the watch keeps it."
);
summary!(
    XrdSummary,
    Source::Xrd,
    "A CompositeResourceDefinition as the watch keeps it."
);

/// One definition in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// CRD or XRD.
    pub source: Source,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// The group of the kind it defines.
    pub group: String,
    /// The kind it defines.
    pub kind: String,
    /// The served versions.
    pub served: Vec<String>,
    /// An MRD's state (`None` for CRDs and XRDs).
    pub state: Option<MrdState>,
}

impl Summary {
    fn new(source: Source, meta: &ObjectMeta, spec: &SpecSummary) -> Self {
        Summary {
            source,
            name: meta.name.clone().unwrap_or_default(),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            group: spec.group.clone(),
            kind: spec.names.kind.clone(),
            served: spec
                .versions
                .iter()
                .filter(|v| v.served)
                .map(|v| v.name.clone())
                .collect(),
            state: (source == Source::Mrd).then(|| MrdState::parse(spec.state.as_deref())),
        }
    }

    /// `CRD <name>`, `MRD <name>` or `XRD <name>`.
    pub fn label(&self) -> String {
        format!("{} {}", self.source.label(), self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crd_summary_keeps_names_and_versions_and_skips_the_schema() {
        let json = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
            "metadata":{"name":"buckets.s3.aws.upbound.io","resourceVersion":"42","uid":"u",
              "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{...}"},
              "managedFields":[{"manager":"kubectl"}]},
            "spec":{"group":"s3.aws.upbound.io","names":{"kind":"Bucket","plural":"buckets"},
              "scope":"Cluster","versions":[
                {"name":"v1beta1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}},
                {"name":"v1alpha1","served":false,"storage":false}]}}"#;
        let crd: CrdSummary = serde_json::from_str(json).expect("parses");
        assert_eq!(crd.metadata.annotations, None);
        assert_eq!(
            crd.summary(),
            Summary {
                source: Source::Crd,
                name: "buckets.s3.aws.upbound.io".into(),
                resource_version: "42".into(),
                group: "s3.aws.upbound.io".into(),
                kind: "Bucket".into(),
                served: vec!["v1beta1".into()],
                state: None,
            }
        );
        assert_eq!(
            <CrdSummary as kube::Resource>::url_path(&(), None),
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        );
    }
}
