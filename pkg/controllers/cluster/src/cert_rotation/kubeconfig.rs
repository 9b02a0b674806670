//! The agent's kubeconfig for the Karmada API server as the Secret `karmada-kubeconfig` holds it:
//! reading its client certificate, judging whether it is due for renewal, asking for a new one and
//! writing it back. Pure: no API calls.
//!
//! The kubeconfig is edited as a YAML document, so everything this module does not touch (other
//! users, clusters, extensions) is kept as it was.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;
use x509_parser::prelude::FromDer;

/// The key of the kubeconfig in the Secret (Karmada's `karmada-kubeconfig`).
pub const SECRET_KEY: &str = "karmada-kubeconfig";

/// Why the kubeconfig or its certificate cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// The kubeconfig does not parse as YAML.
    #[error("the kubeconfig does not parse: {0}")]
    Parse(String),
    /// The current context names no user, or the user is missing.
    #[error("the kubeconfig's current context {0:?} names no user with a client certificate")]
    NoUser(String),
    /// The client certificate is not base64 PEM holding an X.509 certificate.
    #[error("the client certificate of user {user:?} cannot be read: {reason}")]
    Certificate {
        /// The kubeconfig user.
        user: String,
        /// What is wrong.
        reason: String,
    },
    /// The edited kubeconfig cannot be written (not expected).
    #[error("the kubeconfig cannot be written: {0}")]
    Write(String),
}

/// The agent's kubeconfig, parsed.
#[derive(Debug, Clone)]
pub struct AgentKubeconfig {
    document: Value,
    /// The current context's user: Karmada names the CSR after it.
    pub user: String,
    /// The client certificate's PEM.
    pub certificate_pem: Vec<u8>,
}

/// What the client certificate says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validity {
    /// Seconds since the Unix epoch when it became valid.
    pub not_before: i64,
    /// Seconds since the Unix epoch when it expires.
    pub not_after: i64,
    /// Its subject's common name.
    pub common_name: String,
    /// Its subject's organizations.
    pub organizations: Vec<String>,
}

impl AgentKubeconfig {
    /// Parses the Secret's kubeconfig and finds the current context's client certificate.
    pub fn parse(text: &[u8]) -> Result<Self, KubeconfigError> {
        let text = std::str::from_utf8(text).map_err(|e| KubeconfigError::Parse(e.to_string()))?;
        let document: Value =
            serde_saphyr::from_str(text).map_err(|e| KubeconfigError::Parse(e.to_string()))?;
        let current = document
            .get("current-context")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let user = named(&document, "contexts", &current)
            .and_then(|c| c.get("context")?.get("user")?.as_str())
            .unwrap_or_default()
            .to_owned();
        let data = named(&document, "users", &user)
            .and_then(|u| u.get("user")?.get("client-certificate-data")?.as_str())
            .filter(|d| !user.is_empty() && !d.is_empty())
            .ok_or_else(|| KubeconfigError::NoUser(current.clone()))?;
        let certificate_pem =
            STANDARD
                .decode(data.trim())
                .map_err(|e| KubeconfigError::Certificate {
                    user: user.clone(),
                    reason: format!("not base64: {e}"),
                })?;
        Ok(Self {
            document,
            user,
            certificate_pem,
        })
    }

    /// The validity and subject of the client certificate (the first one of the PEM; with a
    /// chain, the latest start and the earliest end, as Karmada reads it).
    pub fn validity(&self) -> Result<Validity, KubeconfigError> {
        let bad = |reason: String| KubeconfigError::Certificate {
            user: self.user.clone(),
            reason,
        };
        let mut out: Option<Validity> = None;
        for block in x509_parser::pem::Pem::iter_from_buffer(&self.certificate_pem) {
            let block = block.map_err(|e| bad(format!("invalid PEM: {e}")))?;
            if block.label != "CERTIFICATE" {
                continue;
            }
            let (_, cert) = x509_parser::certificate::X509Certificate::from_der(&block.contents)
                .map_err(|e| bad(format!("invalid certificate: {e}")))?;
            let validity = cert.validity();
            let (from, to) = (
                validity.not_before.timestamp(),
                validity.not_after.timestamp(),
            );
            match out.as_mut() {
                None => {
                    let subject = cert.subject();
                    out = Some(Validity {
                        not_before: from,
                        not_after: to,
                        common_name: subject
                            .iter_common_name()
                            .next()
                            .and_then(|c| c.as_str().ok())
                            .unwrap_or_default()
                            .to_owned(),
                        organizations: subject
                            .iter_organization()
                            .filter_map(|o| o.as_str().ok().map(str::to_owned))
                            .collect(),
                    });
                }
                Some(v) => {
                    v.not_before = v.not_before.max(from);
                    v.not_after = v.not_after.min(to);
                }
            }
        }
        out.ok_or_else(|| bad("no CERTIFICATE block".to_owned()))
    }

    /// The kubeconfig with the current user's client certificate and key replaced.
    pub fn with_credentials(
        &self,
        certificate_pem: &[u8],
        key_pem: &[u8],
    ) -> Result<String, KubeconfigError> {
        let mut document = self.document.clone();
        let user = document
            .get_mut("users")
            .and_then(Value::as_array_mut)
            .and_then(|users| {
                users
                    .iter_mut()
                    .find(|u| u.get("name").and_then(Value::as_str) == Some(self.user.as_str()))
            })
            .and_then(|u| u.get_mut("user"))
            .and_then(Value::as_object_mut)
            .ok_or_else(|| KubeconfigError::NoUser(self.user.clone()))?;
        user.insert(
            "client-certificate-data".into(),
            STANDARD.encode(certificate_pem).into(),
        );
        user.insert("client-key-data".into(), STANDARD.encode(key_pem).into());
        serde_saphyr::to_string(&document).map_err(|e| KubeconfigError::Write(e.to_string()))
    }
}

/// The entry called `name` of the named list `list` (`contexts`, `users`).
fn named<'a>(document: &'a Value, list: &str, name: &str) -> Option<&'a Value> {
    document
        .get(list)?
        .as_array()?
        .iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
}

/// Karmada's rule: renew once the remaining fraction of the validity (`remaining / total`) is no
/// more than `threshold`. An expired or zero-length certificate is always due.
pub fn due_for_renewal(validity: &Validity, now: i64, threshold: f64) -> bool {
    let total = (validity.not_after - validity.not_before) as f64;
    let remaining = (validity.not_after - now) as f64;
    if total <= 0.0 || remaining <= 0.0 {
        return true;
    }
    remaining / total <= threshold
}

/// A new private key and a PEM certificate request with the old certificate's subject (common
/// name and organizations, as the control plane's approver checks them).
pub fn certificate_request(validity: &Validity) -> Result<(String, String), rcgen::Error> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, validity.common_name.as_str());
    for o in &validity.organizations {
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, o.as_str());
    }
    let request = params.serialize_request(&key)?.pem()?;
    Ok((request, key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issued(cn: &str, org: &str, days: i64) -> (String, String) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, org);
        params.not_before = rcgen::date_time_ymd(2026, 1, 1);
        params.not_after = params.not_before + std::time::Duration::from_secs(days as u64 * 86_400);
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn kubeconfig(cert: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: karmada\n  cluster:\n    server: https://cp:6443\n\
             contexts:\n- name: member1@karmada\n  context:\n    cluster: karmada\n    user: member1\n\
             current-context: member1@karmada\nusers:\n- name: other\n  user:\n    token: abc\n\
             - name: member1\n  user:\n    client-certificate-data: {}\n    client-key-data: a2V5\n",
            STANDARD.encode(cert)
        )
    }

    #[test]
    fn reads_the_current_users_certificate() {
        let (cert, _) = issued("system:karmada:agent:member1", "system:karmada:agents", 10);
        let kc = AgentKubeconfig::parse(kubeconfig(&cert).as_bytes()).unwrap();
        assert_eq!(kc.user, "member1");
        let v = kc.validity().unwrap();
        assert_eq!(v.common_name, "system:karmada:agent:member1");
        assert_eq!(v.organizations, ["system:karmada:agents"]);
        assert_eq!(v.not_after - v.not_before, 10 * 86_400);
    }

    #[test]
    fn renewal_follows_the_remaining_fraction() {
        let v = Validity {
            not_before: 1000,
            not_after: 2000,
            common_name: String::new(),
            organizations: vec![],
        };
        assert!(!due_for_renewal(&v, 1500, 0.2));
        assert!(!due_for_renewal(&v, 1799, 0.2));
        assert!(due_for_renewal(&v, 1800, 0.2));
        assert!(due_for_renewal(&v, 2500, 0.2));
        assert!(due_for_renewal(&v, 1000, 1.0));
        assert!(!due_for_renewal(&v, 1000, 0.0));
    }

    #[test]
    fn new_credentials_replace_only_the_current_users() {
        let (cert, _) = issued("system:karmada:agent:member1", "system:karmada:agents", 10);
        let kc = AgentKubeconfig::parse(kubeconfig(&cert).as_bytes()).unwrap();
        let (request, key) = certificate_request(&kc.validity().unwrap()).unwrap();
        assert!(request.starts_with("-----BEGIN CERTIFICATE REQUEST-----"));
        let (new_cert, _) = issued("system:karmada:agent:member1", "system:karmada:agents", 20);
        let written = kc
            .with_credentials(new_cert.as_bytes(), key.as_bytes())
            .unwrap();
        let again = AgentKubeconfig::parse(written.as_bytes()).unwrap();
        assert_eq!(again.certificate_pem, new_cert.as_bytes());
        let doc: Value = serde_saphyr::from_str(&written).unwrap();
        assert_eq!(doc["users"][0]["user"]["token"], "abc");
        assert_eq!(doc["clusters"][0]["cluster"]["server"], "https://cp:6443");
        assert_eq!(
            doc["users"][1]["user"]["client-key-data"],
            STANDARD.encode(key)
        );
    }

    #[test]
    fn a_kubeconfig_without_a_certificate_is_refused() {
        let text = "apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts: []\nusers: []\n";
        assert!(matches!(
            AgentKubeconfig::parse(text.as_bytes()),
            Err(KubeconfigError::NoUser(_))
        ));
    }
}
