//! `karmada-agent`: serves its member cluster to a Karmada control plane (Pull mode).

fn main() -> std::process::ExitCode {
    karmada_agent::app::main()
}
