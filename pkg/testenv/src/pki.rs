//! Certificates and keys for one API server: a cluster CA, a serving certificate for the loopback address,
//! an admin client certificate (`O=system:masters`) and the service-account signing key pair; more client
//! certificates on demand ([`ClusterPki::issue_client`]), e.g. to tell two processes apart in an audit log.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::Error;

/// The user name of the environment's admin certificate (group `system:masters`).
pub const ADMIN_USER: &str = "karmada-rs-admin";

/// The PEM files of one cluster's PKI, written under its directory.
#[derive(Debug, Clone)]
pub struct ClusterPki {
    /// The cluster CA's certificate.
    pub ca_cert: PathBuf,
    /// The cluster CA's key.
    pub ca_key: PathBuf,
    /// The API server's serving certificate (loopback address).
    pub serving_cert: PathBuf,
    /// The serving certificate's key.
    pub serving_key: PathBuf,
    /// The admin client certificate (`O=system:masters`).
    pub admin_cert: PathBuf,
    /// The admin client certificate's key.
    pub admin_key: PathBuf,
    /// The service-account verification key.
    pub sa_public_key: PathBuf,
    /// The service-account signing key.
    pub sa_private_key: PathBuf,
    /// The cluster name the CA was made for (its subject is `<name>-ca`).
    pub name: String,
}

/// The CA's certificate parameters for cluster `name` (the same every time, so the CA can sign again
/// from its key alone).
fn ca_params(name: &str) -> Result<CertificateParams, rcgen::Error> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("{name}-ca"));
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(ca_params)
}

impl ClusterPki {
    /// Generates a fresh PKI for the cluster `name` and writes it into `dir`.
    pub fn generate(name: &str, dir: &Path) -> Result<Self, Error> {
        let pki_err = |e: rcgen::Error| Error::Pki(format!("cluster {name}: {e}"));

        let ca_key = KeyPair::generate().map_err(pki_err)?;
        let ca_params = ca_params(name).map_err(pki_err)?;
        let ca_cert = ca_params.self_signed(&ca_key).map_err(pki_err)?;
        let issuer = Issuer::from_params(&ca_params, &ca_key);

        let serving_key = KeyPair::generate().map_err(pki_err)?;
        let mut serving = CertificateParams::new(vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default".to_string(),
            "kubernetes.default.svc".to_string(),
        ])
        .map_err(pki_err)?;
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving.signed_by(&serving_key, &issuer).map_err(pki_err)?;

        let admin_key = KeyPair::generate().map_err(pki_err)?;
        let mut admin = CertificateParams::new(Vec::<String>::new()).map_err(pki_err)?;
        admin
            .distinguished_name
            .push(DnType::CommonName, ADMIN_USER);
        admin
            .distinguished_name
            .push(DnType::OrganizationName, "system:masters");
        admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let admin_cert = admin.signed_by(&admin_key, &issuer).map_err(pki_err)?;

        let sa_key = KeyPair::generate().map_err(pki_err)?;

        let pki = ClusterPki {
            ca_cert: dir.join("ca.crt"),
            ca_key: dir.join("ca.key"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            admin_cert: dir.join("admin.crt"),
            admin_key: dir.join("admin.key"),
            sa_public_key: dir.join("sa.pub"),
            sa_private_key: dir.join("sa.key"),
            name: name.to_string(),
        };
        for (path, pem) in [
            (&pki.ca_cert, ca_cert.pem()),
            (&pki.ca_key, ca_key.serialize_pem()),
            (&pki.serving_cert, serving_cert.pem()),
            (&pki.serving_key, serving_key.serialize_pem()),
            (&pki.admin_cert, admin_cert.pem()),
            (&pki.admin_key, admin_key.serialize_pem()),
            (&pki.sa_public_key, sa_key.public_key_pem()),
            (&pki.sa_private_key, sa_key.serialize_pem()),
        ] {
            std::fs::write(path, pem).map_err(|e| Error::io(path, e))?;
        }
        Ok(pki)
    }

    /// Issues a serving certificate for `cn`, valid for the host names and IP addresses in `sans`,
    /// signed by this cluster's CA, and writes it as `<dir>/<cn>.crt` and `<dir>/<cn>.key`: for a
    /// server the API server calls back (an admission webhook on loopback), which trusts this CA.
    /// Returns (certificate, key) paths.
    pub fn issue_serving(
        &self,
        cn: &str,
        sans: &[&str],
        dir: &Path,
    ) -> Result<(PathBuf, PathBuf), Error> {
        let pki_err = |e: rcgen::Error| Error::Pki(format!("serving certificate {cn}: {e}"));
        let mut params =
            CertificateParams::new(sans.iter().map(ToString::to_string).collect::<Vec<_>>())
                .map_err(pki_err)?;
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(cn, params, dir, pki_err)
    }

    /// Issues a client certificate for user `cn` in the groups `orgs`, signed by this cluster's CA, and
    /// writes it as `<dir>/<cn>.crt` and `<dir>/<cn>.key`. Returns (certificate, key) paths.
    pub fn issue_client(
        &self,
        cn: &str,
        orgs: &[&str],
        dir: &Path,
    ) -> Result<(PathBuf, PathBuf), Error> {
        let pki_err = |e: rcgen::Error| Error::Pki(format!("client certificate {cn}: {e}"));
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(pki_err)?;
        params.distinguished_name.push(DnType::CommonName, cn);
        for org in orgs {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(cn, params, dir, pki_err)
    }

    /// Signs `params` with a fresh key and this CA, and writes `<dir>/<name>.crt` and `<dir>/<name>.key`.
    fn sign(
        &self,
        name: &str,
        params: CertificateParams,
        dir: &Path,
        pki_err: impl Fn(rcgen::Error) -> Error,
    ) -> Result<(PathBuf, PathBuf), Error> {
        let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| Error::io(p, e));
        let ca_key = KeyPair::from_pem(&read(&self.ca_key)?).map_err(&pki_err)?;
        let issuer = Issuer::new(ca_params(&self.name).map_err(&pki_err)?, ca_key);
        let key = KeyPair::generate().map_err(&pki_err)?;
        let cert = params.signed_by(&key, &issuer).map_err(&pki_err)?;
        let (cert_path, key_path) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        for (path, pem) in [(&cert_path, cert.pem()), (&key_path, key.serialize_pem())] {
            std::fs::write(path, pem).map_err(|e| Error::io(path, e))?;
        }
        Ok((cert_path, key_path))
    }
}
