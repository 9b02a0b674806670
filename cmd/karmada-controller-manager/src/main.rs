//! `karmada-controller-manager`: runs the Karmada controllers against a host (Karmada) API server.

fn main() -> std::process::ExitCode {
    karmada_controller_manager::app::main()
}
