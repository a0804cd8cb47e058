//! The schema catalog: every CRD known to the validator, indexed by group and kind.
//!
//! Mirrors how Crossplane's webhook finds CRDs (an index keyed `<Kind>.<group>` over all
//! CRDs in the cluster): zero matches is NotFound, more than one is an error. Files are not
//! a cluster, so the catalog adds two rules:
//!
//! - a real CRD and a CRD generated from an XRD for the same group and kind are not a
//!   conflict: the real one wins (in a cluster the XRD's CRD *is* that CRD);
//! - the same definition loaded twice (identical content) counts once.
//!
//! It also keeps the ManagedResourceActivationPolicies among the documents: they decide
//! whether an MRD's kind is served.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use thiserror::Error;

use super::crd::{Crd, CrdVersion, is_crd};
use super::mrap::{ActivationPolicies, ActivationPolicy, is_mrap};
use super::mrd::{Mrd, MrdState, is_mrd};
use super::structural::{Schema, SchemaError};
use super::xrd::{generate_crds, is_xrd};

/// Deepest nesting of `List` documents followed by [`Catalog::add_document`].
const MAX_LIST_DEPTH: usize = 16;

/// Where a catalog entry came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A CustomResourceDefinition document.
    Crd,
    /// The composite resource CRD generated from the named XRD.
    CompositeFromXrd {
        /// The XRD's `metadata.name` (or `<plural>.<group>`).
        xrd: String,
    },
    /// The claim CRD generated from the named XRD.
    ClaimFromXrd {
        /// The XRD's `metadata.name` (or `<plural>.<group>`).
        xrd: String,
    },
    /// A ManagedResourceDefinition: the CRD Crossplane creates from it once it is active.
    Mrd {
        /// Its `spec.state`.
        state: MrdState,
        /// Its `Established` condition, when it has one.
        established: Option<bool>,
    },
}

impl Origin {
    /// True for CRDs generated from an XRD.
    pub fn is_generated(&self) -> bool {
        matches!(
            self,
            Self::CompositeFromXrd { .. } | Self::ClaimFromXrd { .. }
        )
    }

    /// Which definition of a kind wins: a CRD, else an MRD (whose CRD is not there), else
    /// one generated from an XRD (whose CRD Crossplane has not generated yet).
    fn rank(&self) -> u8 {
        match self {
            Self::Crd => 0,
            Self::Mrd { .. } => 1,
            Self::CompositeFromXrd { .. } | Self::ClaimFromXrd { .. } => 2,
        }
    }
}

/// One CRD in the catalog.
#[derive(Debug, Clone)]
pub struct CatalogEntry {
    crd: Arc<Crd>,
    source: String,
    origin: Origin,
}

impl CatalogEntry {
    /// The CRD's API group (empty for the core group).
    pub fn group(&self) -> &str {
        &self.crd.group
    }

    /// The CRD's kind.
    pub fn kind(&self) -> &str {
        &self.crd.names.kind
    }

    /// The CRD's name (`<plural>.<group>`).
    pub fn name(&self) -> &str {
        &self.crd.name
    }

    /// The CRD's versions, in document order.
    pub fn versions(&self) -> &[CrdVersion] {
        &self.crd.versions
    }

    /// The source the CRD (or its XRD) was loaded from, as given to `add_document`.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether this is a real CRD or one generated from an XRD.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// The parsed CRD.
    pub fn crd(&self) -> &Arc<Crd> {
        &self.crd
    }
}

/// What [`Catalog::add_document`] did with a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Added {
    /// A CustomResourceDefinition, by name.
    Crd(String),
    /// A ManagedResourceDefinition, by name.
    Mrd(String),
    /// A ManagedResourceActivationPolicy, by name (no CRD: it activates MRDs).
    Mrap(String),
    /// An XRD: the generated XR CRD and, if offered, the claim CRD (by name).
    Xrd {
        /// The XRD's name.
        xrd: String,
        /// The generated composite resource CRD's name.
        composite: String,
        /// The generated claim CRD's name, when the XRD offers a valid claim.
        claim: Option<String>,
    },
    /// A `List` (or `*List`) object: what each item added, in order.
    List(Vec<Added>),
    /// Not a definition: nothing added (not an error).
    Ignored,
}

impl Added {
    /// How many CRDs this document contributed (generated ones included).
    pub fn crd_count(&self) -> usize {
        match self {
            Self::Crd(_) | Self::Mrd(_) => 1,
            Self::Xrd { claim, .. } => 1 + usize::from(claim.is_some()),
            Self::List(items) => items.iter().map(Added::crd_count).sum(),
            Self::Mrap(_) | Self::Ignored => 0,
        }
    }
}

/// One of several definitions found for a group and kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The CRD's name.
    pub name: String,
    /// The source it was loaded from.
    pub source: String,
    /// Real or generated.
    pub origin: Origin,
}

/// Why a lookup found no single CRD.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LookupError {
    /// No CRD for the group and kind (upstream's NotFound message, verbatim).
    #[error("CustomResourceDefinition.apiextensions.k8s.io \"{kind}.{group}\" not found")]
    NotFound {
        /// The group looked up (empty for the core group).
        group: String,
        /// The kind looked up.
        kind: String,
    },
    /// An `apiVersion` with more than one `/` (Kubernetes' `ParseGroupVersion` message).
    #[error("unexpected GroupVersion string: {api_version}")]
    InvalidApiVersion {
        /// The `apiVersion` as given.
        api_version: String,
    },
    /// More than one different definition for the group and kind.
    #[error("more than one CRD found for {kind}.{group}: [{}]", join_names(.candidates))]
    Ambiguous {
        /// The group looked up.
        group: String,
        /// The kind looked up.
        kind: String,
        /// The conflicting definitions, sorted by name (then source).
        candidates: Vec<Candidate>,
    },
    /// The definition of the group and kind could not be obtained (in a cluster: the API
    /// server refused, failed or did not answer in time, or its schema is unusable).
    #[error("the schema of {kind}.{group} is not available: {reason}")]
    Unavailable {
        /// The group looked up.
        group: String,
        /// The kind looked up.
        kind: String,
        /// Why, in words naming the definition and the cause.
        reason: String,
    },
}

impl LookupError {
    /// The conflicting definitions (empty for NotFound).
    pub fn candidates(&self) -> &[Candidate] {
        match self {
            Self::NotFound { .. } | Self::InvalidApiVersion { .. } | Self::Unavailable { .. } => {
                &[]
            }
            Self::Ambiguous { candidates, .. } => candidates,
        }
    }
}

/// Splits an `apiVersion` into `(group, version)` like Kubernetes' `ParseGroupVersion`:
/// `v1` is the core group, `s3.aws.upbound.io/v1beta1` splits at the slash, `""` and `"/"`
/// are empty; more than one slash is `None`.
pub fn split_api_version(api_version: &str) -> Option<(&str, &str)> {
    if api_version.is_empty() || api_version == "/" {
        return Some(("", ""));
    }
    match api_version.split_once('/') {
        None => Some(("", api_version)),
        Some((_, version)) if version.contains('/') => None,
        Some((group, version)) => Some((group, version)),
    }
}

fn join_names(candidates: &[Candidate]) -> String {
    candidates
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The result of a successful [`Catalog::lookup`].
#[derive(Debug, Clone)]
pub struct Resolved<'a> {
    /// The catalog entry found.
    pub entry: &'a CatalogEntry,
    /// The schema selected for the requested version (see [`Crd::schema_for`]); `None`
    /// means "no schema": every path is accepted with unknown type.
    pub schema: Option<&'a Arc<Schema>>,
    /// Why the selected version has no schema although it declares one, if so.
    pub schema_error: Option<&'a SchemaError>,
    /// Whether the CRD has a version with the requested name.
    pub version_found: bool,
    /// Names of the CRD's served versions, in document order.
    pub served_versions: Vec<&'a str>,
}

impl Resolved<'_> {
    /// The CRD's name.
    pub fn name(&self) -> &str {
        self.entry.name()
    }

    /// The source the CRD (or its XRD) was loaded from.
    pub fn source(&self) -> &str {
        self.entry.source()
    }

    /// Real or generated from an XRD.
    pub fn origin(&self) -> &Origin {
        self.entry.origin()
    }

    /// The parsed CRD.
    pub fn crd(&self) -> &Crd {
        self.entry.crd()
    }
}

/// All CRDs known to the validator, indexed by (group, kind).
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    entries: Vec<CatalogEntry>,
    /// The entries of each kind, by group then kind (looked up by borrowed names: a review
    /// looks up every template's kind).
    index: BTreeMap<String, BTreeMap<String, Vec<usize>>>,
    /// The ManagedResourceActivationPolicies read (shared with lookups, which hand them out).
    policies: Arc<ActivationPolicies>,
    /// The kinds of XRDs refused as invalid, by group then kind, with why: a lookup says
    /// so instead of that nothing defines them.
    refused: BTreeMap<String, BTreeMap<String, String>>,
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a catalog from `(document, source)` pairs; stops at the first error.
    pub fn from_documents<'a, I>(documents: I) -> Result<Self, SchemaError>
    where
        I: IntoIterator<Item = (&'a Value, &'a str)>,
    {
        let mut catalog = Self::new();
        for (value, source) in documents {
            catalog.add_document(value, source)?;
        }
        Ok(catalog)
    }

    /// Adds a document: a CRD, an MRD, an XRD (its XR CRD and claim CRD), a
    /// ManagedResourceActivationPolicy, or a `List`/`*List` of them (recursively). Anything
    /// else is [`Added::Ignored`].
    ///
    /// A malformed definition is an error naming `source` and the object; in a list, the
    /// other items are still added and the first error is returned.
    pub fn add_document(&mut self, value: &Value, source: &str) -> Result<Added, SchemaError> {
        self.add_at(value, source, "", 0)
    }

    fn add_at(
        &mut self,
        value: &Value,
        source: &str,
        at: &str,
        depth: usize,
    ) -> Result<Added, SchemaError> {
        let api_version = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
        let what = |label: &str| {
            let name = value
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if at.is_empty() {
                format!("{label} \"{name}\"")
            } else {
                format!("{at}: {label} \"{name}\"")
            }
        };

        if is_crd(api_version, kind) {
            let crd = Crd::from_value(value)
                .map_err(|e| e.in_document(source, what("CustomResourceDefinition")))?;
            let name = crd.name.clone();
            self.insert(crd, source, Origin::Crd);
            return Ok(Added::Crd(name));
        }

        if is_mrd(api_version, kind) {
            let mrd = Mrd::from_value(value)
                .map_err(|e| e.in_document(source, what("ManagedResourceDefinition")))?;
            let name = mrd.name.clone();
            self.insert(
                mrd.crd,
                source,
                Origin::Mrd {
                    state: mrd.state,
                    established: mrd.established,
                },
            );
            return Ok(Added::Mrd(name));
        }

        if is_mrap(api_version, kind) {
            let policy = ActivationPolicy::from_value(value)
                .map_err(|e| e.in_document(source, what("ManagedResourceActivationPolicy")))?;
            let name = policy.name.clone();
            Arc::make_mut(&mut self.policies).insert(policy);
            return Ok(Added::Mrap(name));
        }

        if is_xrd(api_version, kind) {
            let generated = match generate_crds(value) {
                Ok(g) => g,
                Err(e) => {
                    let e = e.in_document(source, what("CompositeResourceDefinition"));
                    self.refuse_xrd(value, &e);
                    return Err(e);
                }
            };
            let composite = generated.composite.crd.name.clone();
            let xrd_name = value
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .map_or_else(|| composite.clone(), str::to_string);
            self.insert(
                generated.composite.crd,
                source,
                Origin::CompositeFromXrd {
                    xrd: xrd_name.clone(),
                },
            );
            let claim = generated.claim.map(|claim| {
                let name = claim.crd.name.clone();
                self.insert(
                    claim.crd,
                    source,
                    Origin::ClaimFromXrd {
                        xrd: xrd_name.clone(),
                    },
                );
                name
            });
            return Ok(Added::Xrd {
                xrd: xrd_name,
                composite,
                claim,
            });
        }

        if kind.ends_with("List")
            && let Some(items) = value.get("items").and_then(Value::as_array)
        {
            if depth >= MAX_LIST_DEPTH {
                return Err(SchemaError::Invalid {
                    path: at.to_string(),
                    message: format!("List documents nested deeper than {MAX_LIST_DEPTH} levels"),
                }
                .in_document(source, kind.to_string()));
            }
            let mut added = Vec::with_capacity(items.len());
            let mut first_error = None;
            for (i, item) in items.iter().enumerate() {
                let item_at = if at.is_empty() {
                    format!("items[{i}]")
                } else {
                    format!("{at}.items[{i}]")
                };
                match self.add_at(item, source, &item_at, depth + 1) {
                    Ok(a) => added.push(a),
                    Err(e) => {
                        added.push(Added::Ignored);
                        first_error.get_or_insert(e);
                    }
                }
            }
            return match first_error {
                Some(e) => Err(e),
                None => Ok(Added::List(added)),
            };
        }

        Ok(Added::Ignored)
    }

    /// Stores a CRD unless an identical one of the same kind (real or generated) exists.
    fn insert(&mut self, crd: Crd, source: &str, origin: Origin) {
        let bucket = self
            .index
            .entry(crd.group.clone())
            .or_default()
            .entry(crd.names.kind.clone())
            .or_default();
        let duplicate = bucket.iter().any(|&i| {
            let e = &self.entries[i];
            e.origin.rank() == origin.rank() && *e.crd == crd
        });
        if duplicate {
            return;
        }
        bucket.push(self.entries.len());
        self.entries.push(CatalogEntry {
            crd: Arc::new(crd),
            source: source.to_string(),
            origin,
        });
    }

    /// Number of CRDs in the catalog (identical duplicates count once).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the catalog holds no CRD.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The ManagedResourceActivationPolicies read, by name.
    pub fn policies(&self) -> &Arc<ActivationPolicies> {
        &self.policies
    }

    /// Every entry, in the order added, for reporting.
    pub fn entries(&self) -> impl Iterator<Item = &CatalogEntry> {
        self.entries.iter()
    }

    /// [`Catalog::lookup`] with the group and version taken from an `apiVersion` string
    /// (as Crossplane does for `compositeTypeRef` and resource bases).
    pub fn lookup_api_version(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Resolved<'_>, LookupError> {
        let (group, version) =
            split_api_version(api_version).ok_or_else(|| LookupError::InvalidApiVersion {
                api_version: api_version.to_string(),
            })?;
        self.lookup(group, kind, version)
    }

    /// Records the XR and claim kinds of an XRD refused with `error`.
    fn refuse_xrd(&mut self, xrd: &Value, error: &SchemaError) {
        let text = |p: &str| xrd.pointer(p).and_then(Value::as_str).unwrap_or_default();
        let group = text("/spec/group");
        let reason = format!("the XRD that defines it is invalid: {error}");
        for kind in [text("/spec/names/kind"), text("/spec/claimNames/kind")] {
            if !kind.is_empty() {
                self.refused
                    .entry(group.to_string())
                    .or_default()
                    .insert(kind.to_string(), reason.clone());
            }
        }
    }

    /// Finds the CRD for `group` and `kind` and selects the schema for `version`.
    pub fn lookup(
        &self,
        group: &str,
        kind: &str,
        version: &str,
    ) -> Result<Resolved<'_>, LookupError> {
        let not_found = || match self.refused.get(group).and_then(|k| k.get(kind)) {
            Some(reason) => LookupError::Unavailable {
                group: group.to_string(),
                kind: kind.to_string(),
                reason: reason.clone(),
            },
            None => LookupError::NotFound {
                group: group.to_string(),
                kind: kind.to_string(),
            },
        };
        let bucket = self
            .index
            .get(group)
            .and_then(|kinds| kinds.get(kind))
            .ok_or_else(not_found)?;
        let all = || bucket.iter().map(|&i| &self.entries[i]);
        // Real CRDs shadow MRDs, which shadow XRD-generated ones.
        let first = all().map(|e| e.origin.rank()).min();
        let candidates = || all().filter(|e| Some(e.origin.rank()) == first);
        let mut found = candidates();
        match (found.next(), found.next()) {
            (None, _) => Err(not_found()),
            (Some(entry), None) => {
                let selection = entry.crd.schema_for(version);
                Ok(Resolved {
                    entry,
                    schema: selection.schema,
                    schema_error: selection.schema_error,
                    version_found: selection.version.is_some(),
                    served_versions: entry.crd.served_versions(),
                })
            }
            (Some(_), Some(_)) => {
                let mut candidates: Vec<Candidate> = candidates()
                    .map(|e| Candidate {
                        name: e.name().to_string(),
                        source: e.source.clone(),
                        origin: e.origin.clone(),
                    })
                    .collect();
                candidates.sort_by(|a, b| (&a.name, &a.source).cmp(&(&b.name, &b.source)));
                Err(LookupError::Ambiguous {
                    group: group.to_string(),
                    kind: kind.to_string(),
                    candidates,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(name: &str, group: &str, kind: &str, field: &str) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {
                "group": group,
                "scope": "Cluster",
                "names": {"kind": kind, "plural": name.split('.').next().unwrap_or("")},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {field: {"type": "string"}}}}}}}]
            }
        })
    }

    fn xrd(kind: &str, plural: &str, claim: Option<(&str, &str)>) -> Value {
        let mut x = json!({
            "apiVersion": "apiextensions.crossplane.io/v1",
            "kind": "CompositeResourceDefinition",
            "metadata": {"name": format!("{plural}.example.org")},
            "spec": {
                "group": "example.org",
                "names": {"kind": kind, "plural": plural},
                "versions": [{"name": "v1alpha1", "served": true, "referenceable": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]
            }
        });
        if let (Some((k, p)), Some(spec)) =
            (claim, x.get_mut("spec").and_then(Value::as_object_mut))
        {
            spec.insert("claimNames".to_string(), json!({"kind": k, "plural": p}));
        }
        x
    }

    #[test]
    fn api_versions_split_like_kubernetes() {
        assert_eq!(split_api_version("v1"), Some(("", "v1")));
        assert_eq!(
            split_api_version("s3.aws.upbound.io/v1beta1"),
            Some(("s3.aws.upbound.io", "v1beta1"))
        );
        assert_eq!(split_api_version(""), Some(("", "")));
        assert_eq!(split_api_version("a/b/c"), None);
        let catalog = Catalog::from_documents([(
            &crd("widgets.example.org", "example.org", "Widget", "a"),
            "w.yaml",
        )])
        .expect("ok");
        assert!(
            catalog
                .lookup_api_version("example.org/v1", "Widget")
                .is_ok_and(|r| r.version_found)
        );
        assert_eq!(
            catalog
                .lookup_api_version("v1", "ConfigMap")
                .map(|_| ())
                .expect_err("core")
                .to_string(),
            "CustomResourceDefinition.apiextensions.k8s.io \"ConfigMap.\" not found"
        );
        assert_eq!(
            catalog
                .lookup_api_version("a/b/c", "Widget")
                .map(|_| ())
                .expect_err("bad")
                .to_string(),
            "unexpected GroupVersion string: a/b/c"
        );
    }

    #[test]
    fn not_found_message_is_upstreams() {
        let c = Catalog::new();
        let err = c
            .lookup("s3.aws.upbound.io", "Bucket", "v1beta1")
            .expect_err("empty");
        assert_eq!(
            err.to_string(),
            "CustomResourceDefinition.apiextensions.k8s.io \"Bucket.s3.aws.upbound.io\" not found"
        );
        let err = c.lookup("", "ConfigMap", "v1").expect_err("core");
        assert_eq!(
            err.to_string(),
            "CustomResourceDefinition.apiextensions.k8s.io \"ConfigMap.\" not found"
        );
        assert!(err.candidates().is_empty());
    }

    #[test]
    fn two_different_definitions_are_ambiguous() {
        let a = crd("widgets.example.org", "example.org", "Widget", "a");
        let b = crd("widgets.example.org", "example.org", "Widget", "b");
        let c = crd("zwidgets.example.org", "example.org", "Widget", "c");
        let catalog =
            Catalog::from_documents([(&c, "c.yaml"), (&b, "b.yaml"), (&a, "a.yaml")]).expect("ok");
        let err = catalog
            .lookup("example.org", "Widget", "v1")
            .expect_err("ambiguous");
        assert_eq!(
            err.to_string(),
            "more than one CRD found for Widget.example.org: [widgets.example.org widgets.example.org zwidgets.example.org]"
        );
        let sources: Vec<&str> = err.candidates().iter().map(|c| c.source.as_str()).collect();
        assert_eq!(sources, vec!["a.yaml", "b.yaml", "c.yaml"]);
    }

    #[test]
    fn identical_duplicates_count_once() {
        let a = crd("widgets.example.org", "example.org", "Widget", "a");
        let mut catalog = Catalog::new();
        assert_eq!(
            catalog.add_document(&a, "one.yaml").expect("ok"),
            Added::Crd("widgets.example.org".into())
        );
        catalog.add_document(&a, "two.yaml").expect("ok");
        assert_eq!(catalog.len(), 1);
        let r = catalog
            .lookup("example.org", "Widget", "v1")
            .expect("found");
        assert_eq!(r.source(), "one.yaml");
        assert_eq!(r.origin(), &Origin::Crd);
        assert!(r.version_found);
        assert_eq!(r.served_versions, vec!["v1"]);
        assert!(r.schema.and_then(|s| s.descend(&["spec", "a"])).is_some());
    }

    #[test]
    fn real_crd_wins_over_xrd_generated() {
        let x = xrd("XWidget", "xwidgets", None);
        let real = crd("xwidgets.example.org", "example.org", "XWidget", "real");
        let mut catalog = Catalog::new();
        catalog.add_document(&x, "xrd.yaml").expect("ok");
        catalog.add_document(&real, "crd.yaml").expect("ok");
        assert_eq!(catalog.len(), 2);
        let r = catalog
            .lookup("example.org", "XWidget", "v1")
            .expect("real wins");
        assert_eq!(r.source(), "crd.yaml");
        assert_eq!(r.origin(), &Origin::Crd);
    }

    #[test]
    fn xrd_adds_composite_and_claim_crds() {
        let x = xrd("XWidget", "xwidgets", Some(("Widget", "widgets")));
        let mut catalog = Catalog::new();
        let added = catalog.add_document(&x, "xrd.yaml").expect("ok");
        assert_eq!(
            added,
            Added::Xrd {
                xrd: "xwidgets.example.org".into(),
                composite: "xwidgets.example.org".into(),
                claim: Some("widgets.example.org".into()),
            }
        );
        assert_eq!(added.crd_count(), 2);
        let xr = catalog
            .lookup("example.org", "XWidget", "v1alpha1")
            .expect("XR");
        assert!(xr.origin().is_generated());
        let schema = xr.schema.expect("schema");
        assert!(
            schema
                .descend(&["spec", "compositionRef", "name"])
                .is_some()
        );
        assert!(schema.descend(&["status", "conditions"]).is_some());
        assert!(schema.descend(&["spec", "size"]).is_some());
        // Single version: the schema serves any version, but the version is not found.
        let other = catalog.lookup("example.org", "XWidget", "v9").expect("XR");
        assert!(other.schema.is_some() && !other.version_found);
        let claim = catalog
            .lookup("example.org", "Widget", "v1alpha1")
            .expect("claim");
        assert_eq!(
            claim.origin(),
            &Origin::ClaimFromXrd {
                xrd: "xwidgets.example.org".into()
            }
        );
        assert!(
            claim
                .schema
                .and_then(|s| s.descend(&["spec", "resourceRef"]))
                .is_some()
        );
        // The same XRD twice is not a conflict.
        catalog.add_document(&x, "again.yaml").expect("ok");
        assert_eq!(catalog.len(), 2);
        assert!(catalog.lookup("example.org", "XWidget", "v1alpha1").is_ok());
    }

    #[test]
    fn two_different_xrds_for_one_kind_are_ambiguous() {
        let a = xrd("XWidget", "xwidgets", None);
        let mut b = xrd("XWidget", "xwidgets", None);
        if let Some(t) = b.pointer_mut(
            "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size/type",
        ) {
            *t = json!("string");
        }
        let catalog = Catalog::from_documents([(&a, "a.yaml"), (&b, "b.yaml")]).expect("ok");
        let err = catalog
            .lookup("example.org", "XWidget", "v1alpha1")
            .expect_err("ambiguous");
        assert_eq!(
            err.to_string(),
            "more than one CRD found for XWidget.example.org: [xwidgets.example.org xwidgets.example.org]"
        );
    }

    #[test]
    fn lists_are_followed_and_others_ignored() {
        let list = json!({
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                crd("widgets.example.org", "example.org", "Widget", "a"),
                {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinitionList",
                 "items": [crd("gadgets.example.org", "example.org", "Gadget", "a")]},
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
            ]
        });
        let mut catalog = Catalog::new();
        let added = catalog.add_document(&list, "list.yaml").expect("ok");
        assert_eq!(added.crd_count(), 2);
        assert_eq!(catalog.len(), 2);
        assert_eq!(
            catalog
                .add_document(
                    &json!({"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition"}),
                    "c.yaml"
                )
                .expect("ok"),
            Added::Ignored
        );
        assert_eq!(
            catalog
                .add_document(&json!("scalar"), "s.yaml")
                .expect("ok"),
            Added::Ignored
        );
        let kinds: Vec<(&str, &str)> = catalog.entries().map(|e| (e.group(), e.kind())).collect();
        assert_eq!(
            kinds,
            vec![("example.org", "Widget"), ("example.org", "Gadget")]
        );
    }

    #[test]
    fn bad_documents_name_source_and_object() {
        let mut bad = crd("widgets.example.org", "example.org", "Widget", "a");
        if let Some(n) = bad.pointer_mut("/spec/names") {
            *n = json!({"plural": "widgets"});
        }
        let list = json!({"kind": "List", "items": [bad, crd("gadgets.example.org", "example.org", "Gadget", "a")]});
        let mut catalog = Catalog::new();
        let err = catalog
            .add_document(&list, "bad.yaml")
            .expect_err("no kind");
        assert_eq!(
            err.to_string(),
            "bad.yaml: items[0]: CustomResourceDefinition \"widgets.example.org\": spec.names.kind: required value is missing"
        );
        // The good item was still added.
        assert_eq!(catalog.len(), 1);
    }

    #[test]
    fn deeply_nested_lists_are_refused() {
        let mut v = json!({"kind": "List", "items": []});
        for _ in 0..40 {
            v = json!({"kind": "List", "items": [v]});
        }
        let err = Catalog::new()
            .add_document(&v, "deep.yaml")
            .expect_err("too deep");
        assert!(
            err.to_string()
                .contains("List documents nested deeper than 16 levels")
        );
    }
}
