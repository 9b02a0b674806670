//! Joining members the way users do: through `karmadactl join` (the library entry point of the
//! real command, so no separate binary has to be built).

use testenv::ApiServer;

/// `karmadactl join <member> --kubeconfig=<host> --cluster-kubeconfig=<member> <extra>...`.
pub async fn join(host: &ApiServer, member: &ApiServer, extra: &[&str]) -> anyhow::Result<()> {
    let mut args = vec![
        "karmadactl".to_string(),
        "join".to_string(),
        member.name().to_string(),
        format!("--kubeconfig={}", host.kubeconfig_path().display()),
        format!(
            "--cluster-kubeconfig={}",
            member.kubeconfig_path().display()
        ),
    ];
    args.extend(extra.iter().map(ToString::to_string));
    karmadactl::run(args)
        .await
        .map_err(|e| e.context(format!("karmadactl join {}", member.name())))
}
