//! Command-line flags, named as Karmada's `karmadactl join` / `unjoin` name them.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// karmadactl controls a karmada-rs control plane.
#[derive(Debug, Parser)]
#[command(name = "karmadactl", version)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Register a cluster to Karmada control plane with Push mode.
    Join(JoinArgs),
    /// Remove a cluster from Karmada control plane.
    Unjoin(UnjoinArgs),
    /// Register a cluster to Karmada control plane with Pull mode.
    Register(RegisterArgs),
    /// Remove a pull mode cluster from Karmada control plane.
    Unregister(UnregisterArgs),
    /// Manage bootstrap tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Mark cluster as unschedulable.
    Cordon(CordonArgs),
    /// Mark cluster as schedulable.
    Uncordon(CordonArgs),
    /// Update the taints on one or more clusters.
    ///
    /// A taint is `key=value:effect` (the value is optional); the effect must be NoSchedule,
    /// PreferNoSchedule or NoExecute. `key:effect-` removes the taint with that key and effect,
    /// `key-` every taint with that key. Example: `karmadactl taint clusters foo
    /// dedicated=special-user:NoSchedule`.
    Taint(TaintArgs),
    /// Output shell completion code for the specified shell (bash, zsh, fish, elvish or
    /// powershell).
    Completion(CompletionArgs),
    /// Print the version information.
    Version(VersionArgs),
    /// Validate, test and edit interpreter customization before applying it to the control
    /// plane.
    ///
    /// Examples: `karmadactl interpret -f customization.yml --check`; `karmadactl interpret -f
    /// customization.yml --operation reviseReplica --observed-file observed.yml
    /// --desired-replica 2`; `karmadactl interpret -f customization.yml --operation
    /// aggregateStatus --observed-file observed.yml --status-file status.yml`.
    Interpret(InterpretArgs),
    /// Promote resources from legacy clusters to Karmada control plane.
    ///
    /// Requires the cluster has been joined or registered. If the resource already exists in
    /// Karmada control plane, please edit PropagationPolicy and OverridePolicy to propagate it.
    /// Example: `karmadactl promote deployment nginx -n default -C cluster1 -d`.
    Promote(PromoteArgs),
    /// Read and steer the staged rollout of a workload (karmada-rs's own RolloutStrategy).
    ///
    /// Examples: `karmadactl rollout status deployment/web -n prod`; `karmadactl rollout approve
    /// deployment/web -n prod`; `karmadactl rollout rollback deployment/web -n prod`.
    Rollout(RolloutArgs),
}

/// `karmadactl rollout ACTION KIND/NAME -n NAMESPACE`.
#[derive(Debug, Args, Clone)]
pub struct RolloutArgs {
    /// What to do.
    #[arg(value_enum)]
    pub action: RolloutAction,
    /// The workload, `KIND/NAME` (e.g. `deployment/web`), or its Rollout's name.
    pub target: String,
    /// The workload's namespace (default `default`).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// For `approve`: the stage to approve (default: the stage waiting).
    #[arg(long)]
    pub stage: Option<String>,
    /// Control-plane connection.
    #[command(flatten)]
    pub control_plane: ControlPlaneArgs,
}

/// A `karmadactl rollout` action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RolloutAction {
    /// Print the stages and clusters.
    Status,
    /// Approve the stage waiting for an approval.
    Approve,
    /// Give no further cluster the new revision.
    Pause,
    /// Carry on after a pause.
    Resume,
    /// Return every cluster to the stable revision.
    Rollback,
}

/// `karmadactl promote <RESOURCE_TYPE> <RESOURCE_NAME> -n <NAME_SPACE> -C <CLUSTER_NAME>`.
#[derive(Debug, Args, Clone)]
pub struct PromoteArgs {
    /// The resource type (`deployment`, `deployments`, `deploy`, `deployment.v1.apps`, ...).
    pub resource_type: String,
    /// The resource name.
    pub name: String,
    /// Control-plane connection.
    #[command(flatten)]
    pub control_plane: ControlPlaneArgs,
    /// If present, the namespace scope for this CLI request.
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// The name of legacy cluster (eg -C=member1).
    #[arg(long, short = 'C', default_value = "")]
    pub cluster: String,
    /// Context name of legacy cluster in kubeconfig (default: the cluster name).
    #[arg(long)]
    pub cluster_context: Option<String>,
    /// Path of the legacy cluster's kubeconfig (default: the credentials of the Cluster object).
    #[arg(long)]
    pub cluster_kubeconfig: Option<PathBuf>,
    /// Promote resource with its dependencies automatically.
    #[arg(long, short = 'd', num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set)]
    pub dependencies: bool,
    /// Run the command in dry-run mode, without making any server requests.
    #[arg(long)]
    pub dry_run: bool,
    /// Automatically create a PropagationPolicy for namespace-scoped resources or create a
    /// ClusterPropagationPolicy for cluster-scoped resources.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_create_policy: bool,
    /// The name of the PropagationPolicy(or ClusterPropagationPolicy) that is automatically
    /// created after promotion (default: the resource name with a hash suffix).
    #[arg(long)]
    pub policy_name: Option<String>,
    /// Output format; prints the template and the policy instead of creating them. One of:
    /// json|yaml.
    #[arg(long, short = 'o', value_enum)]
    pub output: Option<PromoteOutput>,
}

/// `karmadactl promote -o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PromoteOutput {
    /// kubectl's JSON.
    Json,
    /// kubectl's YAML.
    Yaml,
}

/// `karmadactl interpret (-f FILENAME) (--operation OPERATION) [--ARGS VALUE]...`.
#[derive(Debug, Args, Clone, Default)]
pub struct InterpretArgs {
    /// Filename, directory, or `-` (stdin) of the customizations. Files need to be in either
    /// YAML or JSON format.
    #[arg(long, short = 'f')]
    pub filename: Vec<PathBuf>,
    /// Process the directory used in -f, --filename recursively.
    #[arg(long, short = 'R')]
    pub recursive: bool,
    /// The interpret operation to use. One of: (Retain,InterpretReplica,InterpretComponent,
    /// ReviseReplica,InterpretStatus,AggregateStatus,InterpretHealth,InterpretDependency)
    #[arg(long)]
    pub operation: Option<String>,
    /// Validates the given ResourceInterpreterCustomization configuration(s).
    #[arg(long)]
    pub check: bool,
    /// Edit customizations (not supported by this karmadactl).
    #[arg(long)]
    pub edit: bool,
    /// Show document of rules when editing (with --edit).
    #[arg(long)]
    pub show_doc: bool,
    /// Filename or directory of the resource to use as desiredObj argument in rule script.
    #[arg(long)]
    pub desired_file: Option<PathBuf>,
    /// Filename or directory of the resource to use as observedObj argument in rule script.
    #[arg(long)]
    pub observed_file: Option<PathBuf>,
    /// Filename, directory or `-` of the resources to use as statusItems argument in rule
    /// script.
    #[arg(long)]
    pub status_file: Option<PathBuf>,
    /// The desiredReplica argument in rule script.
    #[arg(long, default_value_t = 0)]
    pub desired_replica: i32,
}

/// `karmadactl version [-o json|yaml]`.
#[derive(Debug, Args, Clone)]
pub struct VersionArgs {
    /// Output format (karmada-rs extension; Karmada prints only the text form). One of:
    /// json|yaml.
    #[arg(long, short = 'o', value_enum)]
    pub output: Option<VersionOutput>,
}

/// `karmadactl version -o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VersionOutput {
    /// Indented JSON.
    Json,
    /// YAML.
    Yaml,
}

/// `karmadactl cordon CLUSTER` / `karmadactl uncordon CLUSTER`.
#[derive(Debug, Args, Clone)]
pub struct CordonArgs {
    /// Name of the cluster.
    pub cluster_name: String,
    /// Control-plane connection.
    #[command(flatten)]
    pub control_plane: ControlPlaneArgs,
    /// Run the command in dry-run mode, without making any server requests.
    #[arg(long)]
    pub dry_run: bool,
}

/// `karmadactl taint clusters NAME... KEY_1=VAL_1:TAINT_EFFECT_1 ...`.
#[derive(Debug, Args, Clone)]
pub struct TaintArgs {
    /// `cluster` (or `clusters`), the cluster names, then the taint changes.
    #[arg(required = true, value_name = "CLUSTER NAME... KEY=VAL:EFFECT")]
    pub args: Vec<String>,
    /// Control-plane connection.
    #[command(flatten)]
    pub control_plane: ControlPlaneArgs,
    /// If true, allow taints to be overwritten, otherwise reject taint updates that overwrite
    /// existing taints.
    #[arg(long)]
    pub overwrite: bool,
    /// Run the command in dry-run mode, without making any server requests.
    #[arg(long)]
    pub dry_run: bool,
}

/// `karmadactl completion SHELL`.
#[derive(Debug, Args, Clone)]
pub struct CompletionArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

/// `karmadactl token list`.
#[derive(Debug, Args, Clone)]
pub struct TokenListArgs {
    /// Control-plane connection.
    #[command(flatten)]
    pub control_plane: ControlPlaneArgs,
}

/// `karmadactl token delete [token-value] ...`.
#[derive(Debug, Args, Clone)]
pub struct TokenDeleteArgs {
    /// Tokens (`[a-z0-9]{6}.[a-z0-9]{16}`) or token IDs (`[a-z0-9]{6}`) to delete.
    pub tokens: Vec<String>,
    /// Control-plane connection.
    #[command(flatten)]
    pub control_plane: ControlPlaneArgs,
}

/// `karmadactl token …`.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create bootstrap tokens on the server.
    Create(TokenCreateArgs),
    /// List bootstrap tokens on the server.
    List(TokenListArgs),
    /// Delete bootstrap tokens on the server.
    Delete(TokenDeleteArgs),
}

/// `karmadactl token create`.
#[derive(Debug, Args, Clone)]
pub struct TokenCreateArgs {
    /// Control-plane connection.
    #[command(flatten)]
    pub control_plane: ControlPlaneArgs,
    /// Instead of printing only the token, print the full 'karmadactl register' flag needed to
    /// register the member cluster using the token.
    #[arg(long)]
    pub print_register_command: bool,
    /// The duration before the token is automatically deleted (e.g. 1s, 2m, 3h). If set to '0',
    /// the token will never expire.
    #[arg(long, value_parser = humantime_duration_or_zero, default_value = "24h")]
    pub ttl: Duration,
    /// Describes the ways in which this token can be used (comma-separated: signing,authentication).
    #[arg(long, value_delimiter = ',', default_values_t = ["signing".to_string(), "authentication".to_string()])]
    pub usages: Vec<String>,
    /// Extra groups that this token will authenticate as when used for authentication.
    #[arg(long, value_delimiter = ',', default_values_t = ["system:bootstrappers:karmada:default-cluster-token".to_string()])]
    pub groups: Vec<String>,
    /// A human friendly description of how this token is used.
    #[arg(long, default_value = "")]
    pub description: String,
}

/// `karmadactl register [karmada-apiserver-endpoint]`.
#[derive(Debug, Args, Clone)]
pub struct RegisterArgs {
    /// Address of the Karmada API server (`<host>:<port>`) from which info will be fetched.
    pub endpoint: String,
    /// Path to the kubeconfig file of member cluster.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Name of the cluster context in kubeconfig file.
    #[arg(long)]
    pub context: Option<String>,
    /// Namespace the karmada-agent component deployed.
    #[arg(long, short = 'n', default_value = "karmada-system")]
    pub namespace: String,
    /// The name of member cluster in the control plane; the cluster of current-context by default.
    #[arg(long, default_value = "")]
    pub cluster_name: String,
    /// Namespace in the control plane where member cluster secrets are stored.
    #[arg(long, default_value = "karmada-cluster")]
    pub cluster_namespace: String,
    /// Provider of the joining cluster.
    #[arg(long, default_value = "")]
    pub cluster_provider: String,
    /// The region of the joining cluster.
    #[arg(long, default_value = "")]
    pub cluster_region: String,
    /// The zones of the joining cluster (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub cluster_zones: Vec<String>,
    /// Rotate the agent's certificate when it is about to expire.
    #[arg(long)]
    pub enable_cert_rotation: bool,
    /// For token-based discovery, the token used to validate cluster information fetched from the
    /// API server.
    #[arg(long, default_value = "")]
    pub token: String,
    /// For token-based discovery, validate that the root CA public key matches this hash (format:
    /// "<type>:<value>").
    #[arg(long, value_delimiter = ',')]
    pub discovery_token_ca_cert_hash: Vec<String>,
    /// For token-based discovery, allow joining without --discovery-token-ca-cert-hash pinning.
    #[arg(long)]
    pub discovery_token_unsafe_skip_ca_verification: bool,
    /// The timeout to discovery karmada apiserver client.
    #[arg(long, value_parser = humantime_duration, default_value = "5m")]
    pub discovery_timeout: Duration,
    /// Karmada agent image.
    #[arg(long, default_value = concat!("ghcr.io/karmada-rs/karmada-controller-manager:", env!("CARGO_PKG_VERSION")))]
    pub karmada_agent_image: String,
    /// Karmada agent replicas.
    #[arg(long, default_value_t = 1)]
    pub karmada_agent_replicas: i32,
    /// The expiration time of certificate.
    #[arg(long, default_value_t = 86400 * 365)]
    pub cert_expiration_seconds: i32,
    /// Run the command in dry-run mode, without making any server requests.
    #[arg(long)]
    pub dry_run: bool,
    /// Address of the proxy server that is used to proxy to the cluster.
    #[arg(long, default_value = "")]
    pub proxy_server_address: String,
    /// Do not create the karmada-agent Deployment (karmada-rs extension: for an agent run as a
    /// process with the kubeconfig in Secret <namespace>/karmada-kubeconfig).
    #[arg(long)]
    pub skip_agent_deployment: bool,
}

/// `karmadactl unregister CLUSTER_NAME`.
#[derive(Debug, Args, Clone)]
pub struct UnregisterArgs {
    /// Name of the member cluster.
    pub cluster_name: String,
    /// KUBECONFIG file path to access unregistering member cluster, required.
    #[arg(long)]
    pub cluster_kubeconfig: PathBuf,
    /// Context in cluster-kubeconfig to access unregistering member cluster (default: current).
    #[arg(long)]
    pub cluster_context: Option<String>,
    /// Path of config to access karmada-apiserver (default: the agent's, from the member).
    #[arg(long)]
    pub karmada_config: Option<PathBuf>,
    /// Context in karmada-config to access karmada-apiserver (default: current).
    #[arg(long)]
    pub karmada_context: Option<String>,
    /// Namespace of the karmada-agent component deployed.
    #[arg(long, short = 'n', default_value = "karmada-system")]
    pub namespace: String,
    /// Deployment name of the karmada-agent component deployed.
    #[arg(long, default_value = "karmada-agent")]
    pub agent_name: String,
    /// Namespace in the control plane where member cluster secrets are stored.
    #[arg(long, default_value = "karmada-cluster")]
    pub cluster_namespace: String,
    /// How long to wait for the Works and the Cluster to be deleted.
    #[arg(long, value_parser = humantime_duration, default_value = "60s")]
    pub wait: Duration,
    /// Run the command in dry-run mode, without making any server requests.
    #[arg(long)]
    pub dry_run: bool,
}

/// Flags shared by join and unjoin: the control plane's kubeconfig and context.
#[derive(Debug, Args, Clone)]
pub struct ControlPlaneArgs {
    /// Path to the kubeconfig file to use for CLI requests (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The name of the kubeconfig context to use.
    #[arg(long = "karmada-context")]
    pub karmada_context: Option<String>,
}

impl ControlPlaneArgs {
    /// The control plane these flags name, without impersonation.
    pub async fn load(&self) -> anyhow::Result<crate::util::Target> {
        crate::util::load(
            "control plane",
            self.kubeconfig.as_deref(),
            self.karmada_context.as_deref(),
            None,
        )
        .await
    }
}

/// `karmadactl join CLUSTER_NAME --cluster-kubeconfig=<KUBECONFIG>`.
#[derive(Debug, Args, Clone)]
pub struct JoinArgs {
    /// Name of the member cluster.
    pub cluster_name: String,
    /// Control-plane connection.
    #[command(flatten)]
    pub control_plane: ControlPlaneArgs,
    /// Namespace in the control plane where member cluster secrets are stored.
    #[arg(long, default_value = "karmada-cluster")]
    pub cluster_namespace: String,
    /// Name of cluster context in kubeconfig. The current context is used by default.
    #[arg(long)]
    pub cluster_context: Option<String>,
    /// Path of the cluster's kubeconfig.
    #[arg(long)]
    pub cluster_kubeconfig: Option<PathBuf>,
    /// Provider of the joining cluster.
    #[arg(long, default_value = "")]
    pub cluster_provider: String,
    /// The region of the joining cluster.
    #[arg(long, default_value = "")]
    pub cluster_region: String,
    /// The zones of the joining cluster (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub cluster_zones: Vec<String>,
    /// Labels for the Cluster object, `key=value` (comma-separated; karmada-rs extension).
    #[arg(long, value_delimiter = ',')]
    pub cluster_labels: Vec<String>,
    /// Username to impersonate for the operation in karmada control plane.
    #[arg(long)]
    pub karmada_as: Option<String>,
    /// Group to impersonate for the operation in karmada control plane (repeatable).
    #[arg(long = "karmada-as-group")]
    pub karmada_as_group: Vec<String>,
    /// Run the command in dry-run mode, without making any changes.
    #[arg(long)]
    pub dry_run: bool,
    /// How long to wait for the member's token controller to fill the ServiceAccount token Secret
    /// before falling back to the TokenRequest API.
    #[arg(long, value_parser = humantime_duration, default_value = "15s")]
    pub token_wait: Duration,
    /// Lifetime of a token obtained through the TokenRequest API (fallback only).
    #[arg(long, value_parser = humantime_duration, default_value = "8760h")]
    pub token_request_expiration: Duration,
}

/// `karmadactl unjoin CLUSTER_NAME`.
#[derive(Debug, Args, Clone)]
pub struct UnjoinArgs {
    /// Name of the member cluster.
    pub cluster_name: String,
    /// Control-plane connection.
    #[command(flatten)]
    pub control_plane: ControlPlaneArgs,
    /// Namespace in the control plane where member cluster secrets are stored.
    #[arg(long, default_value = "karmada-cluster")]
    pub cluster_namespace: String,
    /// Context name of cluster in kubeconfig (default: the cluster name).
    #[arg(long)]
    pub cluster_context: Option<String>,
    /// Path of the cluster's kubeconfig; when given, the objects join created in the member are
    /// removed too.
    #[arg(long)]
    pub cluster_kubeconfig: Option<PathBuf>,
    /// If the cleanup does not finish within --wait, remove the finalizers of the cluster's Works
    /// and of the Cluster anyway (may leave resources behind in the member).
    #[arg(long)]
    pub force: bool,
    /// How long to wait for the Cluster to be cleaned up and deleted.
    #[arg(long, value_parser = humantime_duration, default_value = "60s")]
    pub wait: Duration,
    /// Run the command in dry-run mode, without making any changes.
    #[arg(long)]
    pub dry_run: bool,
}

/// Like [`humantime_duration`], also accepting `0` (no limit).
pub fn humantime_duration_or_zero(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    humantime_duration(s)
}

/// Parses Go-style durations: `90s`, `2m`, `1m30s`, `500ms`, `1h`.
pub fn humantime_duration(s: &str) -> Result<Duration, String> {
    let err = || format!("invalid duration {s:?} (e.g. 60s, 2m, 1m30s)");
    let mut total = Duration::ZERO;
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(err());
    }
    while !rest.is_empty() {
        let n_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        let (num, tail) = rest.split_at(n_end);
        let value: f64 = num.parse().map_err(|_| err())?;
        let u_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(u_end);
        let secs = match unit {
            "ms" => value / 1000.0,
            "s" => value,
            "m" => value * 60.0,
            "h" => value * 3600.0,
            _ => return Err(err()),
        };
        total += Duration::from_secs_f64(secs);
        rest = tail;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(humantime_duration("60s").unwrap(), Duration::from_secs(60));
        assert_eq!(
            humantime_duration("1m30s").unwrap(),
            Duration::from_secs(90)
        );
        assert_eq!(
            humantime_duration("500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert!(humantime_duration("5").is_err());
        assert!(humantime_duration("x").is_err());
    }

    #[test]
    fn parses_join_flags() {
        let cli = Cli::try_parse_from([
            "karmadactl",
            "join",
            "member1",
            "--kubeconfig=/k",
            "--karmada-context=karmada",
            "--cluster-kubeconfig=/m",
            "--cluster-context=m1",
            "--cluster-provider=aws",
            "--cluster-region=eu",
            "--cluster-zones=a,b",
        ])
        .unwrap();
        let Command::Join(j) = cli.command else {
            panic!("not join")
        };
        assert_eq!(j.cluster_name, "member1");
        assert_eq!(j.cluster_zones, ["a", "b"]);
        assert_eq!(j.cluster_namespace, "karmada-cluster");
        assert_eq!(j.control_plane.karmada_context.as_deref(), Some("karmada"));
    }
}
