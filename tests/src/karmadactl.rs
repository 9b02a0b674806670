//! Joining members the way users do: through `karmadactl join` (the library entry point of the
//! real command, so no separate binary has to be built).

use std::path::Path;

use testenv::ApiServer;

/// `karmadactl join <member> --kubeconfig=<host> --cluster-kubeconfig=<member> <extra>...`.
pub async fn join(host: &ApiServer, member: &ApiServer, extra: &[&str]) -> anyhow::Result<()> {
    join_with(host, member.name(), member.kubeconfig_path(), extra).await
}

/// `karmadactl join <name> --kubeconfig=<host> --cluster-kubeconfig=<kubeconfig> <extra>...`: a
/// member reached through a kubeconfig of the test's own (another server address, a `proxy-url`).
pub async fn join_with(
    host: &ApiServer,
    name: &str,
    kubeconfig: &Path,
    extra: &[&str],
) -> anyhow::Result<()> {
    let mut args = vec![
        "karmadactl".to_string(),
        "join".to_string(),
        name.to_string(),
        format!("--kubeconfig={}", host.kubeconfig_path().display()),
        format!("--cluster-kubeconfig={}", kubeconfig.display()),
    ];
    args.extend(extra.iter().map(ToString::to_string));
    karmadactl::run(args)
        .await
        .map_err(|e| e.context(format!("karmadactl join {name}")))
}
