//! The agent CSR approving controller (`--controllers` name `agentcsrapproving`, Karmada's
//! `agent-csr-approving-controller`): approves the client-certificate requests of Pull-mode agents,
//! so that `karmadactl register` (bootstrap token) and the agent's certificate rotation get a
//! certificate signed by the control plane's `kubernetes.io/kube-apiserver-client` signer.
//!
//! A CSR is approved when it is an agent CSR (signer `kubernetes.io/kube-apiserver-client`, a
//! subject of exactly one organization `system:karmada:agents` and exactly one common name
//! `system:karmada:agent:<…>` and no other attribute, no subject alternative names, usages digital
//! signature + client auth, with or without key encipherment) and its requester may `create` `certificatesigningrequests/selfclusteragent` (the
//! requester is the certificate's own subject: a renewal) or
//! `certificatesigningrequests/clusteragent` (anyone else, e.g. a bootstrap token), checked by a
//! SubjectAccessReview. Everything else is left alone, as in Karmada (neither approved nor denied:
//! an administrator may still decide); a request that claims to be an agent's but is refused gets a
//! Warning Event `AgentCSRNotApproved` saying why.
//!
//! Stricter than Karmada on the subject: the signer copies the whole subject into the certificate
//! and the API server takes the user from its last common name, so a request with two common names
//! (or any attribute we do not check) could pass as one identity here and authenticate as another.
//! Only a subject with one `O` and one `CN` and nothing else is an agent's.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use lariat::{HandlerResult, ObjectKey, SharedController};
use x509_parser::cri_attributes::ParsedCriAttribute;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;

use karmada_controllers_common::handlers::{start_fn_of, template_controller};
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use lariat::events::{EventRecorder, EventType, reference_of};

/// The controller's `--controllers` name.
pub const NAME: &str = "agentcsrapproving";
/// Karmada's controller name (User-Agent suffix, Event source).
pub const CONTROLLER_NAME: &str = "agent-csr-approving-controller";
/// The signer agent certificates are issued by.
pub const KUBE_APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// The one organization of an agent certificate.
pub const AGENT_GROUP: &str = "system:karmada:agents";
/// The prefix of an agent certificate's common name (`system:karmada:agent:<cluster>`).
pub const AGENT_USER_PREFIX: &str = "system:karmada:agent:";

/// Why a CSR is not an agent CSR (Karmada's wording).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAgentCsr {
    /// The signer is not `kubernetes.io/kube-apiserver-client`.
    #[error("signer is {0:?}, not {KUBE_APISERVER_CLIENT_SIGNER}")]
    Signer(String),
    /// The request is not a PEM/DER PKCS#10 request.
    #[error("unable to parse the certificate request: {0}")]
    Unparsable(String),
    /// Subject organization is not exactly `system:karmada:agents`.
    #[error("subject organization is not system:karmada:agents")]
    Organization,
    /// DNS SANs present.
    #[error("DNS subjectAltNames are not allowed")]
    DnsSan,
    /// Email SANs present.
    #[error("email subjectAltNames are not allowed")]
    EmailSan,
    /// IP SANs present.
    #[error("IP subjectAltNames are not allowed")]
    IpSan,
    /// URI SANs present.
    #[error("URI subjectAltNames are not allowed")]
    UriSan,
    /// Common name without the agent prefix.
    #[error("subject common name does not begin with system:karmada:agent: prefix")]
    CommonName,
    /// Not exactly one common name.
    #[error("subject must have exactly one common name, has {0}")]
    CommonNameCount(usize),
    /// A subject attribute other than one `O` and one `CN`.
    #[error("subject attribute {0} is not allowed (only one O and one CN)")]
    ExtraAttribute(String),
    /// A subject alternative name of a kind the approver does not know.
    #[error("subjectAltNames are not allowed")]
    OtherSan,
    /// Wrong usages.
    #[error("usages did not match [client auth digital signature key encipherment]")]
    Usages,
}

/// The subject of a parsed request, as the approver needs it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestSubject {
    /// Every `O`.
    pub organizations: Vec<String>,
    /// The `CN` (the last one, as the API server reads it; empty when absent).
    pub common_name: String,
    /// How many `CN`s the subject has.
    pub common_names: usize,
    /// The OIDs of subject attributes other than `O` and `CN`.
    pub other_attributes: Vec<String>,
    /// DNS, email, IP and URI SAN counts.
    pub sans: [usize; 4],
    /// SANs of other kinds, and empty SAN extensions.
    pub other_sans: usize,
}

/// Parses a PEM (or DER) PKCS#10 request.
pub fn parse_request(request: &[u8]) -> Result<RequestSubject, NotAgentCsr> {
    let der = match x509_parser::pem::parse_x509_pem(request) {
        Ok((_, pem)) if pem.label == "CERTIFICATE REQUEST" => pem.contents,
        Ok((_, pem)) => {
            return Err(NotAgentCsr::Unparsable(format!(
                "PEM block is {:?}, not CERTIFICATE REQUEST",
                pem.label
            )));
        }
        Err(_) => request.to_vec(),
    };
    let (_, csr) = x509_parser::certification_request::X509CertificationRequest::from_der(&der)
        .map_err(|e| NotAgentCsr::Unparsable(e.to_string()))?;
    let subject = &csr.certification_request_info.subject;
    let text = |a: &x509_parser::x509::AttributeTypeAndValue<'_>| {
        a.as_str().map(str::to_owned).unwrap_or_default()
    };
    let cn_oid = x509_parser::oid_registry::OID_X509_COMMON_NAME;
    let o_oid = x509_parser::oid_registry::OID_X509_ORGANIZATION_NAME;
    let mut out = RequestSubject {
        organizations: subject.iter_organization().map(text).collect(),
        common_name: subject
            .iter_common_name()
            .last()
            .map(text)
            .unwrap_or_default(),
        common_names: subject.iter_common_name().count(),
        ..RequestSubject::default()
    };
    for attr in subject.iter_attributes() {
        let oid = attr.attr_type();
        if *oid != cn_oid && *oid != o_oid {
            out.other_attributes.push(oid.to_id_string());
        }
    }
    let san_oid = x509_parser::oid_registry::OID_X509_EXT_SUBJECT_ALT_NAME;
    for attr in csr.certification_request_info.iter_attributes() {
        let ParsedCriAttribute::ExtensionRequest(requested) = attr.parsed_attribute() else {
            continue;
        };
        for ext in &requested.extensions {
            if ext.oid != san_oid {
                continue;
            }
            let ParsedExtension::SubjectAlternativeName(san) = ext.parsed_extension() else {
                // A SAN extension the parser could not read is still one the signer may copy.
                out.other_sans += 1;
                continue;
            };
            if san.general_names.is_empty() {
                out.other_sans += 1;
            }
            for n in &san.general_names {
                match n {
                    GeneralName::DNSName(_) => out.sans[0] += 1,
                    GeneralName::RFC822Name(_) => out.sans[1] += 1,
                    GeneralName::IPAddress(_) => out.sans[2] += 1,
                    GeneralName::URI(_) => out.sans[3] += 1,
                    _ => out.other_sans += 1,
                }
            }
        }
    }
    Ok(out)
}

/// Karmada's `ValidateAgentCSR`: whether the subject and usages are an agent certificate's.
pub fn validate_agent_request(
    subject: &RequestSubject,
    usages: &[String],
) -> Result<(), NotAgentCsr> {
    if subject.organizations != [AGENT_GROUP] {
        return Err(NotAgentCsr::Organization);
    }
    let errors = [
        NotAgentCsr::DnsSan,
        NotAgentCsr::EmailSan,
        NotAgentCsr::IpSan,
        NotAgentCsr::UriSan,
    ];
    for (count, err) in subject.sans.iter().zip(errors) {
        if *count > 0 {
            return Err(err);
        }
    }
    if subject.other_sans > 0 {
        return Err(NotAgentCsr::OtherSan);
    }
    if let Some(oid) = subject.other_attributes.first() {
        return Err(NotAgentCsr::ExtraAttribute(oid.clone()));
    }
    if subject.common_names != 1 {
        return Err(NotAgentCsr::CommonNameCount(subject.common_names));
    }
    if !subject.common_name.starts_with(AGENT_USER_PREFIX) {
        return Err(NotAgentCsr::CommonName);
    }
    let got: BTreeSet<&str> = usages.iter().map(String::as_str).collect();
    let full: BTreeSet<&str> = ["digital signature", "key encipherment", "client auth"].into();
    let minimal: BTreeSet<&str> = ["digital signature", "client auth"].into();
    if got != full && got != minimal {
        return Err(NotAgentCsr::Usages);
    }
    Ok(())
}

/// Which permission approves a recognised agent CSR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentCsrKind {
    /// The requester is the certificate's subject (rotation): `selfclusteragent`.
    SelfAgent,
    /// Anyone else (a bootstrap token): `clusteragent`.
    Agent,
}

impl AgentCsrKind {
    /// The `certificatesigningrequests` subresource the requester needs `create` on.
    pub fn subresource(self) -> &'static str {
        match self {
            AgentCsrKind::SelfAgent => "selfclusteragent",
            AgentCsrKind::Agent => "clusteragent",
        }
    }

    /// The approval condition's message (Karmada's).
    pub fn message(self) -> &'static str {
        match self {
            AgentCsrKind::SelfAgent => {
                "Auto approving self karmada agent certificate after SubjectAccessReview."
            }
            AgentCsrKind::Agent => {
                "Auto approving karmada agent certificate after SubjectAccessReview."
            }
        }
    }
}

/// The recognisers Karmada tries, in order: a self CSR is also an agent CSR, so a renewal whose
/// requester lacks `selfclusteragent` may still pass as `clusteragent`.
pub fn recognize(csr: &CertificateSigningRequest) -> Result<Vec<AgentCsrKind>, NotAgentCsr> {
    let spec = &csr.spec;
    if spec.signer_name != KUBE_APISERVER_CLIENT_SIGNER {
        return Err(NotAgentCsr::Signer(spec.signer_name.clone()));
    }
    let subject = parse_request(&spec.request.0)?;
    validate_agent_request(&subject, spec.usages.as_deref().unwrap_or_default())?;
    let mut kinds = Vec::new();
    if spec.username.as_deref() == Some(subject.common_name.as_str()) {
        kinds.push(AgentCsrKind::SelfAgent);
    }
    kinds.push(AgentCsrKind::Agent);
    Ok(kinds)
}

/// Whether the CSR was already decided or signed (nothing to do).
fn decided(csr: &CertificateSigningRequest) -> bool {
    let Some(status) = &csr.status else {
        return false;
    };
    status.certificate.as_ref().is_some_and(|c| !c.0.is_empty())
        || status
            .conditions
            .iter()
            .flatten()
            .any(|c| (c.type_ == "Approved" || c.type_ == "Denied") && c.status == "True")
}

/// Whether a refused CSR claims to be an agent's (worth an Event): its request names the agent
/// organization or common-name prefix.
fn claims_agent(csr: &CertificateSigningRequest) -> bool {
    parse_request(&csr.spec.request.0).is_ok_and(|s| {
        s.organizations.iter().any(|o| o == AGENT_GROUP)
            || s.common_name.starts_with(AGENT_USER_PREFIX)
    })
}

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    /// The detector's (dynamic) CSR controller: CSRs stay propagatable templates.
    csrs: SharedController<DynamicObject>,
    events: EventRecorder,
}

/// The agent CSR approving controller. Cheap to clone.
#[derive(Clone)]
pub struct AgentCsrApprovingController {
    inner: Arc<Inner>,
}

/// An approving failure (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum ApprovingError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// An API call failed.
    #[error("{action} for csr {name}: {source}")]
    Api {
        /// What was done.
        action: &'static str,
        /// The CSR.
        name: String,
        /// The cause.
        source: kube::Error,
    },
}

karmada_controllers_common::core_error_from!(ApprovingError);

impl AgentCsrApprovingController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, ApprovingError> {
        let cp = &ctx.control_plane;
        let client = cp.clients().client_for_controller(CONTROLLER_NAME)?;
        let csrs = template_controller::<CertificateSigningRequest>(cp)?;
        let events = ctx.events.recorder(CONTROLLER_NAME);
        Ok(AgentCsrApprovingController {
            inner: Arc::new(Inner {
                ctx,
                client,
                csrs,
                events,
            }),
        })
    }

    /// Registers the handler and runs until the context is cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        inner
            .ctx
            .wiring("agent csr approving controller", &self)
            .handles_typed(
                &inner.csrs,
                NAME,
                |this: Self, k: ObjectKey, o: Option<Arc<CertificateSigningRequest>>| async move {
                    match o {
                        None => HandlerResult::Success,
                        Some(csr) => match this.handle(&csr).await {
                            Ok(()) => HandlerResult::Success,
                            Err(e) => {
                                tracing::warn!(csr = %k, error = %e, "agent csr approving failed");
                                HandlerResult::error(e)
                            }
                        },
                    }
                },
            )
            .run()
            .await?;
        Ok(())
    }

    async fn handle(&self, csr: &CertificateSigningRequest) -> Result<(), ApprovingError> {
        if csr.spec.signer_name != KUBE_APISERVER_CLIENT_SIGNER || decided(csr) {
            return Ok(());
        }
        let name = csr.metadata.name.clone().unwrap_or_default();
        let kinds = match recognize(csr) {
            Ok(k) => k,
            Err(reason) => {
                if claims_agent(csr) {
                    self.refuse(csr, &format!("not an agent CSR: {reason}"))
                        .await;
                }
                tracing::debug!(csr = %name, %reason, "not an agent csr, left alone");
                return Ok(());
            }
        };
        let mut tried = Vec::new();
        for kind in kinds {
            tried.push(kind.subresource());
            if self.authorized(csr, kind).await? {
                return self.approve(csr, kind).await;
            }
        }
        self.refuse(
            csr,
            &format!(
                "recognized as an agent CSR but the requester {:?} may not create \
                 certificatesigningrequests/{}: subject access review was not approved",
                csr.spec.username.as_deref().unwrap_or_default(),
                tried.join(" or certificatesigningrequests/")
            ),
        )
        .await;
        Ok(())
    }

    async fn refuse(&self, csr: &CertificateSigningRequest, message: &str) {
        let name = csr.metadata.name.as_deref().unwrap_or_default();
        tracing::info!(csr = name, message, "agent csr not approved");
        self.inner
            .events
            .record(
                &reference_of(csr),
                EventType::Warning,
                "AgentCSRNotApproved",
                message,
            )
            .await;
    }

    async fn authorized(
        &self,
        csr: &CertificateSigningRequest,
        kind: AgentCsrKind,
    ) -> Result<bool, ApprovingError> {
        let spec = &csr.spec;
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: spec.username.clone(),
                uid: spec.uid.clone(),
                groups: spec.groups.clone(),
                extra: spec.extra.clone(),
                resource_attributes: Some(ResourceAttributes {
                    group: Some("certificates.k8s.io".into()),
                    resource: Some("certificatesigningrequests".into()),
                    verb: Some("create".into()),
                    subresource: Some(kind.subresource().into()),
                    version: Some("*".into()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.inner.client.clone());
        let done = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| ApprovingError::Api {
                action: "subject access review",
                name: csr.metadata.name.clone().unwrap_or_default(),
                source,
            })?;
        Ok(done.status.is_some_and(|s| s.allowed))
    }

    async fn approve(
        &self,
        csr: &CertificateSigningRequest,
        kind: AgentCsrKind,
    ) -> Result<(), ApprovingError> {
        let name = csr.metadata.name.clone().unwrap_or_default();
        let mut conditions = csr
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        conditions.push(CertificateSigningRequestCondition {
            type_: "Approved".into(),
            status: "True".into(),
            reason: Some("AutoApproved".into()),
            message: Some(kind.message().into()),
            last_update_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Timestamp::now(),
            )),
            ..CertificateSigningRequestCondition::default()
        });
        // The resourceVersion makes the patch conditional: conditions we did not see are kept.
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": csr.metadata.resource_version},
            "status": {"conditions": conditions},
        });
        let api: Api<CertificateSigningRequest> = Api::all(self.inner.client.clone());
        api.patch_approval(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| ApprovingError::Api {
                action: "approving",
                name: name.clone(),
                source,
            })?;
        tracing::info!(csr = %name, subresource = kind.subresource(), "approved agent csr");
        Ok(())
    }
}

/// The start function registered as `agentcsrapproving`.
pub fn start_fn() -> StartFn {
    start_fn_of(
        AgentCsrApprovingController::new,
        AgentCsrApprovingController::run,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject(o: &[&str], cn: &str) -> RequestSubject {
        RequestSubject {
            organizations: o.iter().map(|s| (*s).to_owned()).collect(),
            common_name: cn.into(),
            common_names: 1,
            ..RequestSubject::default()
        }
    }

    /// A PEM request made by openssl for `subject` (`/O=…/CN=…`), which may repeat attributes.
    fn openssl_request(subject: &str) -> Option<Vec<u8>> {
        let dir =
            std::env::temp_dir().join(format!("csr-{}-{}", std::process::id(), subject.len()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("key.pem");
        let out = std::process::Command::new("openssl")
            .args([
                "req",
                "-new",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .args(["-nodes", "-multivalue-rdn", "-subj", subject, "-keyout"])
            .arg(&key)
            .output()
            .ok()?;
        let _ = std::fs::remove_dir_all(&dir);
        out.status.success().then_some(out.stdout)
    }

    #[test]
    fn refuses_subjects_the_api_server_reads_differently() {
        let full = usages(&["digital signature", "key encipherment", "client auth"]);
        // Never skipped: without openssl the test fails and says how to get it.
        let own = openssl_request("/O=system:karmada:agents/CN=system:karmada:agent:m1")
            .expect("openssl makes the test's requests: install it (apt-get install openssl)");
        let own = parse_request(&own).unwrap();
        assert_eq!(validate_agent_request(&own, &full), Ok(()));
        for (subject, err) in [
            (
                "/O=system:karmada:agents/CN=system:karmada:agent:m1/CN=system:karmada:agent:rbac-generator",
                NotAgentCsr::CommonNameCount(2),
            ),
            (
                "/O=system:karmada:agents/CN=system:karmada:agent:rbac-generator/CN=system:karmada:agent:m1",
                NotAgentCsr::CommonNameCount(2),
            ),
            (
                "/O=system:karmada:agents/CN=system:karmada:agent:m1+CN=admin",
                NotAgentCsr::CommonNameCount(2),
            ),
            (
                "/O=system:karmada:agents/OU=x/CN=system:karmada:agent:m1",
                NotAgentCsr::ExtraAttribute("2.5.4.11".into()),
            ),
            (
                "/O=system:karmada:agents/O=system:masters/CN=system:karmada:agent:m1",
                NotAgentCsr::Organization,
            ),
        ] {
            let parsed = parse_request(&openssl_request(subject).unwrap()).unwrap();
            assert_eq!(
                validate_agent_request(&parsed, &full),
                Err(err),
                "{subject}"
            );
        }
        let two = parse_request(
            &openssl_request(
                "/O=system:karmada:agents/CN=system:karmada:agent:m1/CN=system:karmada:agent:m2",
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(two.common_name, "system:karmada:agent:m2", "the last one");
    }

    fn usages(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn validates_like_karmada() {
        let full = usages(&["digital signature", "key encipherment", "client auth"]);
        let ok = subject(&[AGENT_GROUP], "system:karmada:agent:m1");
        assert_eq!(validate_agent_request(&ok, &full), Ok(()));
        assert_eq!(
            validate_agent_request(&ok, &usages(&["client auth", "digital signature"])),
            Ok(())
        );
        assert_eq!(
            validate_agent_request(&ok, &usages(&["client auth"])),
            Err(NotAgentCsr::Usages)
        );
        assert_eq!(
            validate_agent_request(&subject(&["other"], "system:karmada:agent:m1"), &full),
            Err(NotAgentCsr::Organization)
        );
        assert_eq!(
            validate_agent_request(
                &subject(&[AGENT_GROUP, "x"], "system:karmada:agent:m1"),
                &full
            ),
            Err(NotAgentCsr::Organization)
        );
        assert_eq!(
            validate_agent_request(&subject(&[AGENT_GROUP], "system:node:m1"), &full),
            Err(NotAgentCsr::CommonName)
        );
        let mut san = ok.clone();
        san.sans[2] = 1;
        assert_eq!(validate_agent_request(&san, &full), Err(NotAgentCsr::IpSan));
    }

    #[test]
    fn parses_a_generated_request() {
        let mut params = rcgen::CertificateParams::new(vec!["example.com".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, AGENT_GROUP);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "system:karmada:agent:m1");
        let key = rcgen::KeyPair::generate().unwrap();
        let pem = params.serialize_request(&key).unwrap().pem().unwrap();
        let s = parse_request(pem.as_bytes()).unwrap();
        assert_eq!(s.organizations, [AGENT_GROUP]);
        assert_eq!(s.common_name, "system:karmada:agent:m1");
        assert_eq!(s.sans, [1, 0, 0, 0]);
        assert!(parse_request(b"garbage").is_err());
    }
}
