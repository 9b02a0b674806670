//! `karmada-agent`: serves its member cluster to a Karmada control plane (Pull mode).

// jemalloc, so that --enable-pprof can serve heap profiles (karmada_process::profiling).
karmada_process::global_allocator!();

fn main() -> std::process::ExitCode {
    karmada_agent::app::main()
}
