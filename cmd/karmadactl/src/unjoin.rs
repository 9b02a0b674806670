//! `karmadactl unjoin`.

use std::time::{Duration, Instant};

use anyhow::bail;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use karmada_apis::cluster::v1alpha1::ClusterSyncMode;
use karmada_apis::names::{execution_space_name, impersonation_secret_name, service_account_name};
use karmada_apis::well_known::{CLUSTER_CONTROLLER_FINALIZER, EXECUTION_CONTROLLER_FINALIZER};
use karmada_apis::{Cluster, Work};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};

use crate::cli::UnjoinArgs;
use crate::util::{CREATED_BY_JOIN, Target, code, explain, load, role_name};

/// Deletes `name`; a missing object is fine.
async fn delete<K>(api: &Api<K>, name: &str, what: &str, target: &Target) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(404) => Ok(()),
        Err(e) => Err(explain(e, &format!("deleting {what}"), target)),
    }
}

/// Whether `name` exists (read only).
async fn exists<K>(api: &Api<K>, name: &str, what: &str, target: &Target) -> anyhow::Result<bool>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name)
        .await
        .map(|o| o.is_some())
        .map_err(|e| explain(e, &format!("getting {what}"), target))
}

/// What `unjoin` would delete, one `would delete <what>` line per object that exists, reading
/// only: the Works in the execution namespace, the Cluster, its Secrets and (with a member
/// kubeconfig) the member objects join created.
async fn dry_run_plan(
    host: &Target,
    member: Option<&Target>,
    args: &UnjoinArgs,
) -> anyhow::Result<Vec<String>> {
    let name = &args.cluster_name;
    let mut out = Vec::new();
    let es = execution_space_name(name);
    let works: Api<Work> = Api::namespaced(host.client.clone(), &es);
    let list = works
        .list(&ListParams::default())
        .await
        .map_err(|e| explain(e, &format!("listing works in {es}"), host))?;
    for w in &list.items {
        out.push(format!(
            "would delete work {es}/{} (control plane, via the cluster's cleanup)",
            w.metadata.name.as_deref().unwrap_or_default()
        ));
    }
    out.push(format!("would delete cluster {name} (control plane)"));
    let secrets: Api<Secret> = Api::namespaced(host.client.clone(), &args.cluster_namespace);
    for s in [name.clone(), impersonation_secret_name(name)] {
        let what = format!("secret {}/{s}", args.cluster_namespace);
        if exists(&secrets, &s, &what, host).await? {
            out.push(format!("would delete {what} (control plane)"));
        }
    }
    if let Some(m) = member {
        let sa = service_account_name(name);
        let role = role_name(&sa);
        let what = format!("cluster role binding {role}");
        if exists(
            &Api::<ClusterRoleBinding>::all(m.client.clone()),
            &role,
            &what,
            m,
        )
        .await?
        {
            out.push(format!("would delete {what} (member)"));
        }
        let what = format!("cluster role {role}");
        if exists(&Api::<ClusterRole>::all(m.client.clone()), &role, &what, m).await? {
            out.push(format!("would delete {what} (member)"));
        }
        let sas: Api<ServiceAccount> = Api::namespaced(m.client.clone(), &args.cluster_namespace);
        let what = format!("service account {}/{sa}", args.cluster_namespace);
        if exists(&sas, &sa, &what, m).await? {
            out.push(format!("would delete {what} (member)"));
        }
        let ns = Api::<Namespace>::all(m.client.clone())
            .get_opt(&args.cluster_namespace)
            .await
            .map_err(|e| {
                explain(
                    e,
                    &format!("getting namespace {}", args.cluster_namespace),
                    m,
                )
            })?;
        if let Some(ns) = ns {
            let joined = ns
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(CREATED_BY_JOIN.0))
                .is_some_and(|v| v == CREATED_BY_JOIN.1);
            if joined {
                out.push(format!(
                    "would delete namespace {} (member)",
                    args.cluster_namespace
                ));
            }
        }
    }
    Ok(out)
}

/// Deletes the member namespace `name` only if `join` created it (it carries [`CREATED_BY_JOIN`]);
/// a namespace that existed before the join is left, with a note.
async fn delete_namespace_if_joined(
    api: &Api<Namespace>,
    name: &str,
    target: &Target,
) -> anyhow::Result<()> {
    let what = format!("namespace {name}");
    let Some(ns) = api
        .get_opt(name)
        .await
        .map_err(|e| explain(e, &format!("getting {what}"), target))?
    else {
        return Ok(());
    };
    let created_by_join = ns
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CREATED_BY_JOIN.0))
        .is_some_and(|v| v == CREATED_BY_JOIN.1);
    if !created_by_join {
        println!(
            "keeping {what} in the member cluster: it existed before karmadactl join (no {}={} annotation)",
            CREATED_BY_JOIN.0, CREATED_BY_JOIN.1
        );
        return Ok(());
    }
    // The uid precondition keeps a namespace recreated since the read from being deleted.
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: ns.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(404) => Ok(()),
        Err(e) => Err(explain(e, &format!("deleting {what}"), target)),
    }
}

/// Removes `finalizer` from the object's metadata with a merge patch guarded by resourceVersion.
async fn strip_finalizer<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let meta = obj.meta();
    let Some(fs) = meta
        .finalizers
        .as_ref()
        .filter(|f| f.iter().any(|f| f == finalizer))
    else {
        return Ok(());
    };
    let remaining: Vec<&String> = fs.iter().filter(|f| *f != finalizer).collect();
    let patch = serde_json::json!({"metadata": {"finalizers": remaining, "resourceVersion": meta.resource_version}});
    api.patch(
        meta.name.as_deref().unwrap_or_default(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map(|_| ())
}

/// Runs `karmadactl unjoin`.
#[allow(
    clippy::too_many_lines,
    reason = "the unjoin steps in the order they must run, each a few lines"
)]
pub async fn run(args: UnjoinArgs) -> anyhow::Result<()> {
    let name = args.cluster_name.clone();
    if name.is_empty() {
        bail!("cluster name is required");
    }
    if args.wait.is_zero() {
        bail!(
            "--wait {:?} must be a positive duration, e.g. 1m0s",
            args.wait
        );
    }
    let host = args.control_plane.load().await?;
    let member = match &args.cluster_kubeconfig {
        Some(path) => Some(
            load(
                &format!("member cluster {name}"),
                Some(path),
                Some(args.cluster_context.as_deref().unwrap_or(&name)),
                None,
            )
            .await?,
        ),
        None => None,
    };

    let clusters: Api<Cluster> = Api::all(host.client.clone());
    let cluster = match clusters.get(&name).await {
        Ok(c) => c,
        Err(e) if code(&e) == Some(404) => {
            bail!("no cluster object {name} found in karmada control Plane")
        }
        Err(e) => return Err(explain(e, &format!("getting cluster {name}"), &host)),
    };
    if cluster.spec.sync_mode == ClusterSyncMode::Pull {
        bail!(
            "cluster {name} is a Pull mode member cluster, please use command `unregister` if you \
             want to continue unregistering the cluster"
        );
    }
    if args.dry_run {
        for line in dry_run_plan(&host, member.as_ref(), &args).await? {
            println!("{line}");
        }
        println!("cluster({name}) can be unjoined (dry run: nothing was changed)");
        return Ok(());
    }

    // Delete the Cluster and wait for the controllers' cleanup to release it.
    delete(&clusters, &name, &format!("cluster {name}"), &host).await?;
    let deadline = Instant::now() + args.wait;
    let mut gone = false;
    while Instant::now() < deadline {
        match clusters.get_opt(&name).await {
            Ok(None) => {
                gone = true;
                break;
            }
            Ok(Some(_)) => {}
            Err(e) => return Err(explain(e, &format!("getting cluster {name}"), &host)),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    if !gone {
        if !args.force {
            bail!(
                "cluster {name} was not cleaned up within {:?}: its Works or execution namespace {} \
                 may still be waiting for the member; retry with a longer --wait, or --force",
                args.wait,
                execution_space_name(&name)
            );
        }
        eprintln!("warning: deleting cluster {name} timed out; forcing: removing finalizers");
        let es = execution_space_name(&name);
        let works: Api<Work> = Api::namespaced(host.client.clone(), &es);
        match works.list(&ListParams::default()).await {
            Ok(list) => {
                for w in &list.items {
                    if let Err(e) = strip_finalizer(&works, w, EXECUTION_CONTROLLER_FINALIZER).await
                    {
                        eprintln!(
                            "warning: cannot remove the finalizer of work {es}/{}: {e}",
                            w.metadata.name.as_deref().unwrap_or_default()
                        );
                    }
                }
            }
            Err(e) => eprintln!("warning: cannot list works in {es}: {e}"),
        }
        if let Ok(Some(c)) = clusters.get_opt(&name).await
            && let Err(e) = strip_finalizer(&clusters, &c, CLUSTER_CONTROLLER_FINALIZER).await
        {
            eprintln!("warning: cannot remove the finalizer of cluster {name}: {e}");
        }
    }
    // The Secrets are owned by the Cluster; delete them too in case no garbage collector runs.
    let secrets: Api<Secret> = Api::namespaced(host.client.clone(), &args.cluster_namespace);
    for s in [name.clone(), impersonation_secret_name(&name)] {
        delete(
            &secrets,
            &s,
            &format!("secret {}/{s}", args.cluster_namespace),
            &host,
        )
        .await?;
    }

    // Member side, when we can reach it.
    if let Some(member) = member {
        let force = args.force;
        let sa = service_account_name(&name);
        let role = role_name(&sa);
        let steps: Vec<(&str, anyhow::Result<()>)> = vec![
            (
                "cluster role binding",
                delete(
                    &Api::<ClusterRoleBinding>::all(member.client.clone()),
                    &role,
                    &format!("cluster role binding {role}"),
                    &member,
                )
                .await,
            ),
            (
                "cluster role",
                delete(
                    &Api::<ClusterRole>::all(member.client.clone()),
                    &role,
                    &format!("cluster role {role}"),
                    &member,
                )
                .await,
            ),
            (
                "service account",
                delete(
                    &Api::<ServiceAccount>::namespaced(
                        member.client.clone(),
                        &args.cluster_namespace,
                    ),
                    &sa,
                    &format!("service account {}/{sa}", args.cluster_namespace),
                    &member,
                )
                .await,
            ),
            (
                "namespace",
                delete_namespace_if_joined(
                    &Api::<Namespace>::all(member.client.clone()),
                    &args.cluster_namespace,
                    &member,
                )
                .await,
            ),
        ];
        for (_, r) in steps {
            if let Err(e) = r {
                if !force {
                    return Err(e);
                }
                eprintln!("warning: force deletion: {e:#}");
            }
        }
    }
    println!("cluster({name}) is unjoined successfully");
    Ok(())
}
