//! `karmada-controller-manager`: runs the Karmada controllers against a host (Karmada) API server.

// jemalloc, so that --enable-pprof can serve heap profiles (karmada_process::profiling).
karmada_process::global_allocator!();

fn main() -> std::process::ExitCode {
    karmada_controller_manager::app::main()
}
