//! `karmadactl register`: registers the member cluster of the current kubeconfig with a Karmada
//! control plane in Pull mode, as Karmada's command does.
//!
//! 1. Discovery: reads `kube-public/cluster-info` from `https://<endpoint>` anonymously, checks the
//!    bootstrapsigner's JWS for the token and the CA's public-key pin, and reads it again over TLS
//!    verified with that CA.
//! 2. With the bootstrap token, requests a certificate for the RBAC generator
//!    (`CN=system:karmada:agent:rbac-generator`), refuses a cluster name already in use, and creates
//!    the agent's RBAC on the control plane ([`RbacResources`]): its own Cluster, its Leases and
//!    its execution namespace `karmada-es-<cluster>`, nothing else; and the
//!    `karmada-agent-restriction` admission policy for what RBAC cannot limit.
//! 3. Requests the agent's certificate (`O=system:karmada:agents`,
//!    `CN=system:karmada:agent:<cluster>`, signer `kubernetes.io/kube-apiserver-client`); the
//!    `agentcsrapproving` controller approves it and the control plane's signer issues it.
//! 4. In the member: namespace, Secret `karmada-kubeconfig`, ServiceAccount `karmada-agent-sa`,
//!    ClusterRole and ClusterRoleBinding `karmada-agent`, and the `karmada-agent` Deployment
//!    (unless `--skip-agent-deployment`), then waits for its rollout.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::Cluster;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::Kubeconfig;

use crate::bootstrap::{
    AGENT_GROUP, CLUSTER_INFO, CLUSTER_INFO_NAMESPACE, JWS_KEY_PREFIX, RBAC_GENERATOR_USER, Token,
    apply, certificate_request, check_pins, client_of, detached_jws_valid, kubeconfig, name_suffix,
    role_ref, rule,
};
use crate::cli::RegisterArgs;
use crate::util::{SYSTEM_LABEL, code, validate_cluster_name};

/// The signer of agent certificates.
pub const SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// The Secret (and its key) holding the agent's kubeconfig in the member.
pub const KARMADA_KUBECONFIG: &str = "karmada-kubeconfig";
/// The agent's ServiceAccount in the member.
pub const AGENT_SERVICE_ACCOUNT: &str = "karmada-agent-sa";
/// The agent's Deployment, ClusterRole and ClusterRoleBinding in the member.
pub const AGENT_NAME: &str = "karmada-agent";
/// The cluster entry name of the kubeconfigs register writes.
const KARMADA_CLUSTER: &str = "karmada-apiserver";
const POLL: Duration = Duration::from_secs(1);

/// `system:karmada:agent:<cluster>`: the agent's user name.
pub fn agent_user(cluster: &str) -> String {
    format!("system:karmada:agent:{cluster}")
}

fn labels() -> BTreeMap<String, String> {
    [(SYSTEM_LABEL.0.to_owned(), SYSTEM_LABEL.1.to_owned())].into()
}

fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        ..ObjectMeta::default()
    }
}

fn user_subject(name: &str) -> Vec<Subject> {
    vec![Subject {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: "User".into(),
        name: name.into(),
        namespace: None,
    }]
}

/// The agent's RBAC on the control plane, named as Karmada names it but narrower (the same rights
/// as the karmada-agent chart's `karmadaApiServer` target): its own Cluster, its cluster Lease, its
/// leader-election Lease and the Works and Events of its execution namespace, each limited by
/// `resourceNames` wherever RBAC can. No Secrets (karmada-rs's agent reports none) and no Events
/// outside its execution namespace. What RBAC cannot limit (creating a Cluster or a Lease of another
/// name, making its Cluster a Push cluster) the `karmada-agent-restriction` admission policy refuses
/// ([`AGENT_RESTRICTION`]).
pub struct RbacResources {
    /// `system:karmada:<cluster>:agent`.
    pub cluster_role: ClusterRole,
    /// Its binding to the agent's user.
    pub cluster_role_binding: ClusterRoleBinding,
    /// `system:karmada:<cluster>:agent-lease` (cluster namespace), `…:agent-work`
    /// (`karmada-es-<cluster>`) and `…:agent-leader-election` (the agent's namespace).
    pub roles: Vec<Role>,
    /// Their bindings.
    pub role_bindings: Vec<RoleBinding>,
}

/// The `karmada-agent-restriction` ValidatingAdmissionPolicy and its binding (YAML, two documents),
/// the same file the charts install.
pub const AGENT_RESTRICTION: &str =
    include_str!("../../../charts/karmada-agent/files/agent-restriction.yaml");

impl RbacResources {
    /// What the agent of `cluster` may do on the control plane; `lease_namespace` is where its
    /// leader-election Lease lives (`--leader-elect-resource-namespace`, register's `--namespace`).
    #[allow(
        clippy::too_many_lines,
        reason = "the agent's RBAC as one literal list of rules, as Karmada's register writes it"
    )]
    pub fn new(cluster: &str, cluster_namespace: &str, lease_namespace: &str) -> Self {
        let user = agent_user(cluster);
        let name = format!("system:karmada:{cluster}:agent");
        let cluster_role = ClusterRole {
            metadata: meta(None, &name),
            rules: Some(vec![
                // Registration lists Clusters (a name or ID in use) and creates its own.
                rule(
                    &["cluster.karmada.io"],
                    &["clusters"],
                    &[],
                    &["list", "create"],
                ),
                // Its own Cluster: read, watch (field selector on its name), patch its spec.
                rule(
                    &["cluster.karmada.io"],
                    &["clusters"],
                    &[cluster],
                    &["get", "watch", "patch"],
                ),
                rule(
                    &["cluster.karmada.io"],
                    &["clusters/status"],
                    &[cluster],
                    &["patch"],
                ),
                rule(
                    &["config.karmada.io"],
                    &[
                        "resourceinterpreterwebhookconfigurations",
                        "resourceinterpretercustomizations",
                    ],
                    &[],
                    &["list", "watch"],
                ),
                // execution and workStatus: karmada-rs's drift policies.
                rule(
                    &["policy.karmada-rs.io"],
                    &["driftpolicies", "clusterdriftpolicies"],
                    &[],
                    &["list", "watch"],
                ),
                rule(&[""], &["namespaces"], &[cluster_namespace], &["get"]),
                // certRotation: its renewal CSRs (random names).
                rule(
                    &["certificates.k8s.io"],
                    &["certificatesigningrequests"],
                    &[],
                    &["get", "create"],
                ),
            ]),
            ..ClusterRole::default()
        };
        let cluster_role_binding = ClusterRoleBinding {
            metadata: meta(None, &name),
            role_ref: role_ref("ClusterRole", &name),
            subjects: Some(user_subject(&user)),
        };
        let lease = format!("system:karmada:{cluster}:agent-lease");
        let work = format!("system:karmada:{cluster}:agent-work");
        let election = format!("system:karmada:{cluster}:agent-leader-election");
        let es = karmada_apis::names::execution_space_name(cluster);
        let leases = "coordination.k8s.io";
        let election_lease = format!("karmada-agent-{cluster}");
        let roles = vec![
            Role {
                metadata: meta(Some(cluster_namespace), &lease),
                rules: Some(vec![
                    rule(&[leases], &["leases"], &[], &["create"]),
                    rule(&[leases], &["leases"], &[cluster], &["get", "patch"]),
                ]),
            },
            Role {
                metadata: meta(Some(&es), &work),
                rules: Some(vec![
                    rule(
                        &["work.karmada.io"],
                        &["works"],
                        &[],
                        &["get", "list", "watch", "create", "patch", "delete"],
                    ),
                    rule(
                        &["work.karmada.io"],
                        &["works/status"],
                        &[],
                        &["patch", "update"],
                    ),
                    rule(&[""], &["events"], &[], &["create", "patch"]),
                ]),
            },
            Role {
                metadata: meta(Some(lease_namespace), &election),
                rules: Some(vec![
                    rule(&[leases], &["leases"], &[], &["create"]),
                    rule(
                        &[leases],
                        &["leases"],
                        &[&election_lease],
                        &["get", "update"],
                    ),
                ]),
            },
        ];
        let role_bindings = roles
            .iter()
            .map(|r| RoleBinding {
                metadata: r.metadata.clone(),
                role_ref: role_ref("Role", name_of(&r.metadata)),
                subjects: Some(user_subject(&user)),
            })
            .collect();
        RbacResources {
            cluster_role,
            cluster_role_binding,
            roles,
            role_bindings,
        }
    }

    /// `Kind/[namespace/]name` of each, for messages.
    pub fn describe(&self) -> String {
        let mut out = vec![
            format!("ClusterRole/{}", name_of(&self.cluster_role.metadata)),
            format!(
                "ClusterRoleBinding/{}",
                name_of(&self.cluster_role_binding.metadata)
            ),
        ];
        for r in &self.roles {
            out.push(format!(
                "Role/{}/{}",
                ns_of(&r.metadata),
                name_of(&r.metadata)
            ));
        }
        for r in &self.role_bindings {
            out.push(format!(
                "RoleBinding/{}/{}",
                ns_of(&r.metadata),
                name_of(&r.metadata)
            ));
        }
        out.join("\n")
    }

    /// Creates those missing (and the Roles' namespaces), as Karmada does.
    pub async fn ensure(&self, client: &kube::Client) -> anyhow::Result<()> {
        create_if_absent(&Api::all(client.clone()), &self.cluster_role, "ClusterRole").await?;
        create_if_absent(
            &Api::all(client.clone()),
            &self.cluster_role_binding,
            "ClusterRoleBinding",
        )
        .await?;
        for r in &self.roles {
            let ns = ns_of(&r.metadata);
            let namespace = Namespace {
                metadata: ObjectMeta {
                    labels: Some(labels()),
                    ..meta(None, ns)
                },
                ..Namespace::default()
            };
            create_if_absent(&Api::all(client.clone()), &namespace, "Namespace").await?;
            create_if_absent(&Api::namespaced(client.clone(), ns), r, "Role").await?;
        }
        for b in &self.role_bindings {
            let ns = ns_of(&b.metadata);
            create_if_absent(&Api::namespaced(client.clone(), ns), b, "RoleBinding").await?;
        }
        ensure_agent_restriction(client).await
    }

    /// Deletes them (absent ones are fine).
    pub async fn delete(&self, client: &kube::Client) -> anyhow::Result<()> {
        delete_absent_ok::<ClusterRole>(&Api::all(client.clone()), &self.cluster_role.metadata)
            .await?;
        delete_absent_ok::<ClusterRoleBinding>(
            &Api::all(client.clone()),
            &self.cluster_role_binding.metadata,
        )
        .await?;
        for r in &self.roles {
            let api = Api::<Role>::namespaced(client.clone(), ns_of(&r.metadata));
            delete_absent_ok(&api, &r.metadata).await?;
        }
        for b in &self.role_bindings {
            let api = Api::<RoleBinding>::namespaced(client.clone(), ns_of(&b.metadata));
            delete_absent_ok(&api, &b.metadata).await?;
        }
        Ok(())
    }
}

/// The policy and binding of [`AGENT_RESTRICTION`].
pub fn agent_restriction()
-> anyhow::Result<(ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding)> {
    let mut docs = AGENT_RESTRICTION.split("\n---\n");
    let policy = docs.next().unwrap_or_default();
    let binding = docs.next().unwrap_or_default();
    Ok((
        serde_saphyr::from_str(policy)
            .context("parsing the karmada-agent-restriction ValidatingAdmissionPolicy")?,
        serde_saphyr::from_str(binding)
            .context("parsing the karmada-agent-restriction ValidatingAdmissionPolicyBinding")?,
    ))
}

/// Creates or updates (server-side apply) the `karmada-agent-restriction` admission policy and its
/// binding, shared by every agent (so `unregister` leaves them).
pub async fn ensure_agent_restriction(client: &kube::Client) -> anyhow::Result<()> {
    let (policy, binding) = agent_restriction()?;
    let name = name_of(&policy.metadata).to_owned();
    crate::bootstrap::apply(&Api::all(client.clone()), &name, &policy)
        .await
        .with_context(|| format!("applying ValidatingAdmissionPolicy {name}"))?;
    let name = name_of(&binding.metadata).to_owned();
    crate::bootstrap::apply(&Api::all(client.clone()), &name, &binding)
        .await
        .with_context(|| format!("applying ValidatingAdmissionPolicyBinding {name}"))?;
    Ok(())
}

fn name_of(m: &ObjectMeta) -> &str {
    m.name.as_deref().unwrap_or_default()
}

fn ns_of(m: &ObjectMeta) -> &str {
    m.namespace.as_deref().unwrap_or_default()
}

async fn create_if_absent<K>(api: &Api<K>, obj: &K, kind: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(409) => Ok(()),
        Err(e) => Err(anyhow!(
            "creating {kind} {}: {e}",
            describe_meta(obj.meta())
        )),
    }
}

/// Deletes the object named by `m`; NotFound is success.
pub(crate) async fn delete_absent_ok<K>(api: &Api<K>, m: &ObjectMeta) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    match api.delete(name_of(m), &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(404) => Ok(()),
        Err(e) => Err(anyhow!(
            "deleting {} {}: {e}",
            K::kind(&K::DynamicType::default()),
            describe_meta(m)
        )),
    }
}

fn describe_meta(m: &ObjectMeta) -> String {
    match &m.namespace {
        Some(ns) => format!("{ns}/{}", name_of(m)),
        None => name_of(m).to_owned(),
    }
}

/// The validated `cluster-info` kubeconfig's only cluster: `(server, CA PEM)`.
struct Discovered {
    ca_pem: Vec<u8>,
}

async fn fetch_cluster_info(
    client: &kube::Client,
    token: &Token,
    deadline: Instant,
) -> anyhow::Result<ConfigMap> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), CLUSTER_INFO_NAMESPACE);
    let key = format!("{JWS_KEY_PREFIX}{}", token.id);
    loop {
        let last = match api.get(CLUSTER_INFO).await {
            Ok(cm) if cm.data.as_ref().is_some_and(|d| d.contains_key(&key)) => return Ok(cm),
            Ok(_) => anyhow!(
                "token id {:?} is invalid for this cluster or it has expired (the {CLUSTER_INFO} \
                 ConfigMap has no JWS signature for it). Use \"karmadactl token create\" on the \
                 karmada-control-plane to create a new valid token",
                token.id
            ),
            Err(e) => anyhow!("failed to request {CLUSTER_INFO_NAMESPACE}/{CLUSTER_INFO}: {e}"),
        };
        if Instant::now() + POLL > deadline {
            return Err(last);
        }
        tokio::time::sleep(POLL).await;
    }
}

fn validate_cluster_info(cm: &ConfigMap, token: &Token) -> anyhow::Result<(String, Kubeconfig)> {
    let data = cm.data.clone().unwrap_or_default();
    let content = data.get("kubeconfig").filter(|k| !k.is_empty()).with_context(|| {
        format!(
            "there is no kubeconfig key in the {CLUSTER_INFO} ConfigMap. This API Server isn't set \
             up for token bootstrapping, can't connect"
        )
    })?;
    let jws = data
        .get(&format!("{JWS_KEY_PREFIX}{}", token.id))
        .cloned()
        .unwrap_or_default();
    if !detached_jws_valid(&jws, content, token) {
        bail!(
            "failed to verify JWS signature of received cluster info object, can't trust this API Server"
        );
    }
    let kc = Kubeconfig::from_yaml(content).with_context(|| {
        format!("couldn't parse the kubeconfig file in the {CLUSTER_INFO} ConfigMap")
    })?;
    if kc.clusters.len() != 1 {
        bail!(
            "expected the kubeconfig file in the {CLUSTER_INFO} ConfigMap to have a single cluster, \
             but it had {}",
            kc.clusters.len()
        );
    }
    Ok((content.clone(), kc))
}

fn ca_of(kc: &Kubeconfig) -> anyhow::Result<Vec<u8>> {
    use base64::Engine as _;
    let data = kc
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.certificate_authority_data.clone())
        .unwrap_or_default();
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .with_context(|| format!("failed to parse cluster CA from the {CLUSTER_INFO} ConfigMap"))
}

/// Karmada's `retrieveValidatedConfigInfo`.
async fn discover(args: &RegisterArgs, token: &Token) -> anyhow::Result<Discovered> {
    let server = format!("https://{}", args.endpoint);
    let deadline = Instant::now() + args.discovery_timeout;
    let insecure = client_of(kubeconfig(&server, KARMADA_CLUSTER, None, None)?).await?;
    let cm = fetch_cluster_info(&insecure, token, deadline).await?;
    let (content, kc) = validate_cluster_info(&cm, token)?;
    let ca_pem = ca_of(&kc)?;
    if args.discovery_token_ca_cert_hash.is_empty() {
        return Ok(Discovered { ca_pem });
    }
    check_pins(&ca_pem, &args.discovery_token_ca_cert_hash)
        .with_context(|| format!("cluster CA found in {CLUSTER_INFO} ConfigMap is invalid"))?;
    let secure = client_of(kubeconfig(&server, KARMADA_CLUSTER, Some(&ca_pem), None)?).await?;
    let again = fetch_cluster_info(&secure, token, deadline).await?;
    let second = again
        .data
        .and_then(|d| d.get("kubeconfig").cloned())
        .unwrap_or_default();
    if second != content {
        bail!(
            "the second kubeconfig from the {CLUSTER_INFO} ConfigMap (using validated TLS) was \
             different from the first"
        );
    }
    Ok(Discovered { ca_pem })
}

/// Requests a client certificate for `cn` (organization `system:karmada:agents`) as `requester`,
/// waits until it is issued and returns `(certificate PEM, key PEM)`.
pub async fn request_certificate(
    requester: &kube::Client,
    csr_name: &str,
    cn: &str,
    expiration_seconds: i32,
    timeout: Duration,
) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
    let (request, key) = certificate_request(cn, AGENT_GROUP)?;
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta {
            name: Some(csr_name.to_owned()),
            labels: Some(labels()),
            ..ObjectMeta::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(request.into_bytes()),
            signer_name: SIGNER.into(),
            expiration_seconds: Some(expiration_seconds),
            usages: Some(vec![
                "digital signature".into(),
                "key encipherment".into(),
                "client auth".into(),
            ]),
            ..CertificateSigningRequestSpec::default()
        },
        status: None,
    };
    let api: Api<CertificateSigningRequest> = Api::all(requester.clone());
    api.create(&PostParams::default(), &csr)
        .await
        .with_context(|| format!("creating CertificateSigningRequest {csr_name}"))?;
    let deadline = Instant::now() + timeout;
    loop {
        let got = api
            .get(csr_name)
            .await
            .with_context(|| format!("failed to get the cluster csr {csr_name}"))?;
        let status = got.status.unwrap_or_default();
        if let Some(cert) = status.certificate.filter(|c| !c.0.is_empty()) {
            return Ok((cert.0, key.into_bytes()));
        }
        if let Some(c) = status
            .conditions
            .iter()
            .flatten()
            .find(|c| (c.type_ == "Denied" || c.type_ == "Failed") && c.status == "True")
        {
            bail!(
                "CertificateSigningRequest {csr_name} was {}: {}",
                c.type_.to_lowercase(),
                c.message.as_deref().unwrap_or_default()
            );
        }
        if Instant::now() + POLL > deadline {
            bail!(
                "the client certificate of CertificateSigningRequest {csr_name} was not issued within \
                 {timeout:?}. Approve it manually (`kubectl certificate approve {csr_name}` on the \
                 control plane) or enable the agentcsrapproving controller of \
                 karmada-controller-manager"
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

fn cert_kubeconfig(
    server: &str,
    user: &str,
    ca_pem: &[u8],
    cert: &[u8],
    key: &[u8],
) -> anyhow::Result<Kubeconfig> {
    use base64::Engine as _;
    let b64 = |d: &[u8]| base64::engine::general_purpose::STANDARD.encode(d);
    kubeconfig(
        server,
        KARMADA_CLUSTER,
        Some(ca_pem),
        Some((
            user,
            serde_json::json!({"client-certificate-data": b64(cert), "client-key-data": b64(key)}),
        )),
    )
}

/// The member's kubeconfig: client, server, and the cluster name of its context.
async fn member_client(args: &RegisterArgs) -> anyhow::Result<(kube::Client, String, String)> {
    let kc = match &args.kubeconfig {
        Some(p) => Kubeconfig::read_from(p)
            .with_context(|| format!("failed to read kubeconfig file {}", p.display()))?,
        None => Kubeconfig::read().context("cannot read the member kubeconfig")?,
    };
    let ctx_name = args
        .context
        .clone()
        .or_else(|| kc.current_context.clone())
        .context("no context given and no current context in the member kubeconfig")?;
    let ctx_cluster = kc
        .contexts
        .iter()
        .find(|c| c.name == ctx_name)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .with_context(|| format!("context {ctx_name:?} not found in the member kubeconfig"))?;
    let server = kc
        .clusters
        .iter()
        .find(|c| c.name == ctx_cluster)
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .unwrap_or_default();
    let mut config = kube::Config::from_custom_kubeconfig(
        kc,
        &kube::config::KubeConfigOptions {
            context: Some(ctx_name),
            ..Default::default()
        },
    )
    .await
    .context("invalid member kubeconfig")?;
    config.connect_timeout = Some(Duration::from_secs(10));
    config.read_timeout = Some(Duration::from_secs(30));
    let client = kube::Client::try_from(config).context("cannot build the member client")?;
    Ok((client, server, ctx_cluster))
}

async fn preflight(member: &kube::Client, ns: &str) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(member.clone());
    if namespaces
        .get_opt(ns)
        .await
        .context("reading the agent's namespace in the member")?
        .is_none()
    {
        return Ok(());
    }
    let mut errors = Vec::new();
    if Api::<Secret>::namespaced(member.clone(), ns)
        .get_opt(KARMADA_KUBECONFIG)
        .await?
        .is_some()
    {
        errors.push(format!("{ns}/{KARMADA_KUBECONFIG} Secret already exists"));
    }
    if Api::<ServiceAccount>::namespaced(member.clone(), ns)
        .get_opt(AGENT_SERVICE_ACCOUNT)
        .await?
        .is_some()
    {
        errors.push(format!(
            "{ns}/{AGENT_SERVICE_ACCOUNT} ServiceAccount already exists"
        ));
    }
    if Api::<Deployment>::namespaced(member.clone(), ns)
        .get_opt(AGENT_NAME)
        .await?
        .is_some()
    {
        errors.push(format!("{ns}/{AGENT_NAME} Deployment already exists"));
    }
    if !errors.is_empty() {
        bail!(
            "[preflight] Some fatal errors occurred:\n\t[ERROR]: {}",
            errors.join("\n\t[ERROR]: ")
        );
    }
    Ok(())
}

/// Runs `karmadactl register`.
pub async fn run(mut args: RegisterArgs) -> anyhow::Result<()> {
    let (member, member_server, ctx_cluster) = member_client(&args).await?;
    if args.cluster_name.is_empty() {
        args.cluster_name = ctx_cluster;
    }
    let name = args.cluster_name.clone();
    validate_cluster_name(&name).map_err(|e| anyhow!("invalid cluster name({name}): {e}"))?;
    if args.token.is_empty() {
        bail!("token is required");
    }
    if !args.discovery_token_unsafe_skip_ca_verification
        && args.discovery_token_ca_cert_hash.is_empty()
    {
        bail!(
            "need to verify CACertHashes, or set --discovery-token-unsafe-skip-ca-verification=true"
        );
    }
    let token = Token::parse(&args.token)?;
    println!("[preflight] Running pre-flight checks");
    preflight(&member, &args.namespace).await?;
    println!("[preflight] All pre-flight checks were passed");
    if args.dry_run {
        return Ok(());
    }

    println!("[karmada-agent-start] Waiting to perform the TLS Bootstrap");
    let found = discover(&args, &token)
        .await
        .context("couldn't validate the identity of the API Server")?;
    let server = format!("https://{}", args.endpoint);
    let bootstrap = client_of(kubeconfig(
        &server,
        KARMADA_CLUSTER,
        Some(&found.ca_pem),
        Some((
            "tls-bootstrap-token-user",
            serde_json::json!({"token": token.to_string()}),
        )),
    )?)
    .await?;

    // The RBAC generator: a short-lived identity that creates the agent's RBAC.
    let rbac = RbacResources::new(&name, &args.cluster_namespace, &args.namespace);
    let generator_csr = format!("agent-rbac-generator-{name}{}", name_suffix()?);
    let (cert, key) = request_certificate(
        &bootstrap,
        &generator_csr,
        RBAC_GENERATOR_USER,
        args.cert_expiration_seconds,
        args.discovery_timeout,
    )
    .await?;
    let generator = client_of(cert_kubeconfig(
        &server,
        RBAC_GENERATOR_USER,
        &found.ca_pem,
        &cert,
        &key,
    )?)
    .await?;
    let result = async {
        // A name in use is refused before anything is created (Karmada would then delete the
        // existing agent's RBAC in its clean-up; nothing changes here).
        println!("[karmada-agent-start] Waiting to check cluster exists");
        let clusters: Api<Cluster> = Api::all(generator.clone());
        if clusters
            .get_opt(&name)
            .await
            .with_context(|| format!("reading cluster {name}"))?
            .is_some()
        {
            bail!("failed to register as cluster with name {name} already exists");
        }
        let created = register_with(
            &args,
            &generator,
            &bootstrap,
            &rbac,
            &found,
            &member,
            &member_server,
        )
        .await;
        if created.is_err() {
            println!("karmadactl register failed and started deleting the created resources");
            if let Err(d) = rbac.delete(&generator).await {
                eprintln!("warning: failed to delete rbac resources: {d}");
            }
        }
        created
    }
    .await;
    // The generator's CSR is not needed any more, whatever happened.
    let csrs: Api<CertificateSigningRequest> = Api::all(generator.clone());
    if let Err(e) = delete_absent_ok(&csrs, &meta(None, &generator_csr)).await {
        eprintln!("warning: {e}");
    }
    result?;
    println!("\ncluster({name}) is joined successfully");
    Ok(())
}

#[allow(
    clippy::too_many_lines,
    reason = "the register steps in order: certificate, kubeconfig Secret, RBAC, Deployment, rollout"
)]
async fn register_with(
    args: &RegisterArgs,
    generator: &kube::Client,
    bootstrap: &kube::Client,
    rbac: &RbacResources,
    found: &Discovered,
    member: &kube::Client,
    member_server: &str,
) -> anyhow::Result<()> {
    let name = &args.cluster_name;
    println!("[karmada-agent-start] Assign the necessary RBAC permissions to the agent");
    rbac.ensure(generator).await?;

    println!("[karmada-agent-start] Waiting to construct karmada-agent kubeconfig");
    let csr_name = format!("{name}-{}", name_suffix()?);
    let (cert, key) = request_certificate(
        bootstrap,
        &csr_name,
        &agent_user(name),
        args.cert_expiration_seconds,
        args.discovery_timeout,
    )
    .await?;
    let server = format!("https://{}", args.endpoint);
    let agent_kc = cert_kubeconfig(&server, name, &found.ca_pem, &cert, &key)?;
    let yaml = serde_saphyr::to_string(&agent_kc).context("serializing the agent kubeconfig")?;

    let ns = &args.namespace;
    let namespace = Namespace {
        metadata: ObjectMeta {
            labels: Some(labels()),
            ..meta(None, ns)
        },
        ..Namespace::default()
    };
    create_if_absent(&Api::all(member.clone()), &namespace, "Namespace").await?;
    println!("[karmada-agent-start] Waiting the necessary secret and RBAC");
    let secret = Secret {
        metadata: ObjectMeta {
            labels: Some(labels()),
            ..meta(Some(ns), KARMADA_KUBECONFIG)
        },
        type_: Some("Opaque".into()),
        string_data: Some([(KARMADA_KUBECONFIG.to_owned(), yaml)].into()),
        ..Secret::default()
    };
    apply(
        &Api::namespaced(member.clone(), ns),
        KARMADA_KUBECONFIG,
        &secret,
    )
    .await
    .with_context(|| format!("create secret {KARMADA_KUBECONFIG} failed"))?;
    let role = ClusterRole {
        metadata: ObjectMeta {
            labels: Some(labels()),
            ..meta(None, AGENT_NAME)
        },
        rules: Some(vec![
            rule(&["*"], &["*"], &[], &["*"]),
            PolicyRule {
                non_resource_urls: Some(vec!["*".into()]),
                verbs: vec!["get".into()],
                ..PolicyRule::default()
            },
        ]),
        ..ClusterRole::default()
    };
    apply(&Api::all(member.clone()), AGENT_NAME, &role)
        .await
        .with_context(|| format!("creating ClusterRole {AGENT_NAME} in the member"))?;
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            labels: Some(labels()),
            ..meta(Some(ns), AGENT_SERVICE_ACCOUNT)
        },
        ..ServiceAccount::default()
    };
    create_if_absent(&Api::namespaced(member.clone(), ns), &sa, "ServiceAccount").await?;
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            labels: Some(labels()),
            ..meta(None, AGENT_NAME)
        },
        role_ref: role_ref("ClusterRole", AGENT_NAME),
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: AGENT_SERVICE_ACCOUNT.into(),
            namespace: Some(ns.clone()),
            api_group: None,
        }]),
    };
    apply(&Api::all(member.clone()), AGENT_NAME, &binding)
        .await
        .with_context(|| format!("creating ClusterRoleBinding {AGENT_NAME} in the member"))?;

    if args.skip_agent_deployment {
        println!(
            "[karmada-agent-start] Skipping the karmada-agent Deployment: run the agent with the \
             kubeconfig in Secret {ns}/{KARMADA_KUBECONFIG}"
        );
        return Ok(());
    }
    println!("[karmada-agent-start] Waiting karmada-agent Deployment");
    let deployment = agent_deployment(args, member_server)?;
    let deployments: Api<Deployment> = Api::namespaced(member.clone(), ns);
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .with_context(|| format!("creating Deployment {ns}/{AGENT_NAME} in the member"))?;
    wait_rollout(&deployments, args.discovery_timeout).await
}

/// The `karmada-agent` Deployment Karmada's register creates (the image runs `/karmada-agent`), with
/// liveness and readiness probes on its health port (Karmada's has none). `tests/tests/
/// agent_deployments.rs` runs exactly this container.
pub fn agent_deployment(args: &RegisterArgs, member_server: &str) -> anyhow::Result<Deployment> {
    let controllers = if args.enable_cert_rotation {
        "*,certRotation"
    } else {
        "*"
    };
    let ns = &args.namespace;
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": AGENT_NAME, "namespace": ns, "labels": {"app": AGENT_NAME}},
        "spec": {
            "replicas": args.karmada_agent_replicas,
            "selector": {"matchLabels": {"app": AGENT_NAME}},
            "template": {
                "metadata": {"name": AGENT_NAME, "namespace": ns, "labels": {"app": AGENT_NAME}},
                "spec": {
                    "serviceAccountName": AGENT_SERVICE_ACCOUNT,
                    "containers": [{
                        "name": AGENT_NAME,
                        "image": args.karmada_agent_image,
                        "command": [
                            "/karmada-agent",
                            format!("--karmada-kubeconfig=/etc/kubeconfig/{KARMADA_KUBECONFIG}"),
                            format!("--cluster-name={}", args.cluster_name),
                            format!("--cluster-api-endpoint={member_server}"),
                            format!("--cluster-provider={}", args.cluster_provider),
                            format!("--cluster-region={}", args.cluster_region),
                            format!("--cluster-zones={}", args.cluster_zones.join(",")),
                            format!("--controllers={controllers}"),
                            format!("--proxy-server-address={}", args.proxy_server_address),
                            format!("--leader-elect-resource-namespace={ns}"),
                            format!("--cluster-namespace={}", args.cluster_namespace),
                            "--cluster-status-update-frequency=10s",
                            "--metrics-bind-address=:8080",
                            "--health-probe-bind-address=0.0.0.0:10357",
                            "--v=4",
                        ],
                        "ports": [
                            {"name": "metrics", "containerPort": 8080, "protocol": "TCP"},
                            {"name": "healthz", "containerPort": 10357, "protocol": "TCP"},
                        ],
                        // Not in Karmada's: the probes of charts/karmada-agent, so that the rollout
                        // register waits for means the agent serves (/readyz: its controllers synced).
                        "livenessProbe": {
                            "httpGet": {"path": "/healthz", "port": "healthz", "scheme": "HTTP"},
                            "initialDelaySeconds": 15,
                            "periodSeconds": 15,
                            "timeoutSeconds": 5,
                            "failureThreshold": 3,
                        },
                        "readinessProbe": {
                            "httpGet": {"path": "/readyz", "port": "healthz", "scheme": "HTTP"},
                            "periodSeconds": 5,
                            "timeoutSeconds": 5,
                            "failureThreshold": 3,
                        },
                        "volumeMounts": [{"name": "kubeconfig", "mountPath": "/etc/kubeconfig"}],
                    }],
                    "volumes": [{"name": "kubeconfig", "secret": {"secretName": KARMADA_KUBECONFIG}}],
                    "tolerations": [{"key": "node-role.kubernetes.io/master", "operator": "Exists"}],
                },
            },
        },
    }))
    .context("building the karmada-agent Deployment")
}

async fn wait_rollout(api: &Api<Deployment>, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let d = api
            .get(AGENT_NAME)
            .await
            .context("reading the agent Deployment")?;
        let want = d.spec.replicas.unwrap_or(1);
        let status = d.status.unwrap_or_default();
        let generation = d.metadata.generation.unwrap_or_default();
        if status.observed_generation.unwrap_or_default() >= generation
            && status.updated_replicas.unwrap_or_default() >= want
            && status.available_replicas.unwrap_or_default() >= want
        {
            return Ok(());
        }
        if Instant::now() + POLL > deadline {
            bail!("the karmada-agent Deployment did not roll out within {timeout:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_restriction_parses_and_both_charts_install_the_same() {
        let (policy, binding) = agent_restriction().unwrap();
        assert_eq!(
            policy.metadata.name.as_deref(),
            Some("karmada-agent-restriction")
        );
        assert_eq!(
            binding.spec.policy_name.as_str(),
            "karmada-agent-restriction"
        );
        assert_eq!(
            AGENT_RESTRICTION,
            include_str!("../../../charts/karmada-controller-manager/files/agent-restriction.yaml"),
            "the two charts' copies differ"
        );
    }

    #[test]
    fn rbac_names_only_its_own_objects() {
        let rbac = RbacResources::new("m1", "karmada-cluster", "karmada-system");
        let text = serde_json::to_string(&(&rbac.cluster_role, &rbac.roles)).unwrap();
        assert!(!text.contains("secrets"), "{text}");
        assert!(text.contains("karmada-agent-m1"), "{text}");
        for role in &rbac.roles {
            for r in role.rules.iter().flatten() {
                let names = r.resource_names.as_ref();
                if r.resources.iter().flatten().any(|x| x == "leases") {
                    assert!(names.is_some() || r.verbs == ["create"], "{r:?}");
                }
            }
        }
    }
}
