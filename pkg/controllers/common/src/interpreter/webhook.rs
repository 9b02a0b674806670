//! The interpreter webhooks (ResourceInterpreterWebhookConfiguration), served as an
//! [`InterpreterLayer`] behind the customizations and in front of the native rules, as in
//! Karmada.
//!
//! For an object and an operation, the first matching webhook (ordered by
//! `<configuration>/<webhook>`) is called over HTTPS with a `ResourceInterpreterContext`; its
//! answer is checked as Karmada checks it (uid, `successful`, the operation's field, JSON patches).
//! Every call has a deadline: the webhook's `timeoutSeconds` (clamped to Karmada's 1..=30; 10
//! when unset), covering Service lookup, connection, request and response. Karmada's
//! configuration has no failure policy: a failed, slow or unreachable webhook fails the
//! operation (the controller reports it and retries), which is what we do.
//!
//! Only `https://` URLs are called (Karmada's validating webhook refuses any other scheme; a
//! configuration that slipped past it, e.g. without the webhook installed, is refused here with
//! the same message before any connection is made). A response is read up to
//! [`MAX_RESPONSE_BYTES`]; a longer one fails the call at that size, so a hostile or broken
//! webhook costs bounded memory.
//!
//! The interpreter is synchronous while HTTPS is not: calls run on one thread with its own
//! small runtime, started at the first call and owned by the layer (it ends when the layer is
//! dropped and its last call has finished); the caller waits at most the deadline.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;
use k8s_openapi::api::core::v1::Service;
use karmada_apis::config::v1alpha1::{
    DependentObjectReference, GroupVersionKind, PATCH_TYPE_JSON_PATCH, ResourceInterpreterContext,
    ResourceInterpreterRequest, ResourceInterpreterResponse, ResourceInterpreterWebhook,
    ResourceInterpreterWebhookConfiguration, operations,
};
use karmada_apis::work::v1alpha2::{AggregatedStatusItem, Component};
use karmada_interpreter::{Cause, InterpreterLayer, ObjectRef, Operation, Replicas, Result};
use serde_json::Value;

/// Where the configurations come from: the full current list, or `None` while not yet known.
pub type Source =
    Box<dyn Fn() -> Option<Vec<Arc<ResourceInterpreterWebhookConfiguration>>> + Send + Sync>;

/// The deadline when a webhook sets no `timeoutSeconds`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest webhook response read. An answer carries at most about one object: the API
/// server takes request bodies up to 3 MiB (etcd stores objects up to 1.5 MiB), and a JSON patch
/// travels base64-encoded (+33 %), so a legitimate answer stays under 4 MiB; twice that leaves
/// room while bounding what one call can hold (calls run at most one per worker).
pub const MAX_RESPONSE_BYTES: usize = 8 << 20;

/// A webhook call that failed (Karmada's `ErrCallingWebhook`).
#[derive(Debug, thiserror::Error)]
#[error("failed calling webhook {webhook:?}: {reason}")]
pub struct WebhookError {
    /// `<configuration>/<webhook>`.
    pub webhook: String,
    /// What went wrong.
    pub reason: String,
}

/// What one call sends (Karmada's request `Attributes`).
#[derive(Clone, Copy)]
struct Attributes<'a> {
    operation: &'a str,
    object: &'a Value,
    observed: Option<&'a Value>,
    replicas: i32,
    aggregated: &'a [AggregatedStatusItem],
}

impl<'a> Attributes<'a> {
    /// `operation` on `object` alone.
    fn of(operation: &'a str, object: &'a Value) -> Self {
        Self {
            operation,
            object,
            observed: None,
            replicas: 0,
            aggregated: &[],
        }
    }
}

/// One webhook of one configuration.
#[derive(Clone)]
struct Hook {
    uid: String,
    /// The webhook's index in its configuration (for field paths in errors).
    index: usize,
    webhook: ResourceInterpreterWebhook,
}

/// The interpreter-webhooks layer. Cheap to share; safe to call from many tasks at once.
pub struct Webhooks {
    source: Source,
    /// The control plane's client configuration, for resolving Service references.
    control_plane: Option<kube::Config>,
    caller: OnceLock<std::result::Result<Caller, String>>,
    clients: Arc<Mutex<HashMap<String, (WebhookClientConfig, kube::Client)>>>,
}

impl fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Webhooks").finish_non_exhaustive()
    }
}

impl Webhooks {
    /// A layer reading its configurations from `source`; Service references are looked up with
    /// `control_plane` (without it they resolve to `<name>.<namespace>.svc`).
    pub fn new(source: Source, control_plane: Option<kube::Config>) -> Self {
        Self {
            source,
            control_plane,
            caller: OnceLock::new(),
            clients: Arc::default(),
        }
    }

    /// The webhooks, ordered by uid; `None` until the source has synced.
    fn hooks(&self) -> Option<Vec<Hook>> {
        let mut configs = (self.source)()?;
        configs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut hooks: Vec<Hook> = configs
            .iter()
            .flat_map(|c| {
                let config = c.metadata.name.clone().unwrap_or_default();
                c.webhooks.iter().enumerate().map(move |(index, w)| Hook {
                    uid: format!("{config}/{}", w.name),
                    index,
                    webhook: w.clone(),
                })
            })
            .collect();
        hooks.sort_by(|a, b| a.uid.cmp(&b.uid));
        Some(hooks)
    }

    fn first_hook(&self, api_version: &str, kind: &str, operation: &str) -> Option<Hook> {
        let (group, version) = apimachinery::split_api_version(api_version);
        self.hooks()?.into_iter().find(|h| {
            h.webhook
                .rules
                .iter()
                .any(|r| r.matches(group, version, kind, operation))
        })
    }

    /// Calls the first webhook matching the object and operation: `None` when none matches.
    #[allow(
        clippy::too_many_lines,
        reason = "one webhook call: match, request, send, then the response checks the protocol defines"
    )]
    fn interpret(
        &self,
        attributes: &Attributes<'_>,
    ) -> Option<std::result::Result<ResourceInterpreterResponse, WebhookError>> {
        let Attributes {
            operation,
            object,
            observed,
            replicas,
            aggregated,
        } = *attributes;
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        let hook = self.first_hook(api_version, kind, operation)?;
        let fail = |reason: String| WebhookError {
            webhook: hook.uid.clone(),
            reason,
        };
        if !hook
            .webhook
            .interpreter_context_versions
            .iter()
            .any(|v| v == karmada_apis::config::v1alpha1::VERSION)
        {
            return Some(Err(fail(
                "could not create ResourceInterpreterContext objects: webhook does not accept known ResourceInterpreterContext versions (v1alpha1)".into(),
            )));
        }
        if let Some(url) = &hook.webhook.client_config.url
            && hook.webhook.client_config.service.is_none()
            && let Err(e) = validate_url(hook.index, url)
        {
            let (configuration, webhook) = hook.uid.split_once('/').unwrap_or_default();
            tracing::warn!(configuration, webhook, error = %e, "interpreter webhook refused: its URL is not allowed");
            return Some(Err(fail(e)));
        }
        let (group, version) = apimachinery::split_api_version(api_version);
        let uid = uuid::Uuid::new_v4().to_string();
        let metadata = object.get("metadata");
        let text = |field: &str| {
            metadata
                .and_then(|m| m.get(field))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let context = ResourceInterpreterContext {
            api_version: format!(
                "{}/{}",
                karmada_apis::config::GROUP,
                karmada_apis::config::v1alpha1::VERSION
            ),
            kind: karmada_apis::config::v1alpha1::INTERPRETER_CONTEXT_KIND.into(),
            request: Some(ResourceInterpreterRequest {
                uid: uid.clone(),
                kind: GroupVersionKind {
                    group: group.into(),
                    version: version.into(),
                    kind: kind.into(),
                },
                name: text("name"),
                namespace: text("namespace"),
                operation: operation.into(),
                object: object.clone(),
                observed_object: observed.cloned(),
                desired_replicas: Some(replicas),
                aggregated_status: aggregated.to_vec(),
            }),
            response: None,
        };
        let timeout = hook.webhook.timeout_seconds.map_or(DEFAULT_TIMEOUT, |s| {
            Duration::from_secs(s.clamp(1, 30).unsigned_abs().into())
        });
        let caller = match self.caller.get_or_init(Caller::start) {
            Ok(caller) => caller,
            Err(e) => return Some(Err(fail(e.clone()))),
        };
        let call = post(
            hook.webhook.client_config.clone(),
            hook.uid.clone(),
            self.control_plane.clone(),
            self.clients.clone(),
            context,
        );
        let answer = caller
            .call(timeout, call)
            .map_err(|e| fail(format!("failed to call webhook: {e}")))
            .and_then(|context| {
                verify(&uid, operation, context)
                    .map_err(|e| fail(format!("received invalid webhook response: {e}")))
            })
            .and_then(|response| {
                if response.successful {
                    Ok(response)
                } else {
                    let status = response.status.unwrap_or_default();
                    Err(fail(format!(
                        "webhook call failed, get status code: {}, msg: {}",
                        status.code, status.message
                    )))
                }
            });
        if let Err(e) = &answer {
            let (configuration, webhook) = hook.uid.split_once('/').unwrap_or_default();
            tracing::warn!(configuration, webhook, error = %e, "interpreter webhook failed");
        }
        Some(answer)
    }

    /// [`Self::interpret`] for the patch operations: the object with the response's patch
    /// applied.
    fn patched(&self, attributes: &Attributes<'_>) -> Option<Result<Value>> {
        let object = attributes.object;
        let answer = self.interpret(attributes)?;
        Some(match answer {
            Ok(r) => apply_patch(object, &r)
                .map_err(|reason| Cause::Layer(reason.into()).at(&ObjectRef::of(object))),
            Err(e) => Err(layer_error(object, e)),
        })
    }
}

fn layer_error(object: &Value, error: WebhookError) -> karmada_interpreter::InterpretError {
    Cause::Layer(Box::new(error)).at(&ObjectRef::of(object))
}

/// Karmada's response checks for `operation`.
fn verify(
    uid: &str,
    operation: &str,
    context: ResourceInterpreterContext,
) -> std::result::Result<ResourceInterpreterResponse, String> {
    let Some(response) = context.response else {
        return Err("webhook response was absent".into());
    };
    if response.uid != uid {
        return Err(format!(
            "expected response.uid {uid:?}, got {:?}",
            response.uid
        ));
    }
    if !response.successful {
        if response.status.is_none() {
            return Err("webhook require response.status when response.successful is false".into());
        }
        return Ok(response);
    }
    match operation {
        operations::INTERPRET_REPLICA if response.replicas.is_none() => {
            Err("webhook returned nil response.replicas".into())
        }
        operations::INTERPRET_DEPENDENCY => {
            for d in response.dependencies.iter().flatten() {
                verify_dependency(d)?;
            }
            Ok(response)
        }
        operations::PRUNE
        | operations::REVISE_REPLICA
        | operations::RETAIN
        | operations::AGGREGATE_STATUS => {
            let empty = response.patch.as_ref().is_none_or(|p| p.0.is_empty());
            let patch_type = response.patch_type.clone();
            match (patch_type.as_deref(), empty) {
                (None, false) => Err("webhook returned nil response.patchType".into()),
                (Some(_), true) => Err("webhook returned empty response.patch".into()),
                (Some(t), false) if t != PATCH_TYPE_JSON_PATCH => Err(format!(
                    "webhook returned invalid response.patchType of {t:?}"
                )),
                // No patch at all, or a JSON patch.
                _ => Ok(response),
            }
        }
        operations::INTERPRET_STATUS if response.raw_status.is_none() => {
            Err("webhook returned nill response.rawStatus".into())
        }
        operations::INTERPRET_HEALTH if response.healthy.is_none() => {
            Err("webhook returned nil response.healthy".into())
        }
        _ => Ok(response),
    }
}

/// Karmada's `VerifyDependencies`.
fn verify_dependency(d: &DependentObjectReference) -> std::result::Result<(), String> {
    if d.api_version.is_empty() || d.kind.is_empty() {
        return Err(format!(
            "dependency {}/{} {}: apiVersion and kind must not be empty",
            d.namespace, d.name, d.kind
        ));
    }
    if d.name.is_empty() && d.label_selector.is_none() {
        return Err(format!(
            "dependency {}/{}: dependency can not leave name and labelSelector all empty",
            d.api_version, d.kind
        ));
    }
    Ok(())
}

/// The object with the response's JSON patch applied (unchanged without a patch).
fn apply_patch(
    object: &Value,
    response: &ResourceInterpreterResponse,
) -> std::result::Result<Value, String> {
    let Some(patch) = response.patch.as_ref().filter(|p| !p.0.is_empty()) else {
        return Ok(object.clone());
    };
    let patch: json_patch::Patch = serde_json::from_slice(&patch.0)
        .map_err(|e| format!("the webhook's patch is not a JSON patch: {e}"))?;
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch)
        .map_err(|e| format!("the webhook's patch does not apply: {e}"))?;
    Ok(patched)
}

/// Karmada's check of `webhooks[index].clientConfig.url` (the API server's `ValidateWebhookURL`
/// with https forced), with its messages: an https URL with a host, without user information,
/// query or fragment.
fn validate_url(index: usize, url: &str) -> std::result::Result<http::Uri, String> {
    const FORM: &str = "; desired format: https://host[/path]";
    let field = format!("webhooks[{index}].clientConfig.url");
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("{field}: Required value: url must be a valid URL: {e}{FORM}"))?;
    let mut problems = Vec::new();
    let scheme = uri.scheme_str().unwrap_or_default();
    if scheme != "https" {
        problems.push(format!(
            "{field}: Invalid value: {scheme:?}: 'https' is the only allowed URL scheme{FORM}"
        ));
    }
    let authority = uri.authority().map(http::uri::Authority::as_str);
    if uri.host().is_none_or(str::is_empty) {
        problems.push(format!(
            "{field}: Invalid value: \"\": host must be specified{FORM}"
        ));
    }
    if let Some((user, _)) = authority.and_then(|a| a.rsplit_once('@')) {
        problems.push(format!(
            "{field}: Invalid value: {user:?}: user information is not permitted in the URL"
        ));
    }
    if let Some(query) = uri.query().filter(|q| !q.is_empty()) {
        problems.push(format!(
            "{field}: Invalid value: {query:?}: query parameters are not permitted in the URL"
        ));
    }
    if problems.is_empty() {
        Ok(uri)
    } else {
        Err(problems.join(", "))
    }
}

/// Reads `body` whole, failing once it passes `limit` bytes (at once when its declared length
/// does) or when it fails.
pub async fn read_limited<B>(body: B, limit: usize) -> std::result::Result<Vec<u8>, String>
where
    B: http_body::Body,
    B::Error: fmt::Display,
{
    use bytes::Buf as _;
    use http_body_util::BodyExt;
    let too_large = || format!("the response is larger than the {limit}-byte limit");
    if !usize::try_from(body.size_hint().lower()).is_ok_and(|declared| declared <= limit) {
        return Err(too_large());
    }
    let mut body = std::pin::pin!(body);
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("reading the response: {e}"))?;
        if let Ok(mut data) = frame.into_data() {
            if out.len().saturating_add(data.remaining()) > limit {
                return Err(too_large());
            }
            while data.has_remaining() {
                let chunk = data.chunk();
                out.extend_from_slice(chunk);
                let n = chunk.len();
                data.advance(n);
            }
        }
    }
    Ok(out)
}

/// The PEM certificates of a CA bundle, DER-encoded.
fn pem_certificates(bundle: &[u8]) -> std::result::Result<Vec<Vec<u8>>, String> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let text = std::str::from_utf8(bundle).map_err(|_| "caBundle is not PEM text".to_owned())?;
    let mut certs = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(BEGIN) {
        let body = &rest[start + BEGIN.len()..];
        let Some(end) = body.find(END) else {
            return Err("caBundle has an unterminated certificate".into());
        };
        let b64: String = body[..end].split_whitespace().collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| format!("caBundle has an invalid certificate: {e}"))?;
        certs.push(der);
        rest = &body[end + END.len()..];
    }
    if certs.is_empty() {
        return Err("caBundle holds no PEM certificate".into());
    }
    Ok(certs)
}

/// The URL to call and the TLS server name to verify, for a client config (a Service, when set,
/// wins over the URL, as in Karmada).
async fn endpoint(
    config: &WebhookClientConfig,
    control_plane: Option<kube::Config>,
) -> std::result::Result<(http::Uri, Option<String>), String> {
    if let Some(service) = &config.service {
        let port = service.port.unwrap_or(443);
        let path = service.path.clone().unwrap_or_default();
        let server_name = format!("{}.{}.svc", service.name, service.namespace);
        let mut host = format!("{server_name}:{port}");
        if let Some(cp) = control_plane {
            let client = kube::Client::try_from(cp)
                .map_err(|e| format!("no control-plane client for Service lookup: {e}"))?;
            let api: kube::Api<Service> = kube::Api::namespaced(client, &service.namespace);
            let found = api.get_opt(&service.name).await.map_err(|e| {
                format!(
                    "looking up Service {}/{}: {e}",
                    service.namespace, service.name
                )
            })?;
            if let Some(svc) = found {
                host = resolve_service(&svc, port)?;
            }
        }
        let uri = format!("https://{host}{path}")
            .parse()
            .map_err(|e| format!("invalid Service endpoint: {e}"))?;
        return Ok((uri, Some(server_name)));
    }
    let Some(url) = &config.url else {
        return Err("clientConfig has neither url nor service".into());
    };
    // Checked before the call too (with the webhook's index); never connect elsewhere than https.
    Ok((validate_url(0, url)?, None))
}

/// Karmada's Service resolution: ClusterIP, LoadBalancer and NodePort Services by cluster IP
/// and the matching port, ExternalName by name.
fn resolve_service(svc: &Service, port: i32) -> std::result::Result<String, String> {
    let spec = svc.spec.clone().unwrap_or_default();
    let ty = spec.type_.as_deref().unwrap_or("ClusterIP");
    let name = svc.metadata.name.clone().unwrap_or_default();
    match ty {
        "ClusterIP" if spec.cluster_ip.as_deref() == Some("None") => {
            Err("cannot route to service with ClusterIP \"None\"".into())
        }
        "ClusterIP" | "LoadBalancer" | "NodePort" => {
            if !spec.ports.iter().flatten().any(|p| p.port == port) {
                return Err(format!("no service port {port} found for service {name:?}"));
            }
            let ip = spec.cluster_ip.unwrap_or_default();
            Ok(if ip.contains(':') {
                format!("[{ip}]:{port}")
            } else {
                format!("{ip}:{port}")
            })
        }
        "ExternalName" => Ok(format!("{}:{port}", spec.external_name.unwrap_or_default())),
        other => Err(format!("unsupported service type {other:?}")),
    }
}

/// One call: resolves the endpoint, (re)uses the webhook's client, POSTs the context.
async fn post(
    config: WebhookClientConfig,
    uid: String,
    control_plane: Option<kube::Config>,
    clients: Arc<Mutex<HashMap<String, (WebhookClientConfig, kube::Client)>>>,
    context: ResourceInterpreterContext,
) -> std::result::Result<ResourceInterpreterContext, String> {
    let (uri, server_name) = endpoint(&config, control_plane).await?;
    let base: http::Uri = format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("https"),
        uri.authority().map(ToString::to_string).unwrap_or_default()
    )
    .parse()
    .map_err(|e| format!("invalid webhook address: {e}"))?;
    let cached = {
        let clients = clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients
            .get(&uid)
            .filter(|(c, _)| *c == config)
            .map(|(_, client)| client.clone())
    };
    let client = match cached {
        Some(client) => client,
        None => {
            let mut kc = kube::Config::new(base);
            if let Some(bundle) = config.ca_bundle.as_ref().filter(|b| !b.0.is_empty()) {
                kc.root_cert = Some(pem_certificates(&bundle.0)?);
            }
            kc.tls_server_name = server_name;
            // The call's deadline bounds connection, request and response together.
            kc.default_retry = false;
            let client = kube::Client::try_from(kc)
                .map_err(|e| format!("could not get REST client: {e}"))?;
            clients
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(uid, (config, client.clone()));
            client
        }
    };
    let path = uri
        .path_and_query()
        .map_or_else(|| "/".to_owned(), ToString::to_string);
    let body = serde_json::to_vec(&context).map_err(|e| e.to_string())?;
    let request = http::Request::post(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(body)
        .map_err(|e| e.to_string())?;
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = read_limited(response.into_body(), MAX_RESPONSE_BYTES).await?;
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body[..body.len().min(1024)]).into_owned();
        return Err(format!("the webhook answered {status}: {}", text.trim()));
    }
    decode_response(&body)
}

/// Decodes a webhook's answer (a `ResourceInterpreterContext`), at most [`MAX_RESPONSE_BYTES`]
/// long, into an error naming the cause for anything else.
pub fn decode_response(body: &[u8]) -> std::result::Result<ResourceInterpreterContext, String> {
    if body.len() > MAX_RESPONSE_BYTES {
        return Err(format!(
            "the response is larger than the {MAX_RESPONSE_BYTES}-byte limit"
        ));
    }
    serde_json::from_slice(body).map_err(|e| format!("decoding the response: {e}"))
}

type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Runs webhook calls on a thread of its own (see the module doc).
struct Caller {
    jobs: tokio::sync::mpsc::UnboundedSender<Job>,
}

impl Caller {
    fn start() -> std::result::Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("starting the webhook caller: {e}"))?;
        let (jobs, mut queue) = tokio::sync::mpsc::unbounded_channel::<Job>();
        std::thread::Builder::new()
            .name("interpreter-webhooks".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let mut running = tokio::task::JoinSet::new();
                    loop {
                        tokio::select! {
                            job = queue.recv() => match job {
                                Some(job) => { running.spawn(job); }
                                None => break,
                            },
                            Some(_) = running.join_next(), if !running.is_empty() => {}
                        }
                    }
                    // Every job has a deadline: the thread ends soon after its owner.
                    while running.join_next().await.is_some() {}
                });
            })
            .map_err(|e| format!("starting the webhook caller: {e}"))?;
        Ok(Self { jobs })
    }

    /// Runs `call` with `deadline` and waits for its answer (never longer than the deadline).
    fn call<T: Send + 'static>(
        &self,
        deadline: Duration,
        call: impl Future<Output = std::result::Result<T, String>> + Send + 'static,
    ) -> std::result::Result<T, String> {
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        let job = async move {
            let result = tokio::time::timeout(deadline, call)
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {}s", deadline.as_secs())));
            let _ = answer.send(result);
        };
        self.jobs
            .send(Box::pin(job))
            .map_err(|_| "the webhook caller has stopped".to_owned())?;
        // A little slack over the job's own deadline, which answers first.
        let wait = || answered.recv_timeout(deadline + Duration::from_millis(500));
        let got = match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(wait)
            }
            _ => wait(),
        };
        got.unwrap_or_else(|_| Err(format!("no answer within {}s", deadline.as_secs())))
    }
}

fn operation_name(operation: Operation) -> Option<&'static str> {
    match operation {
        Operation::InterpretReplica => Some(operations::INTERPRET_REPLICA),
        Operation::ReviseReplica => Some(operations::REVISE_REPLICA),
        Operation::Retain => Some(operations::RETAIN),
        Operation::ReflectStatus => Some(operations::INTERPRET_STATUS),
        Operation::InterpretHealth => Some(operations::INTERPRET_HEALTH),
        Operation::AggregateStatus => Some(operations::AGGREGATE_STATUS),
        // Karmada's interpreter never sends Prune to webhooks.
        Operation::Prune => None,
    }
}

impl InterpreterLayer for Webhooks {
    fn hook_enabled(&self, api_version: &str, kind: &str, operation: Operation) -> bool {
        operation_name(operation).is_some_and(|op| self.first_hook(api_version, kind, op).is_some())
    }

    fn get_replicas(&self, object: &Value) -> Option<Result<Replicas>> {
        let answer = self.interpret(&Attributes::of(operations::INTERPRET_REPLICA, object))?;
        Some(
            answer
                .map(|r| Replicas {
                    replicas: r.replicas.unwrap_or_default(),
                    requirements: r.replica_requirements,
                })
                .map_err(|e| layer_error(object, e)),
        )
    }

    fn revise_replica(&self, object: &Value, replicas: i64) -> Option<Result<Value>> {
        let replicas = i32::try_from(replicas).unwrap_or(i32::MAX);
        self.patched(&Attributes {
            replicas,
            ..Attributes::of(operations::REVISE_REPLICA, object)
        })
    }

    fn retain(&self, desired: &Value, observed: &Value) -> Option<Result<Value>> {
        self.patched(&Attributes {
            observed: Some(observed),
            ..Attributes::of(operations::RETAIN, desired)
        })
    }

    fn reflect_status(&self, object: &Value) -> Option<Result<Value>> {
        let answer = self.interpret(&Attributes::of(operations::INTERPRET_STATUS, object))?;
        Some(
            answer
                .map(|r| r.raw_status.unwrap_or(Value::Null))
                .map_err(|e| layer_error(object, e)),
        )
    }

    fn interpret_health(&self, object: &Value) -> Option<Result<bool>> {
        let answer = self.interpret(&Attributes::of(operations::INTERPRET_HEALTH, object))?;
        Some(
            answer
                .map(|r| r.healthy.unwrap_or_default())
                .map_err(|e| layer_error(object, e)),
        )
    }

    fn aggregate_status(
        &self,
        template: &Value,
        items: &[AggregatedStatusItem],
    ) -> Option<Result<Value>> {
        self.patched(&Attributes {
            aggregated: items,
            ..Attributes::of(operations::AGGREGATE_STATUS, template)
        })
    }

    fn get_dependencies(&self, object: &Value) -> Option<Result<Vec<DependentObjectReference>>> {
        let answer = self.interpret(&Attributes::of(operations::INTERPRET_DEPENDENCY, object))?;
        Some(
            answer
                .map(|r| r.dependencies.unwrap_or_default())
                .map_err(|e| layer_error(object, e)),
        )
    }

    fn get_components(&self, object: &Value) -> Option<Result<Vec<Component>>> {
        let answer = self.interpret(&Attributes::of(operations::INTERPRET_COMPONENT, object))?;
        Some(
            answer
                .map(|r| r.components.unwrap_or_default())
                .map_err(|e| layer_error(object, e)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::config::v1alpha1::RuleWithOperations;
    use serde_json::json;

    fn response(patch: Option<&str>, patch_type: Option<&str>) -> ResourceInterpreterResponse {
        ResourceInterpreterResponse {
            uid: "u".into(),
            successful: true,
            patch: patch.map(|p| k8s_openapi::ByteString(p.as_bytes().to_vec())),
            patch_type: patch_type.map(Into::into),
            ..Default::default()
        }
    }

    fn context(r: ResourceInterpreterResponse) -> ResourceInterpreterContext {
        ResourceInterpreterContext {
            response: Some(r),
            ..Default::default()
        }
    }

    #[test]
    fn responses_are_checked_as_karmada_checks_them() {
        let ok = |op: &str, r| verify("u", op, context(r));
        assert!(
            verify(
                "u",
                "InterpretReplica",
                ResourceInterpreterContext::default()
            )
            .is_err()
        );
        let mut wrong_uid = response(None, None);
        wrong_uid.uid = "other".into();
        assert!(
            ok("Retain", wrong_uid)
                .unwrap_err()
                .contains("expected response.uid")
        );
        assert!(
            ok("InterpretReplica", response(None, None))
                .unwrap_err()
                .contains("nil response.replicas")
        );
        assert!(
            ok("InterpretHealth", response(None, None))
                .unwrap_err()
                .contains("nil response.healthy")
        );
        assert!(ok("Retain", response(None, None)).is_ok());
        assert!(
            ok("Retain", response(Some("[]"), None))
                .unwrap_err()
                .contains("nil response.patchType")
        );
        assert!(
            ok("Retain", response(None, Some("JSONPatch")))
                .unwrap_err()
                .contains("empty response.patch")
        );
        assert!(
            ok("Retain", response(Some("[]"), Some("Merge")))
                .unwrap_err()
                .contains("invalid response.patchType")
        );
        let mut failed = response(None, None);
        failed.successful = false;
        assert!(
            ok("InterpretHealth", failed)
                .unwrap_err()
                .contains("require response.status")
        );
    }

    #[test]
    fn patches_apply_as_json_patches() {
        let object = json!({"spec": {"size": 4}});
        let r = response(
            Some(r#"[{"op": "replace", "path": "/spec/size", "value": 2}]"#),
            Some("JSONPatch"),
        );
        assert_eq!(
            apply_patch(&object, &r).unwrap(),
            json!({"spec": {"size": 2}})
        );
        assert_eq!(apply_patch(&object, &response(None, None)).unwrap(), object);
        let bad = response(
            Some(r#"[{"op": "remove", "path": "/nope"}]"#),
            Some("JSONPatch"),
        );
        assert!(apply_patch(&object, &bad).is_err());
        // Go's []byte: base64 in JSON.
        let wire: ResourceInterpreterResponse = serde_json::from_value(
            json!({"uid": "u", "successful": true, "patch": "W10=", "patchType": "JSONPatch"}),
        )
        .unwrap();
        assert_eq!(wire.patch.unwrap().0, b"[]");
    }

    #[test]
    fn the_first_matching_webhook_by_uid_is_chosen() {
        let hook = |name: &str, kinds: &[&str], ops: &[&str]| ResourceInterpreterWebhook {
            name: name.into(),
            rules: vec![RuleWithOperations {
                operations: ops.iter().map(|s| (*s).into()).collect(),
                api_groups: vec!["example.io".into()],
                api_versions: vec!["*".into()],
                kinds: kinds.iter().map(|s| (*s).into()).collect(),
            }],
            interpreter_context_versions: vec!["v1alpha1".into()],
            ..Default::default()
        };
        let config = |name: &str, hooks| {
            Arc::new(ResourceInterpreterWebhookConfiguration {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some(name.into()),
                    ..Default::default()
                },
                webhooks: hooks,
                ..Default::default()
            })
        };
        let list = vec![
            config("b", vec![hook("x", &["Widget"], &["*"])]),
            config(
                "a",
                vec![
                    hook("y", &["Widget"], &["InterpretHealth"]),
                    hook("z", &["*"], &["Retain"]),
                ],
            ),
        ];
        let layer = Webhooks::new(Box::new(move || Some(list.clone())), None);
        assert_eq!(
            layer
                .first_hook("example.io/v1", "Widget", "InterpretHealth")
                .unwrap()
                .uid,
            "a/y"
        );
        assert_eq!(
            layer
                .first_hook("example.io/v1", "Widget", "InterpretReplica")
                .unwrap()
                .uid,
            "b/x"
        );
        assert_eq!(
            layer
                .first_hook("example.io/v1", "Gadget", "Retain")
                .unwrap()
                .uid,
            "a/z"
        );
        assert!(
            layer
                .first_hook("other.io/v1", "Widget", "Retain")
                .is_none()
        );
        assert!(!layer.hook_enabled("example.io/v1", "Gadget", Operation::InterpretHealth));
        assert!(layer.hook_enabled("example.io/v1", "Widget", Operation::ReflectStatus));
    }

    #[test]
    fn pem_bundles_decode() {
        assert!(pem_certificates(b"nothing").is_err());
        let pem = "-----BEGIN CERTIFICATE-----\nAAEC\n-----END CERTIFICATE-----\n";
        assert_eq!(
            pem_certificates(pem.as_bytes()).unwrap(),
            vec![vec![0u8, 1, 2]]
        );
    }
}

/// Property tests: whatever a webhook answers, decoding and checking it never panics, holds no
/// more than the cap, and fails with a message.
#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Arbitrary JSON, a few levels deep.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|f| json!(f)),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(any::<String>(), inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// A response with Karmada's field names, each absent or holding arbitrary JSON (or a
    /// plausible value), so decoding gets past the envelope and the checks see odd contents.
    fn adversarial_response() -> impl Strategy<Value = Value> {
        let fields = [
            "uid",
            "successful",
            "status",
            "patch",
            "patchType",
            "replicas",
            "replicaRequirements",
            "dependencies",
            "rawStatus",
            "healthy",
            "components",
        ];
        let plausible = prop_oneof![
            any_json(),
            Just(json!("u")),
            Just(json!(true)),
            Just(json!("JSONPatch")),
            prop::collection::vec(any::<u8>(), 0..64)
                .prop_map(|b| { json!(base64::engine::general_purpose::STANDARD.encode(b)) }),
            Just(json!(
                base64::engine::general_purpose::STANDARD
                    .encode(r#"[{"op":"add","path":"/spec/x","value":1}]"#)
            )),
        ];
        prop::collection::vec(prop::option::of(plausible), fields.len()).prop_map(move |values| {
            let mut response = serde_json::Map::new();
            for (name, value) in fields.iter().zip(values) {
                if let Some(v) = value {
                    response.insert((*name).to_owned(), v);
                }
            }
            json!({"apiVersion": "config.karmada.io/v1alpha1",
                "kind": "ResourceInterpreterContext", "response": response})
        })
    }

    const OPERATIONS: [&str; 8] = [
        operations::INTERPRET_REPLICA,
        operations::REVISE_REPLICA,
        operations::RETAIN,
        operations::AGGREGATE_STATUS,
        operations::INTERPRET_STATUS,
        operations::INTERPRET_HEALTH,
        operations::INTERPRET_DEPENDENCY,
        operations::INTERPRET_COMPONENT,
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_bytes_fail_with_a_message(body in prop::collection::vec(any::<u8>(), 0..4096)) {
            if let Err(e) = decode_response(&body) {
                prop_assert!(e.starts_with("decoding the response: "), "{e}");
            }
        }

        #[test]
        fn any_json_is_decoded_or_refused(value in any_json()) {
            let body = serde_json::to_vec(&value).unwrap();
            if let Ok(context) = decode_response(&body) {
                for op in OPERATIONS {
                    if let Err(e) = verify("u", op, context.clone()) {
                        prop_assert!(!e.is_empty());
                    }
                }
            }
        }

        #[test]
        fn adversarial_responses_are_checked_and_patches_applied_safely(
            value in adversarial_response()
        ) {
            let body = serde_json::to_vec(&value).unwrap();
            let object = json!({"apiVersion": "example.io/v1", "kind": "Widget",
                "metadata": {"name": "w"}, "spec": {"size": 1}});
            if let Ok(context) = decode_response(&body) {
                for op in OPERATIONS {
                    match verify("u", op, context.clone()) {
                        Ok(response) => {
                            if let Err(e) = apply_patch(&object, &response) {
                                prop_assert!(e.starts_with("the webhook's patch"), "{e}");
                            }
                        }
                        Err(e) => prop_assert!(!e.is_empty()),
                    }
                }
            }
        }

        #[test]
        fn deep_nesting_is_refused(depth in 129usize..20_000) {
            let body = format!(
                r#"{{"response":{{"uid":"u","successful":true,"rawStatus":{}{}}}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            );
            let e = decode_response(body.as_bytes()).unwrap_err();
            prop_assert!(e.contains("recursion limit"), "{e}");
        }
    }

    #[test]
    fn a_body_past_the_cap_is_refused_before_decoding() {
        let body = vec![b' '; MAX_RESPONSE_BYTES + 1];
        let e = decode_response(&body).unwrap_err();
        assert!(e.contains("larger than the 8388608-byte limit"), "{e}");
    }
}
