//! InterpretDependency: which other objects a workload needs in a member cluster (Karmada's
//! `GetDependencies`), so the dependencies distributor can propagate them with it.
//!
//! Native rules, keyed by apiVersion and kind as Karmada keys them (another version of a kind has
//! no rule):
//!
//! | kind | dependencies |
//! |---|---|
//! | apps/v1 Deployment, ReplicaSet, DaemonSet, StatefulSet; batch/v1 Job | the pod template's |
//! | batch/v1 CronJob | the job template's pod template's |
//! | v1 Pod | its own spec's |
//! | networking.k8s.io/v1 Ingress | the Secret of every `spec.tls` entry |
//! | multicluster.x-k8s.io/v1alpha1 ServiceImport | Service `derived-<name>` and the EndpointSlices labelled with it |
//!
//! A pod spec depends on the ConfigMaps and Secrets its containers (init, regular and ephemeral)
//! read through `env` and `envFrom`, on the ConfigMaps, Secrets and PersistentVolumeClaims its
//! volumes use (projected sources and the Secret references of volume plugins included), on its
//! `imagePullSecrets` and on its `serviceAccountName` unless that is empty or `default`. A
//! StatefulSet's claims named by its `volumeClaimTemplates` are left out: the member creates them.
//! Empty names are skipped. Within a kind, names are sorted (Karmada's order is random), and kinds
//! come in the order ConfigMap, Secret, ServiceAccount, PersistentVolumeClaim.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use serde_json::Value;

use crate::Interpreter;
use crate::error::{AtObject, ObjectRef, Result};
use crate::object;

/// An object a workload depends on: Karmada's `config.karmada.io/v1alpha1`
/// `DependentObjectReference`, which customizations return too.
pub use karmada_apis::config::v1alpha1::DependentObjectReference;

impl Interpreter {
    /// The objects `object` depends on (Karmada's `GetDependencies`), for the dependencies
    /// distributor. `Ok(None)` when no rule knows the kind (Karmada's `HookEnabled` is false for
    /// `InterpretDependency`): the workload's dependencies are then not propagated. This is the
    /// one entry point; a customization for the kind goes in front of the native rules here.
    pub fn get_dependencies(
        &self,
        object: &Value,
    ) -> Result<Option<Vec<DependentObjectReference>>> {
        // A customization's rule comes first (customization > native, as in Karmada).
        if let Some(r) = self.layered_dependencies(object) {
            return r.map(Some);
        }
        native_dependencies(object)
    }
}

/// The native InterpretDependency rules (see the module docs); `Ok(None)` for other kinds.
pub fn native_dependencies(object: &Value) -> Result<Option<Vec<DependentObjectReference>>> {
    let id = ObjectRef::of(object);
    let namespace = id.namespace.as_str();
    let pod_spec_at = |path: &[&str]| -> Result<Vec<DependentObjectReference>> {
        let spec: PodSpec = decode_at(object, path, &id)?;
        Ok(spec.dependencies(namespace))
    };
    let deps = match (id.api_version.as_str(), id.kind.as_str()) {
        ("apps/v1", "Deployment" | "ReplicaSet" | "DaemonSet") | ("batch/v1", "Job") => {
            pod_spec_at(&["spec", "template", "spec"])?
        }
        ("apps/v1", "StatefulSet") => {
            let claims: Vec<ClaimTemplate> =
                decode_at(object, &["spec", "volumeClaimTemplates"], &id)?;
            let templated: BTreeSet<String> = claims
                .into_iter()
                .filter_map(|c| c.metadata.and_then(|m| m.name))
                .collect();
            let mut deps = pod_spec_at(&["spec", "template", "spec"])?;
            deps.retain(|d| d.kind != PVC || !templated.contains(&d.name));
            deps
        }
        ("batch/v1", "CronJob") => {
            pod_spec_at(&["spec", "jobTemplate", "spec", "template", "spec"])?
        }
        ("v1", "Pod") => pod_spec_at(&["spec"])?,
        ("networking.k8s.io/v1", "Ingress") => {
            let tls: Vec<IngressTls> = decode_at(object, &["spec", "tls"], &id)?;
            tls.into_iter()
                .map(|t| {
                    let name = t.secret_name.unwrap_or_default();
                    DependentObjectReference::named("v1", SECRET, namespace, &name)
                })
                .collect()
        }
        ("multicluster.x-k8s.io/v1alpha1", "ServiceImport") => {
            let derived = format!("derived-{}", id.name);
            vec![
                DependentObjectReference::named("v1", "Service", namespace, &derived),
                DependentObjectReference {
                    api_version: "discovery.k8s.io/v1".into(),
                    kind: "EndpointSlice".into(),
                    namespace: namespace.to_owned(),
                    name: String::new(),
                    label_selector: Some(LabelSelector {
                        match_labels: Some(BTreeMap::from([(
                            "kubernetes.io/service-name".to_owned(),
                            derived,
                        )])),
                        ..Default::default()
                    }),
                },
            ]
        }
        _ => return Ok(None),
    };
    Ok(Some(deps))
}

const CONFIG_MAP: &str = "ConfigMap";
const SECRET: &str = "Secret";
const SERVICE_ACCOUNT: &str = "ServiceAccount";
const PVC: &str = "PersistentVolumeClaim";

/// Decodes the field at `path` (absent or `null`: the type's default, as Go's typed conversion).
fn decode_at<T: for<'de> Deserialize<'de> + Default>(
    object: &Value,
    path: &[&str],
    id: &ObjectRef,
) -> Result<T> {
    match object::get(object, path).at(id)? {
        None => Ok(T::default()),
        Some(value) => object::decode(value, path).at(id),
    }
}

// The parts of the Kubernetes types the rules read. Every field is optional and unknown fields are
// ignored, as in Go's conversion to the typed object; a field of the wrong type is an error.

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PodSpec {
    init_containers: Option<Vec<Container>>,
    containers: Option<Vec<Container>>,
    ephemeral_containers: Option<Vec<Container>>,
    volumes: Option<Vec<Volume>>,
    image_pull_secrets: Option<Vec<NameRef>>,
    service_account_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Container {
    env_from: Option<Vec<EnvFromSource>>,
    env: Option<Vec<EnvVar>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvFromSource {
    config_map_ref: Option<NameRef>,
    secret_ref: Option<NameRef>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvVar {
    value_from: Option<EnvVarSource>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvVarSource {
    config_map_key_ref: Option<NameRef>,
    secret_key_ref: Option<NameRef>,
}

/// Any reference carrying a `name`.
#[derive(Deserialize)]
struct NameRef {
    name: Option<String>,
}

/// A volume plugin source that names a Secret in `secretRef`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SecretRefSource {
    secret_ref: Option<NameRef>,
}

/// A source that names a Secret in `secretName` (Secret volumes, Azure File).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SecretNameSource {
    secret_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CsiSource {
    node_publish_secret_ref: Option<NameRef>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaimSource {
    claim_name: Option<String>,
}

#[derive(Deserialize)]
struct ProjectedSource {
    sources: Option<Vec<Projection>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Projection {
    secret: Option<NameRef>,
    config_map: Option<NameRef>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Volume {
    azure_file: Option<SecretNameSource>,
    #[serde(rename = "cephfs")]
    ceph_fs: Option<SecretRefSource>,
    cinder: Option<SecretRefSource>,
    #[serde(rename = "flexVolume")]
    flex: Option<SecretRefSource>,
    projected: Option<ProjectedSource>,
    rbd: Option<SecretRefSource>,
    secret: Option<SecretNameSource>,
    #[serde(rename = "scaleIO")]
    scale_io: Option<SecretRefSource>,
    iscsi: Option<SecretRefSource>,
    storageos: Option<SecretRefSource>,
    csi: Option<CsiSource>,
    config_map: Option<NameRef>,
    persistent_volume_claim: Option<ClaimSource>,
}

#[derive(Deserialize)]
struct ClaimTemplate {
    metadata: Option<NameMeta>,
}

#[derive(Deserialize)]
struct NameMeta {
    name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IngressTls {
    secret_name: Option<String>,
}

fn name_of(r: &Option<NameRef>) -> Option<&str> {
    r.as_ref().and_then(|r| r.name.as_deref())
}

/// Where a volume's Secret comes from.
enum SecretSource<'a> {
    /// The Secrets of the projected sources.
    Projected,
    /// The one Secret a plugin names, if it names one.
    Named(Option<&'a str>),
}

fn by_ref(s: &Option<SecretRefSource>) -> Option<SecretSource<'_>> {
    s.as_ref()
        .map(|s| SecretSource::Named(name_of(&s.secret_ref)))
}

fn by_name(s: &Option<SecretNameSource>) -> Option<SecretSource<'_>> {
    s.as_ref()
        .map(|s| SecretSource::Named(s.secret_name.as_deref()))
}

impl Volume {
    /// The source a volume's Secret comes from: the first set source in Karmada's order decides,
    /// as a volume has one source.
    fn secret_source(&self) -> Option<SecretSource<'_>> {
        by_name(&self.azure_file)
            .or_else(|| by_ref(&self.ceph_fs))
            .or_else(|| by_ref(&self.cinder))
            .or_else(|| by_ref(&self.flex))
            .or_else(|| self.projected.as_ref().map(|_| SecretSource::Projected))
            .or_else(|| by_ref(&self.rbd))
            .or_else(|| by_name(&self.secret))
            .or_else(|| by_ref(&self.scale_io))
            .or_else(|| by_ref(&self.iscsi))
            .or_else(|| by_ref(&self.storageos))
            .or_else(|| {
                self.csi
                    .as_ref()
                    .map(|c| SecretSource::Named(name_of(&c.node_publish_secret_ref)))
            })
    }

    fn projections(&self) -> impl Iterator<Item = &Projection> {
        self.projected
            .iter()
            .flat_map(|p| p.sources.iter().flatten())
    }
}

impl PodSpec {
    fn all_containers(&self) -> impl Iterator<Item = &Container> {
        [
            &self.init_containers,
            &self.containers,
            &self.ephemeral_containers,
        ]
        .into_iter()
        .flat_map(|c| c.iter().flatten())
    }

    fn volumes(&self) -> impl Iterator<Item = &Volume> {
        self.volumes.iter().flatten()
    }

    fn config_maps(&self) -> BTreeSet<&str> {
        let mut out = BTreeSet::new();
        for c in self.all_containers() {
            out.extend(
                c.env_from
                    .iter()
                    .flatten()
                    .filter_map(|e| name_of(&e.config_map_ref)),
            );
            out.extend(c.env.iter().flatten().filter_map(|e| {
                e.value_from
                    .as_ref()
                    .and_then(|v| name_of(&v.config_map_key_ref))
            }));
        }
        for v in self.volumes() {
            if v.projected.is_some() {
                out.extend(v.projections().filter_map(|p| name_of(&p.config_map)));
            } else {
                out.extend(name_of(&v.config_map));
            }
        }
        out
    }

    fn secrets(&self) -> BTreeSet<&str> {
        let mut out: BTreeSet<&str> = self
            .image_pull_secrets
            .iter()
            .flatten()
            .filter_map(|r| r.name.as_deref())
            .collect();
        for c in self.all_containers() {
            out.extend(
                c.env_from
                    .iter()
                    .flatten()
                    .filter_map(|e| name_of(&e.secret_ref)),
            );
            out.extend(c.env.iter().flatten().filter_map(|e| {
                e.value_from
                    .as_ref()
                    .and_then(|v| name_of(&v.secret_key_ref))
            }));
        }
        for v in self.volumes() {
            match v.secret_source() {
                Some(SecretSource::Projected) => {
                    out.extend(v.projections().filter_map(|p| name_of(&p.secret)));
                }
                Some(SecretSource::Named(name)) => out.extend(name),
                None => {}
            }
        }
        out
    }

    fn claims(&self) -> BTreeSet<&str> {
        self.volumes()
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .filter_map(|c| c.claim_name.as_deref())
            .collect()
    }

    fn dependencies(&self, namespace: &str) -> Vec<DependentObjectReference> {
        let service_account = self
            .service_account_name
            .as_deref()
            .filter(|n| *n != "default");
        let groups = [
            (CONFIG_MAP, self.config_maps()),
            (SECRET, self.secrets()),
            (SERVICE_ACCOUNT, service_account.into_iter().collect()),
            (PVC, self.claims()),
        ];
        groups
            .into_iter()
            .flat_map(|(kind, names)| {
                names
                    .into_iter()
                    .filter(|n| !n.is_empty())
                    .map(move |n| DependentObjectReference::named("v1", kind, namespace, n))
            })
            .collect()
    }
}
