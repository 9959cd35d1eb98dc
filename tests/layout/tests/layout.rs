//! The workspace's layout, as the architecture review (issue 17) left it: a file is
//! one concept a reader can hold, and no two files of one crate import each other in a
//! circle. Both read the sources as text; a failure names the files.

use std::path::Path;

use terminull_layout_tests::{Crate, circles, sources, workspace};

/// The most lines a source file may have. Tests, fixtures and generated files are
/// exempt: a table of cases reads fine at any length.
const MAX_LINES: usize = 900;

/// Exempt from the line limit: tests, fixtures, generated or vendored output, and the
/// Python reference adapter, which is one self-contained, copy-pasteable file on purpose
/// (an adapter author starts from it; docs/adapter-protocol.md).
fn exempt(rel: &Path) -> bool {
    let s = rel.to_string_lossy();
    s == "examples/ext_adapter_example.py"
        || s.starts_with("tests/")
        || s.contains("/tests/")
        || s.ends_with("/tests.rs")
        || s.contains("/fixtures/")
        || s.starts_with("web/dist/")
        || s.contains("/benches/")
}

#[test]
fn no_source_file_passes_the_line_limit() {
    let root = workspace();
    let mut long = Vec::new();
    for file in sources(&root, &["rs", "js", "mjs", "py"]) {
        let rel = file.strip_prefix(&root).expect("under the workspace").to_path_buf();
        if exempt(&rel) {
            continue;
        }
        let lines = std::fs::read_to_string(&file).map(|t| t.lines().count()).unwrap_or(0);
        if lines > MAX_LINES {
            long.push(format!("{} ({lines} lines)", rel.display()));
        }
    }
    assert!(long.is_empty(), "split these along their seams (limit {MAX_LINES} lines):\n{}", long.join("\n"));
}

#[test]
fn no_files_of_a_crate_import_each_other_in_a_circle() {
    let root = workspace();
    let mut crates: Vec<_> = sources(&root, &["toml"])
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "Cargo.toml"))
        .filter_map(|manifest| manifest.parent().map(|d| d.join("src")))
        .filter(|src| src.is_dir())
        .collect();
    crates.sort();
    assert!(crates.len() > 20, "found only {} crates under {}", crates.len(), root.display());
    let mut found = Vec::new();
    for src in crates {
        let krate = Crate::read(&src);
        for circle in circles(&krate.uses()) {
            let names: Vec<String> = circle
                .iter()
                .map(|m| krate.modules[m].strip_prefix(&root).unwrap_or(&krate.modules[m]).display().to_string())
                .collect();
            found.push(format!("{} → {}", names.join(" → "), names[0]));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn the_path_reader_expands_use_groups_and_resolves_super() {
    let paths = terminull_layout_tests::paths_in(
        "use crate::a::{b, c::D};\n// use crate::commented::Out;\nfn f() { super::e::g(); let x = self::h::I; }",
    );
    let want: Vec<Vec<String>> =
        [vec!["crate", "a", "b"], vec!["crate", "a", "c", "D"], vec!["super", "e", "g"], vec!["self", "h", "I"]]
            .iter()
            .map(|p| p.iter().map(|s| s.to_string()).collect())
            .collect();
    assert_eq!(paths, want);
}

#[test]
fn a_circle_of_two_modules_is_found_once() {
    let m = |s: &str| vec![s.to_owned()];
    let graph = [(m("a"), [m("b")].into()), (m("b"), [m("a")].into()), (m("c"), [m("a")].into())].into();
    assert_eq!(circles(&graph), vec![vec![m("a"), m("b")]]);
}
