//! Kubeconfig files for the admin identity of each API server.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};

use crate::{ApiServer, Error};

fn read_b64(path: &Path) -> Result<String, Error> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    Ok(STANDARD.encode(bytes))
}

/// The admin kubeconfig of one API server, with context, cluster and user all named after it.
pub(crate) fn for_server(server: &ApiServer) -> Result<Kubeconfig, Error> {
    let pki = server.pki();
    for_client_cert(server, &pki.admin_cert, &pki.admin_key)
}

/// A kubeconfig for one API server authenticating with the client certificate `cert`/`key`; context,
/// cluster and user are named after the server.
pub(crate) fn for_client_cert(
    server: &ApiServer,
    cert: &Path,
    key: &Path,
) -> Result<Kubeconfig, Error> {
    let name = server.name().to_string();
    let pki = server.pki();
    let cluster = Cluster {
        server: Some(server.url().to_string()),
        certificate_authority_data: Some(read_b64(&pki.ca_cert)?),
        ..Default::default()
    };
    let user = AuthInfo {
        client_certificate_data: Some(read_b64(cert)?),
        client_key_data: Some(read_b64(key)?.into()),
        ..Default::default()
    };
    let context = Context {
        cluster: name.clone(),
        user: Some(name.clone()),
        ..Default::default()
    };
    Ok(Kubeconfig {
        clusters: vec![NamedCluster {
            name: name.clone(),
            cluster: Some(cluster),
            other: Default::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: name.clone(),
            auth_info: Some(user),
            other: Default::default(),
        }],
        contexts: vec![NamedContext {
            name: name.clone(),
            context: Some(context),
            other: Default::default(),
        }],
        current_context: Some(name),
        ..Default::default()
    })
}

/// Writes `kubeconfig` as YAML to `path` (mode 0600: it holds a private key).
pub(crate) fn write(path: &Path, kubeconfig: &Kubeconfig) -> Result<(), Error> {
    let mut kubeconfig = kubeconfig.clone();
    kubeconfig.api_version = Some("v1".into());
    kubeconfig.kind = Some("Config".into());
    let yaml = serde_saphyr::to_string(&kubeconfig)
        .map_err(|e| Error::Kubeconfig(format!("{}: {e}", path.display())))?;
    std::fs::write(path, yaml).map_err(|e| Error::io(path, e))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| Error::io(path, e))
}

/// Writes one kubeconfig holding a context per server; the first server's is current.
pub(crate) fn write_combined<'a>(
    path: &Path,
    servers: impl Iterator<Item = &'a ApiServer>,
) -> Result<(), Error> {
    let mut merged = Kubeconfig::default();
    for s in servers {
        let k = for_server(s)?;
        if merged.current_context.is_none() {
            merged.current_context = k.current_context.clone();
        }
        merged.clusters.extend(k.clusters);
        merged.auth_infos.extend(k.auth_infos);
        merged.contexts.extend(k.contexts);
    }
    write(path, &merged)
}
