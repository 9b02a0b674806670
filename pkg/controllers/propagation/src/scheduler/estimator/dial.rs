//! Finding and dialling a member's estimator, as Karmada's `EstablishConnection` does: the Service
//! `<prefix>-<cluster>` in the estimator namespace of the Karmada API server, when it exists, must be
//! of type `ExternalName` with a port equal to `--scheduler-estimator-port`, and the estimator is
//! `<externalName>:<targetPort>`; when it does not exist, the cluster DNS names
//! `<prefix>-<cluster>.<namespace>.svc.cluster.local:<port>` and then `….svc:<port>` are tried in
//! turn. Each dial waits at most 5 seconds for a ready connection.
//!
//! Transport, as Karmada's gRPC client config: plaintext unless a CA file is given or
//! `--insecure-skip-estimator-verify` is set; then TLS 1.2+ with ALPN `h2`, the server checked
//! against the CA (or not at all), and a client certificate when both cert and key files are given.

use std::sync::Arc;
use std::time::Duration;

use http::Uri;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use karmada_controllers_common::context::SchedulerEstimatorSettings;
use kube::Api;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tonic::transport::{Channel, Endpoint};

use super::EstimatorError;

/// How long one dial waits for a ready connection (Karmada's, fixed).
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// Karmada's `GenerateEstimatorServiceName`.
pub fn service_name(prefix: &str, cluster: &str) -> String {
    format!("{prefix}-{cluster}")
}

/// The `host:port` addresses to try for `cluster`'s estimator, in order.
pub async fn resolve(
    client: &kube::Client,
    settings: &SchedulerEstimatorSettings,
    cluster: &str,
) -> Result<Vec<String>, EstimatorError> {
    let name = service_name(&settings.service_prefix, cluster);
    let namespace = &settings.service_namespace;
    let port = settings.port;
    let api: Api<Service> = Api::namespaced(client.clone(), namespace);
    let service = api
        .get_opt(&name)
        .await
        .map_err(|source| EstimatorError::Service {
            namespace: namespace.clone(),
            name: name.clone(),
            source: Box::new(source),
        })?;
    let Some(service) = service else {
        return Ok(vec![
            join_host_port(&format!("{name}.{namespace}.svc.cluster.local"), port),
            join_host_port(&format!("{name}.{namespace}.svc"), port),
        ]);
    };
    address_of(&service, port)
        .map(|a| vec![a])
        .map_err(|why| EstimatorError::UnusableService {
            namespace: namespace.clone(),
            name: name.clone(),
            why,
        })
}

/// `<externalName>:<targetPort>` of an `ExternalName` Service's port numbered `port`.
fn address_of(service: &Service, port: u16) -> Result<String, String> {
    let spec = service.spec.clone().unwrap_or_default();
    let kind = spec.type_.clone().unwrap_or_else(|| "ClusterIP".to_owned());
    if kind != "ExternalName" {
        return Err(format!("unsupported service type \"{kind}\""));
    }
    let external = spec.external_name.unwrap_or_default();
    let found = spec
        .ports
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.port == i32::from(port))
        .ok_or_else(|| format!("no service port {port} found"))?;
    match found.target_port {
        Some(IntOrString::Int(target)) => Ok(join_host_port(&external, target)),
        other => Err(format!(
            "ExternalName service type should have int target port, current target port: {other:?}"
        )),
    }
}

/// Go's `net.JoinHostPort`.
fn join_host_port(host: &str, port: impl std::fmt::Display) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Builds the TLS client config the flags ask for, `None` for plaintext.
pub fn tls_config(
    settings: &SchedulerEstimatorSettings,
) -> Result<Option<Arc<rustls::ClientConfig>>, EstimatorError> {
    if settings.ca_file.is_empty() && !settings.insecure_skip_verify {
        return Ok(None);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| EstimatorError::Tls(e.to_string()))?;
    let builder = if settings.insecure_skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        let certs = read_certs(&settings.ca_file)?;
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(EstimatorError::File {
                path: settings.ca_file.clone(),
                why: "failed to append ca certs".to_owned(),
            });
        }
        builder.with_root_certificates(roots)
    };
    let mut config = if !settings.cert_file.is_empty() && !settings.key_file.is_empty() {
        let certs = read_certs(&settings.cert_file)?;
        let key =
            PrivateKeyDer::from_pem_file(&settings.key_file).map_err(|e| EstimatorError::File {
                path: settings.key_file.clone(),
                why: e.to_string(),
            })?;
        builder
            .with_client_auth_cert(certs, key)
            .map_err(|e| EstimatorError::Tls(e.to_string()))?
    } else {
        builder.with_no_client_auth()
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Some(Arc::new(config)))
}

fn read_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, EstimatorError> {
    let file_error = |why: String| EstimatorError::File {
        path: path.to_owned(),
        why,
    };
    CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(e.to_string()))
}

/// `--insecure-skip-estimator-verify`: any server certificate and name is accepted (signatures
/// are still checked, so the handshake is a real one).
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Dials `addresses` in turn and returns the first channel that became ready.
pub async fn dial(
    addresses: &[String],
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<Channel, EstimatorError> {
    let mut errors = Vec::new();
    for address in addresses {
        match dial_one(address, tls).await {
            Ok(channel) => return Ok(channel),
            Err(e) => errors.push(format!("dial {address} error: {e}")),
        }
    }
    Err(EstimatorError::Dial(errors.join(", ")))
}

/// A TCP connection to `uri`'s authority with Nagle's algorithm off, as tonic's own connector
/// does (a connector of ours bypasses its `tcp_nodelay`): otherwise each small request can wait for
/// the peer's delayed ACK (~40 ms).
async fn connect_tcp(uri: &Uri) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect(authority(uri)?).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

async fn dial_one(
    address: &str,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<Channel, String> {
    let endpoint = Endpoint::from_shared(format!("http://{address}"))
        .map_err(|e| e.to_string())?
        .connect_timeout(DIAL_TIMEOUT);
    let connecting = async {
        match tls {
            None => {
                endpoint
                    .connect_with_connector(tower::service_fn(|uri: Uri| async move {
                        let stream = connect_tcp(&uri).await?;
                        Ok::<_, std::io::Error>(TokioIo::new(stream))
                    }))
                    .await
            }
            Some(config) => {
                let connector = TlsConnector::from(config.clone());
                endpoint
                    .connect_with_connector(tower::service_fn(move |uri: Uri| {
                        let connector = connector.clone();
                        async move {
                            let host = uri.host().unwrap_or_default();
                            let host = host.trim_start_matches('[').trim_end_matches(']');
                            let name = ServerName::try_from(host.to_owned())
                                .map_err(|e| std::io::Error::other(e.to_string()))?;
                            let stream = connect_tcp(&uri).await?;
                            let stream = connector.connect(name, stream).await?;
                            Ok::<_, std::io::Error>(TokioIo::new(stream))
                        }
                    }))
                    .await
            }
        }
    };
    tokio::time::timeout(DIAL_TIMEOUT, connecting)
        .await
        .map_err(|_| format!("timeout after {DIAL_TIMEOUT:?} waiting for a ready connection"))?
        .map_err(|e| lariat::error::error_chain(&e))
}

fn authority(uri: &Uri) -> std::io::Result<String> {
    uri.authority()
        .map(ToString::to_string)
        .ok_or_else(|| std::io::Error::other(format!("no host:port in {uri}")))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};

    use super::*;

    fn service(kind: &str, external: &str, port: i32, target: IntOrString) -> Service {
        Service {
            spec: Some(ServiceSpec {
                type_: Some(kind.into()),
                external_name: Some(external.into()),
                ports: Some(vec![ServicePort {
                    port,
                    target_port: Some(target),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn external_name_service_gives_the_address() {
        let s = service("ExternalName", "127.0.0.1", 10352, IntOrString::Int(4000));
        assert_eq!(address_of(&s, 10352).as_deref(), Ok("127.0.0.1:4000"));
        let v6 = service("ExternalName", "::1", 10352, IntOrString::Int(4000));
        assert_eq!(address_of(&v6, 10352).as_deref(), Ok("[::1]:4000"));
    }

    #[test]
    fn other_services_are_refused_with_karmadas_reasons() {
        let cluster_ip = service("ClusterIP", "", 10352, IntOrString::Int(4000));
        assert_eq!(
            address_of(&cluster_ip, 10352),
            Err("unsupported service type \"ClusterIP\"".to_owned())
        );
        let other_port = service("ExternalName", "h", 80, IntOrString::Int(4000));
        assert_eq!(
            address_of(&other_port, 10352),
            Err("no service port 10352 found".to_owned())
        );
        let named = service(
            "ExternalName",
            "h",
            10352,
            IntOrString::String("grpc".into()),
        );
        assert!(address_of(&named, 10352).is_err_and(|e| e.contains("int target port")));
    }

    fn settings() -> SchedulerEstimatorSettings {
        SchedulerEstimatorSettings {
            enabled: true,
            ..Default::default()
        }
    }

    #[test]
    fn plaintext_unless_a_ca_or_insecure_is_given() {
        let mut s = settings();
        s.cert_file = "/nowhere/cert".into();
        s.key_file = "/nowhere/key".into();
        // As Karmada: a client certificate alone does not turn TLS on.
        assert!(tls_config(&s).unwrap().is_none());
        s.insecure_skip_verify = true;
        s.cert_file.clear();
        let config = tls_config(&s).unwrap().unwrap();
        assert_eq!(config.alpn_protocols, vec![b"h2".to_vec()]);
    }

    #[test]
    fn tls_files_are_read_and_named_when_unusable() {
        let dir = tempfile::tempdir().unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let ca_path = dir.path().join("ca.crt");
        std::fs::write(&ca_path, ca.cert.pem()).unwrap();
        let key_path = dir.path().join("client.key");
        std::fs::write(&key_path, ca.signing_key.serialize_pem()).unwrap();
        let mut s = settings();
        s.ca_file = ca_path.display().to_string();
        assert!(tls_config(&s).unwrap().is_some());
        s.cert_file = ca_path.display().to_string();
        s.key_file = key_path.display().to_string();
        assert!(tls_config(&s).unwrap().is_some());
        s.ca_file = dir.path().join("missing.crt").display().to_string();
        let err = tls_config(&s).unwrap_err().to_string();
        assert!(err.contains("missing.crt"), "{err}");
        let empty = dir.path().join("empty.crt");
        std::fs::write(&empty, "").unwrap();
        s.ca_file = empty.display().to_string();
        let err = tls_config(&s).unwrap_err().to_string();
        assert!(
            err.contains("empty.crt") && err.contains("ca certs"),
            "{err}"
        );
    }

    #[test]
    fn service_names_follow_karmada() {
        assert_eq!(
            service_name("karmada-scheduler-estimator", "member1"),
            "karmada-scheduler-estimator-member1"
        );
    }
}
