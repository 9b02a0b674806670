//! Controllers are peers: a controller module (a folder under `src/`, other than `common/`) never
//! names another controller module; what two controllers share lives in `common/`. This reads the
//! sources, so a new controller folder is covered without being listed here.

use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_controller_imports_another() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let controllers: Vec<String> = fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|name| name != "common")
        .collect();
    assert!(
        controllers.len() >= 9,
        "expected the controller folders under {}, found {controllers:?}",
        src.display()
    );
    let mut violations = Vec::new();
    for own in &controllers {
        let mut files = Vec::new();
        rust_files(&src.join(own), &mut files);
        for file in files {
            let text = fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                for other in controllers.iter().filter(|c| *c != own) {
                    if line.contains(&format!("crate::{other}::"))
                        || line.contains(&format!("crate::{other};"))
                        || line.contains(&format!("crate::{{{other}"))
                    {
                        violations.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "controllers import each other (move what they share to src/common/):\n{}",
        violations.join("\n")
    );
}
