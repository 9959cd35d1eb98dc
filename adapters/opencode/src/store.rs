//! Where OpenCode or Kilo keeps its SQLite session store: [`database_path`]. The hooks
//! read it with [`terminull_adapter_sdk::handoff::sqlite::read_rows`].
//!
//! The CLI's own `<cli> db "<SELECT>"` starts the whole CLI for every query (about 3 s
//! of CPU for Kilo 7.7, 4–5 s of wall time on an idle machine, over 30 s on a loaded
//! one), and a parked session's mirror queries every poll, so the handoff hooks read the
//! file themselves and use the CLI's command only for a store they cannot find (a
//! development channel's database, `<cli>-<channel>.db`).
//!
//! Where the CLI keeps it (OpenCode 1.18, Kilo 7.7): `$<PREFIX>_DB` when it is an
//! absolute path, `<data>/$<PREFIX>_DB` when it is relative, otherwise `<data>/<cli>.db`
//! for a release build, where `<data>` is `$XDG_DATA_HOME/<cli>` (default
//! `~/.local/share/<cli>`).

use std::path::{Path, PathBuf};

/// Where the CLI named `cli` (environment prefix `env_prefix`) keeps its database, from
/// `var` (the process environment in use, a map in tests). `None` without a home
/// directory or for an in-memory database.
pub fn database_path(cli: &str, env_prefix: &str, var: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let nonempty = |name: &str| var(name).filter(|v| !v.is_empty());
    let data = match nonempty("XDG_DATA_HOME") {
        Some(dir) if Path::new(&dir).is_absolute() => PathBuf::from(dir),
        _ => PathBuf::from(nonempty("HOME")?).join(".local/share"),
    }
    .join(cli);
    match nonempty(&format!("{env_prefix}_DB")) {
        Some(db) if db == ":memory:" => None,
        Some(db) => Some(data.join(db)),
        None => Some(data.join(format!("{cli}.db"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn the_database_is_found_where_the_cli_keeps_it() {
        type Vars<'a> = &'a [(&'a str, &'a str)];
        let cases: &[(Vars<'_>, Option<&str>)] = &[
            (&[("HOME", "/home/u")], Some("/home/u/.local/share/kilo/kilo.db")),
            (&[("HOME", "/home/u"), ("XDG_DATA_HOME", "/d")], Some("/d/kilo/kilo.db")),
            (&[("HOME", "/home/u"), ("XDG_DATA_HOME", "rel")], Some("/home/u/.local/share/kilo/kilo.db")),
            (&[("HOME", "/home/u"), ("KILO_DB", "/elsewhere/x.db")], Some("/elsewhere/x.db")),
            (&[("HOME", "/home/u"), ("KILO_DB", "mine.db")], Some("/home/u/.local/share/kilo/mine.db")),
            (&[("HOME", "/home/u"), ("KILO_DB", ":memory:")], None),
            (&[("HOME", "/home/u"), ("KILO_DB", "")], Some("/home/u/.local/share/kilo/kilo.db")),
            (&[], None),
        ];
        for (vars, want) in cases {
            assert_eq!(database_path("kilo", "KILO", env(vars)), want.map(PathBuf::from), "{vars:?}");
        }
    }
}
