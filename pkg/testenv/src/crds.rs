//! Installing the project's CustomResourceDefinitions (`crds/`, with the admission policies kept
//! beside them) into an API server.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};

use crate::Error;

/// The workspace's `crds/` folder.
pub fn workspace_crds_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds")
}

/// The Cluster CRD's name: left out where Karmada's aggregated API server serves the group.
pub const CLUSTER_CRD: &str = "clusters.cluster.karmada.io";

/// Applies every CRD in the workspace's `crds/` (and the admission policies there) and waits until
/// each is Established.
pub async fn install_crds(client: &Client) -> Result<Vec<String>, Error> {
    install_crds_from(client, &workspace_crds_dir()).await
}

/// Like [`install_crds`], without the CRDs named in `skip` (e.g. [`CLUSTER_CRD`]).
pub async fn install_crds_except(client: &Client, skip: &[&str]) -> Result<Vec<String>, Error> {
    let mut objects = read_dir(&workspace_crds_dir())?;
    objects.crds.retain(|c| {
        c.metadata
            .name
            .as_deref()
            .is_none_or(|n| !skip.contains(&n))
    });
    objects.install(client).await
}

/// Applies every `*.yaml` file in `dir` (server-side apply) and waits until each CRD is
/// Established. Besides CRDs a file may hold the ValidatingAdmissionPolicies (and their bindings)
/// installed with them (`crds/` has Karmada's resource deletion protection); they are applied
/// after the CRDs. Returns the names of the CRDs.
pub async fn install_crds_from(client: &Client, dir: &Path) -> Result<Vec<String>, Error> {
    read_dir(dir)?.install(client).await
}

/// What the `*.yaml` files of a `crds/` folder hold.
struct CrdsDir {
    crds: Vec<CustomResourceDefinition>,
    policies: Vec<ValidatingAdmissionPolicy>,
    bindings: Vec<ValidatingAdmissionPolicyBinding>,
}

impl CrdsDir {
    /// Applies the CRDs (waiting until Established), then the policies. Returns the CRDs' names.
    async fn install(&self, client: &Client) -> Result<Vec<String>, Error> {
        let names = install_crd_objects(client, &self.crds).await?;
        install_admission_policies(client, &self.policies, &self.bindings).await?;
        Ok(names)
    }
}

/// The CRDs and admission policies of the `*.yaml` files in `dir`, sorted by file name; each CRD
/// must have a name.
fn read_dir(dir: &Path) -> Result<CrdsDir, Error> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::Crds(format!(
            "no CRD files in {}: run `make crds` to generate them",
            dir.display()
        )));
    }
    let mut crds = Vec::new();
    let mut policies = Vec::new();
    let mut bindings = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| Error::io(file, e))?;
        let docs: Vec<serde_json::Value> = serde_saphyr::from_str_multiple(&text)
            .map_err(|e| Error::Crds(format!("{}: {e}", file.display())))?;
        for doc in docs.into_iter().filter(|d| !d.is_null()) {
            let kind = doc
                .get("kind")
                .and_then(|k| k.as_str())
                .unwrap_or_default()
                .to_owned();
            let parsed =
                |e: serde_json::Error| Error::Crds(format!("{}: {kind}: {e}", file.display()));
            match kind.as_str() {
                "CustomResourceDefinition" => {
                    let crd: CustomResourceDefinition =
                        serde_json::from_value(doc).map_err(parsed)?;
                    if crd.metadata.name.is_none() {
                        return Err(Error::Crds(format!(
                            "{}: CRD without a name",
                            file.display()
                        )));
                    }
                    crds.push(crd);
                }
                "ValidatingAdmissionPolicy" => {
                    policies.push(serde_json::from_value(doc).map_err(parsed)?);
                }
                "ValidatingAdmissionPolicyBinding" => {
                    bindings.push(serde_json::from_value(doc).map_err(parsed)?);
                }
                other => {
                    return Err(Error::Crds(format!(
                        "{}: unexpected kind {other:?} (CRDs and ValidatingAdmissionPolicies only)",
                        file.display()
                    )));
                }
            }
        }
    }
    Ok(CrdsDir {
        crds,
        policies,
        bindings,
    })
}

/// Applies `policies` and `bindings` (server-side apply). The API server enforces a policy moments
/// later (its admission plugin loads policies from a watch): a test relying on one waits for it,
/// e.g. until a dry run of what it refuses is refused.
pub async fn install_admission_policies(
    client: &Client,
    policies: &[ValidatingAdmissionPolicy],
    bindings: &[ValidatingAdmissionPolicyBinding],
) -> Result<(), Error> {
    let params = PatchParams::apply("karmada-rs-testenv").force();
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    for policy in policies {
        let name =
            policy.metadata.name.clone().ok_or_else(|| {
                Error::Crds("a ValidatingAdmissionPolicy without a name".to_owned())
            })?;
        api.patch(&name, &params, &Patch::Apply(policy))
            .await
            .map_err(|e| Error::kube(format!("applying ValidatingAdmissionPolicy {name}"), e))?;
    }
    let binding_api: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    for binding in bindings {
        let name = binding.metadata.name.clone().ok_or_else(|| {
            Error::Crds("a ValidatingAdmissionPolicyBinding without a name".to_owned())
        })?;
        binding_api
            .patch(&name, &params, &Patch::Apply(binding))
            .await
            .map_err(|e| {
                Error::kube(
                    format!("applying ValidatingAdmissionPolicyBinding {name}"),
                    e,
                )
            })?;
    }
    Ok(())
}

/// Applies `crds` (server-side apply) and waits until each is Established. Returns their names.
pub async fn install_crd_objects(
    client: &Client,
    crds: &[CustomResourceDefinition],
) -> Result<Vec<String>, Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("karmada-rs-testenv").force();
    let mut names = Vec::new();
    for crd in crds {
        let name = crd
            .metadata
            .name
            .clone()
            .ok_or_else(|| Error::Crds("a CRD without a name".to_owned()))?;
        api.patch(&name, &params, &Patch::Apply(crd))
            .await
            .map_err(|e| Error::kube(format!("applying CRD {name}"), e))?;
        names.push(name);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for name in &names {
        loop {
            let crd = api
                .get(name)
                .await
                .map_err(|e| Error::kube(format!("reading CRD {name}"), e))?;
            let established = crd
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
            if established {
                break;
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout(format!(
                    "CRD {name} was not Established within 60s"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(names)
}
