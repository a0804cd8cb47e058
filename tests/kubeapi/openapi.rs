//! `/openapi/v3` as kube-apiserver serves it (kube-openapi's `handler3`): the index of group
//! versions, each with the `serverRelativeURL` of its document carrying the document's hash
//! (SHA-512, upper-case hex); a document asked for with a stale hash is answered with a 301
//! to its current URL, with the current one it comes with `Cache-Control: public,
//! immutable`. Documents are read from a folder of `kubectl get --raw` captures
//! (`apis__apps__v1.json` is `apis/apps/v1`) and can be replaced or refused by tests.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use bytes::Bytes;
use hyper::header::{
    CACHE_CONTROL, CONTENT_TYPE, ETAG, EXPIRES, HeaderValue, LAST_MODIFIED, LOCATION, VARY,
};
use hyper::{Response, StatusCode};
use serde_json::{Value, json};
use sha2::Digest as _;

use super::{ApiError, Body, FORBIDDEN_USER, chunks_response, json_response};

/// The index's path.
pub const INDEX: &str = "/openapi/v3";

/// One group version's document.
struct Document {
    bytes: Bytes,
    hash: String,
    modified: SystemTime,
}

impl Document {
    fn new(bytes: Bytes) -> Document {
        Document {
            hash: hash(&bytes),
            bytes,
            modified: SystemTime::now(),
        }
    }
}

/// What the fake serves under `/openapi/v3`, the faults injected and the requests answered.
#[derive(Default)]
pub(super) struct OpenApi {
    documents: BTreeMap<String, Document>,
    fault: Option<u16>,
    /// Path and query of each request answered, and the status.
    requests: Vec<(String, u16)>,
}

/// `computeETag`: SHA-512, upper-case hex.
fn hash(bytes: &[u8]) -> String {
    hex::encode_upper(sha2::Sha512::digest(bytes))
}

/// `path` (`apis/apps/v1`) from a capture's file name (`apis__apps__v1.json`).
pub fn path_of_file(name: &str) -> Option<String> {
    let stem = name.strip_suffix(".json")?;
    (stem != "index").then(|| stem.replace("__", "/"))
}

/// Go's `time.RFC1123` of a UTC time (`Mon, 02 Jan 2006 15:04:05 GMT`, as `http.TimeFormat`).
fn http_date(t: SystemTime) -> String {
    let t = time::OffsetDateTime::from(t);
    t.format(&time::format_description::well_known::Rfc2822)
        .map(|s| s.replace("+0000", "GMT"))
        .unwrap_or_default()
}

impl OpenApi {
    /// Serves every capture in `dir`.
    pub(super) fn load(&mut self, dir: &Path) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(path) = path_of_file(&name) else {
                continue;
            };
            let bytes = std::fs::read(entry.path())
                .unwrap_or_else(|e| panic!("{}: {e}", entry.path().display()));
            self.documents
                .insert(path, Document::new(Bytes::from(bytes)));
        }
    }

    pub(super) fn put(&mut self, path: &str, document: &Value) {
        let bytes = Bytes::from(serde_json::to_vec(document).expect("JSON"));
        self.documents
            .insert(path.to_string(), Document::new(bytes));
    }

    pub(super) fn document(&self, path: &str) -> Option<Value> {
        serde_json::from_slice(&self.documents.get(path)?.bytes).ok()
    }

    pub(super) fn hash(&self, path: &str) -> Option<String> {
        Some(self.documents.get(path)?.hash.clone())
    }

    pub(super) fn set_fault(&mut self, code: Option<u16>) {
        self.fault = code;
    }

    pub(super) fn requests(&self) -> Vec<(String, u16)> {
        self.requests.clone()
    }

    /// The answer to `GET path?query` (authenticated).
    pub(super) fn answer(&mut self, path: &str, query: &str) -> Response<Body> {
        let response = self.respond(path, query);
        let shown = if query.is_empty() {
            path.to_string()
        } else {
            format!("{path}?{query}")
        };
        self.requests.push((shown, response.status().as_u16()));
        response
    }

    fn respond(&self, path: &str, query: &str) -> Response<Body> {
        if let Some(code) = self.fault {
            return fault(code, path).response();
        }
        if path == INDEX {
            return self.index();
        }
        let Some(group_version) = path.strip_prefix("/openapi/v3/") else {
            return not_found();
        };
        let Some(doc) = self.documents.get(group_version) else {
            return not_found();
        };
        let hash = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("hash="))
            .unwrap_or_default();
        let etag = HeaderValue::from_str(&format!("\"{}\"", doc.hash)).expect("a header value");
        if !hash.is_empty() && hash != doc.hash {
            // `http.Redirect` after Content-Type was set: no body.
            let mut response = chunks_response(StatusCode::MOVED_PERMANENTLY.as_u16(), Vec::new());
            let headers = response.headers_mut();
            headers.insert(VARY, HeaderValue::from_static("Accept"));
            headers.insert(ETAG, etag);
            headers.insert(
                LOCATION,
                HeaderValue::from_str(&url(group_version, &doc.hash)).expect("a header value"),
            );
            return response;
        }
        let mut response = json_response(200, doc.bytes.clone());
        let headers = response.headers_mut();
        headers.insert(VARY, HeaderValue::from_static("Accept"));
        headers.insert(ETAG, etag);
        if let Ok(v) = HeaderValue::from_str(&http_date(doc.modified)) {
            headers.insert(LAST_MODIFIED, v);
        }
        if !hash.is_empty() {
            headers.insert(CACHE_CONTROL, HeaderValue::from_static("public, immutable"));
            let year = SystemTime::now() + std::time::Duration::from_secs(365 * 24 * 3600);
            if let Ok(v) = HeaderValue::from_str(&http_date(year)) {
                headers.insert(EXPIRES, v);
            }
        }
        response
    }

    fn index(&self) -> Response<Body> {
        let paths: serde_json::Map<String, Value> = self
            .documents
            .iter()
            .map(|(path, doc)| {
                (
                    path.clone(),
                    json!({"serverRelativeURL": url(path, &doc.hash)}),
                )
            })
            .collect();
        let body = Bytes::from(json!({"paths": paths}).to_string());
        let etag = format!("\"{}\"", hash(&body));
        let mut response = json_response(200, body);
        response
            .headers_mut()
            .insert(ETAG, HeaderValue::from_str(&etag).expect("a header value"));
        response
    }
}

/// `constructServerRelativeURL`.
fn url(group_version: &str, hash: &str) -> String {
    format!("/openapi/v3/{group_version}?hash={hash}")
}

/// `http.NotFound`: a plain-text 404, not a Status.
fn not_found() -> Response<Body> {
    let mut response = chunks_response(404, vec![Bytes::from_static(b"404 page not found\n")]);
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// An injected fault, worded as kube-apiserver words it for a non-resource URL.
fn fault(code: u16, path: &str) -> ApiError {
    match code {
        401 => ApiError::unauthorized(),
        403 => ApiError::new(
            403,
            "Forbidden",
            &format!("forbidden: User \"{FORBIDDEN_USER}\" cannot get path \"{path}\""),
            Some(json!({})),
        ),
        503 => ApiError::new(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
            Some(json!({})),
        ),
        other => ApiError::new(
            other,
            "InternalError",
            "Internal error occurred: etcdserver: request timed out",
            Some(json!({})),
        ),
    }
}
