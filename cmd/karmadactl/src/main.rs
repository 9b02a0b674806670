//! `karmadactl`: joins member clusters to, and removes them from, a karmada-rs control plane.

use clap::Parser;

#[tokio::main]
async fn main() {
    // clap prints help and usage errors itself (exit 0 and 2).
    let cli = karmadactl::Cli::parse();
    if let Err(e) = karmadactl::execute(cli).await {
        match e.downcast_ref::<karmadactl::CommandFailed>() {
            // The output printed already says what failed.
            Some(failed) if failed.message.is_empty() => {}
            Some(failed) => eprintln!("error: {}", failed.message),
            None => eprintln!("error: {e:#}"),
        }
        std::process::exit(1);
    }
}
