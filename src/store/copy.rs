//! `ctxgate migrate --to postgres://…`: copies a SQLite store into a PostgreSQL database, so a
//! deployment can move without losing its history.
//!
//! Both sides are migrated to this build's schema first; then every table of the SQLite file is
//! copied in foreign-key order with its ids, and each identity sequence is moved past the
//! largest copied id. The tables are read from SQLite itself (`pragma_table_list`,
//! `pragma_table_info`), not from a list kept here, so a column a later migration adds is
//! copied too, or reported when PostgreSQL lacks it, never dropped. Not copied: full-text index
//! data (the FTS5 table and its shadow tables, and `archive_index_state`); PostgreSQL's
//! `messages.tsv` is a generated column, computed from each copied text.
//!
//! The copy is one PostgreSQL transaction reading one SQLite snapshot: interrupted, it leaves the
//! target as it was. Running it again is safe: a row whose primary key the target already has
//! is compared with the source and skipped when equal. A row that differs means the target holds
//! other data (or the source changed since the last copy); that is an error naming the table,
//! the row and the column, and nothing is written. Rows the target holds beyond the source's
//! are left alone and counted in the report.
//!
//! PostgreSQL text cannot hold NUL: as the PostgreSQL store does on every write, each NUL in a
//! text becomes U+FFFD, and in JSON columns an escaped `\u0000` inside strings does too.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgRow};
use sqlx::sqlite::{SqliteConnectOptions, SqliteRow};
use sqlx::{
    ConnectOptions, Connection, PgConnection, Postgres, QueryBuilder, Row, SqliteConnection,
    TypeInfo, ValueRef,
};

use super::open::display_url;
use super::postgres::{self, PgStore};
use super::sqlite::SqliteStore;
use crate::config::StoreSettings;

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/postgres");

/// Derived tables the target rebuilds itself (besides FTS5 virtual and shadow tables, which are
/// recognised by their kind), and bookkeeping that is not data.
const NOT_COPIED: &[&str] = &["archive_index_state", "_sqlx_migrations"];

/// Text columns holding JSON: a NUL escaped inside their strings is replaced as well.
const JSON_COLUMNS: &[(&str, &str)] = &[
    ("messages", "audience"),
    ("messages", "actions"),
    ("messages", "meta"),
    ("tasks", "actions"),
    ("tasks", "context"),
    ("outbox", "meta"),
    ("schedules", "spec"),
];

/// Rows per INSERT (fewer for wide tables: a statement takes at most 65,535 parameters).
const BATCH_ROWS: usize = 1_000;
const MAX_PARAMS: usize = 65_535;
/// Progress lines per table are at most this frequent (plus one when the table is done).
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What a copy did: printed by `ctxgate migrate --to` at the end.
#[derive(Debug)]
pub struct CopyReport {
    pub source: String,
    pub target: String,
    pub tables: Vec<TableReport>,
    /// Tables left out because the target rebuilds them.
    pub skipped: Vec<String>,
    /// Sequences moved: (table, the next id it hands out).
    pub sequences: Vec<(String, i64)>,
}

#[derive(Debug)]
pub struct TableReport {
    pub table: String,
    /// Rows in the source.
    pub rows: u64,
    /// Rows written by this run.
    pub copied: u64,
    /// Rows the target already held, equal to the source's.
    pub present: u64,
    /// Rows in the target afterwards.
    pub target_rows: u64,
}

impl fmt::Display for CopyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "copied {} into {}", self.source, self.target)?;
        for t in &self.tables {
            write!(
                f,
                "{}: {} rows, {} copied, {} already there",
                t.table, t.rows, t.copied, t.present
            )?;
            if t.target_rows > t.rows {
                write!(
                    f,
                    " (the target holds {} other rows)",
                    t.target_rows - t.rows
                )?;
            }
            writeln!(f)?;
        }
        for (table, next) in &self.sequences {
            writeln!(f, "next {table} id: {next}")?;
        }
        if !self.skipped.is_empty() {
            writeln!(
                f,
                "not copied (rebuilt by PostgreSQL): {}",
                self.skipped.join(", ")
            )?;
        }
        Ok(())
    }
}

/// Copies the SQLite store `source` names into the PostgreSQL database at `target_url`,
/// writing progress lines to `progress`.
pub async fn sqlite_to_postgres(
    source: &StoreSettings,
    target_url: &str,
    progress: &mut impl Write,
) -> anyhow::Result<CopyReport> {
    let source_name = display_url(&source.url);
    let target_name = display_url(target_url);
    if postgres::is_postgres_url(&source.url) {
        bail!(
            "the configured store ({source_name}) is PostgreSQL already; `migrate --to` copies a \
             SQLite store (store.url = \"sqlite://…\") into PostgreSQL"
        );
    }
    if !postgres::is_postgres_url(target_url) {
        bail!(
            "--to must name a PostgreSQL database (postgres://USER:PASSWORD@HOST/DB), not {target_name}"
        );
    }
    let mut src = open_source(source).await?;
    let mut target = open_target(source, target_url, &target_name).await?;
    let copied = copy_all(&mut src, &mut target, progress).await;
    let _ = target.close().await;
    let _ = src.close().await;
    let (tables, skipped, sequences) = copied?;
    Ok(CopyReport {
        source: source_name,
        target: target_name,
        tables,
        skipped,
        sequences,
    })
}

/// The source must exist (a wrong path would otherwise "copy" a new, empty store); it is
/// migrated to this build's schema and read through a connection of its own.
async fn open_source(settings: &StoreSettings) -> anyhow::Result<SqliteConnection> {
    let name = display_url(&settings.url);
    let options = SqliteConnectOptions::from_str(&settings.url)
        .with_context(|| format!("store.url {name} is not a SQLite URL"))?
        .busy_timeout(settings.busy_timeout)
        .disable_statement_logging();
    let file = options.get_filename();
    if settings.url.contains(":memory:") || settings.url.contains("mode=memory") {
        bail!("the configured store is in memory ({name}): there is nothing to copy");
    }
    if !file.exists() {
        bail!(
            "the SQLite store {} does not exist (check store.url and the working directory)",
            file.display()
        );
    }
    let mut conn = options
        .connect()
        .await
        .with_context(|| format!("cannot open the SQLite store {name}"))?;
    let tracked: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table'
                        AND name = '_sqlx_migrations')",
    )
    .fetch_one(&mut conn)
    .await
    .with_context(|| format!("cannot read the SQLite store {name}"))?;
    let applied: Vec<i64> = if tracked {
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success = 1")
            .fetch_all(&mut conn)
            .await
            .with_context(|| format!("cannot read the migrations of the SQLite store {name}"))?
    } else {
        Vec::new()
    };
    refuse_newer(
        &applied,
        &SQLITE_MIGRATIONS,
        &format!("the SQLite store {name}"),
    )?;
    let store = SqliteStore::connect(settings)
        .await
        .with_context(|| format!("cannot open the SQLite store {name}"))?;
    let migrated = store.migrate().await;
    store.close().await;
    migrated.with_context(|| format!("cannot migrate the SQLite store {name}"))?;
    Ok(conn)
}

/// The connection the copy writes through: made directly (so that an unreachable server is
/// reported at once, not after a pool's retries) and without statement logging (a slow batch
/// would log a statement with thousands of parameters). Refuses a newer schema, then migrates.
async fn open_target(
    settings: &StoreSettings,
    url: &str,
    name: &str,
) -> anyhow::Result<PgConnection> {
    let options = PgConnectOptions::from_str(url)
        .map_err(|e| anyhow!("--to {name} is not a valid PostgreSQL URL: {e}"))?
        .application_name("ctxgate migrate --to")
        .disable_statement_logging();
    let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, options.connect())
        .await
        .map_err(|_| anyhow!("cannot connect to the target {name}: no answer within 10 s"))?
        .with_context(|| format!("cannot connect to the target {name}"))?;
    let tracked: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(&mut conn)
        .await
        .with_context(|| format!("cannot read the target {name}"))?;
    let applied: Vec<i64> = if tracked {
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
            .fetch_all(&mut conn)
            .await
            .with_context(|| format!("cannot read the migrations of the target {name}"))?
    } else {
        Vec::new()
    };
    refuse_newer(
        &applied,
        &POSTGRES_MIGRATIONS,
        &format!("the target {name}"),
    )?;
    let store = PgStore::connect(url, settings)
        .await
        .with_context(|| format!("cannot connect to the target {name}"))?;
    let migrated = store.migrate().await;
    store.close().await;
    migrated.with_context(|| format!("cannot migrate the target {name}"))?;
    Ok(conn)
}

fn refuse_newer(applied: &[i64], known: &Migrator, what: &str) -> anyhow::Result<()> {
    let ours: HashSet<i64> = known.iter().map(|m| m.version).collect();
    let newer: Vec<String> = applied
        .iter()
        .filter(|v| !ours.contains(v))
        .map(i64::to_string)
        .collect();
    if newer.is_empty() {
        return Ok(());
    }
    bail!(
        "{what} has schema migration(s) {} that this ctxgate build does not know (it knows up to \
         {}): it was migrated by a newer version; run `migrate --to` with that version",
        newer.join(", "),
        ours.iter().max().copied().unwrap_or(0)
    )
}

type Copied = (Vec<TableReport>, Vec<String>, Vec<(String, i64)>);

async fn copy_all(
    src: &mut SqliteConnection,
    target: &mut PgConnection,
    progress: &mut impl Write,
) -> anyhow::Result<Copied> {
    // One snapshot of the source: a read transaction, begun by the first query in it.
    let mut read = src.begin().await?;
    let (plans, skipped) = plan(&mut read, target).await?;
    let mut tx = target.begin().await?;
    let mut reports = Vec::with_capacity(plans.len());
    for table in &plans {
        reports.push(copy_table(&mut read, &mut tx, table, progress).await?);
    }
    let sequences = advance_sequences(&mut tx, &plans).await?;
    tx.commit()
        .await
        .context("cannot commit the copy to the target")?;
    let _ = read.rollback().await;
    for r in reports.iter().filter(|r| r.copied > 0) {
        // Fresh statistics for the planner after a bulk load; the copy is done either way.
        let analyzed = sqlx::query(&format!("ANALYZE {}", ident(&r.table)))
            .execute(&mut *target)
            .await;
        if let Err(e) = analyzed {
            let _ = writeln!(progress, "{}: copied, but ANALYZE failed: {e}", r.table);
        }
    }
    Ok((reports, skipped, sequences))
}

// --- the plan: tables, columns and their types ----------------------------------------------

/// What PostgreSQL stores in a column, as far as a copy is concerned.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Int8,
    Int4,
    Int2,
    Bool,
    Float8,
    Text,
    Bytes,
}

impl Kind {
    fn of(pg_type: &str) -> Option<Self> {
        Some(match pg_type {
            "bigint" => Self::Int8,
            "integer" => Self::Int4,
            "smallint" => Self::Int2,
            "boolean" => Self::Bool,
            "double precision" => Self::Float8,
            "text" | "character varying" => Self::Text,
            "bytea" => Self::Bytes,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Int8 => "bigint",
            Self::Int4 => "integer",
            Self::Int2 => "smallint",
            Self::Bool => "boolean",
            Self::Float8 => "double precision",
            Self::Text => "text",
            Self::Bytes => "bytea",
        }
    }

    /// Whether values of a SQLite column declared `declared` fit (SQLite's affinity rules).
    fn holds(self, declared: &str) -> bool {
        let t = declared.to_ascii_uppercase();
        let int = matches!(self, Self::Int8 | Self::Int4 | Self::Int2 | Self::Bool);
        if t.contains("INT") {
            int
        } else if t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") {
            self == Self::Text
        } else if t.contains("BLOB") || t.is_empty() {
            self == Self::Bytes
        } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
            self == Self::Float8
        } else {
            int || self == Self::Float8
        }
    }
}

struct Column {
    name: String,
    kind: Kind,
    json: bool,
}

struct TablePlan {
    name: String,
    columns: Vec<Column>,
    /// Positions in `columns` of the primary key.
    key: Vec<usize>,
    /// Whether an inserted column is an identity column (needs `OVERRIDING SYSTEM VALUE` when
    /// it is `GENERATED ALWAYS`).
    identity: bool,
}

struct PgColumn {
    data_type: String,
    required: bool,
    generated: bool,
    identity: bool,
}

/// The tables to copy, in foreign-key order, checked against the target's columns; and the
/// names of those left out.
async fn plan(
    src: &mut SqliteConnection,
    target: &mut PgConnection,
) -> anyhow::Result<(Vec<TablePlan>, Vec<String>)> {
    let tables: Vec<(String, String, bool)> = sqlx::query_as(
        "SELECT m.name, l.type, l.wr FROM sqlite_master m
         JOIN pragma_table_list l ON l.name = m.name AND l.schema = 'main'
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
         ORDER BY m.rowid",
    )
    .fetch_all(&mut *src)
    .await
    .context("cannot list the SQLite tables")?;
    let mut pg: HashMap<String, HashMap<String, PgColumn>> = HashMap::new();
    let rows: Vec<(String, String, String, bool, bool, bool, bool)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text, data_type::text,
                is_nullable = 'NO', column_default IS NOT NULL,
                is_generated <> 'NEVER', is_identity = 'YES'
         FROM information_schema.columns WHERE table_schema = current_schema()",
    )
    .fetch_all(&mut *target)
    .await
    .context("cannot read the target's columns")?;
    for (table, column, data_type, not_null, default, generated, identity) in rows {
        pg.entry(table).or_default().insert(
            column,
            PgColumn {
                data_type,
                required: not_null && !default && !generated && !identity,
                generated,
                identity,
            },
        );
    }

    let mut skipped = Vec::new();
    let mut plans = Vec::new();
    let mut references: HashMap<String, Vec<String>> = HashMap::new();
    for (name, kind, without_rowid) in tables {
        match kind.as_str() {
            "shadow" => continue,
            "virtual" => {
                skipped.push(name);
                continue;
            }
            _ if NOT_COPIED.contains(&name.as_str()) => {
                if name != "_sqlx_migrations" {
                    skipped.push(name);
                }
                continue;
            }
            _ => {}
        }
        if without_rowid {
            bail!("table {name}: WITHOUT ROWID tables cannot be copied");
        }
        let target_columns = pg.get(&name).ok_or_else(|| {
            anyhow!("table {name} exists in the SQLite store but not in the target database")
        })?;
        plans.push(table_plan(&mut *src, &name, target_columns).await?);
        let refs: Vec<String> =
            sqlx::query_scalar("SELECT DISTINCT \"table\" FROM pragma_foreign_key_list(?1)")
                .bind(&name)
                .fetch_all(&mut *src)
                .await?;
        references.insert(name, refs);
    }
    Ok((in_key_order(plans, &references)?, skipped))
}

async fn table_plan(
    src: &mut SqliteConnection,
    table: &str,
    target: &HashMap<String, PgColumn>,
) -> anyhow::Result<TablePlan> {
    let info: Vec<(String, String, i64)> =
        sqlx::query_as("SELECT name, type, pk FROM pragma_table_info(?1) ORDER BY cid")
            .bind(table)
            .fetch_all(&mut *src)
            .await?;
    let mut columns = Vec::with_capacity(info.len());
    let mut key = Vec::new();
    let mut identity = false;
    for (name, declared, pk) in &info {
        let pg = target.get(name).ok_or_else(|| {
            anyhow!(
                "table {table}: the target has no column {name}; the SQLite store has it, so \
                 copying would lose its data"
            )
        })?;
        if pg.generated {
            bail!("table {table}: column {name} is generated in the target and cannot be copied");
        }
        let kind = Kind::of(&pg.data_type)
            .filter(|k| k.holds(declared))
            .ok_or_else(|| {
                anyhow!(
                    "table {table}: column {name} is {declared} in SQLite but {} in the target; \
                     the copy cannot convert it",
                    pg.data_type
                )
            })?;
        identity |= pg.identity;
        if *pk > 0 {
            key.push((*pk, columns.len()));
        }
        columns.push(Column {
            name: name.clone(),
            kind,
            json: JSON_COLUMNS.contains(&(table, name.as_str())),
        });
    }
    if let Some((missing, _)) = target
        .iter()
        .find(|(name, c)| c.required && !info.iter().any(|(n, ..)| n == *name))
    {
        bail!("table {table}: the target requires a column {missing} that the SQLite store lacks");
    }
    if key.is_empty() {
        bail!("table {table} has no primary key: rows cannot be matched on a second run");
    }
    key.sort();
    Ok(TablePlan {
        name: table.to_owned(),
        columns,
        key: key.into_iter().map(|(_, at)| at).collect(),
        identity,
    })
}

/// Referenced tables first (references to itself aside: rows go in id order, and a row refers
/// to an earlier one); otherwise in the order the tables were created.
fn in_key_order(
    mut pending: Vec<TablePlan>,
    references: &HashMap<String, Vec<String>>,
) -> anyhow::Result<Vec<TablePlan>> {
    let names: HashSet<String> = pending.iter().map(|p| p.name.clone()).collect();
    let mut placed: HashSet<String> = HashSet::new();
    let mut ordered = Vec::with_capacity(pending.len());
    while !pending.is_empty() {
        let ready = pending.iter().position(|p| {
            references
                .get(&p.name)
                .into_iter()
                .flatten()
                .all(|r| r == &p.name || placed.contains(r) || !names.contains(r))
        });
        let Some(at) = ready else {
            let left: Vec<&str> = pending.iter().map(|p| p.name.as_str()).collect();
            bail!(
                "the foreign keys of tables {} form a cycle",
                left.join(", ")
            );
        };
        let next = pending.remove(at);
        placed.insert(next.name.clone());
        ordered.push(next);
    }
    Ok(ordered)
}

// --- values -----------------------------------------------------------------------------------

/// One value as PostgreSQL stores it (typed even when NULL, so that the parameter's type fits
/// the column). Floats compare by their bits: a copy must round-trip exactly.
#[derive(Debug, Clone)]
enum Value {
    Int(Option<i64>),
    Bool(Option<bool>),
    Float(Option<f64>),
    Text(Option<String>),
    Bytes(Option<Vec<u8>>),
}

impl Value {
    fn null(kind: Kind) -> Self {
        match kind {
            Kind::Int8 | Kind::Int4 | Kind::Int2 => Self::Int(None),
            Kind::Bool => Self::Bool(None),
            Kind::Float8 => Self::Float(None),
            Kind::Text => Self::Text(None),
            Kind::Bytes => Self::Bytes(None),
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Int(a), Self::Int(b)) => a == b,
            (Self::Bool(a), Self::Bool(b)) => a == b,
            (Self::Float(a), Self::Float(b)) => a.map(f64::to_bits) == b.map(f64::to_bits),
            (Self::Text(a), Self::Text(b)) => a == b,
            (Self::Bytes(a), Self::Bytes(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Value {}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Self::Int(v) => v.hash(state),
            Self::Bool(v) => v.hash(state),
            Self::Float(v) => v.map(f64::to_bits).hash(state),
            Self::Text(v) => v.hash(state),
            Self::Bytes(v) => v.hash(state),
        }
    }
}

/// The value of SQLite column `i` of `row` for a PostgreSQL column of `column.kind`; an error
/// names what the column holds.
fn from_sqlite(row: &SqliteRow, i: usize, column: &Column) -> Result<Value, String> {
    let raw = row.try_get_raw(i).map_err(|e| e.to_string())?;
    if raw.is_null() {
        return Ok(Value::null(column.kind));
    }
    let stored = raw.type_info().name().to_owned();
    let get_err = |e: sqlx::Error| e.to_string();
    let value = match (column.kind, stored.as_str()) {
        (Kind::Int8 | Kind::Int4 | Kind::Int2, "INTEGER") => {
            let v: i64 = row.try_get_unchecked(i).map_err(get_err)?;
            let fits = match column.kind {
                Kind::Int4 => i32::try_from(v).is_ok(),
                Kind::Int2 => i16::try_from(v).is_ok(),
                _ => true,
            };
            if !fits {
                return Err(format!("{v} is out of range for the target column"));
            }
            Value::Int(Some(v))
        }
        (Kind::Bool, "INTEGER") => match row.try_get_unchecked::<i64, _>(i).map_err(get_err)? {
            0 => Value::Bool(Some(false)),
            1 => Value::Bool(Some(true)),
            v => return Err(format!("{v} is neither 0 nor 1 (the target is boolean)")),
        },
        (Kind::Float8, "REAL" | "INTEGER") => {
            Value::Float(Some(row.try_get_unchecked(i).map_err(get_err)?))
        }
        (Kind::Text, "TEXT") => {
            let text: String = row.try_get_unchecked(i).map_err(get_err)?;
            Value::Text(Some(if column.json {
                json_nul_free(text)
            } else {
                nul_free(text)
            }))
        }
        (Kind::Bytes, "BLOB" | "TEXT") => {
            Value::Bytes(Some(row.try_get_unchecked(i).map_err(get_err)?))
        }
        (kind, stored) => {
            return Err(format!(
                "holds {stored} where the target has {}",
                kind.name()
            ));
        }
    };
    Ok(value)
}

fn from_postgres(row: &PgRow, i: usize, kind: Kind) -> Result<Value, sqlx::Error> {
    Ok(match kind {
        Kind::Int8 => Value::Int(row.try_get(i)?),
        Kind::Int4 => Value::Int(row.try_get::<Option<i32>, _>(i)?.map(i64::from)),
        Kind::Int2 => Value::Int(row.try_get::<Option<i16>, _>(i)?.map(i64::from)),
        Kind::Bool => Value::Bool(row.try_get(i)?),
        Kind::Float8 => Value::Float(row.try_get(i)?),
        Kind::Text => Value::Text(row.try_get(i)?),
        Kind::Bytes => Value::Bytes(row.try_get(i)?),
    })
}

fn push_value(b: &mut sqlx::query_builder::Separated<'_, '_, Postgres, &str>, v: Value) {
    match v {
        Value::Int(v) => b.push_bind(v),
        Value::Bool(v) => b.push_bind(v),
        Value::Float(v) => b.push_bind(v),
        Value::Text(v) => b.push_bind(v),
        Value::Bytes(v) => b.push_bind(v),
    };
}

/// Each NUL replaced by U+FFFD, as the PostgreSQL store stores text.
fn nul_free(s: String) -> String {
    if s.contains('\0') {
        s.replace('\0', "\u{FFFD}")
    } else {
        s
    }
}

/// [`nul_free`] for JSON text, also inside its strings and keys (`\u0000`), which PostgreSQL's
/// JSON functions refuse. Text that is not JSON is only made [`nul_free`].
fn json_nul_free(s: String) -> String {
    if !s.contains("\\u0000") {
        return nul_free(s);
    }
    match serde_json::from_str::<serde_json::Value>(&s) {
        Ok(mut value) => {
            replace_nul(&mut value);
            value.to_string()
        }
        Err(_) => nul_free(s),
    }
}

fn replace_nul(value: &mut serde_json::Value) {
    use serde_json::Value as J;
    match value {
        J::String(s) => *s = nul_free(std::mem::take(s)),
        J::Array(items) => items.iter_mut().for_each(replace_nul),
        J::Object(map) => {
            let entries = std::mem::take(map);
            for (k, mut v) in entries {
                replace_nul(&mut v);
                map.insert(nul_free(k), v);
            }
        }
        _ => {}
    }
}

fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

// --- copying ----------------------------------------------------------------------------------

async fn copy_table(
    src: &mut SqliteConnection,
    tx: &mut PgConnection,
    table: &TablePlan,
    progress: &mut impl Write,
) -> anyhow::Result<TableReport> {
    let name = &table.name;
    let list = table
        .columns
        .iter()
        .map(|c| ident(&c.name))
        .collect::<Vec<_>>()
        .join(", ");
    let count = format!("SELECT COUNT(*) FROM {}", ident(name));
    let total: i64 = sqlx::query_scalar(&count).fetch_one(&mut *src).await?;
    // Nothing to compare with in a table that is empty in the target (and stays so but for
    // this transaction): the common first run skips the look-ups.
    let empty: bool = sqlx::query_scalar::<_, i64>(&count)
        .fetch_one(&mut *tx)
        .await?
        == 0;
    let read = format!(
        "SELECT rowid, {list} FROM {} WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
        ident(name)
    );
    let batch = BATCH_ROWS.min(MAX_PARAMS / table.columns.len().max(1));
    let mut report = TableReport {
        table: name.clone(),
        rows: total as u64,
        copied: 0,
        present: 0,
        target_rows: 0,
    };
    let mut after = i64::MIN;
    let mut shown = Instant::now();
    loop {
        let rows = sqlx::query(&read)
            .bind(after)
            .bind(batch as i64)
            .fetch_all(&mut *src)
            .await
            .with_context(|| format!("cannot read table {name} from the SQLite store"))?;
        let Some(last) = rows.last() else { break };
        after = last.try_get(0)?;
        let mut values = Vec::with_capacity(rows.len());
        for row in &rows {
            let rowid: i64 = row.try_get(0)?;
            let mut v = Vec::with_capacity(table.columns.len());
            for (i, column) in table.columns.iter().enumerate() {
                v.push(from_sqlite(row, i + 1, column).map_err(|why| {
                    anyhow!("table {name}, row {rowid}, column {}: {why}", column.name)
                })?);
            }
            values.push(v);
        }
        let fresh = if empty {
            values
        } else {
            skip_present(tx, table, values, &mut report).await?
        };
        insert(tx, table, &list, fresh, &mut report).await?;
        if shown.elapsed() >= PROGRESS_EVERY {
            shown = Instant::now();
            let _ = writeln!(
                progress,
                "{name}: {}/{total} rows",
                report.copied + report.present
            );
        }
    }
    let _ = writeln!(
        progress,
        "{name}: {}/{total} rows",
        report.copied + report.present
    );
    let held: i64 = sqlx::query_scalar(&count).fetch_one(&mut *tx).await?;
    report.target_rows = held as u64;
    Ok(report)
}

/// The rows whose key the target does not hold yet. A held row must equal the source's.
async fn skip_present(
    tx: &mut PgConnection,
    table: &TablePlan,
    rows: Vec<Vec<Value>>,
    report: &mut TableReport,
) -> anyhow::Result<Vec<Vec<Value>>> {
    let key_of =
        |row: &[Value]| -> Vec<Value> { table.key.iter().map(|&k| row[k].clone()).collect() };
    let key_list = table
        .key
        .iter()
        .map(|&k| ident(&table.columns[k].name))
        .collect::<Vec<_>>()
        .join(", ");
    let mut q = QueryBuilder::<Postgres>::new("SELECT ");
    q.push(
        table
            .columns
            .iter()
            .map(|c| ident(&c.name))
            .collect::<Vec<_>>()
            .join(", "),
    );
    q.push(format!(
        " FROM {} WHERE ({key_list}) IN (",
        ident(&table.name)
    ));
    q.push_values(rows.iter(), |mut b, row| {
        for v in key_of(row) {
            push_value(&mut b, v);
        }
    });
    q.push(")");
    let held = q
        .build()
        .fetch_all(&mut *tx)
        .await
        .with_context(|| format!("cannot read table {} from the target", table.name))?;
    if held.is_empty() {
        return Ok(rows);
    }
    let mut there: HashMap<Vec<Value>, Vec<Value>> = HashMap::with_capacity(held.len());
    for row in &held {
        let values = table
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| from_postgres(row, i, c.kind))
            .collect::<Result<Vec<_>, _>>()?;
        there.insert(key_of(&values), values);
    }
    let mut fresh = Vec::with_capacity(rows.len() - there.len().min(rows.len()));
    for row in rows {
        let Some(theirs) = there.get(&key_of(&row)) else {
            fresh.push(row);
            continue;
        };
        if let Some(c) = (0..row.len()).find(|&i| row[i] != theirs[i]) {
            bail!(
                "table {}: the target already holds a different row with {} (column {} \
                 differs); it holds other data, or the source changed since an earlier copy. \
                 Nothing was copied; copy into an empty database",
                table.name,
                describe_key(table, &row),
                table.columns[c].name
            );
        }
        report.present += 1;
    }
    Ok(fresh)
}

fn describe_key(table: &TablePlan, row: &[Value]) -> String {
    table
        .key
        .iter()
        .map(|&k| {
            let shown = match &row[k] {
                Value::Int(Some(v)) => v.to_string(),
                Value::Text(Some(v)) => format!("{v:?}"),
                other => format!("{other:?}"),
            };
            format!("{} = {shown}", table.columns[k].name)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

async fn insert(
    tx: &mut PgConnection,
    table: &TablePlan,
    list: &str,
    rows: Vec<Vec<Value>>,
    report: &mut TableReport,
) -> anyhow::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let n = rows.len() as u64;
    let overriding = if table.identity {
        " OVERRIDING SYSTEM VALUE "
    } else {
        " "
    };
    let mut q = QueryBuilder::<Postgres>::new(format!(
        "INSERT INTO {} ({list}){overriding}",
        ident(&table.name)
    ));
    q.push_values(rows, |mut b, row| {
        for v in row {
            push_value(&mut b, v);
        }
    });
    q.build().execute(&mut *tx).await.with_context(|| {
        format!(
            "cannot insert into table {} of the target (if a unique value is taken, the target \
             holds other data: copy into an empty database)",
            table.name
        )
    })?;
    report.copied += n;
    Ok(())
}

/// Moves each identity (or serial) sequence of the copied tables past the largest id, so the
/// next insert gets a fresh one. Never moves a sequence back.
async fn advance_sequences(
    tx: &mut PgConnection,
    plans: &[TablePlan],
) -> anyhow::Result<Vec<(String, i64)>> {
    let mut moved = Vec::new();
    for table in plans {
        for column in &table.columns {
            let sequence: Option<String> =
                sqlx::query_scalar("SELECT pg_get_serial_sequence($1, $2)")
                    .bind(ident(&table.name))
                    .bind(&column.name)
                    .fetch_one(&mut *tx)
                    .await?;
            let Some(sequence) = sequence else { continue };
            let set: Option<i64> = sqlx::query_scalar(&format!(
                "SELECT setval($1::regclass, m) FROM (SELECT MAX({}) AS m FROM {}) s
                 WHERE m IS NOT NULL AND m > COALESCE(pg_sequence_last_value($1::regclass), 0)",
                ident(&column.name),
                ident(&table.name)
            ))
            .bind(&sequence)
            .fetch_optional(&mut *tx)
            .await
            .with_context(|| {
                format!("cannot set the sequence of {}.{}", table.name, column.name)
            })?;
            if let Some(last) = set {
                moved.push((table.name.clone(), last + 1));
            }
        }
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_affinities_map_to_postgres_types() {
        assert!(Kind::Int8.holds("INTEGER"));
        assert!(Kind::Bool.holds("INTEGER"));
        assert!(Kind::Bool.holds("BOOLEAN"));
        assert!(Kind::Text.holds("TEXT"));
        assert!(Kind::Text.holds("VARCHAR(20)"));
        assert!(Kind::Float8.holds("REAL"));
        assert!(!Kind::Text.holds("INTEGER"));
        assert!(!Kind::Int8.holds("TEXT"));
        assert!(!Kind::Float8.holds("BLOB"));
        assert_eq!(Kind::of("tsvector"), None);
    }

    #[test]
    fn nul_is_replaced_in_text_and_inside_json_strings() {
        assert_eq!(nul_free("a\0b".into()), "a\u{FFFD}b");
        let json = json_nul_free(r#"{"k\u0000":"v\u0000","n":[1,"\u0000"]}"#.into());
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["k\u{FFFD}"], "v\u{FFFD}");
        assert_eq!(value["n"][1], "\u{FFFD}");
        assert_eq!(json_nul_free(r#"{"a":1}"#.into()), r#"{"a":1}"#);
        assert_eq!(json_nul_free("not json \\u0000".into()), "not json \\u0000");
    }

    #[test]
    fn floats_compare_exactly() {
        assert_eq!(Value::Float(Some(0.1)), Value::Float(Some(0.1)));
        assert_ne!(Value::Float(Some(0.0)), Value::Float(Some(-0.0)));
        assert_ne!(Value::Int(None), Value::Text(None));
    }
}
