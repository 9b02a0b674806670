//! `karmada-controller-manager`: runs the Karmada controllers against a host (Karmada) API server.
fn main() {
    eprintln!("karmada-controller-manager: not implemented yet");
    std::process::exit(1);
}
