//! `karmadactl`: joins member clusters to, and removes them from, a karmada-rs control plane.
fn main() {
    eprintln!("karmadactl: not implemented yet");
    std::process::exit(1);
}
