//! `karmadactl token create`: a bootstrap token Secret in `kube-system` of the Karmada API server.

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};

use crate::bootstrap::{TOKEN_NAMESPACE, Token, pem_certificates, public_key_pin};
use crate::cli::TokenCreateArgs;
use crate::util::{code, explain, load};

/// Runs `karmadactl token create`: creates the token and returns what the command prints (the
/// token, or the register command with `--print-register-command`).
pub async fn create(args: TokenCreateArgs) -> anyhow::Result<String> {
    for u in &args.usages {
        if u != "signing" && u != "authentication" {
            bail!(
                "invalid bootstrap token usage string: {u}, valid usage options: signing,authentication"
            );
        }
    }
    for g in &args.groups {
        if !g.starts_with("system:bootstrappers:") {
            bail!(
                "{g:?} is not a valid bootstrap group: it must start with \"system:bootstrappers:\""
            );
        }
    }
    let host = load(
        "control plane",
        args.control_plane.kubeconfig.as_deref(),
        args.control_plane.karmada_context.as_deref(),
        None,
    )
    .await?;
    let token = Token::generate()?;
    let expiration = if args.ttl.is_zero() {
        None
    } else {
        let ttl = SignedDuration::try_from(args.ttl).context("--ttl is too long")?;
        let at = Timestamp::now()
            .checked_add(ttl)
            .context("--ttl is too long")?;
        Some(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
    };
    let secret = token.to_secret(
        expiration.as_deref(),
        &args.description,
        &args.usages,
        &args.groups,
    );
    let secrets: Api<Secret> = Api::namespaced(host.client.clone(), TOKEN_NAMESPACE);
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {}
        Err(e) if code(&e) == Some(409) => {
            bail!("a token with id {:?} already exists", token.id)
        }
        Err(e) => {
            return Err(explain(
                e,
                &format!(
                    "creating bootstrap token secret {TOKEN_NAMESPACE}/{}",
                    token.secret_name()
                ),
                &host,
            ));
        }
    }
    if args.print_register_command {
        let ca = host
            .ca_pem
            .as_deref()
            .context("failed to get register command: no CA certificates found in kubeconfig")?;
        let mut pins = Vec::new();
        for der in pem_certificates(ca).context("failed to parse CA certificate from kubeconfig")? {
            pins.push(public_key_pin(&der)?);
        }
        Ok(format!(
            "karmadactl register {} --token {token} --discovery-token-ca-cert-hash {}",
            host.server.replace("https://", ""),
            pins.join(",")
        ))
    } else {
        Ok(token.to_string())
    }
}
