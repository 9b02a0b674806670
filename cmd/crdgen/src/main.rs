//! `crdgen`: writes the CRDs in `crds/` from the Rust API types.
//!
//! Usage: `crdgen [--check] [--out-dir DIR]`. Without `--check` it (re)writes the files; with it, it
//! exits 1 and lists the differences when the directory is out of date.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("crdgen: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> anyhow::Result<ExitCode> {
    let mut check = false;
    let mut out_dir = crdgen::default_out_dir();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => check = true,
            "--out-dir" => match args.next() {
                Some(dir) => out_dir = PathBuf::from(dir),
                None => bail!("--out-dir needs a directory"),
            },
            "-h" | "--help" => {
                println!(
                    "usage: crdgen [--check] [--out-dir DIR]  (default DIR: the workspace's crds/)"
                );
                return Ok(ExitCode::SUCCESS);
            }
            other => bail!("unknown argument {other:?} (see --help)"),
        }
    }
    if check {
        let drift = crdgen::check(&out_dir)?;
        if drift.is_empty() {
            println!("crdgen: {} is up to date", out_dir.display());
            return Ok(ExitCode::SUCCESS);
        }
        eprint!("{drift}");
        eprintln!(
            "crdgen: {} is out of date; run `make crds`",
            out_dir.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    for name in crdgen::write(&out_dir)? {
        println!("wrote {}", out_dir.join(name).display());
    }
    Ok(ExitCode::SUCCESS)
}
