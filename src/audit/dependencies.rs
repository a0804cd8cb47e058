//! What a validation depended on: the kinds whose schemas it looked up, and whether it
//! asked which Functions are installed.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde_json::Value;

use crate::budget::Budget;
use crate::checks::schema_aware::lookup::{SchemaInfo, SchemaSource};
use crate::model::function::FunctionSet;
use crate::schema::LookupError;
use crate::validate::{Options, Report, Validator};

/// A kind as schemas are keyed: its API group (empty for the core group) and kind.
pub type Kind = (String, String);

/// What one validation of a Composition depended on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Dependencies {
    /// Every kind looked up (the composite resource's, each composed resource's), found or
    /// not: a kind that was missing matters when it appears.
    pub kinds: BTreeSet<Kind>,
    /// Whether the installed Functions were asked for (pipeline steps).
    pub functions: bool,
}

impl Dependencies {
    /// Whether any of `kinds` was looked up.
    pub fn uses_any<'a>(&self, kinds: impl IntoIterator<Item = &'a Kind>) -> bool {
        kinds.into_iter().any(|k| self.kinds.contains(k))
    }
}

/// A schema source that records what is asked of it.
pub struct Recording<S> {
    inner: S,
    seen: Mutex<Dependencies>,
}

impl<S: SchemaSource> Recording<S> {
    /// Records the lookups made through `inner`.
    pub fn new(inner: S) -> Self {
        Recording {
            inner,
            seen: Mutex::default(),
        }
    }

    /// What was looked up so far.
    pub fn dependencies(&self) -> Dependencies {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl<S: SchemaSource> SchemaSource for Recording<S> {
    fn resolve(&self, group: &str, kind: &str, version: &str) -> Result<SchemaInfo, LookupError> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .kinds
            .insert((group.to_string(), kind.to_string()));
        self.inner.resolve(group, kind, version)
    }

    fn functions(&self) -> Option<Arc<FunctionSet>> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .functions = true;
        self.inner.functions()
    }

    /// Not recorded: a change of the policies changes the kinds of the MRDs they concern.
    fn activation_policies(&self) -> Option<Arc<crate::schema::ActivationPolicies>> {
        self.inner.activation_policies()
    }
}

/// Validates a Composition given as JSON (as [`Validator::validate_value`] does) and records
/// what the validation depended on.
pub fn validate_recorded(
    schemas: &dyn SchemaSource,
    options: Options,
    budget: Budget,
    value: &Value,
) -> (Report, Dependencies) {
    let recording = Recording::new(schemas);
    let report = Validator::new(&recording, options)
        .with_budget(budget)
        .validate_value(value);
    (report, recording.dependencies())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::parse_documents;
    use crate::schema::Catalog;

    const XRD: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xbuckets.example.org}
spec:
  group: example.org
  names: {kind: XBucket, plural: xbuckets}
  versions:
  - name: v1
    served: true
    referenceable: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object}}}}
"#;

    const COMPOSITION: &str = r#"
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: xbuckets}
spec:
  compositeTypeRef: {apiVersion: example.org/v1, kind: XBucket}
  mode: Pipeline
  pipeline:
  - step: patch-and-transform
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: config
        base: {apiVersion: v1, kind: ConfigMap, data: {a: b}}
      - name: bucket
        base: {apiVersion: s3.aws.m.upbound.io/v1beta1, kind: Bucket}
"#;

    #[test]
    fn every_kind_looked_up_is_recorded_found_or_not() {
        let mut catalog = Catalog::new();
        for doc in parse_documents("xrd.yaml", XRD).expect("XRD parses") {
            catalog.add_document(&doc.value, "xrd.yaml").expect("XRD");
        }
        let doc = &parse_documents("c.yaml", COMPOSITION).expect("parses")[0];
        let (report, deps) =
            validate_recorded(&catalog, Options::default(), Budget::default(), &doc.value);
        assert_eq!(report.name, "xbuckets");
        let kinds: Vec<(&str, &str)> = deps
            .kinds
            .iter()
            .map(|(g, k)| (g.as_str(), k.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("", "ConfigMap"),
                ("example.org", "XBucket"),
                ("s3.aws.m.upbound.io", "Bucket")
            ]
        );
        assert!(deps.functions, "a pipeline step asks for the Functions");
        assert!(deps.uses_any(&[("example.org".to_string(), "XBucket".to_string())]));
        assert!(!deps.uses_any(&[("example.org".to_string(), "XQueue".to_string())]));
    }
}
