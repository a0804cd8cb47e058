//! A minimal mock composite resource (XR): every field its schema requires, filled with a
//! value that satisfies the field's own constraints, then the schema's defaults, so the mock
//! is what the API server would store for the smallest valid XR.
//!
//! The fill follows the never-merged upstream prototype (`MockRequiredFields`): only required
//! properties, recursively; a required array gets one element; a scalar gets its default,
//! else a plain value (`0`, `false`, `0.1` for numbers). Unlike the prototype, the value is
//! adjusted to the field's enum, format, pattern, bounds and lengths, and a string is never
//! the prototype's `""` (which renders names such as `-controlplane` no real XR gives): it
//! is what the Composition's patches expect of the field ([`Hints`]: a key of the map
//! transform that reads it, ...), else the field's name as a DNS label (`cluster-name`).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::fieldpath::{self, Segment};
use crate::model::{self, Patch};
use crate::schema::{Schema, apply_defaults};

/// The mock's `metadata.uid` (a fixed, well-formed UUID so patches of it render alike).
pub const MOCK_UID: &str = "00000000-0000-4000-8000-000000000000";
/// The mock claim's namespace, and a namespaced (v2) mock XR's.
pub const MOCK_NAMESPACE: &str = "default";

/// Why no mock could be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the composite resource schema has type {0:?}, not object")]
pub struct MockError(pub String);

/// What the Composition's patches expect of XR string fields, by field path (array indexes
/// as `*`): the values the first transform of a patch reading the field takes without
/// failing (the keys of a map, the literals of a match, a number or boolean a convert
/// parses). A mock holding one of them renders what a real XR
/// renders, instead of failing on a missing map key.
#[derive(Debug, Clone, Default)]
pub struct Hints(HashMap<Vec<String>, Vec<String>, crate::hashing::ByInput>);

impl Hints {
    /// The hints of patches that read the XR (`FromCompositeFieldPath`; combine variables go
    /// through no transform of their own).
    pub fn of<'a>(patches: impl IntoIterator<Item = &'a Patch>) -> Self {
        let mut hints = Hints::default();
        for p in patches {
            if p.effective_type() != model::FROM_COMPOSITE_FIELD_PATH {
                continue;
            }
            let (Some(from), Some(first)) = (p.from_field_path.as_deref(), p.transforms.first())
            else {
                continue;
            };
            let Ok(segments) = fieldpath::parse(from) else {
                continue;
            };
            let key: Vec<String> = segments
                .as_slice()
                .iter()
                .map(|s| match s {
                    Segment::Field(f) => f.clone(),
                    Segment::Index(_) => "*".to_string(),
                })
                .collect();
            let values = hints.0.entry(key).or_default();
            for v in accepted(first) {
                if values.len() < MAX_HINTS && !values.contains(&v) {
                    values.push(v);
                }
            }
        }
        hints
    }

    fn at(&self, path: &[String]) -> &[String] {
        self.0.get(path).map_or(&[], Vec::as_slice)
    }
}

/// Strings `t` accepts as input without failing. Not the strings a regexp matches: making
/// one means compiling the regexp, which a hostile Composition makes slow, outside the
/// rendering that the review's budget bounds.
fn accepted(t: &model::Transform) -> Vec<String> {
    match t.r#type.as_str() {
        "map" => t
            .map
            .as_ref()
            .map(|m| m.pairs.keys().take(MAX_HINTS).cloned().collect())
            .unwrap_or_default(),
        "match" => t
            .r#match
            .as_ref()
            .map(|m| {
                m.patterns
                    .iter()
                    .filter(|p| p.r#type != "regexp")
                    .filter_map(|p| p.literal.clone())
                    .take(MAX_HINTS)
                    .collect()
            })
            .unwrap_or_default(),
        "convert" => {
            let Some(c) = &t.convert else {
                return Vec::new();
            };
            match (c.to_type.as_str(), c.effective_format()) {
                ("bool", _) => vec!["true".into()],
                ("int" | "int64" | "float64", _) => vec!["1".into()],
                ("object", "json") => vec!["{}".into()],
                ("array", "json") => vec!["[]".into()],
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

/// The most values kept of one transform (a map of a million keys needs only a few).
const MAX_HINTS: usize = 16;

/// The required fields of an object schema, filled (the prototype's `mockRequiredFields`).
/// `None` (no schema) gives an empty object; a schema of another type than object is an error.
pub fn required_fields(schema: Option<&Schema>, hints: &Hints) -> Result<Value, MockError> {
    let Some(schema) = schema else {
        return Ok(Value::Object(Map::new()));
    };
    match schema.type_.as_deref() {
        None | Some("" | "object") => Ok(fill_object(schema, &mut Vec::new(), hints, &mut None)),
        Some(other) => Err(MockError(other.to_string())),
    }
}

/// What the mock XR is of: its type and the Composition that composes it.
#[derive(Debug, Clone, Copy)]
pub struct Of<'a> {
    /// The XR's `apiVersion`.
    pub api_version: &'a str,
    /// The XR's kind.
    pub kind: &'a str,
    /// The Composition's name.
    pub composition: &'a str,
    /// The Composition's `writeConnectionSecretsToNamespace`.
    pub secrets_namespace: Option<&'a str>,
    /// What the Composition's patches expect of the XR's string fields.
    pub hints: &'a Hints,
}

/// A mock XR: required fields filled, defaults applied, and what Crossplane sets: name,
/// uid, the composite label, `spec.compositionRef`, `spec.writeConnectionSecretToRef` when
/// the Composition names a namespace for connection secrets (named after the XR's uid, as
/// Crossplane does) and, when the XR has a `spec.claimRef` (XRs of claims), the claim labels
/// and reference.
///
/// A v2 XR (schema with `spec.crossplane`, scope Namespaced or Cluster) gets
/// `spec.crossplane.compositionRef` instead, and neither connection secret nor claim (v2 XRs
/// have none); a namespaced one (whose `resourceRefs` have no namespace, as Crossplane
/// generates them for scope Namespaced) lives in namespace `default`.
pub fn composite(schema: Option<&Schema>, of: &Of<'_>) -> Result<Value, MockError> {
    composite_filled(schema, of, false)
}

/// [`composite`] with every field of `spec` filled, optional ones too (except those
/// Crossplane sets, and at most [`MAX_OPTIONAL`] of them): the XR a function observes,
/// since what a function reads is not known (a patch's reads are), and a function that
/// finds a field absent composes something no XR holding it would.
pub fn composite_full(schema: Option<&Schema>, of: &Of<'_>) -> Result<Value, MockError> {
    composite_filled(schema, of, true)
}

/// The most optional fields [`composite_full`] fills.
pub const MAX_OPTIONAL: usize = 2000;

/// The fields of a composite resource's `spec` that Crossplane sets or reads for itself.
const CROSSPLANE_SPEC: &[&str] = &[
    "claimRef",
    "compositionRef",
    "compositionRevisionRef",
    "compositionRevisionSelector",
    "compositionSelector",
    "compositionUpdatePolicy",
    "crossplane",
    "environmentConfigRefs",
    "publishConnectionDetailsTo",
    "resourceRef",
    "resourceRefs",
    "writeConnectionSecretToRef",
];

fn composite_filled(schema: Option<&Schema>, of: &Of<'_>, full: bool) -> Result<Value, MockError> {
    let Of {
        api_version,
        kind,
        composition,
        secrets_namespace,
        hints,
    } = *of;
    let required = match schema {
        Some(schema) if full => {
            required_fields(Some(schema), hints)?;
            fill_object(schema, &mut Vec::new(), hints, &mut Some(MAX_OPTIONAL))
        }
        _ => required_fields(schema, hints)?,
    };
    let name = format!("{}-mock", kind.to_ascii_lowercase());
    let claimed = schema.is_some_and(|s| s.descend(&["spec", "claimRef"]).is_some());
    let v2 = schema.is_some_and(|s| {
        s.descend(&["spec", "crossplane", "compositionRef"])
            .is_some()
    });
    let namespaced = v2
        && schema.is_some_and(|s| {
            s.descend(&["spec", "crossplane", "resourceRefs", "[]", "namespace"])
                .is_none()
        });
    // apiVersion, kind and metadata first, as kubectl prints objects.
    let mut xr = Value::Object(Map::new());
    let obj = xr.as_object_mut().ok_or_else(|| MockError("null".into()))?;
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    let mut labels = Map::new();
    labels.insert("crossplane.io/composite".into(), json!(name));
    if claimed {
        labels.insert(
            "crossplane.io/claim-name".into(),
            json!(format!("{name}-claim")),
        );
        labels.insert(
            "crossplane.io/claim-namespace".into(),
            json!(MOCK_NAMESPACE),
        );
    }
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(name));
    if namespaced {
        metadata.insert("namespace".into(), json!(MOCK_NAMESPACE));
    }
    metadata.insert("uid".into(), json!(MOCK_UID));
    metadata.insert("labels".into(), Value::Object(labels));
    obj.insert("metadata".into(), Value::Object(metadata));
    if let Value::Object(fields) = required {
        obj.extend(fields);
    }
    let spec = obj
        .entry("spec")
        .or_insert_with(|| Value::Object(Map::new()));
    if v2 {
        if let Some(spec) = spec.as_object_mut() {
            let crossplane = spec
                .entry("crossplane")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(crossplane) = crossplane.as_object_mut() {
                crossplane.insert("compositionRef".into(), json!({"name": composition}));
            }
        }
    } else if let Some(spec) = spec.as_object_mut() {
        spec.insert("compositionRef".into(), json!({"name": composition}));
        if let Some(ns) = secrets_namespace {
            spec.insert(
                "writeConnectionSecretToRef".into(),
                json!({"name": MOCK_UID, "namespace": ns}),
            );
        }
        if claimed {
            let claim_kind = kind.strip_prefix('X').unwrap_or(kind);
            spec.insert(
                "claimRef".into(),
                json!({"apiVersion": api_version, "kind": claim_kind,
                       "name": format!("{name}-claim"), "namespace": MOCK_NAMESPACE}),
            );
        }
    }
    if let Some(schema) = schema {
        apply_defaults(&mut xr, schema);
    }
    Ok(xr)
}

/// Deep enough for any real schema; recursive schemas cannot occur in structural CRDs.
const MAX_DEPTH: usize = 64;

/// The required fields of `schema` filled; with `optional` (how many more may be), under
/// `spec` the optional ones too.
fn fill_object(
    schema: &Schema,
    path: &mut Vec<String>,
    hints: &Hints,
    optional: &mut Option<usize>,
) -> Value {
    let mut map = Map::new();
    if path.len() > MAX_DEPTH {
        return Value::Object(map);
    }
    for name in &schema.required {
        // `metadata` is Crossplane's to set, and apiVersion/kind are set by the caller.
        if path.is_empty() && matches!(name.as_str(), "metadata" | "apiVersion" | "kind") {
            continue;
        }
        path.push(name.clone());
        let value = match schema.property(name) {
            Some(prop) => fill(prop, path, hints, optional),
            None => json!(plain_string(path)),
        };
        path.pop();
        map.insert(name.clone(), value);
    }
    let under_spec = path.first().is_some_and(|p| p == "spec");
    if optional.is_some() && (under_spec || path.is_empty()) {
        for (name, prop) in &schema.properties {
            if map.contains_key(name)
                || (path.is_empty() && name != "spec")
                || (path.len() == 1 && CROSSPLANE_SPEC.contains(&name.as_str()))
            {
                continue;
            }
            match optional {
                Some(0) | None => break,
                Some(n) => *n -= 1,
            }
            path.push(name.clone());
            let value = fill(prop, path, hints, optional);
            path.pop();
            map.insert(name.clone(), value);
        }
    }
    Value::Object(map)
}

/// A value of `schema` (at `path`) that satisfies its own constraints.
fn fill(
    schema: &Schema,
    path: &mut Vec<String>,
    hints: &Hints,
    optional: &mut Option<usize>,
) -> Value {
    if let Some(default) = &schema.default {
        return default.clone();
    }
    if let Some(first) = schema.enum_values.first() {
        // The enum value a patch expects, if one does.
        let expected = hints.at(path);
        return schema
            .enum_values
            .iter()
            .find(|v| v.as_str().is_some_and(|s| expected.iter().any(|e| e == s)))
            .unwrap_or(first)
            .clone();
    }
    match schema.type_.as_deref() {
        Some("object") => fill_object(schema, path, hints, optional),
        Some("array") => {
            let n = schema.min_items.unwrap_or(1).max(1);
            path.push("*".into());
            let item = match schema.items_schema() {
                Some(s) => fill(s, path, hints, optional),
                None => json!(plain_string(path)),
            };
            path.pop();
            // Elements of a set must differ; a required array is valid with one element
            // unless minItems asks for more.
            let items: Vec<Value> = (0..n.min(16)).map(|i| distinct(&item, i)).collect();
            Value::Array(items)
        }
        Some("integer") => json!(integer(schema)),
        Some("number") => number(schema),
        Some("boolean") => json!(false),
        Some("string") => json!(string(schema, path, hints)),
        _ if schema.int_or_string => json!(integer(schema)),
        _ => json!(plain_string(path)),
    }
}

fn distinct(item: &Value, i: u64) -> Value {
    match item {
        Value::String(s) if i > 0 => json!(format!("{s}{i}")),
        Value::Number(n) if i > 0 => json!(n.as_i64().unwrap_or(0) + i as i64),
        other => other.clone(),
    }
}

fn integer(schema: &Schema) -> i64 {
    let mut v = 0.0_f64;
    if let Some(min) = schema.minimum {
        v = if schema.exclusive_minimum {
            min.floor() + 1.0
        } else {
            min.ceil()
        };
    } else if let Some(max) = schema.maximum.filter(|m| *m < 0.0) {
        v = if schema.exclusive_maximum {
            max.ceil() - 1.0
        } else {
            max.floor()
        };
    }
    if let Some(m) = schema.multiple_of.filter(|m| *m >= 1.0) {
        v = (v / m).ceil() * m;
    }
    v as i64
}

fn number(schema: &Schema) -> Value {
    if schema.minimum.is_some() || schema.maximum.is_some() || schema.multiple_of.is_some() {
        return json!(integer(schema) as f64);
    }
    // The prototype's 0.1: a JSON round trip keeps it a float.
    json!(0.1)
}

fn string(schema: &Schema, path: &[String], hints: &Hints) -> String {
    let fits = |s: &str| {
        let n = s.chars().count() as u64;
        n >= schema.min_length.unwrap_or(0)
            && schema.max_length.is_none_or(|max| n <= max)
            && schema
                .pattern
                .as_deref()
                .is_none_or(|p| regex::Regex::new(p).is_ok_and(|re| re.is_match(s)))
    };
    // What a patch expects, when the schema allows it.
    if let Some(expected) = hints.at(path).iter().find(|s| fits(s)) {
        return expected.clone();
    }
    let mut s = match schema
        .format
        .as_deref()
        .map(|f| f.replace('-', ""))
        .as_deref()
    {
        Some("datetime") => "1970-01-01T00:00:00Z".to_string(),
        Some("date") => "1970-01-01".to_string(),
        Some("duration") => "1s".to_string(),
        Some("uuid" | "uuid4") => MOCK_UID.to_string(),
        Some("uuid3") => "00000000-0000-3000-8000-000000000000".to_string(),
        Some("uuid5") => "00000000-0000-5000-8000-000000000000".to_string(),
        Some("email") => "mock@example.com".to_string(),
        Some("hostname") => "example.com".to_string(),
        Some("uri") => "https://example.com".to_string(),
        Some("ipv4") => "192.0.2.1".to_string(),
        Some("ipv6") => "2001:db8::1".to_string(),
        Some("cidr") => "192.0.2.0/24".to_string(),
        Some("mac") => "00:00:5e:00:53:01".to_string(),
        Some("hexcolor") => "#000000".to_string(),
        Some("rgbcolor") => "rgb(0,0,0)".to_string(),
        Some("bsonobjectid") => "000000000000000000000000".to_string(),
        _ => plain_string(path),
    };
    if let Some(pattern) = &schema.pattern
        && !fits(&s)
        && let Some(m) = super::pattern::example(pattern)
    {
        s = m;
    }
    let min = schema.min_length.unwrap_or(0) as usize;
    while s.chars().count() < min {
        s.push('x');
    }
    if let Some(max) = schema.max_length {
        s = s.chars().take(max as usize).collect();
    }
    s
}

/// The value of a string field without constraints: its name as a DNS label
/// (`clusterName` is `cluster-name`), valid wherever Kubernetes takes a name or a label.
fn plain_string(path: &[String]) -> String {
    let name = path
        .iter()
        .rev()
        .find(|s| *s != "*")
        .map_or("", String::as_str);
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_uppercase() && !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
        match c {
            'a'..='z' | '0'..='9' => out.push(c),
            'A'..='Z' => out.push(c.to_ascii_lowercase()),
            _ if !out.is_empty() && !out.ends_with('-') => out.push('-'),
            _ => {}
        }
    }
    let out: String = out.trim_end_matches('-').chars().take(63).collect();
    let out = out.trim_end_matches('-');
    if out.is_empty() {
        "mock".to_string()
    } else {
        out.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(v: Value) -> Schema {
        Schema::from_value(&v).expect("schema")
    }

    #[test]
    fn fills_constraints() {
        let s = schema(
            json!({"type": "object", "required": ["spec"], "properties": {
            "spec": {"type": "object", "required": ["a", "b", "c", "d", "e", "f", "g", "h", "clusterName", "size", "tier"],
                "properties": {
                    "a": {"type": "string", "enum": ["small", "large"]},
                    "b": {"type": "integer", "minimum": 3},
                    "c": {"type": "string", "minLength": 2},
                    "d": {"type": "string", "pattern": "^[a-z]+-[0-9]{2}$"},
                    "e": {"type": "string", "default": "x"},
                    "f": {"type": "array", "minItems": 2, "x-kubernetes-list-type": "set",
                          "items": {"type": "string"}},
                    "g": {"type": "string", "format": "date-time"},
                    "h": {"type": "number", "maximum": 10, "minimum": 2},
                    "clusterName": {"type": "string", "maxLength": 7},
                    "size": {"type": "string"},
                    "tier": {"type": "string", "enum": ["free", "gold", "silver"]},
                    "opt": {"type": "string", "default": "d"}
                }}}}),
        );
        // What the Composition's map transforms take: a key, the first the schema allows.
        let patch = |from: &str, map: Value| -> Patch {
            serde_json::from_value(json!({"fromFieldPath": from, "toFieldPath": "spec.x",
                "transforms": [{"type": "map", "map": map}]}))
            .expect("patch")
        };
        let patches = [
            patch("spec.size", json!({"s": 1, "medium": 2})),
            patch("spec.tier", json!({"platinum": 1, "silver": 2})),
        ];
        let hints = Hints::of(&patches);
        let xr = required_fields(Some(&s), &hints).expect("mock");
        assert_eq!(
            xr,
            json!({"spec": {"a": "small", "b": 3, "c": "cx", "d": "a-00", "e": "x",
                            "f": ["f", "f1"], "g": "1970-01-01T00:00:00Z", "h": 2.0,
                            "clusterName": "cluster", "size": "s", "tier": "silver"}})
        );
        assert_eq!(
            plain_string(&["spec".into(), "dbVersion".into()]),
            "db-version"
        );
        assert_eq!(plain_string(&["spec".into(), "*".into()]), "spec");
        assert_eq!(plain_string(&["__".into()]), "mock");
    }

    #[test]
    fn composite_has_what_crossplane_sets() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"claimRef": {"type": "object"},
                           "size": {"type": "string", "default": "small"}}}}}),
        );
        let of = Of {
            api_version: "example.org/v1",
            kind: "XDatabase",
            composition: "xdb-aws",
            secrets_namespace: Some("crossplane-system"),
            hints: &Hints::default(),
        };
        let xr = composite(Some(&s), &of).expect("mock");
        assert_eq!(
            xr["spec"]["writeConnectionSecretToRef"],
            json!({"name": MOCK_UID, "namespace": "crossplane-system"})
        );
        assert_eq!(xr["metadata"]["name"], "xdatabase-mock");
        assert_eq!(
            xr["metadata"]["labels"]["crossplane.io/claim-namespace"],
            "default"
        );
        assert_eq!(xr["spec"]["compositionRef"]["name"], "xdb-aws");
        assert_eq!(xr["spec"]["claimRef"]["kind"], "Database");
        assert_eq!(xr["spec"]["size"], "small");
    }
}
