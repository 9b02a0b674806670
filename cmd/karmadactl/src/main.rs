//! `karmadactl`: joins member clusters to, and removes them from, a karmada-rs control plane.

#[tokio::main]
async fn main() {
    if let Err(e) = karmadactl::run(std::env::args_os()).await {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
