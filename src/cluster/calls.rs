//! Every call the kube client makes, observed by a tower layer in its stack: verb
//! (`list`, `watch`, `get`), resource, time to the response's headers, and the error class.
//! The watches' calls are made inside kube-runtime, so the client stack is the one place
//! that sees them all.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Request, Response};

/// One finished (or abandoned) call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiCall {
    /// `list`, `watch`, `get`, `create`, `patch` or `other`.
    pub verb: &'static str,
    /// `customresourcedefinitions`, `managedresourcedefinitions`,
    /// `compositeresourcedefinitions`, `managedresourceactivationpolicies`, `functions`,
    /// `openapi` (the OpenAPI v3 index and
    /// documents), `validatingwebhookconfigurations`; for the audit `compositions`, `events`
    /// and `clusterpolicyreports`; for calls to functions `functionrevisions` and `secrets`;
    /// or `other`.
    pub resource: &'static str,
    /// Time to the response's headers.
    pub duration: Duration,
    /// `http_<code>` for an error answer, `transport` when no answer came, `abandoned`
    /// when the caller gave up waiting (a timeout); `None` on success.
    pub error: Option<String>,
}

/// Where calls are reported.
pub type CallObserver = Arc<dyn Fn(ApiCall) + Send + Sync>;

/// The resources the server calls, the `resource` labels of its metrics; any other path is
/// `other`.
const RESOURCES: [&str; 11] = [
    super::definitions::Source::Crd.plural(),
    super::definitions::Source::Mrd.plural(),
    super::definitions::Source::Xrd.plural(),
    "validatingwebhookconfigurations",
    super::functions::PLURAL,
    super::policies::PLURAL,
    super::compositions::PLURAL,
    "events",
    "clusterpolicyreports",
    super::function_endpoints::REVISIONS_PLURAL,
    super::function_endpoints::SECRETS_PLURAL,
];

/// The verb and resource of a request.
pub fn classify<B>(request: &Request<B>) -> (&'static str, &'static str) {
    let path = request.uri().path();
    let query = request.uri().query().unwrap_or_default();
    if path == super::openapi::INDEX_PATH || path.starts_with("/openapi/v3/") {
        let verb = if request.method() == http::Method::GET {
            "get"
        } else {
            "other"
        };
        return (verb, "openapi");
    }
    // `/apis/{group}/{version}[/namespaces/{namespace}]/{plural}` (the core group's
    // `/api/{version}/...`), then `/{name}` for one object.
    let (resource, collection) = path
        .strip_prefix("/apis/")
        .map(|rest| (rest, 2))
        .or_else(|| path.strip_prefix("/api/").map(|rest| (rest, 1)))
        .and_then(|(rest, skip)| {
            let mut segments = rest.trim_end_matches('/').split('/').skip(skip).peekable();
            if segments.peek() == Some(&"namespaces") {
                segments.nth(1)?;
            }
            let plural = segments.next()?;
            let resource = RESOURCES.into_iter().find(|r| *r == plural)?;
            Some((resource, segments.next().is_none()))
        })
        .unwrap_or(("other", false));
    // A collection's path ends with the resource; an object's with its name.
    let watch = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    let verb = match (request.method().as_str(), collection, watch) {
        ("GET", _, true) => "watch",
        ("GET", true, false) => "list",
        ("GET", false, false) => "get",
        ("PATCH", false, false) => "patch",
        ("POST", true, false) => "create",
        _ => "other",
    };
    (verb, resource)
}

/// The layer.
#[derive(Clone)]
pub struct CallsLayer {
    observer: CallObserver,
}

impl CallsLayer {
    /// Reports to `observer`.
    pub fn new(observer: CallObserver) -> Self {
        CallsLayer { observer }
    }
}

impl<S> tower::Layer<S> for CallsLayer {
    type Service = Calls<S>;

    fn layer(&self, inner: S) -> Calls<S> {
        Calls {
            inner,
            observer: self.observer.clone(),
        }
    }
}

/// The service the layer wraps around the client's stack.
#[derive(Clone)]
pub struct Calls<S> {
    inner: S,
    observer: CallObserver,
}

/// Reports the call when dropped: as abandoned unless the answer was seen.
struct Report {
    observer: CallObserver,
    call: Option<ApiCall>,
    started: Instant,
}

impl Drop for Report {
    fn drop(&mut self) {
        if let Some(mut call) = self.call.take() {
            call.duration = self.started.elapsed();
            (self.observer)(call);
        }
    }
}

impl<S, B, R> tower::Service<Request<B>> for Calls<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
    S::Error: 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (verb, resource) = classify(&request);
        let mut report = Report {
            observer: self.observer.clone(),
            call: Some(ApiCall {
                verb,
                resource,
                duration: Duration::ZERO,
                error: Some("abandoned".to_string()),
            }),
            started: Instant::now(),
        };
        let future = self.inner.call(request);
        Box::pin(async move {
            let result = future.await;
            if let Some(call) = report.call.as_mut() {
                call.error = match &result {
                    Ok(r) if r.status().is_success() => None,
                    Ok(r) => Some(format!("http_{}", r.status().as_u16())),
                    Err(_) => Some("transport".to_string()),
                };
            }
            drop(report);
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verb(uri: &str) -> (&'static str, &'static str) {
        classify(&Request::get(uri).body(()).expect("request"))
    }

    #[test]
    fn requests_are_classified_by_verb_and_resource() {
        let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        assert_eq!(
            verb(&format!("{crds}?limit=50")),
            ("list", "customresourcedefinitions")
        );
        assert_eq!(
            verb(&format!("{crds}?watch=true&resourceVersion=5")),
            ("watch", "customresourcedefinitions")
        );
        assert_eq!(
            verb(&format!("{crds}/buckets.s3.aws.upbound.io")),
            ("get", "customresourcedefinitions")
        );
        assert_eq!(
            verb("/apis/apiextensions.crossplane.io/v1/compositeresourcedefinitions?limit=50"),
            ("list", "compositeresourcedefinitions")
        );
        assert_eq!(verb("/version"), ("get", "other"));
        assert_eq!(verb("/openapi/v3"), ("get", "openapi"));
        assert_eq!(
            verb("/openapi/v3/apis/apps/v1?hash=ABC"),
            ("get", "openapi")
        );
        let patch = Request::patch(
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/composition-webhook",
        )
            .body(())
            .expect("request");
        assert_eq!(
            classify(&patch),
            ("patch", "validatingwebhookconfigurations")
        );
        let events = "/apis/events.k8s.io/v1/namespaces/default/events";
        let create = Request::post(events).body(()).expect("request");
        assert_eq!(classify(&create), ("create", "events"));
        let patch = Request::patch(format!("{events}/c.18a2b"))
            .body(())
            .expect("request");
        assert_eq!(classify(&patch), ("patch", "events"));
        assert_eq!(
            verb("/apis/apiextensions.crossplane.io/v1/compositions?watch=true"),
            ("watch", "compositions")
        );
        let report = Request::patch(
            "/apis/wgpolicyk8s.io/v1alpha2/clusterpolicyreports/composition-webhook-audit?fieldManager=composition-webhook&force=true",
        )
        .body(())
        .expect("request");
        assert_eq!(classify(&report), ("patch", "clusterpolicyreports"));
        assert_eq!(verb("/apis/example.org/v1/namespaces"), ("get", "other"));
        assert_eq!(
            verb("/apis/pkg.crossplane.io/v1/functionrevisions?watch=true"),
            ("watch", "functionrevisions")
        );
        let secrets = "/api/v1/namespaces/crossplane-system/secrets";
        assert_eq!(
            verb(&format!(
                "{secrets}?fieldSelector=metadata.name%3Dcrossplane-tls-client"
            )),
            ("list", "secrets")
        );
        assert_eq!(
            verb(&format!("{secrets}/crossplane-tls-client")),
            ("get", "secrets")
        );
        assert_eq!(
            verb("/api/v1/namespaces/default/configmaps"),
            ("get", "other")
        );
    }
}
