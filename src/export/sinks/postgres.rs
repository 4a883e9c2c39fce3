//! `postgres://…`: a table per item type, rows upserted by the type's key
//! in one transaction per batch. The batch goes to the server as one JSON
//! array (`jsonb_populate_recordset`), so the server converts each value to
//! its column's type and says which value does not fit. A batch the
//! server refuses is written again row by row, each in a savepoint: the
//! rows it refuses come back with its message, the others are committed.
//!
//! No TLS: the client speaks plain TCP (or a Unix socket), for a database
//! on the same host or a private network (see docs/export.md). The
//! password comes from the address (given through the environment or a
//! file) or `PGPASSWORD`, and appears in no message.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio_postgres::config::Host;
use tokio_postgres::types::Json;
use tokio_postgres::{Client, Config, NoTls};

use super::{making_statements, Dialect, Refusal, Sink, SinkError};
use crate::export::schema::{ColumnType, Row, Schema, Table};

/// How long connecting may take before the server counts as down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One PostgreSQL database.
pub struct Postgres {
    /// The address as given (with its password: never shown).
    url: String,
    /// The server and database, for messages.
    shown: String,
    client: Option<Client>,
    /// Each table's upsert statement, by table name.
    upserts: HashMap<String, String>,
}

impl Postgres {
    pub fn new(url: String) -> Postgres {
        let shown =
            Config::from_str(&url).map_or_else(|_| super::shown_address(&url), |c| where_is(&c));
        Postgres {
            url,
            shown,
            client: None,
            upserts: HashMap::new(),
        }
    }

    /// The connection, made (again) if there is none.
    async fn client(&mut self) -> Result<&mut Client, SinkError> {
        if self.client.as_ref().is_some_and(Client::is_closed) {
            self.client = None;
        }
        if self.client.is_none() {
            self.client = Some(self.connect().await?);
        }
        self.client
            .as_mut()
            .ok_or_else(|| SinkError::Unavailable(format!("{}: not connected", self.shown)))
    }

    async fn connect(&self) -> Result<Client, SinkError> {
        let mut config = Config::from_str(&self.url).map_err(|e| {
            SinkError::Fatal(format!(
                "{} is not a PostgreSQL address crawlworker can read: {}",
                super::shown_address(&self.url),
                redacted(&e.to_string(), &self.url)
            ))
        })?;
        if config.get_password().is_none() {
            if let Some(pw) = std::env::var_os("PGPASSWORD") {
                config.password(pw.as_encoded_bytes());
            }
        }
        config.connect_timeout(CONNECT_TIMEOUT);
        config.application_name("crawlworker export");
        let (client, connection) = config.connect(NoTls).await.map_err(|e| {
            let said = redacted(&e.to_string(), &self.url);
            match e.as_db_error().map(|d| d.code().code()) {
                // Authentication, a database or role that does not exist.
                Some(c) if c.starts_with("28") || c == "3D000" => {
                    SinkError::Fatal(format!("{}: cannot log in: {said}", self.shown))
                }
                _ => SinkError::Unavailable(format!("{}: cannot connect: {said}", self.shown)),
            }
        })?;
        tokio::spawn(async move {
            // Ends when the connection closes; the next use reconnects.
            let _ = connection.await;
        });
        Ok(client)
    }

    /// Makes `table` (with `create`) or checks it has every column.
    async fn ensure(&mut self, table: &Table, create: bool) -> Result<(), SinkError> {
        let shown = self.shown.clone();
        let client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| failure(&shown, "begin", &e))?;
        // One exporter at a time changes tables (several start together).
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext('crawlworker export'))",
            &[],
        )
        .await
        .map_err(|e| failure(&shown, "lock the tables", &e))?;
        let have: Vec<String> = tx
            .query(
                "SELECT column_name::text FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1",
                &[&table.name],
            )
            .await
            .map_err(|e| failure(&shown, "read the tables", &e))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let statements = making_statements(
            table,
            &have,
            create,
            (
                &shown,
                ", or make it yourself (`crawlworker export --print-schema` shows the statements)",
            ),
            &DIALECT,
        )?;
        for sql in &statements {
            tx.execute(sql.as_str(), &[]).await.map_err(|e| {
                failure(
                    &shown,
                    &format!("create or extend table {}", table.name),
                    &e,
                )
            })?;
        }
        tx.commit()
            .await
            .map_err(|e| failure(&shown, "commit", &e))?;
        self.upserts.insert(table.name.clone(), upsert(table));
        Ok(())
    }

    /// The whole batch in one transaction; `Ok(None)` when the server
    /// refused a row (then nothing of it was written).
    async fn write_whole(
        &mut self,
        groups: &[(&Table, Vec<usize>)],
        rows: &[Row<'_>],
    ) -> Result<Option<()>, SinkError> {
        let shown = self.shown.clone();
        let statements: Vec<String> = groups.iter().map(|(t, _)| self.statement(t)).collect();
        let client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| failure(&shown, "begin", &e))?;
        for ((table, indexes), sql) in groups.iter().zip(&statements) {
            let batch = Value::Array(
                indexes
                    .iter()
                    .map(|&i| columns_of(table, &rows[i]))
                    .collect(),
            );
            match tx.execute(sql.as_str(), &[&Json(&batch)]).await {
                Ok(_) => {}
                Err(e) if refused(&e) => return Ok(None),
                Err(e) => {
                    return Err(failure(
                        &shown,
                        &format!("write to table {}", table.name),
                        &e,
                    ))
                }
            }
        }
        tx.commit()
            .await
            .map_err(|e| failure(&shown, "commit", &e))?;
        Ok(Some(()))
    }

    /// The batch row by row, each in a savepoint, in one transaction: the
    /// rows the server refuses, with its message.
    async fn write_each(
        &mut self,
        groups: &[(&Table, Vec<usize>)],
        rows: &[Row<'_>],
    ) -> Result<Vec<Refusal>, SinkError> {
        let shown = self.shown.clone();
        let statements: Vec<String> = groups.iter().map(|(t, _)| self.statement(t)).collect();
        let client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| failure(&shown, "begin", &e))?;
        let mut refusals = Vec::new();
        for ((table, indexes), sql) in groups.iter().zip(&statements) {
            for &i in indexes {
                let one = Value::Array(vec![columns_of(table, &rows[i])]);
                let step = |e: tokio_postgres::Error| failure(&shown, "write a row", &e);
                tx.batch_execute("SAVEPOINT row").await.map_err(step)?;
                match tx.execute(sql.as_str(), &[&Json(&one)]).await {
                    Ok(_) => tx
                        .batch_execute("RELEASE SAVEPOINT row")
                        .await
                        .map_err(step)?,
                    Err(e) if refused(&e) => {
                        refusals.push(Refusal {
                            index: i,
                            reason: format!("table {}: {}", table.name, said(&e)),
                        });
                        tx.batch_execute("ROLLBACK TO SAVEPOINT row")
                            .await
                            .map_err(step)?;
                    }
                    Err(e) => {
                        return Err(failure(
                            &shown,
                            &format!("write to table {}", table.name),
                            &e,
                        ))
                    }
                }
            }
        }
        tx.commit()
            .await
            .map_err(|e| failure(&shown, "commit", &e))?;
        Ok(refusals)
    }

    fn statement(&self, table: &Table) -> String {
        self.upserts
            .get(&table.name)
            .cloned()
            .unwrap_or_else(|| upsert(table))
    }
}

#[async_trait]
impl Sink for Postgres {
    async fn open(&mut self, schema: &Schema, create: bool) -> Result<(), SinkError> {
        for table in &schema.tables {
            self.ensure(table, create).await?;
        }
        Ok(())
    }

    async fn write(&mut self, rows: &[Row<'_>]) -> Result<Vec<Refusal>, SinkError> {
        let groups = by_table(rows);
        let result = match self.write_whole(&groups, rows).await {
            Ok(Some(())) => Ok(Vec::new()),
            Ok(None) => self.write_each(&groups, rows).await,
            Err(e) => Err(e),
        };
        if matches!(result, Err(SinkError::Unavailable(_))) {
            // A fresh connection for the next try.
            self.client = None;
        }
        result
    }

    async fn check(&mut self) -> Result<(), SinkError> {
        let shown = self.shown.clone();
        let client = self.client().await?;
        let answer = tokio::time::timeout(CONNECT_TIMEOUT, client.simple_query("SELECT 1")).await;
        let result = match answer {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(failure(&shown, "reach the server", &e)),
            Err(_) => Err(SinkError::Unavailable(format!(
                "{shown}: no answer within {CONNECT_TIMEOUT:?}"
            ))),
        };
        if result.is_err() {
            self.client = None;
        }
        result
    }
}

/// The rows of each table (in the order tables first appear), each key
/// once: the last row of a key wins (one upsert may not touch a row twice).
fn by_table<'a>(rows: &[Row<'a>]) -> Vec<(&'a Table, Vec<usize>)> {
    let mut groups: Vec<(&Table, Vec<usize>)> = Vec::new();
    let mut last: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, row) in rows.iter().enumerate() {
        last.insert((row.table.name.as_str(), row.identity.as_str()), i);
    }
    for (i, row) in rows.iter().enumerate() {
        if last.get(&(row.table.name.as_str(), row.identity.as_str())) != Some(&i) {
            continue;
        }
        match groups.iter_mut().find(|(t, _)| t.name == row.table.name) {
            Some((_, list)) => list.push(i),
            None => groups.push((row.table, vec![i])),
        }
    }
    groups
}

/// A row's values of the table's columns, as a JSON object.
fn columns_of(table: &Table, row: &Row<'_>) -> Value {
    let mut out = serde_json::Map::new();
    for c in &table.columns {
        let v = row.values.get(&c.name).cloned().unwrap_or(Value::Null);
        out.insert(c.name.clone(), v);
    }
    Value::Object(out)
}

/// The statement that upserts a JSON array of rows into `table`.
fn upsert(table: &Table) -> String {
    let names: Vec<String> = table.columns.iter().map(|c| ident(&c.name)).collect();
    format!(
        "INSERT INTO {t} ({cols}) SELECT {cols} FROM jsonb_populate_recordset(NULL::{t}, $1::jsonb) {conflict}",
        t = ident(&table.name),
        cols = names.join(", "),
        conflict = DIALECT.on_conflict(table),
    )
}

fn sql_type(ty: ColumnType) -> &'static str {
    match ty {
        ColumnType::Text => "TEXT",
        ColumnType::Integer => "BIGINT",
        ColumnType::Float => "DOUBLE PRECISION",
        ColumnType::Boolean => "BOOLEAN",
        ColumnType::Timestamp => "TIMESTAMPTZ",
        ColumnType::Json => "JSONB",
    }
}

/// PostgreSQL's table statements.
pub(super) const DIALECT: Dialect = Dialect {
    ident,
    sql_type,
    add_column: "ADD COLUMN IF NOT EXISTS",
};

/// A quoted SQL identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Whether the server refused a row for what is in it (SQLSTATE class 22,
/// a data exception; 23, a constraint), not for the state of the server.
fn refused(e: &tokio_postgres::Error) -> bool {
    e.as_db_error()
        .is_some_and(|d| matches!(&d.code().code()[..2], "22" | "23"))
}

/// The server's message, with its detail.
fn said(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => match d.detail() {
            Some(detail) => format!("{} ({}; {detail})", d.message(), d.code().code()),
            None => format!("{} ({})", d.message(), d.code().code()),
        },
        None => e.to_string(),
    }
}

/// A failure of `what`: the server gone or busy (try again), or a
/// mistake a person must fix (a permission, an object that does not
/// exist, a key without its unique constraint).
fn failure(shown: &str, what: &str, e: &tokio_postgres::Error) -> SinkError {
    let message = format!("{shown}: cannot {what}: {}", said(e));
    let Some(db) = e.as_db_error() else {
        return SinkError::Unavailable(message);
    };
    match &db.code().code()[..2] {
        // Syntax or access rule (a missing table or column, no unique
        // constraint for the key, no permission), a role or database.
        "42" | "28" | "3D" => SinkError::Fatal(format!(
            "{message}; the table must have the columns and the primary key (or a unique constraint) of its item type's key: `crawlworker export --print-schema` shows them"
        )),
        _ => SinkError::Unavailable(message),
    }
}

/// Where a server is, for messages: hosts, ports, database and user.
fn where_is(c: &Config) -> String {
    let hosts: Vec<String> = c
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let port = c
                .get_ports()
                .get(i)
                .or(c.get_ports().first())
                .copied()
                .unwrap_or(5432);
            match h {
                Host::Tcp(name) => format!("{name}:{port}"),
                Host::Unix(path) => format!("{}:{port}", path.display()),
            }
        })
        .collect();
    format!(
        "PostgreSQL at {} (database {}, user {})",
        if hosts.is_empty() {
            "localhost:5432".to_string()
        } else {
            hosts.join(",")
        },
        c.get_dbname().unwrap_or("-"),
        c.get_user().unwrap_or("-"),
    )
}

/// `text` without the address's password, should a message repeat it.
fn redacted(text: &str, url: &str) -> String {
    match url::Url::parse(url)
        .ok()
        .and_then(|u| u.password().map(str::to_string))
    {
        Some(pw) if !pw.is_empty() => text.replace(&pw, "***"),
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::schema::{Column, Schema};

    #[test]
    fn statements_quote_names_and_upsert_by_the_key() {
        let spider = crate::spider::Spider::load(std::path::Path::new("spiders/bbs.toml")).unwrap();
        let schema = Schema::of(&spider);
        let post = &schema.tables[0];
        let create = DIALECT.create_table(post);
        assert!(
            create.starts_with("CREATE TABLE IF NOT EXISTS \"bbs_post\" ("),
            "{create}"
        );
        assert!(create.contains("\"post_id\" BIGINT NOT NULL"), "{create}");
        assert!(create.ends_with("PRIMARY KEY (\"post_id\"))"), "{create}");
        let up = upsert(post);
        assert!(
            up.contains("ON CONFLICT (\"post_id\") DO UPDATE SET \"kind\" = EXCLUDED.\"kind\""),
            "{up}"
        );
        assert_eq!(ident("a\"b"), "\"a\"\"b\"");
        let _ = Column {
            name: "x".into(),
            ty: ColumnType::Json,
        };
    }

    #[test]
    fn the_server_is_named_without_the_password() {
        let p = Postgres::new("postgres://app:s3cret@127.0.0.1:5433/crawl".into());
        assert_eq!(
            p.shown,
            "PostgreSQL at 127.0.0.1:5433 (database crawl, user app)"
        );
        assert_eq!(
            redacted("bad s3cret", "postgres://app:s3cret@h/d"),
            "bad ***"
        );
    }
}
