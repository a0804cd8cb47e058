//! Schemas as they would be after a definition changes: the kinds an updated CRD, MRD or
//! XRD defines answered from it, every other kind from the schemas in force.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use super::dependencies::Kind;
use crate::checks::schema_aware::lookup::{SchemaInfo, SchemaSource};
use crate::model::function::FunctionSet;
use crate::schema::{Catalog, LookupError, SchemaError};

/// A schema source with one definition replaced.
pub struct Overlay<'a> {
    updated: Catalog,
    kinds: BTreeSet<Kind>,
    base: &'a dyn SchemaSource,
}

impl<'a> Overlay<'a> {
    /// `base` with the definition `object` (a CRD, MRD or XRD, as an update would leave it)
    /// in force for the kinds it defines. Crossplane regenerates an XRD's and an MRD's CRD
    /// from them, so their new schema is what counts even where that CRD exists today.
    pub fn new(object: &Value, base: &'a dyn SchemaSource) -> Result<Self, SchemaError> {
        let mut updated = Catalog::new();
        updated.add_document(object, "the update")?;
        let kinds = updated
            .entries()
            .map(|e| (e.group().to_string(), e.kind().to_string()))
            .collect();
        Ok(Overlay {
            updated,
            kinds,
            base,
        })
    }

    /// The kinds the definition defines (an XRD: its composite resource's and its claim's).
    pub fn kinds(&self) -> &BTreeSet<Kind> {
        &self.kinds
    }
}

impl SchemaSource for Overlay<'_> {
    fn resolve(&self, group: &str, kind: &str, version: &str) -> Result<SchemaInfo, LookupError> {
        if self.kinds.contains(&(group.to_string(), kind.to_string())) {
            self.updated.resolve(group, kind, version)
        } else {
            self.base.resolve(group, kind, version)
        }
    }

    fn functions(&self) -> Option<Arc<FunctionSet>> {
        self.base.functions()
    }

    /// The policies in force: an updated MRD is activated as the MRD in place is.
    fn activation_policies(&self) -> Option<Arc<crate::schema::ActivationPolicies>> {
        self.base.activation_policies()
    }
}
