//! Reads the workspace's Rust sources as text for the layout tests in `tests/`: which
//! files there are, how long each is, and which file of a crate uses which.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the workspace root exists")
}

/// Every file under `dir` (relative to the workspace) whose name ends with one of
/// `extensions`, skipping build output, installed packages and hidden folders.
pub fn sources(dir: &Path, extensions: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !(name.starts_with('.') || name == "target" || name == "node_modules") {
                    stack.push(path);
                }
            } else if extensions.iter().any(|e| name.ends_with(&format!(".{e}"))) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// A crate's module tree, file by file: `crate::a::b` → the file that holds it.
#[derive(Debug)]
pub struct Crate {
    /// `src/` of the crate.
    pub src: PathBuf,
    /// Module path (`["a", "b"]`, empty for the root) → file.
    pub modules: BTreeMap<Vec<String>, PathBuf>,
}

impl Crate {
    /// The modules under `src` (`lib.rs` as the root; `x.rs` or `x/mod.rs` as `x`).
    pub fn read(src: &Path) -> Self {
        let mut modules = BTreeMap::new();
        for file in sources(src, &["rs"]) {
            let rel = file.strip_prefix(src).expect("under src");
            let mut path: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
            let last = path.pop().expect("a file name");
            match last.as_str() {
                "lib.rs" | "main.rs" | "mod.rs" => {}
                other => path.push(other.trim_end_matches(".rs").to_owned()),
            }
            if path.first().is_some_and(|p| p == "bin") {
                continue; // a binary of its own, not a module of the library
            }
            // lib.rs wins over main.rs as the root.
            if path.is_empty() && last == "main.rs" && modules.contains_key(&path) {
                continue;
            }
            modules.insert(path, file);
        }
        Self { src: src.to_path_buf(), modules }
    }

    /// The module a path names: the longest known prefix of `path`.
    fn resolve(&self, path: &[String]) -> Option<&Vec<String>> {
        (0..=path.len()).rev().find_map(|n| self.modules.get_key_value(&path[..n]).map(|(k, _)| k))
    }

    /// Which module's file uses which other module (through `crate::…`, `super::…` or
    /// `self::…` paths anywhere in the file, test modules included).
    pub fn uses(&self) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
        let mut graph = BTreeMap::new();
        for (module, file) in &self.modules {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            let is_dir_module = file.ends_with("mod.rs") || file.ends_with("lib.rs") || file.ends_with("main.rs");
            let mut targets = BTreeSet::new();
            for path in paths_in(&text) {
                let mut base: Vec<String> = match path.first().map(String::as_str) {
                    Some("crate") => Vec::new(),
                    // In `a/b.rs` (module a::b), `super` is `a`; in `a/mod.rs` (module a), `super` is the parent of a.
                    Some("super") => module[..module.len().saturating_sub(1)].to_vec(),
                    Some("self") => module.clone(),
                    _ => continue,
                };
                let mut rest = &path[1..];
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                if let Some(target) = self.resolve(&base)
                    && target != module
                    // A module's own children are its parts, not its peers.
                    && !(is_dir_module && target.starts_with(module) && target.len() > module.len())
                {
                    targets.insert(target.clone());
                }
            }
            graph.insert(module.clone(), targets);
        }
        graph
    }
}

/// The `crate::…`, `super::…` and `self::…` paths in Rust source, with `use` groups
/// (`crate::a::{b, c::d}`) expanded; comments are skipped.
pub fn paths_in(text: &str) -> Vec<Vec<String>> {
    let code: String = text
        .lines()
        .map(|l| match l.trim_start().starts_with("//") {
            true => "",
            false => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let at_word_start =
            i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':');
        let head = ["crate::", "super::", "self::"].into_iter().find(|h| bytes[i..].starts_with(h.as_bytes()));
        if at_word_start && head.is_some() {
            let (paths, end) = expand(&code, i);
            out.extend(paths);
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// Expands the path starting at `start` (with one level of `{…}` groups, nested groups
/// taken by their first segment), returning the paths and where the path ends.
fn expand(code: &str, start: usize) -> (Vec<Vec<String>>, usize) {
    let bytes = code.as_bytes();
    let mut i = start;
    let mut prefix = Vec::new();
    loop {
        let seg_start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if i > seg_start {
            prefix.push(code[seg_start..i].to_owned());
        }
        if bytes[i..].starts_with(b"::{") {
            let open = i + 2;
            let mut depth = 0;
            let mut close = open;
            for (k, b) in bytes[open..].iter().enumerate() {
                match b {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            close = open + k;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let inner = &code[open + 1..close];
            let mut paths = Vec::new();
            for item in split_top(inner) {
                let segs: Vec<String> = item
                    .split("::")
                    .map(|s| s.trim().trim_start_matches('{').split([' ', ',', '}']).next().unwrap_or("").to_owned())
                    .take_while(|s| !s.is_empty() && s != "self" && s != "*")
                    .collect();
                let mut p = prefix.clone();
                p.extend(segs);
                paths.push(p);
            }
            return (paths, close + 1);
        }
        if bytes[i..].starts_with(b"::") {
            i += 2;
            continue;
        }
        return (vec![prefix], i);
    }
}

/// Splits a `use` group's inside at its top-level commas.
fn split_top(inner: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut from) = (0, 0);
    for (k, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&inner[from..k]);
                from = k + 1;
            }
            _ => {}
        }
    }
    out.push(&inner[from..]);
    out.into_iter().map(str::trim).filter(|s| !s.is_empty()).collect()
}

/// Every circle in `graph`, each as the modules on it (found by a depth-first search
/// from each module; each circle reported once, starting at its smallest module).
pub fn circles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    let mut found = BTreeSet::new();
    for start in graph.keys() {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        while let Some((at, trail)) = stack.pop() {
            for next in graph.get(&at).into_iter().flatten() {
                if next == start {
                    let mut circle = trail.clone();
                    let min = circle.iter().enumerate().min_by_key(|(_, m)| (*m).clone()).map(|(k, _)| k).unwrap_or(0);
                    circle.rotate_left(min);
                    found.insert(circle);
                } else if !trail.contains(next) && next > start {
                    let mut t = trail.clone();
                    t.push(next.clone());
                    stack.push((next.clone(), t));
                }
            }
        }
    }
    found.into_iter().collect()
}
