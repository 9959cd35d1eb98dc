//! Writes the protocol's JSON Schemas into a directory (default `docs/schema`), or
//! with `--check` reports which committed files differ from the Rust types.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut check = false;
    let mut dir = PathBuf::from("docs/schema");
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--check" => check = true,
            "-h" | "--help" => {
                eprintln!("usage: terminull-schema [--check] [DIR]   (DIR defaults to docs/schema)");
                return ExitCode::SUCCESS;
            }
            other => dir = PathBuf::from(other),
        }
    }
    let mut drifted = 0;
    for (rel, contents) in terminull_protocol::schema::generate() {
        let path = dir.join(&rel);
        let current = std::fs::read_to_string(&path).ok();
        if current.as_deref() == Some(contents.as_str()) {
            continue;
        }
        drifted += 1;
        if check {
            eprintln!("drift: {}", path.display());
            continue;
        }
        if let Some(parent) = path.parent()
            && let Err(e) = std::fs::create_dir_all(parent)
        {
            eprintln!("cannot create {}: {e}", parent.display());
            return ExitCode::FAILURE;
        }
        if let Err(e) = std::fs::write(&path, contents) {
            eprintln!("cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        eprintln!("wrote {}", path.display());
    }
    if check && drifted > 0 {
        eprintln!("{drifted} schema file(s) drifted; run: {}", terminull_protocol::schema::REGENERATE_COMMAND);
        return ExitCode::FAILURE;
    }
    eprintln!("schemas in {} match the Rust types", dir.display());
    ExitCode::SUCCESS
}
