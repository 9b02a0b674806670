//! The version stamp `karmadactl version` prints: the same build script as the controller-manager
//! and agent (`pkg/process/build.rs`), so every binary of one build reports the same git version,
//! commit, tree state and reproducible build date.

#[path = "../../pkg/process/build.rs"]
mod stamp;

fn main() {
    stamp::main();
}
