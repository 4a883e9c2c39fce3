//! `sqlite:PATH`: the same tables as PostgreSQL's in one SQLite file, for
//! one machine. Lists and objects are JSON text (SQLite's JSON functions
//! read them). A batch is one transaction; each row is upserted in a
//! savepoint, so a row SQLite refuses (a constraint) comes back with its
//! message and the others are committed. Several exporters may share the
//! file: a writer waits for another's transaction (`busy_timeout`).
//!
//! rusqlite is synchronous: the connection lives on a blocking thread's
//! turn ([`tokio::task::spawn_blocking`]) for each step.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::types::Value as Sql;
use rusqlite::Connection;
use serde_json::Value;

use super::{making_statements, Dialect, Refusal, Sink, SinkError};
use crate::export::schema::{Column, ColumnType, Row, Schema, Table};

/// How long a writer waits for another exporter's transaction.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// One SQLite file.
pub struct Sqlite {
    path: PathBuf,
    conn: Option<Arc<Mutex<Connection>>>,
}

/// A row as SQLite takes it: its table and values, in column order.
struct Prepared {
    index: usize,
    table: String,
    sql: String,
    values: Vec<Sql>,
}

impl Sqlite {
    pub fn new(path: PathBuf) -> Sqlite {
        Sqlite { path, conn: None }
    }

    fn shown(&self) -> String {
        format!("SQLite file {}", self.path.display())
    }

    fn connection(&mut self) -> Result<Arc<Mutex<Connection>>, SinkError> {
        if let Some(c) = &self.conn {
            return Ok(c.clone());
        }
        let conn = Connection::open(&self.path)
            .and_then(|c| c.busy_timeout(BUSY_TIMEOUT).map(|()| c))
            .map_err(|e| SinkError::Unavailable(format!("{}: cannot open: {e}", self.shown())))?;
        let conn = Arc::new(Mutex::new(conn));
        self.conn = Some(conn.clone());
        Ok(conn)
    }

    /// Runs `step` with the connection on a blocking thread.
    async fn run<T: Send + 'static>(
        &mut self,
        step: impl FnOnce(&mut Connection) -> Result<T, SinkError> + Send + 'static,
    ) -> Result<T, SinkError> {
        let conn = self.connection()?;
        let shown = self.shown();
        tokio::task::spawn_blocking(move || {
            let mut guard = conn
                .lock()
                .map_err(|_| SinkError::Fatal(format!("{shown}: a write panicked before")))?;
            step(&mut guard)
        })
        .await
        .map_err(|e| SinkError::Fatal(format!("the SQLite writer stopped: {e}")))?
    }
}

#[async_trait]
impl Sink for Sqlite {
    async fn open(&mut self, schema: &Schema, create: bool) -> Result<(), SinkError> {
        let tables = schema.tables.clone();
        let shown = self.shown();
        self.run(move |conn| {
            for table in &tables {
                ensure(conn, table, create, &shown)?;
            }
            Ok(())
        })
        .await
    }

    async fn write(&mut self, rows: &[Row<'_>]) -> Result<Vec<Refusal>, SinkError> {
        let prepared: Vec<Prepared> = rows
            .iter()
            .enumerate()
            .map(|(index, row)| Prepared {
                index,
                table: row.table.name.clone(),
                sql: upsert(row.table),
                values: row
                    .table
                    .columns
                    .iter()
                    .map(|c| value(c, row.values.get(&c.name)))
                    .collect(),
            })
            .collect();
        let shown = self.shown();
        self.run(move |conn| write(conn, &prepared, &shown)).await
    }
}

/// The batch in one transaction, each row in a savepoint.
fn write(conn: &mut Connection, rows: &[Prepared], shown: &str) -> Result<Vec<Refusal>, SinkError> {
    let fail = |what: &str, e: rusqlite::Error| failure(shown, what, e);
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| fail("begin", e))?;
    let mut refusals = Vec::new();
    for row in rows {
        tx.execute_batch("SAVEPOINT row")
            .map_err(|e| fail("write a row", e))?;
        let done = tx
            .prepare_cached(&row.sql)
            .and_then(|mut s| s.execute(rusqlite::params_from_iter(row.values.iter())));
        match done {
            Ok(_) => tx
                .execute_batch("RELEASE row")
                .map_err(|e| fail("write a row", e))?,
            Err(e) if refused(&e) => {
                refusals.push(Refusal {
                    index: row.index,
                    reason: format!("table {}: {e}", row.table),
                });
                tx.execute_batch("ROLLBACK TO row; RELEASE row")
                    .map_err(|e| fail("write a row", e))?;
            }
            Err(e) => return Err(fail(&format!("write to table {}", row.table), e)),
        }
    }
    tx.commit().map_err(|e| fail("commit", e))?;
    Ok(refusals)
}

/// Makes `table` (with `create`) or checks it has every column.
fn ensure(
    conn: &mut Connection,
    table: &Table,
    create: bool,
    shown: &str,
) -> Result<(), SinkError> {
    let fail = |what: &str, e: rusqlite::Error| failure(shown, what, e);
    let have: Vec<String> = conn
        .prepare(&format!(
            "SELECT name FROM pragma_table_info({})",
            literal(&table.name)
        ))
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| fail("read the tables", e))?;
    let statements = making_statements(table, &have, create, (shown, ""), &DIALECT)?;
    for sql in statements {
        conn.execute_batch(&sql)
            .map_err(|e| fail(&format!("create or extend table {}", table.name), e))?;
    }
    Ok(())
}

fn upsert(table: &Table) -> String {
    let names: Vec<String> = table.columns.iter().map(|c| ident(&c.name)).collect();
    let marks: Vec<&str> = table.columns.iter().map(|_| "?").collect();
    format!(
        "INSERT INTO {} ({}) VALUES ({}) {}",
        ident(&table.name),
        names.join(", "),
        marks.join(", "),
        DIALECT.on_conflict(table)
    )
}

/// A JSON value as SQLite stores it in `column`: JSON text for a JSON
/// column (and for a list or object anywhere), 1/0 for booleans.
fn value(column: &Column, v: Option<&Value>) -> Sql {
    match v {
        None | Some(Value::Null) => Sql::Null,
        Some(v) if column.ty == ColumnType::Json => Sql::Text(v.to_string()),
        Some(Value::Bool(b)) => Sql::Integer(i64::from(*b)),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(i) => Sql::Integer(i),
            None => Sql::Real(n.as_f64().unwrap_or(f64::NAN)),
        },
        Some(Value::String(s)) => Sql::Text(s.clone()),
        Some(other) => Sql::Text(other.to_string()),
    }
}

fn sql_type(ty: ColumnType) -> &'static str {
    match ty {
        ColumnType::Text | ColumnType::Timestamp | ColumnType::Json => "TEXT",
        ColumnType::Integer | ColumnType::Boolean => "INTEGER",
        ColumnType::Float => "REAL",
    }
}

/// SQLite's table statements.
pub(super) const DIALECT: Dialect = Dialect {
    ident,
    sql_type,
    add_column: "ADD COLUMN",
};

fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A row SQLite refuses for what is in it (a constraint).
fn refused(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation)
}

/// Busy, locked, or out of room: try again later; anything else (a read-only
/// file, a file that is not a database) needs a person.
fn failure(shown: &str, what: &str, e: rusqlite::Error) -> SinkError {
    use rusqlite::ErrorCode as C;
    let message = format!("{shown}: cannot {what}: {e}");
    match e.sqlite_error_code() {
        Some(C::DatabaseBusy | C::DatabaseLocked | C::DiskFull | C::SystemIoFailure) => {
            SinkError::Unavailable(message)
        }
        _ => SinkError::Fatal(message),
    }
}
