//! Kubeconfig loading and error wording shared by join and unjoin.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, anyhow};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Label put on every object join creates.
pub const SYSTEM_LABEL: (&str, &str) = ("karmada.io/system", "true");

/// Annotation `join` puts on the member namespace it creates (not on one that already existed), so
/// that `unjoin` deletes only that one. Karmada has no such mark and deletes the namespace always.
pub const CREATED_BY_JOIN: (&str, &str) = ("karmada-rs.io/created-by", "karmadactl-join");

/// A loaded kubeconfig and the client built from one of its contexts.
pub struct Target {
    /// Client.
    pub client: kube::Client,
    /// PEM CA bundle of the selected cluster entry, if the kubeconfig has one.
    pub ca_pem: Option<Vec<u8>>,
    /// `server` of the selected cluster entry.
    pub server: String,
    /// `insecure-skip-tls-verify` of the selected cluster entry.
    pub insecure: bool,
    /// `proxy-url` of the selected cluster entry.
    pub proxy_url: Option<String>,
    /// Human-readable origin, for error messages.
    pub origin: String,
}

/// Loads `path` (or `$KUBECONFIG` / `~/.kube/config`) and builds a client for `context` (or the
/// current context), optionally impersonating.
pub async fn load(
    what: &str,
    path: Option<&Path>,
    context: Option<&str>,
    impersonate: Option<(&str, &[String])>,
) -> anyhow::Result<Target> {
    let kc = match path {
        Some(p) => Kubeconfig::read_from(p)
            .with_context(|| format!("cannot read the {what} kubeconfig {}", p.display()))?,
        None => Kubeconfig::read().with_context(|| {
            format!("cannot read the {what} kubeconfig from $KUBECONFIG or ~/.kube/config")
        })?,
    };
    let origin = format!(
        "{what} (kubeconfig {}, context {})",
        path.map_or_else(|| "default".into(), |p| p.display().to_string()),
        context.unwrap_or("current")
    );
    target_from(kc, origin, context, impersonate).await
}

/// The [`Target`] of `context` (else the current one) in the kubeconfig `kc`; `origin` names it in
/// errors.
pub async fn target_from(
    kc: Kubeconfig,
    origin: String,
    context: Option<&str>,
    impersonate: Option<(&str, &[String])>,
) -> anyhow::Result<Target> {
    let ctx_name = context
        .map(str::to_string)
        .or_else(|| kc.current_context.clone())
        .ok_or_else(|| anyhow!("{origin}: no context given and no current context"))?;
    let ctx = kc
        .contexts
        .iter()
        .find(|c| c.name == ctx_name)
        .and_then(|c| c.context.clone())
        .ok_or_else(|| anyhow!("{origin}: context {ctx_name:?} not found"))?;
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| anyhow!("{origin}: cluster entry {:?} not found", ctx.cluster))?;
    let ca_pem = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(data), _) => {
            use base64::Engine as _;
            Some(
                base64::engine::general_purpose::STANDARD
                    .decode(data.trim())
                    .with_context(|| {
                        format!("{origin}: certificate-authority-data is not base64")
                    })?,
            )
        }
        (None, Some(file)) => Some(
            std::fs::read(file).with_context(|| format!("{origin}: cannot read CA file {file}"))?,
        ),
        _ => None,
    };
    let mut config = kube::Config::from_custom_kubeconfig(
        kc.clone(),
        &KubeConfigOptions {
            context: Some(ctx_name.clone()),
            ..KubeConfigOptions::default()
        },
    )
    .await
    .with_context(|| format!("{origin}: invalid kubeconfig"))?;
    config.connect_timeout = Some(Duration::from_secs(10));
    config.read_timeout = Some(Duration::from_secs(30));
    if let Some((user, groups)) = impersonate {
        config.auth_info.impersonate = Some(user.to_string());
        if !groups.is_empty() {
            config.auth_info.impersonate_groups = Some(groups.to_vec());
        }
    }
    let client = if config.proxy_url.is_some() {
        proxied_client(config, &ctx.cluster, &origin)?
    } else {
        kube::Client::try_from(config)
            .with_context(|| format!("{origin}: cannot build a client"))?
    };
    Ok(Target {
        server: cluster.server.clone().unwrap_or_default(),
        insecure: cluster.insecure_skip_tls_verify.unwrap_or(false),
        proxy_url: cluster.proxy_url.clone(),
        client,
        ca_pem,
        origin,
    })
}

/// A client for a cluster entry with a `proxy-url` (`http`, `https` or `socks5`, as kubectl and
/// Karmada's karmadactl honour it): built by the same transport the controller-manager uses for
/// proxied members, so a member reachable only through its proxy can be joined. No client-side rate
/// limit, as for kube's own clients here.
fn proxied_client(config: kube::Config, name: &str, origin: &str) -> anyhow::Result<kube::Client> {
    let metrics = lariat::metrics::FrameworkMetrics::global()
        .with_context(|| format!("{origin}: cannot register client metrics"))?;
    let options = lariat::ClientOptions {
        qps: 0.0,
        user_agent: "karmadactl".to_string(),
        ..lariat::ClientOptions::default()
    };
    let factory = lariat::ClientFactory::new(
        name,
        config,
        options,
        lariat::metrics::ClusterMetrics::new(name, metrics),
    )
    .map_err(|e| {
        anyhow!(
            "{origin}: cannot build a client through its proxy: {}",
            lariat::error::error_chain(&e)
        )
    })?;
    Ok(factory.client())
}

/// Refuses a kubeconfig that reaches outside itself: an `exec` or `auth-provider` plugin (a command
/// the reader would run) or a file path (`certificate-authority`, `client-certificate`,
/// `client-key`, `tokenFile`, which the reader would read from its own disk). For kubeconfigs that come
/// from objects (a Cluster API Secret): whoever may write that object must not make the
/// controller-manager run a command or read its files. Karmada's Go client honours all of these.
pub fn refuse_outside_references(kc: &Kubeconfig, origin: &str) -> anyhow::Result<()> {
    for named in &kc.clusters {
        if let Some(cluster) = &named.cluster
            && cluster.certificate_authority.is_some()
        {
            anyhow::bail!(
                "{origin}: cluster entry {:?} names a certificate-authority file; only \
                 certificate-authority-data is accepted from a Secret",
                named.name
            );
        }
    }
    for named in &kc.auth_infos {
        let Some(user) = &named.auth_info else {
            continue;
        };
        let outside = [
            (user.exec.is_some(), "an exec plugin"),
            (user.auth_provider.is_some(), "an auth-provider plugin"),
            (
                user.client_certificate.is_some(),
                "a client-certificate file",
            ),
            (user.client_key.is_some(), "a client-key file"),
            (user.token_file.is_some(), "a token file"),
        ];
        if let Some((_, what)) = outside.iter().find(|(present, _)| *present) {
            anyhow::bail!(
                "{origin}: user entry {:?} uses {what}; a kubeconfig from a Secret must carry its \
                 credentials inline (token, client-certificate-data and client-key-data)",
                named.name
            );
        }
    }
    Ok(())
}

/// Wraps an API error with what was being done and on which side, and says plainly when it is a
/// permission or connectivity problem.
pub fn explain(err: kube::Error, action: &str, target: &Target) -> anyhow::Error {
    match &err {
        kube::Error::Api(s) if s.code == 403 => anyhow!(
            "permission denied while {action} in the {}: {}. The identity in that kubeconfig needs \
             the rights to do this (cluster-admin is the simplest)",
            target.origin,
            s.message
        ),
        kube::Error::Api(s) if s.code == 401 => anyhow!(
            "the {} rejected the credentials while {action}: {}",
            target.origin,
            s.message
        ),
        kube::Error::Api(s) => anyhow!("{action} in the {}: {}", target.origin, s.message),
        _ => anyhow!(
            "cannot reach the {} at {} while {action}: {err}",
            target.origin,
            target.server
        ),
    }
}

/// The status code of an API error.
pub fn code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Validates a cluster name as Karmada does: a DNS-1123 label of at most 48 characters.
pub fn validate_cluster_name(name: &str) -> anyhow::Result<()> {
    match karmada_apis::cluster::v1alpha1::cluster_name_problem(name) {
        Some(problem) => Err(anyhow!(problem)),
        None => Ok(()),
    }
}

/// `karmada-controller-manager:<service account>`, Karmada's ClusterRole and binding name.
pub fn role_name(service_account: &str) -> String {
    format!("karmada-controller-manager:{service_account}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names() {
        assert!(validate_cluster_name("member1").is_ok());
        assert!(validate_cluster_name("").is_err());
        assert!(validate_cluster_name("Member").is_err());
        assert!(validate_cluster_name("-a").is_err());
        assert!(validate_cluster_name(&"a".repeat(49)).is_err());
        assert_eq!(
            role_name("karmada-m"),
            "karmada-controller-manager:karmada-m"
        );
    }

    /// A kubeconfig with `user` as its one user entry and `cluster` as its one cluster entry.
    fn kubeconfig(cluster: &str, user: &str) -> Kubeconfig {
        Kubeconfig::from_yaml(&format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             contexts: [{{name: c, context: {{cluster: m, user: u}}}}]\n\
             clusters: [{{name: m, cluster: {{server: 'https://127.0.0.1:1', {cluster}}}}}]\n\
             users: [{{name: u, user: {{{user}}}}}]\n"
        ))
        .unwrap()
    }

    #[test]
    fn kubeconfigs_from_objects_may_not_reach_outside_themselves() {
        let inline = kubeconfig("certificate-authority-data: eA==", "token: t");
        assert!(refuse_outside_references(&inline, "m").is_ok());
        for (cluster, user, named) in [
            (
                "certificate-authority: /etc/passwd",
                "token: t",
                "certificate-authority file",
            ),
            (
                "insecure-skip-tls-verify: true",
                "exec: {apiVersion: client.authentication.k8s.io/v1, command: touch}",
                "exec plugin",
            ),
            (
                "insecure-skip-tls-verify: true",
                "auth-provider: {name: gcp}",
                "auth-provider",
            ),
            (
                "insecure-skip-tls-verify: true",
                "client-certificate: /etc/c, client-key-data: eA==",
                "client-certificate file",
            ),
            (
                "insecure-skip-tls-verify: true",
                "client-certificate-data: eA==, client-key: /etc/k",
                "client-key file",
            ),
            (
                "insecure-skip-tls-verify: true",
                "tokenFile: /var/run/secrets/token",
                "token file",
            ),
        ] {
            let err = refuse_outside_references(&kubeconfig(cluster, user), "member m")
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(named) && err.starts_with("member m:"),
                "{user}: {err}"
            );
        }
    }
}

/// A command that failed after producing its output: `main` prints `stdout`, then `message` (if
/// any) on stderr, and exits with status 1 (Karmada's `cmdutil.ErrExit` after `--check` printed
/// its table).
#[derive(Debug)]
pub struct CommandFailed {
    /// What the command printed before failing.
    pub stdout: String,
    /// The error to print on stderr; empty when the output says it all.
    pub message: String,
}

impl CommandFailed {
    /// A failure whose output says what failed.
    pub fn stdout(stdout: String) -> Self {
        Self {
            stdout,
            message: String::new(),
        }
    }
}

impl std::fmt::Display for CommandFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.message.is_empty() {
            f.write_str(self.stdout.trim_end())
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for CommandFailed {}
