//! `karmadactl promote <RESOURCE_TYPE> <RESOURCE_NAME> -n <NAMESPACE> -C <CLUSTER>`: brings an
//! object that already runs in a member under the control plane, as Karmada's command does. The
//! object is read from the member, pruned as the controllers prune a template (the interpreter's
//! `prune`), annotated `work.karmada.io/conflict-resolution: overwrite` (unless it says otherwise)
//! and created in the control plane with a PropagationPolicy (ClusterPropagationPolicy for a
//! cluster-scoped kind) named as Karmada names it, selecting it for that one cluster with
//! `conflictResolution: Overwrite` and `preserveResourcesOnDeletion: true`. The execution
//! controller then finds the member object already there and takes it over in place (same UID,
//! same pods). With `--dependencies`, what the object depends on (the interpreter's
//! dependencies: customizations from the control plane, then the third-party and native rules) is
//! promoted first
//! and the policy propagates dependencies.
//!
//! The member is reached through `--cluster-kubeconfig`/`--cluster-context` or, without them, the
//! credentials of the Cluster object (its `secretRef`, Push mode). Karmada goes through the
//! `clusters/proxy` of its aggregated API server instead, which this control plane does not serve.

use std::sync::Arc;

use anyhow::{Context, anyhow, bail};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;
use karmada_apis::config::v1alpha1::ResourceInterpreterCustomization;
use karmada_apis::{Cluster, ClusterPropagationPolicy, PropagationPolicy};
use karmada_interpreter::{Interpreter, InterpreterOptions, ThirdParty};
use karmada_luavm::{Customizations, Limits};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

use crate::cli::{PromoteArgs, PromoteOutput};
use crate::util::{self, Target};

/// The annotation that lets the execution controller take over an existing member object.
const CONFLICT_RESOLUTION: &str = "work.karmada.io/conflict-resolution";

/// A served resource type.
#[derive(Debug, Clone)]
struct Kind {
    ar: ApiResource,
    namespaced: bool,
    singular: String,
    short_names: Vec<String>,
}

impl Kind {
    /// Go's `GroupVersionResource.String()`: `apps/v1, Resource=deployments`.
    fn gvr(&self) -> String {
        format!(
            "{}/{}, Resource={}",
            self.ar.group, self.ar.version, self.ar.plural
        )
    }

    /// Go's `GroupVersionKind.String()`: `apps/v1, Kind=Deployment`.
    fn gvk(&self) -> String {
        format!(
            "{}/{}, Kind={}",
            self.ar.group, self.ar.version, self.ar.kind
        )
    }

    fn api(&self, client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
        if self.namespaced {
            Api::namespaced_with(client.clone(), namespace, &self.ar)
        } else {
            Api::all_with(client.clone(), &self.ar)
        }
    }
}

fn kinds_of(group_version: &str, list: Vec<APIResource>) -> Vec<Kind> {
    let (group, version) = group_version.split_once('/').unwrap_or(("", group_version));
    list.into_iter()
        .filter(|r| !r.name.contains('/'))
        .map(|r| Kind {
            ar: ApiResource {
                group: group.to_owned(),
                version: version.to_owned(),
                api_version: group_version.to_owned(),
                kind: r.kind.clone(),
                plural: r.name.clone(),
            },
            namespaced: r.namespaced,
            singular: if r.singular_name.is_empty() {
                r.kind.to_lowercase()
            } else {
                r.singular_name.clone()
            },
            short_names: r.short_names.unwrap_or_default(),
        })
        .collect()
}

/// The resource types `target` serves in `group_version`.
async fn kinds_in(target: &Target, group_version: &str) -> anyhow::Result<Vec<Kind>> {
    let list = if group_version.contains('/') {
        target.client.list_api_group_resources(group_version).await
    } else {
        target.client.list_core_api_resources(group_version).await
    }
    .map_err(|e| util::explain(e, &format!("discovering {group_version}"), target))?;
    Ok(kinds_of(group_version, list.resources))
}

/// Every resource type `target` serves (each group's preferred version).
async fn discover(target: &Target) -> anyhow::Result<Vec<Kind>> {
    let mut kinds = kinds_in(target, "v1").await?;
    let groups = target
        .client
        .list_api_groups()
        .await
        .map_err(|e| util::explain(e, "discovering API groups", target))?;
    for g in groups.groups {
        let Some(gv) = g
            .preferred_version
            .map(|v| v.group_version)
            .or_else(|| g.versions.first().map(|v| v.group_version.clone()))
        else {
            continue;
        };
        // A group that fails discovery (an unavailable aggregated API) is skipped, as kubectl does.
        if let Ok(found) = kinds_in(target, &gv).await {
            kinds.extend(found);
        }
    }
    Ok(kinds)
}

/// The type kubectl would resolve `arg` to: `deployment`, `deployments`, `deploy`,
/// `deployment.apps` or `deployment.v1.apps`.
fn resolve<'a>(kinds: &'a [Kind], arg: &str) -> Option<&'a Kind> {
    let arg = arg.to_lowercase();
    let named = |k: &Kind, n: &str| {
        k.ar.plural == n
            || k.singular == n
            || k.ar.kind.to_lowercase() == n
            || k.short_names.iter().any(|s| s == n)
    };
    if let Some(k) = kinds
        .iter()
        .find(|k| named(k, &arg) && k.ar.group.is_empty())
    {
        return Some(k);
    }
    if let Some(k) = kinds.iter().find(|k| named(k, &arg)) {
        return Some(k);
    }
    let (name, rest) = arg.split_once('.')?;
    if let Some(k) = kinds.iter().find(|k| named(k, name) && k.ar.group == rest) {
        return Some(k);
    }
    let (version, group) = rest.split_once('.')?;
    kinds
        .iter()
        .find(|k| named(k, name) && k.ar.version == version && k.ar.group == group)
}

/// The member: `--cluster-kubeconfig` (context `--cluster-context`, else the cluster's name), or
/// the Cluster object's credentials.
async fn member(args: &PromoteArgs, host: &Target) -> anyhow::Result<Target> {
    let origin = format!("member cluster {}", args.cluster);
    if let Some(path) = &args.cluster_kubeconfig {
        let context = args.cluster_context.as_deref().unwrap_or(&args.cluster);
        return util::load(&origin, Some(path), Some(context), None).await;
    }
    let cluster = Api::<Cluster>::all(host.client.clone())
        .get(&args.cluster)
        .await
        .map_err(|e| util::explain(e, &format!("reading Cluster {}", args.cluster), host))?;
    let Some(secret_ref) = cluster.spec.secret_ref.as_ref().filter(|_| {
        cluster.spec.sync_mode == karmada_apis::cluster::v1alpha1::ClusterSyncMode::Push
    }) else {
        bail!(
            "cluster {} has no credentials in the control plane (Pull mode, or no secretRef): \
             pass --cluster-kubeconfig (Karmada's karmadactl reaches it through clusters/proxy, \
             which this control plane does not serve)",
            args.cluster
        );
    };
    let secret = Api::<Secret>::namespaced(host.client.clone(), &secret_ref.namespace)
        .get(&secret_ref.name)
        .await
        .map_err(|e| {
            util::explain(
                e,
                &format!(
                    "reading Secret {}/{} of cluster {}",
                    secret_ref.namespace, secret_ref.name, args.cluster
                ),
                host,
            )
        })?;
    let data = secret.data.unwrap_or_default();
    let field = |k: &str| data.get(k).map(|b| b.0.clone()).unwrap_or_default();
    let token = String::from_utf8(field("token")).with_context(|| {
        format!(
            "Secret {}/{}: token is not text",
            secret_ref.namespace, secret_ref.name
        )
    })?;
    if token.is_empty() {
        bail!(
            "Secret {}/{} of cluster {} has no token",
            secret_ref.namespace,
            secret_ref.name,
            args.cluster
        );
    }
    use base64::Engine as _;
    let ca = field("caBundle");
    let mut cluster_entry = json!({"server": cluster.spec.api_endpoint});
    if !ca.is_empty() {
        cluster_entry["certificate-authority-data"] =
            json!(base64::engine::general_purpose::STANDARD.encode(&ca));
    }
    if cluster.spec.insecure_skip_tls_verification {
        cluster_entry["insecure-skip-tls-verify"] = json!(true);
    }
    if !cluster.spec.proxy_url.is_empty() {
        cluster_entry["proxy-url"] = json!(cluster.spec.proxy_url);
    }
    let kubeconfig: kube::config::Kubeconfig = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "member",
        "clusters": [{"name": "member", "cluster": cluster_entry}],
        "users": [{"name": "member", "user": {"token": token.trim()}}],
        "contexts": [{"name": "member", "context": {"cluster": "member", "user": "member"}}],
    }))
    .context("building the member kubeconfig from its Cluster secret")?;
    util::target_from(kubeconfig, format!("{origin} (Cluster secret)"), None, None).await
}

/// The interpreter the controllers use: the control plane's customizations, then the built-in
/// third-party interpretations, in front of the native rules (no interpreter webhooks).
async fn interpreter(host: &Target) -> anyhow::Result<Interpreter> {
    let customizations = Api::<ResourceInterpreterCustomization>::all(host.client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .or_else(|e| match util::code(&e) {
            // A control plane without the CRD has no customizations.
            Some(404) => Ok(Vec::new()),
            _ => Err(util::explain(
                e,
                "listing ResourceInterpreterCustomizations",
                host,
            )),
        })?;
    Ok(Interpreter::new(InterpreterOptions::default())
        .with_layer(Arc::new(Customizations::fixed(
            customizations,
            Limits::default(),
        )))
        .with_layer(Arc::new(ThirdParty::new(InterpreterOptions::default()))))
}

/// The member object as a template: pruned as the controllers prune, with the conflict
/// resolution annotation set to overwrite unless already set.
fn template(interpreter: &Interpreter, object: &DynamicObject) -> anyhow::Result<Value> {
    let mut value = serde_json::to_value(object)?;
    interpreter
        .prune(&mut value)
        .map_err(|e| anyhow!("failed to preprocess resource: {e}"))?;
    let annotations = &mut value["metadata"]["annotations"];
    if !annotations.is_object() {
        *annotations = json!({});
    }
    if annotations.get(CONFLICT_RESOLUTION).is_none() {
        annotations[CONFLICT_RESOLUTION] = json!("overwrite");
    }
    Ok(value)
}

/// Karmada's auto-created policy for the object.
fn policy(args: &PromoteArgs, kind: &Kind, name: &str, namespace: &str) -> Value {
    let policy_name = args
        .policy_name
        .clone()
        .unwrap_or_else(|| karmada_apis::names::policy_name(namespace, name, &kind.gvk()));
    let spec = json!({
        "propagateDeps": args.dependencies,
        "resourceSelectors": [{"apiVersion": kind.ar.api_version, "kind": kind.ar.kind, "name": name}],
        "placement": {"clusterAffinity": {"clusterNames": [args.cluster]}},
        "conflictResolution": "Overwrite",
        "preserveResourcesOnDeletion": true,
    });
    if kind.namespaced {
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
               "metadata": {"name": policy_name, "namespace": namespace}, "spec": spec})
    } else {
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
               "metadata": {"name": policy_name}, "spec": spec})
    }
}

/// `-o json|yaml`: the objects as kubectl prints them.
fn print(objects: &[Value], format: PromoteOutput) -> anyhow::Result<String> {
    let mut out = String::new();
    for (i, o) in objects.iter().enumerate() {
        match format {
            PromoteOutput::Yaml => {
                if i > 0 {
                    out.push_str("---\n");
                }
                out.push_str(&crate::yaml::to_string_k8s(o));
            }
            PromoteOutput::Json => {
                let mut buf = Vec::new();
                let mut ser = serde_json::Serializer::with_formatter(
                    &mut buf,
                    serde_json::ser::PrettyFormatter::with_indent(b"    "),
                );
                serde::Serialize::serialize(o, &mut ser)?;
                out.push_str(&String::from_utf8(buf)?);
                out.push('\n');
            }
        }
    }
    Ok(out)
}

/// `Dependency resource "<gvr>"(<ns>/<name>)` and the like: Go's `%q` of the GVR and the key.
fn describe(kind: &Kind, namespace: &str, name: &str) -> String {
    if kind.namespaced {
        format!("{:?}({namespace}/{name})", kind.gvr())
    } else {
        format!("{:?}({name})", kind.gvr())
    }
}

/// Creates `value` in the control plane unless an object of that name exists; whether it created
/// it.
async fn create(host: &Target, kind: &Kind, namespace: &str, value: Value) -> anyhow::Result<bool> {
    let name = value["metadata"]["name"].as_str().unwrap_or("").to_owned();
    let api = kind.api(&host.client, namespace);
    let what = describe(kind, namespace, &name);
    match api.get_opt(&name).await {
        Ok(Some(_)) => return Ok(false),
        Ok(None) => {}
        Err(e) => {
            return Err(util::explain(
                e,
                &format!("failed to get resource {what}"),
                host,
            ));
        }
    }
    let object: DynamicObject = serde_json::from_value(value)?;
    api.create(&PostParams::default(), &object)
        .await
        .map_err(|e| util::explain(e, &format!("failed to create resource {what}"), host))?;
    Ok(true)
}

/// Promotes the dependencies of `object`; the lines it prints. On a failure the dependencies it
/// created are deleted again.
async fn promote_dependencies(
    host: &Target,
    member: &Target,
    interpreter: &Interpreter,
    object: &Value,
    cluster: &str,
) -> anyhow::Result<Vec<String>> {
    let Some(deps) = interpreter
        .get_dependencies(object)
        .map_err(|e| anyhow!("failed to get the dependencies: {e}"))?
    else {
        return Ok(vec![
            "there is no interpreter configured support to interpret dependencies".to_owned(),
        ]);
    };
    let mut lines = Vec::new();
    let mut created: Vec<(Kind, String, String)> = Vec::new();
    let result: anyhow::Result<()> = async {
        for dep in deps {
            if dep.name.is_empty() {
                lines.push(format!(
                    "Dependency {} {} selected by labels is not promoted; promote each by name",
                    dep.api_version, dep.kind
                ));
                continue;
            }
            let kinds = kinds_in(member, &dep.api_version).await?;
            let kind = kinds
                .into_iter()
                .find(|k| k.ar.kind == dep.kind)
                .ok_or_else(|| {
                    anyhow!(
                        "cluster({cluster}) does not serve {} {}",
                        dep.api_version,
                        dep.kind
                    )
                })?;
            let ns = if kind.namespaced {
                dep.namespace.as_str()
            } else {
                ""
            };
            let found = kind
                .api(&member.client, ns)
                .get_opt(&dep.name)
                .await
                .map_err(|e| util::explain(e, "reading a dependency", member))?
                .ok_or_else(|| {
                    anyhow!(
                        "failed to get dependency {:?}({ns}/{}) in cluster({cluster}): not found",
                        dep.kind,
                        dep.name
                    )
                })?;
            let value = template(interpreter, &found)?;
            let what = describe(&kind, ns, &dep.name);
            if create(host, &kind, ns, value).await? {
                lines.push(format!(
                    "Dependency resource {what} is promoted successfully"
                ));
                created.push((kind, ns.to_owned(), dep.name.clone()));
            } else {
                lines.push(format!(
                    "Dependency resource {what} already exist in karmada control plane, you can \
                     edit PropagationPolicy and OverridePolicy to propagate it"
                ));
            }
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        for (kind, ns, name) in created {
            let _ = kind
                .api(&host.client, &ns)
                .delete(&name, &Default::default())
                .await;
        }
        return Err(e.context("failed to promote dependencies"));
    }
    Ok(lines)
}

/// Creates the PropagationPolicy (namespaced kinds) or ClusterPropagationPolicy `promote` generated,
/// refusing to touch one that exists; the line it prints.
async fn create_policy(
    host: &Target,
    kind: &Kind,
    namespace: &str,
    policy: Value,
) -> anyhow::Result<String> {
    let policy_name = policy["metadata"]["name"].as_str().unwrap_or("").to_owned();
    if kind.namespaced {
        let api: Api<PropagationPolicy> = Api::namespaced(host.client.clone(), namespace);
        if api
            .get_opt(&policy_name)
            .await
            .map_err(|e| util::explain(e, "reading the PropagationPolicy", host))?
            .is_some()
        {
            bail!(
                "the PropagationPolicy({namespace}/{policy_name}) already exist, please edit \
                 it to propagate resource"
            );
        }
        api.create(&PostParams::default(), &serde_json::from_value(policy)?)
            .await
            .map_err(|e| util::explain(e, "creating the PropagationPolicy", host))?;
        Ok(format!(
            "PropagationPolicy ({namespace}/{policy_name}) is created successfully"
        ))
    } else {
        let api: Api<ClusterPropagationPolicy> = Api::all(host.client.clone());
        if api
            .get_opt(&policy_name)
            .await
            .map_err(|e| util::explain(e, "reading the ClusterPropagationPolicy", host))?
            .is_some()
        {
            bail!(
                "the ClusterPropagationPolicy({policy_name}) already exist, please edit it to \
                 propagate resource"
            );
        }
        api.create(&PostParams::default(), &serde_json::from_value(policy)?)
            .await
            .map_err(|e| util::explain(e, "creating the ClusterPropagationPolicy", host))?;
        Ok(format!(
            "ClusterPropagationPolicy {policy_name} is created successfully"
        ))
    }
}

/// Runs `karmadactl promote`; what it prints.
pub async fn run(args: PromoteArgs) -> anyhow::Result<String> {
    if args.cluster.is_empty() {
        bail!("the cluster cannot be empty");
    }
    let host = args.control_plane.load().await?;
    let member = member(&args, &host).await?;
    let kinds = discover(&member).await?;
    let kind = resolve(&kinds, &args.resource_type)
        .ok_or_else(|| {
            anyhow!(
                "failed to get resource in cluster({}): the server doesn't have a resource type \
                 {:?}",
                args.cluster,
                args.resource_type
            )
        })?
        .clone();
    let namespace = if kind.namespaced {
        args.namespace.clone()
    } else {
        String::new()
    };
    let object = kind
        .api(&member.client, &namespace)
        .get_opt(&args.name)
        .await
        .map_err(|e| util::explain(e, "failed to get resource", &member))?
        .ok_or_else(|| {
            anyhow!(
                "failed to get resource in cluster({c}). err: the {} or {} don't exist in \
                 cluster({c})",
                args.resource_type,
                args.name,
                c = args.cluster
            )
        })?;
    // The control plane must serve the kind.
    let host_kinds = kinds_in(&host, &kind.ar.api_version)
        .await
        .map_err(|e| anyhow!("failed to get gvr from {:?}: {e:#}", kind.gvk()))?;
    if !host_kinds.iter().any(|k| k.ar.kind == kind.ar.kind) {
        bail!(
            "failed to get gvr from {:?}: the control plane does not serve it",
            kind.gvk()
        );
    }
    let interpreter = interpreter(&host).await?;
    let value = template(&interpreter, &object)?;
    let policy = policy(&args, &kind, &args.name, &namespace);
    if let Some(format) = args.output {
        let mut objects = vec![value];
        if args.auto_create_policy {
            objects.push(policy);
        }
        return print(&objects, format);
    }
    if args.dry_run {
        return Ok(String::new());
    }
    let mut lines = Vec::new();
    if args.dependencies {
        lines.extend(
            promote_dependencies(&host, &member, &interpreter, &value, &args.cluster)
                .await
                .map_err(|e| {
                    anyhow!(
                        "failed to promote dependencies of resource {} automatically: {e:#}",
                        describe(&kind, &namespace, &args.name)
                    )
                })?,
        );
    }
    let what = describe(&kind, &namespace, &args.name);
    if !create(&host, &kind, &namespace, value).await? {
        eprintln!(
            "Resource {what} already exist in karmada control plane, you can edit \
             PropagationPolicy and OverridePolicy to propagate it"
        );
        return Ok(lines.join("\n"));
    }
    lines.push(if kind.namespaced {
        format!(
            "ResourceTemplate ({namespace}/{}) is created successfully",
            args.name
        )
    } else {
        format!("ResourceTemplate ({}) is created successfully", args.name)
    });
    if args.auto_create_policy {
        lines.push(create_policy(&host, &kind, &namespace, policy).await?);
    }
    lines.push(format!("Resource {what} is promoted successfully"));
    Ok(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Kind {
        let api_version = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        Kind {
            ar: ApiResource {
                group: group.into(),
                version: version.into(),
                api_version,
                kind: kind.into(),
                plural: plural.into(),
            },
            namespaced,
            singular: kind.to_lowercase(),
            short_names: if plural == "deployments" {
                vec!["deploy".into()]
            } else {
                vec![]
            },
        }
    }

    #[test]
    fn resolves_kubectl_spellings() {
        let kinds = [
            kind("", "v1", "ConfigMap", "configmaps", true),
            kind("apps", "v1", "Deployment", "deployments", true),
            kind(
                "rbac.authorization.k8s.io",
                "v1",
                "ClusterRole",
                "clusterroles",
                false,
            ),
        ];
        for arg in [
            "deployment",
            "Deployment",
            "deployments",
            "deploy",
            "deployment.apps",
            "deployment.v1.apps",
        ] {
            assert_eq!(
                resolve(&kinds, arg).map(|k| k.ar.plural.as_str()),
                Some("deployments"),
                "{arg}"
            );
        }
        assert_eq!(
            resolve(&kinds, "clusterrole.rbac.authorization.k8s.io").map(Kind::gvr),
            Some("rbac.authorization.k8s.io/v1, Resource=clusterroles".to_owned())
        );
        assert!(resolve(&kinds, "deployment.v2.apps").is_none());
        assert_eq!(kinds[0].gvr(), "/v1, Resource=configmaps");
    }

    #[test]
    fn policies_are_karmadas() {
        let args = crate::Cli::try_parse_from([
            "karmadactl",
            "promote",
            "deployment",
            "web",
            "-n",
            "shop",
            "-C",
            "member1",
            "-d",
        ])
        .unwrap();
        let crate::Command::Promote(args) = args.command else {
            panic!("not promote")
        };
        assert!(args.auto_create_policy);
        let deploy = kind("apps", "v1", "Deployment", "deployments", true);
        let pp = policy(&args, &deploy, "web", "shop");
        assert_eq!(pp["kind"], "PropagationPolicy");
        assert_eq!(
            pp["metadata"]["name"],
            karmada_apis::names::policy_name("shop", "web", "apps/v1, Kind=Deployment")
        );
        assert_eq!(pp["spec"]["propagateDeps"], true);
        assert_eq!(pp["spec"]["conflictResolution"], "Overwrite");
        assert_eq!(pp["spec"]["preserveResourcesOnDeletion"], true);
        assert_eq!(
            pp["spec"]["placement"]["clusterAffinity"]["clusterNames"],
            json!(["member1"])
        );
        let _: PropagationPolicy = serde_json::from_value(pp).unwrap();
        let role = kind(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
            false,
        );
        let cpp = policy(&args, &role, "system:viewer", "");
        assert_eq!(cpp["kind"], "ClusterPropagationPolicy");
        assert!(
            cpp["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("system.viewer-")
        );
        let _: ClusterPropagationPolicy = serde_json::from_value(cpp).unwrap();
    }

    use clap::Parser as _;
}
