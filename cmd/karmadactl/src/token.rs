//! `karmadactl token create` / `list` / `delete`: bootstrap token Secrets in `kube-system` of the Karmada API server.

use anyhow::{Context, anyhow, bail};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use crate::bootstrap::{
    TOKEN_NAMESPACE, TOKEN_SECRET_TYPE, Token, pem_certificates, public_key_pin,
};
use crate::cli::{TokenCreateArgs, TokenDeleteArgs, TokenListArgs};
use crate::util::{code, explain};

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
    let host = args.control_plane.load().await?;
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

/// Runs `karmadactl token list`: the bootstrap tokens in `kube-system` as a table with kubeadm's
/// columns; Secrets that are not valid tokens are reported on stderr and skipped, as Karmada does.
pub async fn list(args: TokenListArgs) -> anyhow::Result<String> {
    let host = args.control_plane.load().await?;
    let secrets: Api<Secret> = Api::namespaced(host.client.clone(), TOKEN_NAMESPACE);
    let lp = ListParams::default().fields(&format!("type={TOKEN_SECRET_TYPE}"));
    let list = secrets
        .list(&lp)
        .await
        .map_err(|e| explain(e, "listing bootstrap tokens", &host))?;
    let mut rows = vec![
        [
            "TOKEN",
            "TTL",
            "EXPIRES",
            "USAGES",
            "DESCRIPTION",
            "EXTRA GROUPS",
        ]
        .map(String::from),
    ];
    let now = Timestamp::now();
    for s in &list.items {
        match token_row(s, now) {
            Ok(row) => rows.push(row),
            Err(e) => eprint!("{e}"),
        }
    }
    Ok(table(&rows))
}

fn data<'a>(s: &'a Secret, key: &str) -> &'a str {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .and_then(|v| std::str::from_utf8(&v.0).ok())
        .unwrap_or_default()
}

/// One row of `token list` for the Secret `s`, or why it is not a valid token.
fn token_row(s: &Secret, now: Timestamp) -> anyhow::Result<[String; 6]> {
    let name = s.metadata.name.as_deref().unwrap_or_default();
    let id = data(s, "token-id");
    if id.is_empty() {
        bail!("bootstrap Token Secret has no token-id data: {name}");
    }
    if name != format!("bootstrap-token-{id}") {
        bail!(
            "bootstrap token name is not of the form 'bootstrap-token-(token-id)'. Actual: {name:?}. Expected: \"bootstrap-token-{id}\""
        );
    }
    let secret = data(s, "token-secret");
    if secret.is_empty() {
        bail!("bootstrap Token Secret has no token-secret data: {name}");
    }
    let token = Token::parse(&format!("{id}.{secret}")).map_err(|e| {
        anyhow!("bootstrap Token Secret is invalid and couldn't be parsed, err: {e}")
    })?;
    let (ttl, expires) = match data(s, "expiration") {
        "" => ("<forever>".to_owned(), "<never>".to_owned()),
        e => {
            let at: Timestamp = e.parse().map_err(|err| {
                anyhow!("can't parse expiration time of bootstrap token {name:?}, err: {err}")
            })?;
            let left = at.as_second() - now.as_second();
            (short_human_duration(left), e.to_owned())
        }
    };
    let mut usages: Vec<&str> = s
        .data
        .iter()
        .flatten()
        .filter(|(_, v)| v.0 == b"true")
        .filter_map(|(k, _)| k.strip_prefix("usage-bootstrap-"))
        .collect();
    usages.sort_unstable();
    let or_none = |s: String| if s.is_empty() { "<none>".to_owned() } else { s };
    Ok([
        token.to_string(),
        ttl,
        expires,
        or_none(usages.join(",")),
        or_none(data(s, "description").to_owned()),
        or_none(data(s, "auth-extra-groups").to_owned()),
    ])
}

/// apimachinery's `ShortHumanDuration` of `secs` seconds.
fn short_human_duration(secs: i64) -> String {
    match secs {
        s if s < -1 => "<invalid>".into(),
        s if s < 0 => "0s".into(),
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86400 => format!("{}h", s / 3600),
        s if s < 86400 * 365 => format!("{}d", s / 86400),
        s => format!("{}y", s / 86400 / 365),
    }
}

/// Aligns `rows` like kubectl's table printer (a tabwriter with minimum width 10, padding 3).
fn table(rows: &[[String; 6]]) -> String {
    let mut widths = [0usize; 6];
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count() + 3).max(10);
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.trim_end_matches('\n').to_owned()
}

/// Runs `karmadactl token delete`: deletes each token (given as `<id>.<secret>` or `<id>`) and
/// returns the lines printed.
pub async fn delete(args: TokenDeleteArgs) -> anyhow::Result<Vec<String>> {
    if args.tokens.is_empty() {
        bail!("missing subcommand; 'token delete' is missing token of form \"[a-z0-9]{{6}}\"");
    }
    let mut ids = Vec::new();
    for t in &args.tokens {
        let is_id = t.len() == 6
            && t.bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase());
        if is_id {
            ids.push(t.clone());
        } else {
            match Token::parse(t) {
                Ok(tok) => ids.push(tok.id),
                Err(_) => bail!(
                    "given token didn't match pattern \"[a-z0-9]{{6}}\" or \"[a-z0-9]{{6}}.[a-z0-9]{{16}}\""
                ),
            }
        }
    }
    let host = args.control_plane.load().await?;
    let secrets: Api<Secret> = Api::namespaced(host.client.clone(), TOKEN_NAMESPACE);
    let mut out = Vec::new();
    for id in ids {
        let name = format!("bootstrap-token-{id}");
        secrets
            .delete(&name, &DeleteParams::default())
            .await
            .map_err(|e| {
                explain(
                    e,
                    &format!("deleting bootstrap token secret {TOKEN_NAMESPACE}/{name}"),
                    &host,
                )
            })?;
        out.push(format!("bootstrap token {id:?} deleted"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_like_apimachinery() {
        assert_eq!(short_human_duration(-5), "<invalid>");
        assert_eq!(short_human_duration(59), "59s");
        assert_eq!(short_human_duration(86399), "23h");
        assert_eq!(short_human_duration(86400 * 2), "2d");
        assert_eq!(short_human_duration(86400 * 400), "1y");
    }
}
