//! The AdmissionReview envelope (`admission.k8s.io/v1` and `v1beta1`): reading a review from
//! the bytes the API server sent and writing the answer in the version it was sent in.
//!
//! The API server accepts nothing but HTTP 200 with an AdmissionReview that echoes
//! `request.uid`; anything else is a failed call, which its failure policy turns into a
//! rejection nobody can explain. So a review that cannot be read is still answered: the
//! uid is salvaged from whatever part of the body parses, and the answer is a denial that
//! says what was wrong.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::authentication::v1::UserInfo;
use kube_core::admission::{AdmissionResponse, Operation};
use kube_core::gvk::GroupVersionKind;
use kube_core::response::StatusSummary;
use kube_core::{Status, TypeMeta};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

use crate::mode::{self, Mode};
use crate::model::{APIEXTENSIONS_GROUP, LEGACY_MODE_ANNOTATION, MODE_ANNOTATION};

/// `admission.k8s.io/v1`.
pub const V1: &str = "admission.k8s.io/v1";
/// `admission.k8s.io/v1beta1` (deprecated since Kubernetes 1.16, still sent when listed).
pub const V1BETA1: &str = "admission.k8s.io/v1beta1";
/// The kind of the envelope.
pub const KIND: &str = "AdmissionReview";

/// The part of an AdmissionReview's request the webhook reads.
///
/// kube-core's `AdmissionRequest` reads objects into `DynamicObject`s (a typed `ObjectMeta`
/// and a buffered copy of the rest) and reads `oldObject` in full; the validator wants plain
/// JSON and nothing of the old object. Reading `object` straight into JSON and only checking
/// the syntax of `oldObject` reads a 25 KiB review in 110 µs instead of 250 µs
/// (`benches/serve.rs`), and skips most of an UPDATE's second object. Field names and types
/// are those of `admission.k8s.io/v1` (v1beta1 has the same).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// Identifies this call; the answer must echo it.
    pub uid: String,
    /// The kind of the object (after conversion to the version the webhook registered).
    pub kind: GroupVersionKind,
    /// The object's name (empty on a create that asks for a generated name).
    #[serde(default)]
    pub name: String,
    /// The operation.
    pub operation: Operation,
    /// Who asked.
    #[serde(default)]
    pub user_info: UserInfo,
    /// The object being created or updated (absent on DELETE).
    #[serde(default)]
    pub object: Option<Map<String, Value>>,
    /// The object before an UPDATE or DELETE: syntax-checked, not kept.
    #[serde(default)]
    pub old_object: Option<IgnoredAny>,
    /// Whether this is a dry run.
    #[serde(default)]
    pub dry_run: bool,
}

/// The envelope as sent: TypeMeta and the request.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    request: Option<Request>,
}

/// Why a review could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// No body at all.
    #[error("the request body is empty; expected an AdmissionReview")]
    Empty,
    /// More bytes than the limit.
    #[error(
        "the request body is larger than the limit of {limit} bytes (the API server sends at most 3 MiB per object)"
    )]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The body did not arrive in full.
    #[error("the request body could not be read: {0}")]
    Body(String),
    /// A media type other than JSON.
    #[error(
        "Content-Type {0:?} is not supported: send an AdmissionReview as application/json, as the API server does"
    )]
    ContentType(String),
    /// Not JSON, or not an AdmissionReview.
    #[error("the request body is not a valid AdmissionReview: {0}")]
    Decode(#[from] serde_json::Error),
    /// An apiVersion other than v1 and v1beta1.
    #[error(
        "AdmissionReview apiVersion {0:?} is not supported: this webhook answers admission.k8s.io/v1 and admission.k8s.io/v1beta1"
    )]
    ApiVersion(String),
    /// A kind other than AdmissionReview.
    #[error("expected kind AdmissionReview, got {0:?}")]
    Kind(String),
    /// An envelope without `request`.
    #[error("the AdmissionReview has no request")]
    NoRequest,
    /// CREATE or UPDATE without the object.
    #[error("the AdmissionReview request ({0}) has no object")]
    NoObject(&'static str),
    /// No memory left for the body before the deadline.
    #[error(
        "the webhook is busy: no memory for a {bytes}-byte body before the deadline; try again"
    )]
    Busy {
        /// The body's size.
        bytes: usize,
    },
    /// Validation failed (a bug).
    #[error("internal error while validating: {0}")]
    Internal(String),
    /// The object's JSON tree would take more memory than a review may hold.
    #[error(
        "the object holds about {values} values, more than fit in the memory budget of one review"
    )]
    OverBudget {
        /// How many values the body holds (at most).
        values: usize,
    },
    /// Nested deeper than the API server allows.
    #[error(
        "the request body nests more than {MAX_DEPTH} levels deep: the API server accepts objects of at most 10000 levels, 10002 in an AdmissionReview"
    )]
    TooDeep,
}

/// The deepest nesting of a review: the API server decodes objects up to 10,000 levels
/// (Go's `encoding/json` limit, which sigs.k8s.io/json keeps), and the review puts the
/// object two levels down (`request.object`).
pub const MAX_DEPTH: usize = crate::go::json::MAX_NESTING_DEPTH + 2;

/// What one JSON value costs once read (the value, and an object member's key and index
/// entry), for the memory a body's tree will take.
pub const VALUE_BYTES: usize = 2 * size_of::<Value>() + 16;

/// What an answer must echo, salvaged from any body, even a truncated or malformed one; and
/// what a deadline or busy answer goes by (the Composition's mode and name), read before the
/// review waits for a worker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Echo {
    /// The review's apiVersion, when it is one this webhook speaks.
    pub api_version: Option<&'static str>,
    /// `request.uid`.
    pub uid: Option<String>,
    /// `request.operation`, when it is one of the four Kubernetes sends (the API server
    /// sends it before the object).
    pub operation: Option<&'static str>,
    /// Whether `request.kind` is an `apiextensions.crossplane.io` Composition, once read.
    pub composition: Option<bool>,
    /// `request.object`'s metadata, once read in full.
    pub object: Option<ObjectEcho>,
}

/// The part of an object's metadata a deadline answer needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectEcho {
    /// `metadata.name`.
    pub name: Option<String>,
    /// `metadata.generateName`.
    pub generate_name: Option<String>,
    /// The mode annotations (only those).
    pub annotations: BTreeMap<String, String>,
}

impl Echo {
    /// The apiVersion to answer in: the one sent, or v1.
    pub fn answer_version(&self) -> &'static str {
        self.api_version.unwrap_or(V1)
    }

    /// The mode and the name of the Composition under review, as [`super::admission::decide`]
    /// reads them (an invalid mode annotation means strict); `None` until the object's
    /// metadata has been read, or when the object is not a Composition.
    pub fn composition(&self, default_mode: Mode) -> Option<(Mode, String)> {
        if self.composition == Some(false) {
            return None;
        }
        let object = self.object.as_ref()?;
        let mode = mode::mode_from_annotations(&object.annotations, default_mode)
            .map_or(Mode::Strict, |c| c.mode);
        let name =
            super::admission::display_name(object.name.as_deref(), object.generate_name.as_deref());
        Some((mode, name))
    }

    /// Whether everything salvage looks for is known.
    fn complete(&self) -> bool {
        self.api_version.is_some()
            && self.uid.is_some()
            && self.composition.is_some()
            && self.object.is_some()
    }
}

/// Reads a review. `content_type` is the request's `Content-Type` header, if any.
///
/// A body whose JSON tree would take more than `max_tree_bytes` is not decoded
/// ([`ReviewError::OverBudget`]): 3 MiB of JSON hold 1.5 million array elements, 100 MiB once
/// read.
pub fn decode(
    content_type: Option<&str>,
    body: &[u8],
    max_tree_bytes: usize,
) -> Result<Request, ReviewError> {
    if let Some(ct) = content_type
        && !is_json(ct)
    {
        return Err(ReviewError::ContentType(ct.to_string()));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ReviewError::Empty);
    }
    // serde_json stops at 128 levels by default; the API server allows 10,000. The scan
    // bounds the recursion below (on threads whose stacks have room for it), and the tree
    // it would build.
    let shape = crate::document::json_shape(body, MAX_DEPTH);
    if shape.depth > MAX_DEPTH {
        return Err(ReviewError::TooDeep);
    }
    let tree_bytes = shape.values.saturating_mul(VALUE_BYTES);
    if tree_bytes > max_tree_bytes {
        return Err(ReviewError::OverBudget {
            values: shape.values,
        });
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    de.disable_recursion_limit();
    let review = Review::deserialize(&mut de).and_then(|r| de.end().map(|()| r));
    let review: Review = match review {
        Ok(review) => review,
        Err(e) => {
            // Another version or kind need not have this request's shape: say so first.
            if let Ok(types) = serde_json::from_slice::<TypeMeta>(body) {
                check_types(&types.api_version, &types.kind)?;
            }
            return Err(e.into());
        }
    };
    check_types(&review.api_version, &review.kind)?;
    review.request.ok_or(ReviewError::NoRequest)
}

/// The envelope must be an AdmissionReview of a version this webhook answers.
fn check_types(api_version: &str, kind: &str) -> Result<(), ReviewError> {
    match api_version {
        V1 | V1BETA1 => {}
        other => return Err(ReviewError::ApiVersion(other.to_string())),
    }
    if kind != KIND {
        return Err(ReviewError::Kind(kind.to_string()));
    }
    Ok(())
}

/// Whether a media type is JSON (`application/json`, with or without parameters).
fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
}

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

/// Keys are borrowed from the body unless they hold escapes.
type Key<'de> = std::borrow::Cow<'de, str>;

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
                    self.0.api_version = match v.as_ref() {
                        V1 => Some(V1),
                        V1BETA1 => Some(V1BETA1),
                        _ => None,
                    };
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
                    self.0.composition =
                        Some(kind.group == APIEXTENSIONS_GROUP && kind.kind == "Composition");
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

/// An answer to one review: allowed or not, the Status of a denial, warnings.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Whether the object is admitted.
    pub allowed: bool,
    /// The Status of a denial (code, reason, message, causes).
    pub status: Option<Status>,
    /// Warnings for the client (kubectl prints them as `Warning: ...`).
    pub warnings: Vec<String>,
}

impl Answer {
    /// Admitted, with warnings.
    pub fn allow(warnings: Vec<String>) -> Self {
        Answer {
            allowed: true,
            status: None,
            warnings,
        }
    }

    /// Denied with a Status.
    pub fn deny(status: Status, warnings: Vec<String>) -> Self {
        Answer {
            allowed: false,
            status: Some(status),
            warnings,
        }
    }

    /// A denial for a review that could not be read or validated: 400 `BadRequest`, 503
    /// `ServiceUnavailable` when busy, 500 `InternalError` for a bug.
    pub fn bad_request(error: &ReviewError) -> Self {
        let (reason, code) = match error {
            ReviewError::Busy { .. } => ("ServiceUnavailable", 503),
            ReviewError::Internal(_) => ("InternalError", 500),
            _ => ("BadRequest", 400),
        };
        Answer::deny(
            Status::failure(&error.to_string(), reason).with_code(code),
            Vec::new(),
        )
    }
}

/// Serializes the answer as an AdmissionReview in `api_version` echoing `uid`. A validating
/// answer never carries a patch.
pub fn encode(api_version: &str, uid: &str, answer: Answer) -> Vec<u8> {
    let mut response = AdmissionResponse::invalid("");
    response.uid = uid.to_string();
    response.allowed = answer.allowed;
    response.result = match answer.status {
        Some(mut s) => {
            s.status = Some(StatusSummary::Failure);
            s
        }
        None => Status::default(),
    };
    response.warnings = (!answer.warnings.is_empty()).then_some(answer.warnings);
    let mut review = response.into_review();
    review.types = TypeMeta {
        api_version: api_version.to_string(),
        kind: KIND.to_string(),
    };
    // Serializing plain structs of strings, numbers and maps cannot fail.
    serde_json::to_vec(&review).unwrap_or_else(|_| {
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":false}}"#
            .to_vec()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const BODY: &str = r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1",
      "request":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind":{"group":"apiextensions.crossplane.io","version":"v1","kind":"Composition"},
        "resource":{"group":"apiextensions.crossplane.io","version":"v1","resource":"compositions"},
        "name":"c","operation":"CREATE","userInfo":{"username":"admin"},
        "object":{"apiVersion":"apiextensions.crossplane.io/v1","kind":"Composition","metadata":{"name":"c"},"spec":{}},
        "oldObject":null,"dryRun":false}}"#;

    #[test]
    fn decodes_v1beta1_and_keeps_its_version() {
        let r = decode(
            Some("application/json; charset=utf-8"),
            BODY.as_bytes(),
            usize::MAX,
        )
        .unwrap();
        assert_eq!(r.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_eq!(r.object.unwrap()["metadata"]["name"], "c");
    }

    #[test]
    fn salvages_uid_from_truncated_bodies() {
        for cut in [140, 200, BODY.len() - 3] {
            let echo = salvage(&BODY.as_bytes()[..cut]);
            assert_eq!(echo.api_version, Some(V1BETA1), "cut at {cut}");
            assert_eq!(
                echo.uid.as_deref(),
                Some("705ab4f5-6393-11e8-b7cc-42010a800002")
            );
        }
        assert_eq!(salvage(b"").uid, None);
        assert_eq!(salvage(b"[1,2]").uid, None);
        assert_eq!(salvage(br#"{"request":{"kind":{}}"#).uid, None);
        // The request before the apiVersion, or no apiVersion at all.
        let echo = salvage(br#"{"request":{"uid":"u1","x":"#);
        assert_eq!((echo.api_version, echo.uid.as_deref()), (None, Some("u1")));
        assert_eq!(echo.answer_version(), V1);
    }

    #[test]
    fn salvages_the_mode_and_name_without_decoding() {
        let review = |metadata: Value| {
            json!({"apiVersion": V1BETA1, "kind": "AdmissionReview", "request": {
                "uid": "u", "operation": "CREATE",
                "kind": {"group": "apiextensions.crossplane.io", "version": "v1", "kind": "Composition"},
                "object": {"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
                           "metadata": metadata, "spec": {"resources": [1, 2, 3]}},
                "oldObject": null}})
            .to_string()
        };
        let salvaged = |body: &str| salvage(body.as_bytes()).composition(Mode::Loose);
        let strict = review(json!({"name": "c", "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{...}",
            MODE_ANNOTATION: "strict"}}));
        assert_eq!(salvaged(&strict), Some((Mode::Strict, "c".to_string())));
        let echo = salvage(strict.as_bytes());
        assert_eq!(
            (echo.api_version, echo.uid.as_deref(), echo.operation),
            (Some(V1BETA1), Some("u"), Some("CREATE"))
        );
        // The metrics label of a late answer: only the four operations Kubernetes sends.
        let odd = strict.replace("\"CREATE\"", "\"PATCH\"");
        assert_eq!(salvage(odd.as_bytes()).operation, None);
        // No annotation: the default; an invalid one: strict; the legacy one is read.
        assert_eq!(
            salvaged(&review(json!({"generateName": "g-"}))),
            Some((Mode::Loose, "g-*".to_string()))
        );
        assert_eq!(
            salvaged(&review(
                json!({"name": "c", "annotations": {MODE_ANNOTATION: "Strict"}})
            )),
            Some((Mode::Strict, "c".to_string()))
        );
        assert_eq!(
            salvaged(&review(
                json!({"name": "c", "annotations": {LEGACY_MODE_ANNOTATION: "strict"}})
            )),
            Some((Mode::Strict, "c".to_string()))
        );
        assert_eq!(
            salvaged(&review(
                json!({"name": "c", "annotations": {MODE_ANNOTATION: "warn", LEGACY_MODE_ANNOTATION: "strict"}})
            )),
            Some((Mode::Warn, "c".to_string()))
        );
        // Metadata cut short is not trusted; past it, the rest of the object need not arrive.
        let cut = strict.find("strict").unwrap();
        assert_eq!(salvaged(&strict[..cut]), None);
        assert_eq!(salvage(&strict.as_bytes()[..cut]).uid.as_deref(), Some("u"));
        let spec = strict.find("\"spec\"").unwrap();
        assert_eq!(
            salvaged(&strict[..spec + 3]),
            Some((Mode::Strict, "c".to_string()))
        );
        // Not a Composition, or no object (DELETE).
        let other = strict.replace(r#""kind":"Composition"}"#, r#""kind":"ConfigMap"}"#);
        assert_eq!(salvage(other.as_bytes()).composition, Some(false));
        assert_eq!(salvaged(&other), None);
        let delete = json!({"apiVersion": V1, "request": {"uid": "d", "object": null}}).to_string();
        let echo = salvage(delete.as_bytes());
        assert_eq!((echo.uid.as_deref(), echo.object), (Some("d"), None));
    }

    #[test]
    fn refuses_what_is_not_a_review() {
        let err = |ct: Option<&str>, b: &str| {
            decode(ct, b.as_bytes(), usize::MAX)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(Some("text/plain"), BODY),
            r#"Content-Type "text/plain" is not supported: send an AdmissionReview as application/json, as the API server does"#
        );
        assert_eq!(
            err(None, "  \n"),
            "the request body is empty; expected an AdmissionReview"
        );
        assert_eq!(
            err(None, "{\"kind\": "),
            "the request body is not a valid AdmissionReview: EOF while parsing a value at line 1 column 9"
        );
        assert_eq!(
            err(
                None,
                r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}"#
            ),
            "the AdmissionReview has no request"
        );
        assert_eq!(
            err(
                None,
                &BODY.replace("admission.k8s.io/v1beta1", "admission.k8s.io/v2")
            ),
            r#"AdmissionReview apiVersion "admission.k8s.io/v2" is not supported: this webhook answers admission.k8s.io/v1 and admission.k8s.io/v1beta1"#
        );
        // The envelope is judged before the request, whose shape another version may change.
        assert_eq!(
            err(
                None,
                r#"{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"u"}}"#
            ),
            r#"AdmissionReview apiVersion "admission.k8s.io/v2" is not supported: this webhook answers admission.k8s.io/v1 and admission.k8s.io/v1beta1"#
        );
        assert_eq!(
            err(
                None,
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"u"}}"#
            ),
            r#"expected kind AdmissionReview, got "Pod""#
        );
        let deep = format!(
            r#"{{"kind":"AdmissionReview","request":{{"uid":"u","object":{{"spec":{}"#,
            "[".repeat(100_000)
        );
        assert_eq!(
            err(None, &deep),
            "the request body nests more than 10002 levels deep: the API server accepts objects of at most 10000 levels, 10002 in an AdmissionReview"
        );
        // As deep as the API server allows: read.
        let deep = format!(
            r#"{{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{{"uid":"u","kind":{{"group":"","version":"v1","kind":"C"}},"operation":"CREATE","object":{{"spec":{}{}}}}}}}"#,
            "[".repeat(9_999),
            "]".repeat(9_999)
        );
        let request = std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(move || decode(None, deep.as_bytes(), usize::MAX).map(|r| r.uid))
            .expect("thread")
            .join()
            .expect("no overflow");
        assert_eq!(request.ok().as_deref(), Some("u"));
    }

    #[test]
    fn denials_of_unread_reviews_say_whose_fault() {
        let code = |e: ReviewError| {
            let s = Answer::bad_request(&e).status.unwrap();
            (s.code, s.reason, s.message)
        };
        assert_eq!(
            code(ReviewError::Busy { bytes: 10 }),
            (
                503,
                "ServiceUnavailable".to_string(),
                "the webhook is busy: no memory for a 10-byte body before the deadline; try again"
                    .to_string()
            )
        );
        assert_eq!(code(ReviewError::Internal("boom".into())).0, 500);
        assert_eq!(code(ReviewError::Empty).1, "BadRequest");
    }

    #[test]
    fn encodes_in_the_version_sent_without_patch() {
        let status = Status::failure("no", "Invalid").with_code(422);
        let out = encode(V1BETA1, "u", Answer::deny(status, vec!["w".into()]));
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": V1BETA1, "kind": "AdmissionReview",
                   "response": {"uid": "u", "allowed": false, "warnings": ["w"],
                                "status": {"status": "Failure", "code": 422, "reason": "Invalid", "message": "no"}}})
        );
        let v: Value = serde_json::from_slice(&encode(V1, "u", Answer::allow(vec![]))).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": V1, "kind": "AdmissionReview",
                   "response": {"uid": "u", "allowed": true, "status": {}}})
        );
    }
}
