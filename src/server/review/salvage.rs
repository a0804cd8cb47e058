//! Salvage: what an answer must echo, read from any body, even a truncated or malformed one.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use super::{Echo, Key, ObjectEcho, answered_version, is_composition};
use crate::model::{LEGACY_MODE_ANNOTATION, MODE_ANNOTATION};

/// Salvages the apiVersion, `request.uid`, `request.kind` and the object's name and mode
/// annotations from a body, reading as far as it parses and no further than needed: one
/// streaming pass that builds no tree (other values are skipped with `IgnoredAny`).
pub fn salvage(body: &[u8]) -> Echo {
    let mut echo = Echo::default();
    let mut de = serde_json::Deserializer::from_slice(body);
    // Errors are expected (truncated bodies, or the early stop): keep what was found.
    let _ = de::Deserializer::deserialize_map(&mut de, Salvage(&mut echo));
    echo
}

/// The error that stops salvage once everything is known.
fn done<E: de::Error>() -> E {
    E::custom("done")
}

/// The envelope: `apiVersion` and `request`.
struct Salvage<'e>(&'e mut Echo);

impl<'de> Visitor<'de> for Salvage<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an AdmissionReview")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_ref() {
                "apiVersion" => {
                    let v: Key<'de> = map.next_value()?;
                    self.0.api_version = answered_version(&v);
                }
                "request" => map.next_value_seed(SalvageRequest(&mut *self.0))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            if self.0.complete() {
                return Err(done());
            }
        }
        Ok(())
    }
}

/// The request: `uid`, `kind` and `object`.
struct SalvageRequest<'e>(&'e mut Echo);

impl<'de> DeserializeSeed<'de> for SalvageRequest<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for SalvageRequest<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an AdmissionRequest")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        #[derive(Deserialize)]
        struct Kind<'a> {
            #[serde(default, borrow)]
            group: Key<'a>,
            #[serde(default, borrow)]
            kind: Key<'a>,
        }
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_ref() {
                "uid" => self.0.uid = Some(map.next_value()?),
                "operation" => {
                    let op: Key<'de> = map.next_value()?;
                    self.0.operation = ["CREATE", "UPDATE", "DELETE", "CONNECT"]
                        .into_iter()
                        .find(|o| *o == op.as_ref());
                }
                "kind" => {
                    let kind: Kind<'de> = map.next_value()?;
                    self.0.composition = Some(is_composition(&kind.group, &kind.kind));
                }
                "object" => map.next_value_seed(SalvageObject(&mut *self.0))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            if self.0.complete() {
                return Err(done());
            }
        }
        Ok(())
    }
}

/// An object (or null): its metadata, read in full before it counts; the rest is skipped.
struct SalvageObject<'e>(&'e mut Echo);

impl<'de> DeserializeSeed<'de> for SalvageObject<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for SalvageObject<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Metadata {
            #[serde(default)]
            name: Option<String>,
            #[serde(default)]
            generate_name: Option<String>,
            #[serde(default)]
            annotations: Option<ModeAnnotations>,
        }
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if key != "metadata" {
                // Spec and the rest: skipped, not kept.
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let metadata: Option<Metadata> = map.next_value()?;
            let metadata = metadata.unwrap_or(Metadata {
                name: None,
                generate_name: None,
                annotations: None,
            });
            self.0.object = Some(ObjectEcho {
                name: metadata.name,
                generate_name: metadata.generate_name,
                annotations: metadata.annotations.map(|a| a.0).unwrap_or_default(),
            });
            if self.0.complete() {
                return Err(done());
            }
        }
        if self.0.object.is_none() {
            self.0.object = Some(ObjectEcho::default());
        }
        Ok(())
    }
}

/// The mode annotations of an annotations map; the others are skipped.
struct ModeAnnotations(BTreeMap<String, String>);

impl<'de> Deserialize<'de> for ModeAnnotations {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keep;
        impl<'de> Visitor<'de> for Keep {
            type Value = BTreeMap<String, String>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("annotations")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    if key == MODE_ANNOTATION || key == LEGACY_MODE_ANNOTATION {
                        out.insert(key.into_owned(), map.next_value()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(Keep).map(ModeAnnotations)
    }
}
