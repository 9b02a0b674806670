//! Installing the project's CustomResourceDefinitions (`crds/`) into an API server.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

/// Applies every CRD in the workspace's `crds/` and waits until each is Established.
pub async fn install_crds(client: &Client) -> Result<Vec<String>, Error> {
    install_crds_from(client, &workspace_crds_dir()).await
}

/// Like [`install_crds`], without the CRDs named in `skip` (e.g. [`CLUSTER_CRD`]).
pub async fn install_crds_except(client: &Client, skip: &[&str]) -> Result<Vec<String>, Error> {
    let crds = read_crds(&workspace_crds_dir())?
        .into_iter()
        .filter(|c| {
            c.metadata
                .name
                .as_deref()
                .is_none_or(|n| !skip.contains(&n))
        })
        .collect::<Vec<_>>();
    install_crd_objects(client, &crds).await
}

/// Applies every `*.yaml` CRD in `dir` (server-side apply) and waits until each is Established.
/// Returns the names of the CRDs.
pub async fn install_crds_from(client: &Client, dir: &Path) -> Result<Vec<String>, Error> {
    install_crd_objects(client, &read_crds(dir)?).await
}

/// The CRDs of the `*.yaml` files in `dir`, sorted by file name; each must have a name.
fn read_crds(dir: &Path) -> Result<Vec<CustomResourceDefinition>, Error> {
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
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| Error::io(file, e))?;
        let crd: CustomResourceDefinition = serde_saphyr::from_str(&text)
            .map_err(|e| Error::Crds(format!("{}: {e}", file.display())))?;
        if crd.metadata.name.is_none() {
            return Err(Error::Crds(format!(
                "{}: CRD without a name",
                file.display()
            )));
        }
        crds.push(crd);
    }
    Ok(crds)
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
