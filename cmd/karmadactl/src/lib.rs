//! `karmadactl join` / `karmadactl unjoin`: register a Push-mode member cluster with the control
//! plane and remove it again, creating the same objects `karmadactl` of Karmada creates.
//! `karmadactl token create`, `register` and `unregister` do the same for Pull mode (a bootstrap
//! token, the agent's TLS bootstrap and its objects; see [`bootstrap`]).
//!
//! In the member: namespace `karmada-cluster` (label `karmada.io/system=true`), ServiceAccounts
//! `karmada-<cluster>` and `karmada-impersonator`, ClusterRole and ClusterRoleBinding
//! `karmada-controller-manager:karmada-<cluster>` (all verbs on all resources, GET on all
//! non-resource URLs). In the control plane: Secrets `<cluster>` (`token`, `caBundle`) and
//! `<cluster>-impersonator` (`token`) in `karmada-cluster`, owned by the Cluster object.
//!
//! Tokens: like Karmada, a `kubernetes.io/service-account-token` Secret is created for each
//! ServiceAccount and its token (filled in by the member's token controller) is used. Members that
//! do not run the token controller get no token within `--token-wait`; then a long-lived token
//! (`--token-request-expiration`, one year by default) is requested through the TokenRequest API
//! instead — it must be renewed (join again after unjoin, or update the Secret) before it expires.

pub mod bootstrap;
mod cli;
pub mod interpret;
mod join;
mod promote;
mod register;
mod rollout;
mod tabwriter;
mod taint;
mod token;
mod unjoin;
mod unregister;
mod util;
mod version;
mod yaml;

pub use cli::{
    Cli, Command, CompletionArgs, ControlPlaneArgs, CordonArgs, InterpretArgs, JoinArgs,
    RegisterArgs, RolloutAction, RolloutArgs, TaintArgs, TokenCommand, TokenCreateArgs,
    TokenDeleteArgs, TokenListArgs, UnjoinArgs, UnregisterArgs, VersionArgs, VersionOutput,
};
pub use karmada_process::version::{INFO as VERSION_INFO, Info as VersionInfo};
pub use register::{AGENT_RESTRICTION, RbacResources, agent_restriction, ensure_agent_restriction};
pub use taint::UNSCHEDULABLE_TAINT_KEY;
pub use util::CommandFailed;

use std::ffi::OsString;

use clap::Parser;

/// Parses `args` (the program name first) and runs the command.
pub async fn run<I, T>(args: I) -> anyhow::Result<()>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    execute(Cli::try_parse_from(args)?).await
}

/// `karmadactl join <name>` with its defaults, for a member given as kubeconfig YAML (its current
/// context) and a control plane given as a client: what Karmada's Cluster API detector runs for a
/// provisioned Cluster API cluster. Fails like `join` does, e.g. when the name is already taken, and
/// refuses a kubeconfig that would run a command or read a local file
/// ([`util::refuse_outside_references`]).
pub async fn join_from_kubeconfig(
    host: kube::Client,
    name: &str,
    member_kubeconfig: &str,
) -> anyhow::Result<()> {
    let Command::Join(args) = Cli::try_parse_from(["karmadactl", "join", name])?.command else {
        anyhow::bail!("internal error: `karmadactl join {name}` did not parse as a join");
    };
    util::validate_cluster_name(name)?;
    let origin = format!("member cluster {name} (Cluster API kubeconfig Secret)");
    let kubeconfig = kube::config::Kubeconfig::from_yaml(member_kubeconfig)
        .map_err(|e| anyhow::anyhow!("{origin}: invalid kubeconfig: {e}"))?;
    util::refuse_outside_references(&kubeconfig, &origin)?;
    let member = util::target_from(kubeconfig, origin, None, None).await?;
    let host = util::Target {
        client: host,
        ca_pem: None,
        server: String::new(),
        insecure: false,
        proxy_url: None,
        origin: "control plane".to_owned(),
    };
    join::join_targets(&host, &member, &args, Default::default()).await?;
    Ok(())
}

/// `karmadactl token create`: creates a bootstrap token and returns what the command prints.
pub async fn create_token(args: TokenCreateArgs) -> anyhow::Result<String> {
    token::create(args).await
}

/// Runs an already parsed command line, returning what it prints on stdout (the commands that
/// print progress while they run, like join, print it themselves).
pub async fn output(cli: Cli) -> anyhow::Result<String> {
    Ok(match cli.command {
        Command::Token(TokenCommand::Create(a)) => token::create(a).await?,
        Command::Token(TokenCommand::List(a)) => token::list(a).await?,
        Command::Token(TokenCommand::Delete(a)) => token::delete(a).await?.join("\n"),
        Command::Cordon(a) => taint::cordon(a, true).await?,
        Command::Uncordon(a) => taint::cordon(a, false).await?,
        Command::Taint(a) => taint::taint(a).await?.join("\n"),
        Command::Completion(a) => {
            use clap::CommandFactory;
            let mut buf = Vec::new();
            clap_complete::generate(a.shell, &mut Cli::command(), "karmadactl", &mut buf);
            String::from_utf8(buf)?
        }
        Command::Version(a) => version::run(&a)?,
        Command::Interpret(a) => interpret::run(&a)?,
        Command::Promote(a) => promote::run(a).await?,
        Command::Rollout(a) => rollout::run(a).await?,
        Command::Join(a) => join::run(a).await.map(|()| String::new())?,
        Command::Unjoin(a) => unjoin::run(a).await.map(|()| String::new())?,
        Command::Register(a) => register::run(a).await.map(|()| String::new())?,
        Command::Unregister(a) => unregister::run(a).await.map(|()| String::new())?,
    })
}

/// [`output`] for `args` (the program name first).
pub async fn run_output<I, T>(args: I) -> anyhow::Result<String>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    output(Cli::try_parse_from(args)?).await
}

/// Runs an already parsed command line.
pub async fn execute(cli: Cli) -> anyhow::Result<()> {
    let out = match output(cli).await {
        Ok(out) => out,
        Err(e) => {
            if let Some(failed) = e.downcast_ref::<CommandFailed>() {
                print!("{}", failed.stdout);
            }
            return Err(e);
        }
    };
    if !out.is_empty() {
        println!("{}", out.trim_end_matches('\n'));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// A Cluster API kubeconfig Secret whose user runs a command is refused before anything reads
    /// it: the command never runs (the client points nowhere; nothing is sent).
    #[tokio::test]
    async fn a_secret_kubeconfig_never_runs_its_exec_plugin() {
        let marker = std::env::temp_dir().join(format!("karmadactl-exec-{}", std::process::id()));
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             contexts: [{{name: c, context: {{cluster: m, user: u}}}}]\n\
             clusters: [{{name: m, cluster: {{server: 'https://127.0.0.1:1'}}}}]\n\
             users: [{{name: u, user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, \
             command: touch, args: ['{}']}}}}}}]\n",
            marker.display()
        );
        let host =
            kube::Client::try_from(kube::Config::new("https://127.0.0.1:1".parse().unwrap()))
                .unwrap();
        let err = super::join_from_kubeconfig(host, "m", &kubeconfig)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("exec plugin"), "{err}");
        assert!(!marker.exists(), "the exec plugin ran");
    }
}
