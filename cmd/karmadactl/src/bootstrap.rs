//! Bootstrap tokens and TLS bootstrap, as Karmada (and kubeadm) define them: the token format and
//! its `bootstrap.kubernetes.io/token` Secret, the public-key pin of a CA
//! (`--discovery-token-ca-cert-hash`), the JWS signature kube-controller-manager's
//! `bootstrapsigner` puts in `kube-public/cluster-info`, and the control-plane objects Karmada's
//! `init` creates so that tokens can register clusters ([`ensure_control_plane_bootstrap`]).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use base64::Engine as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams};
use kube::config::Kubeconfig;
use serde::de::DeserializeOwned;

/// Namespace of the token Secrets.
pub const TOKEN_NAMESPACE: &str = "kube-system";
/// Secret type of a bootstrap token.
pub const TOKEN_SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// The group Karmada's tokens authenticate as (besides `system:bootstrappers`).
pub const DEFAULT_TOKEN_GROUP: &str = "system:bootstrappers:karmada:default-cluster-token";
/// A token's usages by default: every known one.
pub const DEFAULT_TOKEN_USAGES: &[&str] = &["signing", "authentication"];
/// The agents' group (certificate organization).
pub const AGENT_GROUP: &str = "system:karmada:agents";
/// The user Karmada's register uses to create the agent's RBAC on the control plane.
pub const RBAC_GENERATOR_USER: &str = "system:karmada:agent:rbac-generator";
/// The ConfigMap discovery reads.
pub const CLUSTER_INFO: &str = "cluster-info";
/// Its namespace.
pub const CLUSTER_INFO_NAMESPACE: &str = "kube-public";
/// Prefix of the JWS signature keys in `cluster-info`.
pub const JWS_KEY_PREFIX: &str = "jws-kubeconfig-";

const TOKEN_CHARS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
/// k8s.io/apimachinery's `rand.String` alphabet (no vowels, no confusable characters).
const SUFFIX_CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A bootstrap token `<id>.<secret>` (`[a-z0-9]{6}.[a-z0-9]{16}`).
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// The public part.
    pub id: String,
    /// The private part.
    pub secret: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token({}.<redacted>)", self.id)
    }
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.id, self.secret)
    }
}

fn lower_alnum(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
}

impl Token {
    /// Parses `<id>.<secret>`; the error names the expected form.
    pub fn parse(s: &str) -> anyhow::Result<Token> {
        match s.split_once('.') {
            Some((id, secret)) if lower_alnum(id, 6) && lower_alnum(secret, 16) => Ok(Token {
                id: id.to_owned(),
                secret: secret.to_owned(),
            }),
            _ => bail!(
                "the bootstrap token {s:?} was not of the form \"[a-z0-9]{{6}}.[a-z0-9]{{16}}\""
            ),
        }
    }

    /// A random token.
    pub fn generate() -> anyhow::Result<Token> {
        Ok(Token {
            id: random_string(TOKEN_CHARS, 6)?,
            secret: random_string(TOKEN_CHARS, 16)?,
        })
    }

    /// `bootstrap-token-<id>`.
    pub fn secret_name(&self) -> String {
        format!("bootstrap-token-{}", self.id)
    }

    /// The token's Secret in `kube-system`; `expiration` is RFC 3339 (none: never expires).
    pub fn to_secret(
        &self,
        expiration: Option<&str>,
        description: &str,
        usages: &[String],
        groups: &[String],
    ) -> Secret {
        let mut data = BTreeMap::new();
        let mut put = |k: String, v: &str| {
            data.insert(k, ByteString(v.as_bytes().to_vec()));
        };
        put("token-id".into(), &self.id);
        put("token-secret".into(), &self.secret);
        if !description.is_empty() {
            put("description".into(), description);
        }
        if let Some(e) = expiration {
            put("expiration".into(), e);
        }
        for u in usages {
            put(format!("usage-bootstrap-{u}"), "true");
        }
        if !groups.is_empty() {
            put("auth-extra-groups".into(), &groups.join(","));
        }
        Secret {
            metadata: ObjectMeta {
                name: Some(self.secret_name()),
                namespace: Some(TOKEN_NAMESPACE.into()),
                ..ObjectMeta::default()
            },
            type_: Some(TOKEN_SECRET_TYPE.into()),
            data: Some(data),
            ..Secret::default()
        }
    }
}

/// A random string of `len` characters from `alphabet` (unbiased).
pub fn random_string(alphabet: &[u8], len: usize) -> anyhow::Result<String> {
    use ring::rand::SecureRandom;
    let rng = ring::rand::SystemRandom::new();
    let limit = 256 - (256 % alphabet.len());
    let mut out = String::with_capacity(len);
    let mut buf = [0u8; 32];
    while out.len() < len {
        rng.fill(&mut buf)
            .map_err(|_| anyhow!("the system random number generator failed"))?;
        for b in buf {
            if usize::from(b) < limit && out.len() < len {
                out.push(char::from(alphabet[usize::from(b) % alphabet.len()]));
            }
        }
    }
    Ok(out)
}

/// Five random characters, as Kubernetes' `rand.String(5)` suffixes names.
pub fn name_suffix() -> anyhow::Result<String> {
    random_string(SUFFIX_CHARS, 5)
}

/// A fresh private key and a PKCS#10 request for `CN=<cn>, O=<organization>`: `(request PEM,
/// key PEM)`.
pub fn certificate_request(cn: &str, organization: &str) -> anyhow::Result<(String, String)> {
    let key = rcgen::KeyPair::generate().context("generating a private key")?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, organization);
    let request = params
        .serialize_request(&key)
        .context("creating the certificate request")?
        .pem()
        .context("encoding the certificate request")?;
    Ok((request, key.serialize_pem()))
}

/// The DER certificates in a PEM bundle.
pub fn pem_certificates(pem: &[u8]) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
        let block = block.map_err(|e| anyhow!("invalid PEM: {e}"))?;
        if block.label == "CERTIFICATE" {
            out.push(block.contents);
        }
    }
    if out.is_empty() {
        bail!("no CERTIFICATE block found");
    }
    Ok(out)
}

/// `sha256:<hex>` of a certificate's SubjectPublicKeyInfo (kubeadm's public-key pin).
pub fn public_key_pin(cert_der: &[u8]) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    use x509_parser::prelude::FromDer;
    let (_, cert) = x509_parser::certificate::X509Certificate::from_der(cert_der)
        .map_err(|e| anyhow!("cannot parse the CA certificate: {e}"))?;
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.tbs_certificate.subject_pki.raw);
    let mut pin = String::from("sha256:");
    for b in digest.as_ref() {
        // Writing to a String cannot fail.
        let _ = write!(pin, "{b:02x}");
    }
    Ok(pin)
}

/// Checks that one of the CA certificates in `ca_pem` matches one of `pins` (`sha256:<hex>`;
/// a bare hex value is accepted as sha256, as kubeadm does).
pub fn check_pins(ca_pem: &[u8], pins: &[String]) -> anyhow::Result<()> {
    let mut allowed = Vec::new();
    for p in pins {
        let (kind, value) = p.split_once(':').unwrap_or(("sha256", p.as_str()));
        if kind != "sha256" {
            bail!("unknown hash type {kind:?} in {p:?} (only sha256 is supported)");
        }
        if value.len() != 64 || !value.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!("{p:?} is not a sha256 hash (64 hex digits)");
        }
        allowed.push(format!("sha256:{}", value.to_ascii_lowercase()));
    }
    let mut seen = Vec::new();
    for der in pem_certificates(ca_pem)? {
        let pin = public_key_pin(&der)?;
        if allowed.contains(&pin) {
            return Ok(());
        }
        seen.push(pin);
    }
    bail!(
        "none of the public keys [{}] are pinned (--discovery-token-ca-cert-hash {})",
        seen.join(", "),
        pins.join(",")
    )
}

fn b64url(data: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

/// Whether `detached` (`<header>..<signature>`) is the HS256 JWS over `content` that the
/// `bootstrapsigner` computes with `token`.
pub fn detached_jws_valid(detached: &str, content: &str, token: &Token) -> bool {
    let mut parts = detached.split('.');
    let (Some(header), Some(""), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let Ok(header_json) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(header) else {
        return false;
    };
    let Ok(h) = serde_json::from_slice::<serde_json::Value>(&header_json) else {
        return false;
    };
    if h.get("alg").and_then(|v| v.as_str()) != Some("HS256")
        || h.get("kid").and_then(|v| v.as_str()) != Some(token.id.as_str())
    {
        return false;
    }
    let Ok(sig) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(signature) else {
        return false;
    };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.secret.as_bytes());
    let input = format!("{header}.{}", b64url(content.as_bytes()));
    ring::hmac::verify(&key, input.as_bytes(), &sig).is_ok()
}

/// The detached JWS the `bootstrapsigner` would write (for tests).
pub fn detached_jws(content: &str, token: &Token) -> String {
    let header = b64url(format!(r#"{{"alg":"HS256","kid":"{}"}}"#, token.id).as_bytes());
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.secret.as_bytes());
    let input = format!("{header}.{}", b64url(content.as_bytes()));
    let sig = ring::hmac::sign(&key, input.as_bytes());
    format!("{header}..{}", b64url(sig.as_ref()))
}

/// A kubeconfig with one cluster `cluster` at `server` (CA `ca_pem`, or no verification when
/// `None`) and, when `user` is given, one user (`{"token": …}` or client certificate data) and the
/// context `<user>@<cluster>`.
pub fn kubeconfig(
    server: &str,
    cluster: &str,
    ca_pem: Option<&[u8]>,
    user: Option<(&str, serde_json::Value)>,
) -> anyhow::Result<Kubeconfig> {
    let b64 = |d: &[u8]| base64::engine::general_purpose::STANDARD.encode(d);
    let cluster_entry = match ca_pem {
        Some(ca) => serde_json::json!({"server": server, "certificate-authority-data": b64(ca)}),
        None => serde_json::json!({"server": server, "insecure-skip-tls-verify": true}),
    };
    let mut kc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": cluster_entry}],
        "contexts": [],
        "users": [],
    });
    if let Some((name, auth)) = user {
        let ctx = format!("{name}@{cluster}");
        kc["users"] = serde_json::json!([{"name": name, "user": auth}]);
        kc["contexts"] =
            serde_json::json!([{"name": ctx, "context": {"cluster": cluster, "user": name}}]);
        kc["current-context"] = serde_json::json!(ctx);
    }
    serde_json::from_value(kc).context("building a kubeconfig")
}

/// A client from an in-memory kubeconfig (its current context, or its only cluster anonymously).
pub async fn client_of(kc: Kubeconfig) -> anyhow::Result<kube::Client> {
    let mut config = if kc.current_context.is_some() {
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .context("invalid kubeconfig")?
    } else {
        let cluster = kc
            .clusters
            .first()
            .and_then(|c| c.cluster.clone())
            .context("kubeconfig without a cluster")?;
        let url = cluster.server.clone().unwrap_or_default();
        let mut config = kube::Config::new(url.parse().with_context(|| format!("bad URL {url}"))?);
        config.accept_invalid_certs = cluster.insecure_skip_tls_verify.unwrap_or(false);
        if let Some(data) = &cluster.certificate_authority_data {
            let pem = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .context("certificate-authority-data is not base64")?;
            config.root_cert = Some(pem_certificates(&pem)?);
        }
        config
    };
    config.connect_timeout = Some(Duration::from_secs(10));
    config.read_timeout = Some(Duration::from_secs(30));
    kube::Client::try_from(config).context("cannot build a client")
}

/// Creates or updates `obj` by server-side apply as `karmadactl` (Karmada's CreateOrUpdate).
pub async fn apply<K>(api: &Api<K>, name: &str, obj: &K) -> Result<K, kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply("karmadactl").force(),
        &Patch::Apply(obj),
    )
    .await
}

pub(crate) fn rule(
    groups: &[&str],
    resources: &[&str],
    names: &[&str],
    verbs: &[&str],
) -> PolicyRule {
    let v = |x: &[&str]| x.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(v(groups)),
        resources: Some(v(resources)),
        resource_names: (!names.is_empty()).then(|| v(names)),
        verbs: v(verbs),
        ..PolicyRule::default()
    }
}

fn subject(kind: &str, name: &str) -> Subject {
    Subject {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: name.into(),
        namespace: None,
    }
}

pub(crate) fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: name.into(),
    }
}

fn cluster_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        rules: Some(rules),
        ..ClusterRole::default()
    }
}

fn cluster_role_binding(name: &str, role: &str, subjects: Vec<Subject>) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        role_ref: role_ref("ClusterRole", role),
        subjects: Some(subjects),
    }
}

/// The control plane's side of token registration, as Karmada's `init` (and chart) set it up:
/// `kube-public/cluster-info` holding a kubeconfig with `server` and the CA `ca_pem` (signed by
/// kube-controller-manager's `bootstrapsigner` for each token) and readable anonymously; tokens
/// may post CSRs (`system:node-bootstrapper`) and get agent CSRs approved
/// (`certificatesigningrequests/clusteragent`); agents may get their renewals approved
/// (`selfclusteragent`); and the register's RBAC generator identity may create the agent's RBAC.
#[allow(
    clippy::too_many_lines,
    reason = "the bootstrap objects (cluster-info, roles, bindings) as literals, in the order they are applied"
)]
pub async fn ensure_control_plane_bootstrap(
    client: &kube::Client,
    server: &str,
    ca_pem: &[u8],
) -> anyhow::Result<()> {
    let info = kubeconfig(server, "", Some(ca_pem), None)?;
    let yaml = serde_saphyr::to_string(&info).context("serializing the cluster-info kubeconfig")?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), CLUSTER_INFO_NAMESPACE);
    // Apply only the kubeconfig key: the bootstrapsigner owns the jws-kubeconfig-* keys.
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(CLUSTER_INFO.into()),
            namespace: Some(CLUSTER_INFO_NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        data: Some([("kubeconfig".to_owned(), yaml)].into()),
        ..ConfigMap::default()
    };
    apply(&cms, CLUSTER_INFO, &cm)
        .await
        .context("creating ConfigMap kube-public/cluster-info")?;

    let reader = "system:karmada:bootstrap-signer-clusterinfo";
    let roles: Api<Role> = Api::namespaced(client.clone(), CLUSTER_INFO_NAMESPACE);
    let role = Role {
        metadata: ObjectMeta {
            name: Some(reader.into()),
            namespace: Some(CLUSTER_INFO_NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![rule(
            &[""],
            &["configmaps"],
            &[CLUSTER_INFO],
            &["get"],
        )]),
    };
    apply(&roles, reader, &role)
        .await
        .with_context(|| format!("creating Role kube-public/{reader}"))?;
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), CLUSTER_INFO_NAMESPACE);
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some(reader.into()),
            namespace: Some(CLUSTER_INFO_NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        role_ref: role_ref("Role", reader),
        subjects: Some(vec![subject("User", "system:anonymous")]),
    };
    apply(&bindings, reader, &binding)
        .await
        .with_context(|| format!("creating RoleBinding kube-public/{reader}"))?;

    let autoapprover = "system:karmada:certificatesigningrequest:autoapprover";
    let selfautoapprover = "system:karmada:certificatesigningrequest:selfautoapprover";
    let generator = "system:karmada:agent-rbac-generator";
    let csrs = "certificates.k8s.io";
    let cluster_roles = [
        cluster_role(
            autoapprover,
            vec![rule(
                &[csrs],
                &["certificatesigningrequests/clusteragent"],
                &[],
                &["create"],
            )],
        ),
        cluster_role(
            selfautoapprover,
            vec![rule(
                &[csrs],
                &["certificatesigningrequests/selfclusteragent"],
                &[],
                &["create"],
            )],
        ),
        cluster_role(generator, vec![rule(&["*"], &["*"], &[], &["*"])]),
    ];
    let api: Api<ClusterRole> = Api::all(client.clone());
    for r in &cluster_roles {
        let name = r.metadata.name.clone().unwrap_or_default();
        apply(&api, &name, r)
            .await
            .with_context(|| format!("creating ClusterRole {name}"))?;
    }
    let token_group = || vec![subject("Group", DEFAULT_TOKEN_GROUP)];
    let crbs = [
        cluster_role_binding(
            "system:karmada:agent-bootstrap",
            "system:node-bootstrapper",
            token_group(),
        ),
        cluster_role_binding(
            "system:karmada:agent-autoapprove-bootstrap",
            autoapprover,
            token_group(),
        ),
        cluster_role_binding(
            "system:karmada:agent-autoapprove-certificate-rotation",
            selfautoapprover,
            vec![subject("Group", AGENT_GROUP)],
        ),
        cluster_role_binding(
            generator,
            generator,
            vec![subject("User", RBAC_GENERATOR_USER)],
        ),
    ];
    let api: Api<ClusterRoleBinding> = Api::all(client.clone());
    for b in &crbs {
        let name = b.metadata.name.clone().unwrap_or_default();
        apply(&api, &name, b)
            .await
            .with_context(|| format!("creating ClusterRoleBinding {name}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        let t = Token::generate().unwrap();
        assert_eq!(Token::parse(&t.to_string()).unwrap(), t);
        assert!(Token::parse("abcdef.0123456789abcdef").is_ok());
        assert!(Token::parse("ABCDEF.0123456789abcdef").is_err());
        assert!(Token::parse("abcdef0123456789abcdef").is_err());
        assert!(!format!("{t:?}").contains(&t.secret));
        let s = t.to_secret(Some("2030-01-01T00:00:00Z"), "", &["signing".into()], &[]);
        assert_eq!(
            s.metadata.name.unwrap(),
            format!("bootstrap-token-{}", t.id)
        );
        assert!(s.data.unwrap().contains_key("usage-bootstrap-signing"));
    }

    #[test]
    fn jws_round_trip() {
        let t = Token::parse("abcdef.0123456789abcdef").unwrap();
        let sig = detached_jws("content", &t);
        assert!(detached_jws_valid(&sig, "content", &t));
        assert!(!detached_jws_valid(&sig, "other", &t));
        let other = Token::parse("abcdef.0123456789abcdee").unwrap();
        assert!(!detached_jws_valid(&sig, "content", &other));
    }

    #[test]
    fn pins() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(Vec::<String>::new())
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let pin = public_key_pin(cert.der()).unwrap();
        assert!(pin.starts_with("sha256:") && pin.len() == 71);
        let pem = cert.pem();
        assert!(check_pins(pem.as_bytes(), std::slice::from_ref(&pin)).is_ok());
        let wrong = format!("sha256:{}", "0".repeat(64));
        assert!(check_pins(pem.as_bytes(), &[wrong]).is_err());
        assert!(check_pins(pem.as_bytes(), &["md5:00".into()]).is_err());
    }
}
