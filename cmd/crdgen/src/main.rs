//! `crdgen`: writes the CRDs in `crds/` from the Rust API types.
fn main() {
    eprintln!("crdgen: not implemented yet");
    std::process::exit(1);
}
