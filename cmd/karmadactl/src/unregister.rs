//! `karmadactl unregister`: removes a Pull-mode cluster, as Karmada's command does: its Works
//! (while the agent still runs, so it removes what they applied), the Cluster, the agent's RBAC on
//! the control plane (when `--karmada-config` is given; the agent's own identity cannot delete
//! it), and what `register` (and `join`) created in the member.

use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::cluster::v1alpha1::ClusterSyncMode;
use karmada_apis::names::{execution_space_name, service_account_name};
use karmada_apis::{Cluster, Work};
use kube::api::{Api, DeleteParams, ListParams};
use kube::config::Kubeconfig;

use crate::cli::UnregisterArgs;
use crate::register::{AGENT_SERVICE_ACCOUNT, KARMADA_KUBECONFIG, RbacResources, delete_absent_ok};
use crate::util::{load, role_name, validate_cluster_name};

const POLL: Duration = Duration::from_millis(500);

fn meta(ns: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: ns.map(str::to_owned),
        ..ObjectMeta::default()
    }
}

/// The control plane client: `--karmada-config`, or the agent's kubeconfig from the member.
async fn control_plane(
    args: &UnregisterArgs,
    member: &kube::Client,
) -> anyhow::Result<kube::Client> {
    if let Some(path) = &args.karmada_config {
        return Ok(load(
            "control plane",
            Some(path),
            args.karmada_context.as_deref(),
            None,
        )
        .await?
        .client);
    }
    let ns = &args.namespace;
    let secret = Api::<Secret>::namespaced(member.clone(), ns)
        .get(KARMADA_KUBECONFIG)
        .await
        .with_context(|| {
            format!("failed to get the karmada config (Secret {ns}/{KARMADA_KUBECONFIG}) of the karmada-agent in the member cluster")
        })?;
    let data = secret
        .data
        .and_then(|d| d.get(KARMADA_KUBECONFIG).cloned())
        .with_context(|| {
            format!("Secret {ns}/{KARMADA_KUBECONFIG} has no {KARMADA_KUBECONFIG} key")
        })?;
    let text = String::from_utf8(data.0).context("the agent's kubeconfig is not UTF-8")?;
    let kc = Kubeconfig::from_yaml(&text).context("the agent's kubeconfig is invalid")?;
    let mut config = kube::Config::from_custom_kubeconfig(
        kc,
        &kube::config::KubeConfigOptions {
            context: args.karmada_context.clone(),
            ..Default::default()
        },
    )
    .await
    .context("the agent's kubeconfig is invalid")?;
    config.connect_timeout = Some(Duration::from_secs(10));
    config.read_timeout = Some(Duration::from_secs(30));
    kube::Client::try_from(config).context("cannot build the control plane client")
}

/// Runs `karmadactl unregister`.
#[allow(
    clippy::too_many_lines,
    reason = "the unregister steps in the order they must run, each a few lines"
)]
pub async fn run(args: UnregisterArgs) -> anyhow::Result<()> {
    let name = args.cluster_name.clone();
    validate_cluster_name(&name).map_err(|e| anyhow!("invalid cluster name({name}): {e}"))?;
    if args.wait.is_zero() {
        bail!(
            "--wait {:?} must be a positive duration, e.g. 1m0s",
            args.wait
        );
    }
    let member = load(
        &format!("member cluster {name}"),
        Some(&args.cluster_kubeconfig),
        args.cluster_context.as_deref(),
        None,
    )
    .await
    .context("failed to read member cluster rest config")?
    .client;
    let host = control_plane(&args, &member).await?;
    let clusters: Api<Cluster> = Api::all(host.clone());
    let cluster = match clusters.get_opt(&name).await {
        Ok(Some(c)) => c,
        Ok(None) => bail!("no cluster object {name} found in karmada control Plane"),
        Err(e) => return Err(anyhow!("failed to get cluster object {name}: {e}")),
    };
    if cluster.spec.sync_mode == ClusterSyncMode::Push {
        bail!(
            "cluster {name} is a Push mode member cluster, please use command `unjoin` if you want \
             to continue unjoining the cluster"
        );
    }
    if args.dry_run {
        // Read only: list what the run below would delete.
        let es = execution_space_name(&name);
        let works: Api<Work> = Api::namespaced(host.clone(), &es);
        let list = works
            .list(&ListParams::default())
            .await
            .map_err(|e| anyhow!("failed to list works in {es}: {e}"))?;
        for w in &list.items {
            println!(
                "would delete work {es}/{} (control plane)",
                w.metadata.name.as_deref().unwrap_or_default()
            );
        }
        println!("would delete cluster {name} (control plane)");
        let rbac = RbacResources::new(&name, &args.cluster_namespace, &args.namespace);
        println!(
            "would delete karmada-agent RBAC resources (control plane{}):\n{}",
            if args.karmada_config.is_some() {
                ""
            } else {
                ", left for manual cleanup without --karmada-config"
            },
            rbac.describe()
        );
        let cns = args.cluster_namespace.as_str();
        let ans = args.namespace.as_str();
        let sa = service_account_name(&name);
        let imp = service_account_name("impersonator");
        let role = role_name(&sa);
        for what in [
            format!("service account {cns}/{sa}"),
            format!("cluster role {role}"),
            format!("cluster role binding {role}"),
            format!("secret {cns}/{sa}"),
            format!("service account {cns}/{imp}"),
            format!("secret {cns}/{imp}"),
            format!("namespace {cns}"),
            format!("deployment {ans}/{}", args.agent_name),
            format!("service account {ans}/{AGENT_SERVICE_ACCOUNT}"),
            "cluster role karmada-agent".to_owned(),
            "cluster role binding karmada-agent".to_owned(),
            format!("secret {ans}/{KARMADA_KUBECONFIG}"),
        ] {
            println!("would delete {what} (member, if present)");
        }
        println!("cluster({name}) can be unregistered (dry run: nothing was changed)");
        return Ok(());
    }
    let deadline = Instant::now() + args.wait;

    // 1. The Works first: deleting the Cluster removes the execution namespace, and with it the
    // agent's rights on Works there.
    let es = execution_space_name(&name);
    let works: Api<Work> = Api::namespaced(host.clone(), &es);
    let _ = works
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .map_err(|e| anyhow!("failed to delete works in {es}: {e}"))?;
    loop {
        let left = works
            .list(&ListParams::default())
            .await
            .map_err(|e| anyhow!("failed to list works in {es}: {e}"))?;
        if left.items.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "{} works in {es} were not deleted within {:?} (is the karmada-agent running?)",
                left.items.len(),
                args.wait
            );
        }
        tokio::time::sleep(POLL).await;
    }

    // 2. The Cluster.
    delete_absent_ok(&clusters, &meta(None, &name)).await?;
    loop {
        if clusters.get_opt(&name).await?.is_none() {
            break;
        }
        if Instant::now() > deadline {
            bail!("cluster {name} was not deleted within {:?}", args.wait);
        }
        tokio::time::sleep(POLL).await;
    }
    println!("Successfully delete cluster object ({name}) from control plane.");

    let rbac = RbacResources::new(&name, &args.cluster_namespace, &args.namespace);
    if args.karmada_config.is_some() {
        rbac.delete(&host)
            .await
            .context("failed to delete karmada-agent RBAC resources from control plane")?;
        println!(
            "Successfully delete karmada-agent RBAC resources from control plane. cluster name: {name}"
        );
    } else {
        eprintln!(
            "warning: The RBAC resources on the control plane need to be manually cleaned up, \
             including the following resources:\n{}",
            rbac.describe()
        );
    }

    // 3. What Karmada created in the member (join's objects too).
    let cns = args.cluster_namespace.as_str();
    let ans = args.namespace.as_str();
    let sa = service_account_name(&name);
    let imp = service_account_name("impersonator");
    let m = member.clone();
    delete_absent_ok(
        &Api::<ServiceAccount>::namespaced(m.clone(), cns),
        &meta(Some(cns), &sa),
    )
    .await?;
    delete_absent_ok(
        &Api::<ClusterRole>::all(m.clone()),
        &meta(None, &role_name(&sa)),
    )
    .await?;
    delete_absent_ok(
        &Api::<ClusterRoleBinding>::all(m.clone()),
        &meta(None, &role_name(&sa)),
    )
    .await?;
    delete_absent_ok(
        &Api::<Secret>::namespaced(m.clone(), cns),
        &meta(Some(cns), &sa),
    )
    .await?;
    delete_absent_ok(
        &Api::<ServiceAccount>::namespaced(m.clone(), cns),
        &meta(Some(cns), &imp),
    )
    .await?;
    delete_absent_ok(
        &Api::<Secret>::namespaced(m.clone(), cns),
        &meta(Some(cns), &imp),
    )
    .await?;
    delete_absent_ok(&Api::<Namespace>::all(m.clone()), &meta(None, cns)).await?;
    delete_absent_ok(
        &Api::<Deployment>::namespaced(m.clone(), ans),
        &meta(Some(ans), &args.agent_name),
    )
    .await?;
    delete_absent_ok(
        &Api::<ServiceAccount>::namespaced(m.clone(), ans),
        &meta(Some(ans), AGENT_SERVICE_ACCOUNT),
    )
    .await?;
    delete_absent_ok(
        &Api::<ClusterRole>::all(m.clone()),
        &meta(None, "karmada-agent"),
    )
    .await?;
    delete_absent_ok(
        &Api::<ClusterRoleBinding>::all(m.clone()),
        &meta(None, "karmada-agent"),
    )
    .await?;
    delete_absent_ok(
        &Api::<Secret>::namespaced(m, ans),
        &meta(Some(ans), KARMADA_KUBECONFIG),
    )
    .await?;
    println!("cluster({name}) is unregistered successfully");
    Ok(())
}
