//! The two databases behind one code path: every statement is written once,
//! with `$1, $2, …` parameters (PostgreSQL's, which SQLite takes too when
//! they are numbered in order), over values of four kinds. Only the
//! schema's identity column differs ([`Db::identity`]).

use std::path::Path;

use super::StoreError;

/// A value in or out of a statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A 64-bit integer.
    Int(i64),
    /// A real.
    Real(f64),
    /// Text.
    Text(String),
}

impl Value {
    /// The integer, if it is one.
    pub fn int(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The text, or "" for anything else.
    pub fn text(&self) -> &str {
        match self {
            Value::Text(t) => t,
            _ => "",
        }
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// An open connection.
pub enum Db {
    /// A SQLite file (embedded).
    Sqlite(rusqlite::Connection),
    /// A PostgreSQL server.
    Postgres(Box<postgres::Client>),
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Db::Sqlite(_) => "Db::Sqlite",
            Db::Postgres(_) => "Db::Postgres",
        })
    }
}

impl Db {
    /// Opens (creating it and its folder if need be) a SQLite file.
    pub fn sqlite(path: &Path) -> Result<Db, StoreError> {
        let failed = |e: &dyn std::fmt::Display| StoreError::Open(e.to_string());
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| failed(&e))?;
        }
        let db = rusqlite::Connection::open(path).map_err(|e| failed(&e))?;
        // Two hosts' runs may write at once: wait for the lock rather than fail.
        db.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(|e| failed(&e))?;
        Ok(Db::Sqlite(db))
    }

    /// Connects to a PostgreSQL server (`postgres://…` or a libpq-style
    /// `host=… dbname=…` string).
    pub fn postgres(url: &str) -> Result<Db, StoreError> {
        let client = postgres::Client::connect(url, postgres::NoTls)
            .map_err(|e| StoreError::Open(with_causes(&e)))?;
        Ok(Db::Postgres(Box::new(client)))
    }

    /// The schema's auto-numbered key column, in this database's words.
    pub fn identity(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "INTEGER PRIMARY KEY",
            Db::Postgres(_) => "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        }
    }

    /// Runs statements with no parameters and no result (the schema).
    pub fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        match self {
            Db::Sqlite(db) => db.execute_batch(sql).map_err(query_error),
            Db::Postgres(db) => db.batch_execute(sql).map_err(query_error),
        }
    }

    /// Runs one statement; its rows (`RETURNING` or `SELECT`), each a row
    /// of values.
    pub fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, StoreError> {
        match self {
            Db::Sqlite(db) => sqlite_query(db, sql, params),
            Db::Postgres(db) => postgres_query(db, sql, params),
        }
    }

    /// Runs `work` in one transaction: all of it is stored, or none.
    pub fn transaction<T>(
        &mut self,
        work: impl FnOnce(&mut Db) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.batch("BEGIN")?;
        match work(self) {
            Ok(v) => {
                self.batch("COMMIT")?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.batch("ROLLBACK");
                Err(e)
            }
        }
    }
}

/// `e` and what caused it (`error connecting to server: Connection refused`).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let said = c.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = c.source();
    }
    text
}

fn query_error(e: impl std::fmt::Display) -> StoreError {
    StoreError::Query(e.to_string())
}

fn sqlite_query(
    db: &rusqlite::Connection,
    sql: &str,
    params: &[Value],
) -> Result<Vec<Vec<Value>>, StoreError> {
    use rusqlite::types::{Value as Sql, ValueRef};
    let mut statement = db.prepare_cached(sql).map_err(query_error)?;
    let columns = statement.column_count();
    let bound = params.iter().map(|p| match p {
        Value::Null => Sql::Null,
        Value::Int(v) => Sql::Integer(*v),
        Value::Real(v) => Sql::Real(*v),
        Value::Text(t) => Sql::Text(t.clone()),
    });
    let mut rows = statement
        .query(rusqlite::params_from_iter(bound))
        .map_err(query_error)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(query_error)? {
        let mut values = Vec::with_capacity(columns);
        for i in 0..columns {
            values.push(match row.get_ref(i).map_err(query_error)? {
                ValueRef::Null | ValueRef::Blob(_) => Value::Null,
                ValueRef::Integer(v) => Value::Int(v),
                ValueRef::Real(v) => Value::Real(v),
                ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
            });
        }
        out.push(values);
    }
    Ok(out)
}

fn postgres_query(
    db: &mut postgres::Client,
    sql: &str,
    params: &[Value],
) -> Result<Vec<Vec<Value>>, StoreError> {
    use postgres::types::{ToSql, Type};
    let owned: Vec<Box<dyn ToSql + Sync>> = params
        .iter()
        .map(|p| -> Box<dyn ToSql + Sync> {
            match p {
                Value::Null => Box::new(AnyNull),
                Value::Int(v) => Box::new(*v),
                Value::Real(v) => Box::new(*v),
                Value::Text(t) => Box::new(t.clone()),
            }
        })
        .collect();
    let refs: Vec<&(dyn ToSql + Sync)> = owned.iter().map(|b| b.as_ref()).collect();
    let rows = db.query(sql, &refs).map_err(query_error)?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let mut values = Vec::with_capacity(row.len());
        for (i, column) in row.columns().iter().enumerate() {
            let value = match *column.type_() {
                Type::INT8 => row.get::<_, Option<i64>>(i).map(Value::Int),
                Type::INT4 => row.get::<_, Option<i32>>(i).map(|v| Value::Int(v.into())),
                Type::FLOAT8 => row.get::<_, Option<f64>>(i).map(Value::Real),
                _ => row.get::<_, Option<String>>(i).map(Value::Text),
            };
            values.push(value.unwrap_or(Value::Null));
        }
        out.push(values);
    }
    Ok(out)
}

/// NULL for a column of any type (`Option::<T>::None` would be checked
/// against the column's type as a `T`).
#[derive(Debug)]
struct AnyNull;

impl postgres::types::ToSql for AnyNull {
    fn to_sql(
        &self,
        _: &postgres::types::Type,
        _: &mut postgres::types::private::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        Ok(postgres::types::IsNull::Yes)
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}
