//! Bounded, read-only reads of an agent's SQLite session store (OpenCode, Kilo, Hermes
//! keep their sessions in one): [`read_rows`] runs one `SELECT` and returns its rows as
//! JSON objects. Behind the `sqlite` feature.
//!
//! The file is the user's and written by a running CLI: it is opened read-only (no file
//! is created, nothing written), waits a little while the CLI holds a write lock, and
//! the text read by one query is bounded.

use std::path::Path;
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde_json::{Map, Number, Value};

use crate::AdapterError;

/// How long a read waits while the CLI holds the database locked.
const BUSY_WAIT: Duration = Duration::from_secs(2);

/// The rows of `sql` on the database at `path`, each an object of its columns (integers
/// and reals as numbers, text as strings, blobs as null), at most `max_bytes` of text.
pub async fn read_rows(path: &Path, sql: &str, max_bytes: usize) -> Result<Vec<Value>, AdapterError> {
    let path = path.to_owned();
    let sql = sql.to_owned();
    tokio::task::spawn_blocking(move || read_rows_blocking(&path, &sql, max_bytes))
        .await
        .map_err(|e| AdapterError::agent(format!("reading the session store stopped: {e}")))?
}

fn read_rows_blocking(path: &Path, sql: &str, max_bytes: usize) -> Result<Vec<Value>, AdapterError> {
    let failed = |e: rusqlite::Error| AdapterError::agent(format!("reading {}: {e}", path.display()));
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let connection = Connection::open_with_flags(path, flags).map_err(failed)?;
    connection.busy_timeout(BUSY_WAIT).map_err(failed)?;
    let mut statement = connection.prepare(sql).map_err(failed)?;
    let names: Vec<String> = statement.column_names().map(str::to_owned).collect();
    let mut rows = statement.query([]).map_err(failed)?;
    let mut out = Vec::new();
    let mut bytes = 0usize;
    while let Some(row) = rows.next().map_err(failed)? {
        let mut object = Map::new();
        for (i, name) in names.iter().enumerate() {
            let value = match row.get_ref(i).map_err(failed)? {
                ValueRef::Null | ValueRef::Blob(_) => Value::Null,
                ValueRef::Integer(n) => Value::from(n),
                ValueRef::Real(x) => Number::from_f64(x).map_or(Value::Null, Value::Number),
                ValueRef::Text(text) => {
                    bytes += text.len();
                    Value::String(String::from_utf8_lossy(text).into_owned())
                }
            };
            object.insert(name.clone(), value);
        }
        if bytes > max_bytes {
            return Err(AdapterError::agent(format!("{} holds over {max_bytes} bytes for one query", path.display())));
        }
        out.push(Value::Object(object));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn database(dir: &Path) -> PathBuf {
        let path = dir.join("store.db");
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE session (id TEXT, title TEXT, time_updated INTEGER, data BLOB, score REAL);
             INSERT INTO session VALUES ('ses_1', 'first', 1700000000000, x'00ff', 0.5), ('ses_2', NULL, 2, NULL, NULL);",
        )
        .unwrap();
        path
    }

    #[tokio::test]
    async fn rows_come_back_as_objects_of_their_columns() {
        let dir = tempfile::tempdir().unwrap();
        let path = database(dir.path());
        let rows = read_rows(&path, "SELECT * FROM session ORDER BY id", 1024).await.unwrap();
        assert_eq!(
            rows,
            vec![
                serde_json::json!({"id": "ses_1", "title": "first", "time_updated": 1_700_000_000_000_i64, "data": null, "score": 0.5}),
                serde_json::json!({"id": "ses_2", "title": null, "time_updated": 2, "data": null, "score": null}),
            ]
        );
    }

    #[tokio::test]
    async fn a_read_never_writes_and_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = database(dir.path());
        let error = read_rows(&path, "DELETE FROM session", 1024).await.unwrap_err().to_string();
        assert!(error.contains("store.db") && error.contains("readonly"), "{error}");
        assert_eq!(read_rows(&path, "SELECT id FROM session", 1024).await.unwrap().len(), 2);
        let error = read_rows(&path, "SELECT id FROM absent", 1024).await.unwrap_err().to_string();
        assert!(error.contains("no such table"), "{error}");
        let missing = dir.path().join("missing.db");
        assert!(read_rows(&missing, "SELECT 1", 1024).await.is_err());
        assert!(!missing.exists(), "a read-only open creates no file");
    }

    #[tokio::test]
    async fn a_query_over_the_byte_bound_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = database(dir.path());
        let error = read_rows(&path, "SELECT title FROM session", 3).await.unwrap_err().to_string();
        assert!(error.contains("over 3 bytes"), "{error}");
    }
}
