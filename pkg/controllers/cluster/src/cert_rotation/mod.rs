//! The `certRotation` controller of `karmada-agent` (Karmada's `cert-rotation-controller`, off by
//! default): renews the agent's client certificate for the Karmada API server before it expires.
//!
//! Every `--cert-rotation-checking-interval` it reads the Secret `karmada-kubeconfig` in the
//! member's `--karmada-kubeconfig-namespace` (what `karmadactl register` and the agent's chart
//! create and mount), and when no more than `--cert-rotation-remaining-time-threshold` of the
//! certificate's validity remains ([`kubeconfig::due_for_renewal`]) it asks the control plane for a
//! new one: a fresh key, a CertificateSigningRequest `<user>-<suffix>` with the old certificate's
//! subject and validity length, approved by the controller-manager's `agentcsrapproving` (a
//! renewal: the agent asks as itself) and signed by the control plane's signer. The new
//! certificate and key then replace the old ones in the Secret (a merge patch of that one key,
//! guarded by the resourceVersion read); the agent picks them up when it restarts with the mounted
//! Secret, as Karmada's does.
//!
//! Differs from Karmada: the request names the signer `kubernetes.io/kube-apiserver-client`, the
//! one Karmada's (and our) approver approves agent certificates for (Karmada v1.16 asks
//! `kubernetes.io/kube-apiserver-client-kubelet`, which its approver leaves alone); the check runs
//! on a timer rather than on Cluster events; in the controller-manager (no own cluster) it does
//! nothing.

pub mod kubeconfig;

use std::time::Duration;

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use karmada_controllers_common::error::{ApiError, framework};
use karmada_controllers_common::handlers::start_fn_of;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};

use kubeconfig::{AgentKubeconfig, KubeconfigError, SECRET_KEY, due_for_renewal};

/// The controller's `--controllers` name (agent only).
pub const NAME: &str = "certRotation";
/// Karmada's controller name (User-Agent suffix, logs).
pub const CONTROLLER_NAME: &str = "cert-rotation-controller";
/// The Secret holding the agent's kubeconfig for the Karmada API server.
pub const KARMADA_KUBECONFIG_SECRET: &str = "karmada-kubeconfig";
/// The signer asked for the new certificate.
pub const SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// How long a request may wait for its certificate (Karmada: 5 minutes).
const ISSUE_TIMEOUT: Duration = Duration::from_secs(300);
/// How often the request is looked at while waiting.
const ISSUE_POLL: Duration = Duration::from_secs(1);

/// A certRotation failure, naming the object and the cause.
#[derive(Debug, thiserror::Error)]
pub enum CertRotationError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// The Secret holds no usable kubeconfig.
    #[error("Secret {secret}: {source}")]
    Kubeconfig {
        /// `namespace/name` of the Secret.
        secret: String,
        /// What is wrong.
        #[source]
        source: KubeconfigError,
    },
    /// The certificate request could not be built.
    #[error("building the certificate request for {user:?}: {source}")]
    Request {
        /// The kubeconfig user.
        user: String,
        /// The error.
        #[source]
        source: rcgen::Error,
    },
    /// No certificate was issued in time.
    #[error(
        "CertificateSigningRequest {name}: no certificate issued within {timeout:?} (is it approved, and does the control plane sign {SIGNER}?)"
    )]
    NotIssued {
        /// The request.
        name: String,
        /// How long it was waited for.
        timeout: Duration,
    },
}

karmada_controllers_common::core_error_from!(CertRotationError);

/// The controller. Cheap to clone.
#[derive(Clone)]
pub struct CertRotationController {
    ctx: ControllerContext,
    client: kube::Client,
}

/// The start function the agent registers under `certRotation`.
pub fn start_fn() -> StartFn {
    start_fn_of(CertRotationController::new, CertRotationController::run)
}

impl CertRotationController {
    /// Builds the controller with a control-plane client of its own.
    pub fn new(ctx: ControllerContext) -> Result<Self, CertRotationError> {
        let client = ctx
            .control_plane
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("certRotation client"))?;
        Ok(Self { ctx, client })
    }

    /// Checks the certificate at once and then every checking interval, until cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let cancel = self.ctx.cancel.clone();
        self.ctx.synced.synced();
        let Some(cluster) = self.ctx.members.own_cluster().map(str::to_owned) else {
            tracing::warn!(
                "certRotation renews karmada-agent's certificate; the controller-manager has none to renew"
            );
            cancel.cancelled().await;
            return Ok(());
        };
        let interval = self.ctx.settings.cert_rotation.checking_interval;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                r = self.check(&cluster) => if let Err(e) = r {
                    tracing::warn!(cluster, error = %e, "certificate rotation failed; retrying at the next check");
                },
            }
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(interval) => {}
            }
        }
        Ok(())
    }

    /// One check: renews the certificate in the Secret when it is due.
    async fn check(&self, cluster: &str) -> Result<(), CertRotationError> {
        let Some(member) = self.ctx.members.get(cluster) else {
            tracing::debug!(cluster, "member not connected yet; certificate not checked");
            return Ok(());
        };
        let member_client = member
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework(format!(
                "certRotation client of cluster {cluster}"
            )))?;
        let settings = &self.ctx.settings.cert_rotation;
        let namespace = &settings.karmada_kubeconfig_namespace;
        let key = format!("{namespace}/{KARMADA_KUBECONFIG_SECRET}");
        let secrets: Api<Secret> = Api::namespaced(member_client, namespace);
        let secret = secrets
            .get(KARMADA_KUBECONFIG_SECRET)
            .await
            .map_err(|e| ApiError::new("get", "Secret", key.clone(), e))?;
        let kc_err = |source| CertRotationError::Kubeconfig {
            secret: key.clone(),
            source,
        };
        let data = secret
            .data
            .as_ref()
            .and_then(|d| d.get(SECRET_KEY))
            .ok_or_else(|| kc_err(KubeconfigError::Parse(format!("no {SECRET_KEY} key"))))?;
        let kc = AgentKubeconfig::parse(&data.0).map_err(kc_err)?;
        let validity = kc.validity().map_err(kc_err)?;
        let now = Timestamp::now().as_second();
        if !due_for_renewal(&validity, now, settings.remaining_time_threshold) {
            tracing::debug!(
                cluster,
                expires_in_s = validity.not_after - now,
                "the agent's certificate is not due for renewal"
            );
            return Ok(());
        }
        tracing::info!(
            cluster,
            expires_in_s = validity.not_after - now,
            "renewing the agent's client certificate"
        );
        let (request, private_key) =
            kubeconfig::certificate_request(&validity).map_err(|source| {
                CertRotationError::Request {
                    user: kc.user.clone(),
                    source,
                }
            })?;
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("{}-{}", kc.user, &suffix[..5]);
        let lifetime = i32::try_from(validity.not_after - validity.not_before).unwrap_or(i32::MAX);
        let certificate = self.issue(&name, request, lifetime).await?;
        let text = kc
            .with_credentials(&certificate, private_key.as_bytes())
            .map_err(kc_err)?;
        let patch = json!({
            "metadata": {"resourceVersion": secret.metadata.resource_version},
            "data": {SECRET_KEY: base64::engine::general_purpose::STANDARD.encode(text)},
        });
        secrets
            .patch(
                KARMADA_KUBECONFIG_SECRET,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(|e| ApiError::new("patch", "Secret", key.clone(), e))?;
        tracing::info!(cluster, csr = %name, secret = %key, "the agent's client certificate was renewed");
        Ok(())
    }

    /// Creates the CertificateSigningRequest `name` and waits for its certificate.
    async fn issue(
        &self,
        name: &str,
        request: String,
        lifetime_s: i32,
    ) -> Result<Vec<u8>, CertRotationError> {
        let api: Api<CertificateSigningRequest> = Api::all(self.client.clone());
        let csr = CertificateSigningRequest {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            spec: CertificateSigningRequestSpec {
                request: ByteString(request.into_bytes()),
                signer_name: SIGNER.to_owned(),
                expiration_seconds: Some(lifetime_s.max(600)),
                usages: Some(vec![
                    "digital signature".into(),
                    "key encipherment".into(),
                    "client auth".into(),
                ]),
                ..Default::default()
            },
            status: None,
        };
        api.create(&PostParams::default(), &csr)
            .await
            .map_err(|e| ApiError::new("create", "CertificateSigningRequest", name, e))?;
        let deadline = tokio::time::Instant::now() + ISSUE_TIMEOUT;
        loop {
            let got = api
                .get(name)
                .await
                .map_err(|e| ApiError::new("get", "CertificateSigningRequest", name, e))?;
            if let Some(cert) = got.status.and_then(|s| s.certificate) {
                return Ok(cert.0);
            }
            if tokio::time::Instant::now() > deadline {
                return Err(CertRotationError::NotIssued {
                    name: name.to_owned(),
                    timeout: ISSUE_TIMEOUT,
                });
            }
            tokio::select! {
                _ = self.ctx.cancel.cancelled() => return Err(CertRotationError::NotIssued {
                    name: name.to_owned(),
                    timeout: ISSUE_TIMEOUT,
                }),
                _ = tokio::time::sleep(ISSUE_POLL) => {}
            }
        }
    }
}
