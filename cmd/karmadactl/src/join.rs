//! `karmadactl join`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use karmada_apis::cluster::v1alpha1::{
    ClusterSyncMode, LocalSecretReference, SECRET_CA_DATA_KEY, SECRET_TOKEN_KEY,
};
use karmada_apis::names::{impersonation_secret_name, service_account_name};
use karmada_apis::{Cluster, ClusterSpec};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

use crate::cli::JoinArgs;
use crate::util::{
    CREATED_BY_JOIN, SYSTEM_LABEL, Target, code, explain, load, role_name, validate_cluster_name,
};

use karmada_apis::well_known::IMPERSONATOR_SERVICE_ACCOUNT as IMPERSONATOR_SA;

fn system_labels() -> BTreeMap<String, String> {
    [(SYSTEM_LABEL.0.to_string(), SYSTEM_LABEL.1.to_string())].into()
}

fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        labels: Some(system_labels()),
        ..ObjectMeta::default()
    }
}

/// Creates `obj` unless it already exists.
async fn ensure<K>(api: &Api<K>, obj: &K, what: &str, target: &Target) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(409) => Ok(()),
        Err(e) => Err(explain(e, &format!("creating {what}"), target)),
    }
}

/// Runs `karmadactl join`.
pub async fn run(args: JoinArgs) -> anyhow::Result<()> {
    let name = args.cluster_name.clone();
    validate_cluster_name(&name)?;
    let ns = args.cluster_namespace.clone();
    if ns == "karmada-system" {
        eprintln!(
            "warning: karmada-system is always reserved for Karmada control plane; storing member \
             cluster secrets there is not recommended"
        );
    }
    let mut labels = BTreeMap::new();
    for l in &args.cluster_labels {
        let (k, v) = l
            .split_once('=')
            .ok_or_else(|| anyhow!("invalid --cluster-labels entry {l:?}: expected key=value"))?;
        labels.insert(k.to_string(), v.to_string());
    }
    let host = load(
        "control plane",
        args.control_plane.kubeconfig.as_deref(),
        args.control_plane.karmada_context.as_deref(),
        args.karmada_as
            .as_deref()
            .map(|u| (u, args.karmada_as_group.as_slice())),
    )
    .await?;
    let member = load(
        &format!("member cluster {name}"),
        args.cluster_kubeconfig.as_deref(),
        args.cluster_context.as_deref(),
        None,
    )
    .await?;
    if join_targets(&host, &member, &args, labels).await? {
        println!("cluster({name}) is joined successfully");
    } else {
        println!("cluster({name}) can be joined (dry run: nothing was changed)");
    }
    Ok(())
}

/// Joins `member` to the control plane `host` as `args` says (their kubeconfig fields are not
/// read): the member's ServiceAccounts, RBAC and tokens, then the control plane's Secrets and
/// Cluster. `Ok(false)` after a dry run's checks.
#[allow(
    clippy::too_many_lines,
    reason = "the join steps in order, member side then control plane side, each a few lines"
)]
pub(crate) async fn join_targets(
    host: &Target,
    member: &Target,
    args: &JoinArgs,
    labels: BTreeMap<String, String>,
) -> anyhow::Result<bool> {
    let name = args.cluster_name.clone();
    let ns = args.cluster_namespace.clone();

    // The member's identity: the uid of its kube-system namespace (also proves it is reachable).
    let member_ns: Api<Namespace> = Api::all(member.client.clone());
    let id = member_ns
        .get("kube-system")
        .await
        .map_err(|e| explain(e, "reading namespace kube-system", member))?
        .metadata
        .uid
        .unwrap_or_default();

    // Name and id must be unused.
    let clusters: Api<Cluster> = Api::all(host.client.clone());
    let existing = clusters
        .list(&ListParams::default())
        .await
        .map_err(|e| explain(e, "listing clusters", host))?;
    for c in &existing.items {
        let same_name = c.metadata.name.as_deref() == Some(name.as_str());
        let same_id = !id.is_empty() && c.spec.id == id;
        if same_name || same_id {
            bail!(
                "the cluster ID {id} or the cluster name {name} has been registered (as cluster {})",
                c.metadata.name.as_deref().unwrap_or_default()
            );
        }
    }
    if args.dry_run {
        return Ok(false);
    }

    // Member side: namespace (marked as ours only if created now), ServiceAccounts, RBAC, tokens.
    let mut ns_meta = meta(None, &ns);
    ns_meta.annotations =
        Some([(CREATED_BY_JOIN.0.to_string(), CREATED_BY_JOIN.1.to_string())].into());
    ensure(
        &member_ns,
        &Namespace {
            metadata: ns_meta,
            ..Namespace::default()
        },
        &format!("namespace {ns}"),
        member,
    )
    .await?;
    let sas: Api<ServiceAccount> = Api::namespaced(member.client.clone(), &ns);
    ensure(
        &sas,
        &ServiceAccount {
            metadata: meta(Some(&ns), IMPERSONATOR_SA),
            ..ServiceAccount::default()
        },
        &format!("service account {ns}/{IMPERSONATOR_SA}"),
        member,
    )
    .await?;
    let sa_name = service_account_name(&name);
    ensure(
        &sas,
        &ServiceAccount {
            metadata: meta(Some(&ns), &sa_name),
            ..ServiceAccount::default()
        },
        &format!("service account {ns}/{sa_name}"),
        member,
    )
    .await?;
    let role = role_name(&sa_name);
    let roles: Api<ClusterRole> = Api::all(member.client.clone());
    let cluster_role = ClusterRole {
        metadata: meta(None, &role),
        rules: Some(vec![
            PolicyRule {
                api_groups: Some(vec!["*".into()]),
                resources: Some(vec!["*".into()]),
                verbs: vec!["*".into()],
                ..PolicyRule::default()
            },
            PolicyRule {
                non_resource_urls: Some(vec!["*".into()]),
                verbs: vec!["get".into()],
                ..PolicyRule::default()
            },
        ]),
        ..ClusterRole::default()
    };
    ensure(
        &roles,
        &cluster_role,
        &format!("cluster role {role}"),
        member,
    )
    .await?;
    let bindings: Api<ClusterRoleBinding> = Api::all(member.client.clone());
    let binding = ClusterRoleBinding {
        metadata: meta(None, &role),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: role.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: sa_name.clone(),
            namespace: Some(ns.clone()),
            ..Subject::default()
        }]),
    };
    ensure(
        &bindings,
        &binding,
        &format!("cluster role binding {role}"),
        member,
    )
    .await?;

    let (token, ca) = service_account_token(member, &ns, &sa_name, args).await?;
    let ca = ca.or_else(|| member.ca_pem.clone()).unwrap_or_default();
    if ca.is_empty() && !member.insecure {
        bail!(
            "no CA bundle for the {}: neither the ServiceAccount token Secret nor the kubeconfig has one",
            member.origin
        );
    }
    let (imp_token, _) = service_account_token(member, &ns, IMPERSONATOR_SA, args).await?;

    // Control-plane side: namespace, Secrets, Cluster.
    let host_ns: Api<Namespace> = Api::all(host.client.clone());
    ensure(
        &host_ns,
        &Namespace {
            metadata: meta(None, &ns),
            ..Namespace::default()
        },
        &format!("namespace {ns}"),
        host,
    )
    .await?;
    let secrets: Api<Secret> = Api::namespaced(host.client.clone(), &ns);
    let secret = Secret {
        metadata: meta(Some(&ns), &name),
        data: Some(
            [
                (SECRET_CA_DATA_KEY.to_string(), ByteString(ca)),
                (SECRET_TOKEN_KEY.to_string(), ByteString(token)),
            ]
            .into(),
        ),
        ..Secret::default()
    };
    create_or_replace_secret(&secrets, secret, host).await?;
    let imp_name = impersonation_secret_name(&name);
    let imp_secret = Secret {
        metadata: meta(Some(&ns), &imp_name),
        data: Some([(SECRET_TOKEN_KEY.to_string(), ByteString(imp_token))].into()),
        ..Secret::default()
    };
    create_or_replace_secret(&secrets, imp_secret, host).await?;

    let mut cluster = Cluster::new(
        &name,
        ClusterSpec {
            id,
            sync_mode: ClusterSyncMode::Push,
            api_endpoint: member.server.clone(),
            secret_ref: Some(LocalSecretReference {
                namespace: ns.clone(),
                name: name.clone(),
            }),
            impersonator_secret_ref: Some(LocalSecretReference {
                namespace: ns.clone(),
                name: imp_name.clone(),
            }),
            insecure_skip_tls_verification: member.insecure,
            proxy_url: member.proxy_url.clone().unwrap_or_default(),
            provider: args.cluster_provider.clone(),
            region: args.cluster_region.clone(),
            zones: args.cluster_zones.clone(),
            ..ClusterSpec::default()
        },
    );
    if !labels.is_empty() {
        cluster.metadata.labels = Some(labels);
    }
    let created = match clusters.create(&PostParams::default(), &cluster).await {
        Ok(c) => c,
        Err(e) if code(&e) == Some(409) => bail!("cluster({name}) already exist"),
        Err(e) => {
            return Err(explain(
                e,
                &format!("creating cluster({name}) object"),
                host,
            ));
        }
    };
    // The Secrets belong to the Cluster: deleting it garbage-collects them.
    let owner = OwnerReference {
        api_version: "cluster.karmada.io/v1alpha1".into(),
        kind: "Cluster".into(),
        name: name.clone(),
        uid: created.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    for s in [&name, &imp_name] {
        let patch = serde_json::json!({"metadata": {"ownerReferences": [owner]}});
        secrets
            .patch(s, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| explain(e, &format!("setting the owner of secret {ns}/{s}"), host))?;
    }
    Ok(true)
}

async fn create_or_replace_secret(
    api: &Api<Secret>,
    secret: Secret,
    host: &Target,
) -> anyhow::Result<()> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(409) => {
            // Left over from an earlier join: take it over with the fresh credentials.
            let patch = serde_json::json!({"data": secret.data, "metadata": {"labels": secret.metadata.labels}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|e| explain(e, &format!("updating secret {name}"), host))
        }
        Err(e) => Err(explain(e, &format!("creating secret {name}"), host)),
    }
}

/// A token (and the CA bundle, when the Secret carries one) for ServiceAccount `ns/sa`: from a
/// `kubernetes.io/service-account-token` Secret as Karmada does, else from the TokenRequest API.
async fn service_account_token(
    member: &Target,
    ns: &str,
    sa: &str,
    args: &JoinArgs,
) -> anyhow::Result<(Vec<u8>, Option<Vec<u8>>)> {
    let secrets: Api<Secret> = Api::namespaced(member.client.clone(), ns);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(sa.to_string()),
            namespace: Some(ns.to_string()),
            annotations: Some(
                [(
                    "kubernetes.io/service-account.name".to_string(),
                    sa.to_string(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/service-account-token".into()),
        ..Secret::default()
    };
    ensure(
        &secrets,
        &secret,
        &format!("token secret {ns}/{sa}"),
        member,
    )
    .await?;
    let deadline = Instant::now() + args.token_wait;
    loop {
        let s = secrets
            .get(sa)
            .await
            .map_err(|e| explain(e, &format!("reading token secret {ns}/{sa}"), member))?;
        let data = s.data.unwrap_or_default();
        if let Some(token) = data.get("token").filter(|t| !t.0.is_empty()) {
            return Ok((token.0.clone(), data.get("ca.crt").map(|c| c.0.clone())));
        }
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!(
        "warning: the member did not fill token secret {ns}/{sa} within {:?} (is its token \
         controller running?); requesting a token valid for {:?} through the TokenRequest API",
        args.token_wait, args.token_request_expiration
    );
    let sas: Api<ServiceAccount> = Api::namespaced(member.client.clone(), ns);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: None,
            expiration_seconds: Some(
                i64::try_from(args.token_request_expiration.as_secs()).unwrap_or(i64::MAX),
            ),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let issued = sas
        .create_token_request(sa, &PostParams::default(), &request)
        .await
        .map_err(|e| {
            explain(
                e,
                &format!("requesting a token for service account {ns}/{sa}"),
                member,
            )
        })?;
    let token = issued
        .status
        .and_then(|s| s.token)
        .filter(|t| !t.is_empty())
        .context("the member returned an empty token")?;
    Ok((token.into_bytes(), None))
}
