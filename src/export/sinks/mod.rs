//! The stores an exporter writes to, behind one trait ([`Sink`]): each
//! store is a file of its own ([`postgres`], [`sqlite`], [`files`] for
//! `jsonl:` and `csv:`, [`exec`]), and [`Store`] parses the `--to` address
//! that picks one.
//!
//! A sink either commits a batch when [`Sink::write`] returns (the
//! databases, a command that exited 0), or holds what it wrote until
//! [`Sink::seal`] makes it durable under temporary names (files, renamed by
//! the exporter once Redis has acknowledged their items: see
//! `super::consumer`).

pub mod exec;
pub mod files;
pub mod postgres;
pub mod sqlite;

use std::path::PathBuf;

use async_trait::async_trait;

use super::schema::{Column, ColumnType, Row, Schema, Table};

/// Where `--to` says items go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Store {
    /// `postgres://…` or `postgresql://…`, as libpq reads it.
    Postgres(String),
    /// `sqlite:PATH`.
    Sqlite(PathBuf),
    /// `jsonl:DIR`: JSON Lines files per table.
    Jsonl(PathBuf),
    /// `csv:DIR`: CSV files per table.
    Csv(PathBuf),
    /// `exec:COMMAND`: batches of JSON lines to a command's standard input.
    Exec(String),
}

impl Store {
    /// The store `to` names.
    pub fn parse(to: &str) -> Result<Store, String> {
        let to = to.trim();
        let rest = |prefix: &str| to.strip_prefix(prefix).filter(|r| !r.is_empty());
        if to.starts_with("postgres://") || to.starts_with("postgresql://") {
            return Ok(Store::Postgres(to.to_string()));
        }
        if let Some(path) = rest("sqlite:") {
            return Ok(Store::Sqlite(PathBuf::from(path.trim_start_matches("//"))));
        }
        if let Some(dir) = rest("jsonl:") {
            return Ok(Store::Jsonl(PathBuf::from(dir)));
        }
        if let Some(dir) = rest("csv:") {
            return Ok(Store::Csv(PathBuf::from(dir)));
        }
        if let Some(command) = rest("exec:") {
            return Ok(Store::Exec(command.to_string()));
        }
        Err(format!(
            "`{}` is not a store crawlworker exports to: give postgres://USER@HOST:PORT/DB, sqlite:PATH, jsonl:DIR, csv:DIR or exec:COMMAND",
            shown_address(to)
        ))
    }

    /// The store for people: without a password.
    pub fn shown(&self) -> String {
        match self {
            Store::Postgres(url) => shown_address(url),
            Store::Sqlite(p) => format!("sqlite:{}", p.display()),
            Store::Jsonl(p) => format!("jsonl:{}", p.display()),
            Store::Csv(p) => format!("csv:{}", p.display()),
            Store::Exec(c) => format!("exec:{c}"),
        }
    }

    /// The kind of store, for the metrics' `store` label: `postgres`,
    /// `sqlite`, `jsonl`, `csv` or `exec`.
    pub fn kind(&self) -> &'static str {
        match self {
            Store::Postgres(_) => "postgres",
            Store::Sqlite(_) => "sqlite",
            Store::Jsonl(_) => "jsonl",
            Store::Csv(_) => "csv",
            Store::Exec(_) => "exec",
        }
    }

    /// Whether the address carries a password (`postgres://user:pw@…`).
    pub fn has_password(&self) -> bool {
        match self {
            Store::Postgres(url) => url::Url::parse(url).is_ok_and(|u| u.password().is_some()),
            _ => false,
        }
    }
}

/// An address without its password (and without its query, which may
/// hold one: `?password=…`).
pub fn shown_address(to: &str) -> String {
    match url::Url::parse(to) {
        Ok(mut u) if u.has_host() => {
            if u.password().is_some() {
                let _ = u.set_password(Some("***"));
            }
            u.set_query(None);
            u.to_string()
        }
        _ => to.split('?').next().unwrap_or_default().to_string(),
    }
}

/// Why a sink could not write.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The store is down or busy: wait, then write the batch again.
    #[error("{0}")]
    Unavailable(String),
    /// A person must act (a table missing without `--create`, a
    /// permission, a command that does not exist): the exporter stops.
    #[error("{0}")]
    Fatal(String),
}

/// A row the store refused, by its index in the batch, with the store's
/// message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub index: usize,
    pub reason: String,
}

/// A file written whole under a temporary name, to be given its final name
/// once its items are acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub temp: PathBuf,
    pub done: PathBuf,
}

/// A store.
#[async_trait]
pub trait Sink: Send {
    /// Connects (again) and checks the tables, creating or extending them
    /// when `create` says so (never dropping anything).
    async fn open(&mut self, schema: &Schema, create: bool) -> Result<(), SinkError>;

    /// Writes `rows`: committed when this returns, unless the sink
    /// [`holds`](Sink::holds) what it writes. The rows it refuses come back
    /// with the store's message; the others are written.
    async fn write(&mut self, rows: &[Row<'_>]) -> Result<Vec<Refusal>, SinkError>;

    /// Whether written rows wait for [`Sink::seal`].
    fn holds(&self) -> bool {
        false
    }

    /// Whether what is held should be sealed now (a file big or old
    /// enough).
    fn seal_due(&self) -> bool {
        false
    }

    /// Makes what is held durable under temporary names.
    async fn seal(&mut self) -> Result<Vec<Sealed>, SinkError> {
        Ok(Vec::new())
    }

    /// Forgets what is held (its items went to another exporter).
    async fn discard(&mut self) {}

    /// Whether the store answers now, for an idle exporter's metrics (a
    /// write says so otherwise).
    async fn check(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    /// The directory it writes files in, where killed exporters may have
    /// left temporary files (see `super::stale`).
    fn directory(&self) -> Option<&std::path::Path> {
        None
    }
}

/// How the sinks that need it behave: files' rotation and names, a
/// command's retries and time limit.
#[derive(Debug, Clone)]
pub struct SinkOptions {
    pub rotation: files::Rotation,
    /// Files: the exporter's id, whose tag goes in every file name.
    pub exporter: String,
    /// `exec:`: runs after a failed one before the items are dead-lettered.
    pub exec_retries: u32,
    /// `exec:`: the wait before the first run again (doubled each time).
    pub exec_backoff: std::time::Duration,
    /// `exec:`: a run still going after this is killed and counts as failed.
    pub exec_timeout: std::time::Duration,
}

/// The sink of `store`.
pub fn open(store: &Store, options: SinkOptions) -> Box<dyn Sink> {
    match store {
        Store::Postgres(url) => Box::new(postgres::Postgres::new(url.clone())),
        Store::Sqlite(path) => Box::new(sqlite::Sqlite::new(path.clone())),
        Store::Jsonl(dir) => Box::new(files::Files::new(
            dir.clone(),
            files::Format::Jsonl,
            options.rotation,
            &options.exporter,
        )),
        Store::Csv(dir) => Box::new(files::Files::new(
            dir.clone(),
            files::Format::Csv,
            options.rotation,
            &options.exporter,
        )),
        Store::Exec(command) => Box::new(exec::Exec::new(
            command.clone(),
            exec::Limits {
                retries: options.exec_retries,
                backoff: options.exec_backoff,
                timeout: options.exec_timeout,
            },
        )),
    }
}

/// The statements that make `schema`'s tables in `store` (PostgreSQL or
/// SQLite), for `--print-schema`.
pub fn schema_statements(store: &Store, schema: &Schema) -> Vec<String> {
    schema
        .tables
        .iter()
        .filter_map(|t| match store {
            Store::Postgres(_) => Some(postgres::DIALECT.create_table(t)),
            Store::Sqlite(_) => Some(sqlite::DIALECT.create_table(t)),
            _ => None,
        })
        .collect()
}

/// What differs between the SQL stores' table statements.
pub(super) struct Dialect {
    /// A name quoted as an identifier.
    pub ident: fn(&str) -> String,
    /// A column type's SQL type.
    pub sql_type: fn(ColumnType) -> &'static str,
    /// The words that add a column (`ADD COLUMN IF NOT EXISTS` where the
    /// store has them).
    pub add_column: &'static str,
}

impl Dialect {
    /// `CREATE TABLE` for `table`: its columns, the key's not null, and
    /// the key as primary key.
    pub fn create_table(&self, table: &Table) -> String {
        let ident = self.ident;
        let mut cols: Vec<String> = table
            .columns
            .iter()
            .map(|c| {
                let not_null = if table.is_key(&c.name) {
                    " NOT NULL"
                } else {
                    ""
                };
                format!("{} {}{not_null}", ident(&c.name), (self.sql_type)(c.ty))
            })
            .collect();
        let key: Vec<String> = table.key.iter().map(|k| ident(k)).collect();
        cols.push(format!("PRIMARY KEY ({})", key.join(", ")));
        format!(
            "CREATE TABLE IF NOT EXISTS {} ({})",
            ident(&table.name),
            cols.join(", ")
        )
    }

    /// `ON CONFLICT (key) DO …` of an upsert into `table`: a re-delivered
    /// item updates its row (its key's columns stay).
    pub fn on_conflict(&self, table: &Table) -> String {
        let ident = self.ident;
        let key: Vec<String> = table.key.iter().map(|k| ident(k)).collect();
        let updates: Vec<String> = table
            .columns
            .iter()
            .filter(|c| !table.is_key(&c.name))
            .map(|c| format!("{0} = EXCLUDED.{0}", ident(&c.name)))
            .collect();
        let action = if updates.is_empty() {
            "NOTHING".to_string()
        } else {
            format!("UPDATE SET {}", updates.join(", "))
        };
        format!("ON CONFLICT ({}) DO {action}", key.join(", "))
    }

    fn add_column(&self, table: &Table, c: &Column) -> String {
        format!(
            "ALTER TABLE {} {} {} {}",
            (self.ident)(&table.name),
            self.add_column,
            (self.ident)(&c.name),
            (self.sql_type)(c.ty)
        )
    }
}

/// The statements that make `table` whole in a store whose table has the
/// columns `have` (none: it has no such table): none when it has them
/// all; without `create`, the error that says what is missing, with
/// `hint` on how to make it.
pub(super) fn making_statements(
    table: &Table,
    have: &[String],
    create: bool,
    (shown, hint): (&str, &str),
    dialect: &Dialect,
) -> Result<Vec<String>, SinkError> {
    let missing: Vec<&Column> = table
        .columns
        .iter()
        .filter(|c| !have.contains(&c.name))
        .collect();
    if missing.is_empty() {
        return Ok(Vec::new());
    }
    if !create {
        let what = if have.is_empty() {
            format!("table {} does not exist", table.name)
        } else {
            let names: Vec<&str> = missing.iter().map(|c| c.name.as_str()).collect();
            format!("table {} has no column {}", table.name, names.join(", "))
        };
        return Err(SinkError::Fatal(format!(
            "{shown}: {what} (item type `{}`); run with --create to make it{hint}",
            table.item_type
        )));
    }
    Ok(if have.is_empty() {
        vec![dialect.create_table(table)]
    } else {
        missing
            .iter()
            .map(|c| dialect.add_column(table, c))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_parse_and_show_no_password() {
        let pg = Store::parse("postgres://app:s3cret@127.0.0.1:5432/crawl?password=x").unwrap();
        assert!(pg.has_password());
        let shown = pg.shown();
        assert!(
            !shown.contains("s3cret") && !shown.contains("password=x"),
            "{shown}"
        );
        assert!(shown.contains("127.0.0.1:5432/crawl"), "{shown}");
        assert_eq!(
            Store::parse("sqlite:/tmp/x.db").unwrap(),
            Store::Sqlite("/tmp/x.db".into())
        );
        assert_eq!(
            Store::parse("jsonl:out").unwrap(),
            Store::Jsonl("out".into())
        );
        assert_eq!(
            Store::parse("exec:python3 load.py").unwrap(),
            Store::Exec("python3 load.py".into())
        );
        let e = Store::parse("mysql://u:pw@h/db").unwrap_err();
        assert!(!e.contains("pw@"), "{e}");
    }
}
