//! The store's schema and its migrations, versioned: a store is brought up
//! to [`VERSION`] when opened, one migration at a time, each in its own
//! transaction; a store newer than this hilt is refused by name rather
//! than written in a shape it does not know.

use super::StoreError;
use super::db::Db;

/// The schema version this hilt writes.
pub const VERSION: i64 = 1;

/// Migration `k` (from 1) takes a store from version `k - 1` to `k`.
/// `{id}` is the database's auto-numbered key column.
const MIGRATIONS: [&str; 1] = [
    // 1: invocations of hilt, their board runs, and the runs' per-op figures.
    "CREATE TABLE invocations (
        id {id},
        command TEXT NOT NULL,
        started_at TEXT NOT NULL,
        commit_id TEXT NOT NULL,
        host TEXT NOT NULL,
        hilt_version TEXT NOT NULL
    );
    CREATE TABLE board_runs (
        id {id},
        invocation_id BIGINT NOT NULL REFERENCES invocations (id),
        scenario TEXT NOT NULL,
        board TEXT NOT NULL,
        runner TEXT NOT NULL,
        probe TEXT,
        outcome TEXT NOT NULL,
        message TEXT NOT NULL,
        attempts BIGINT NOT NULL,
        flaky TEXT,
        cycles BIGINT,
        instructions BIGINT,
        estimated_cycles BIGINT,
        arena_capacity BIGINT,
        arena_head BIGINT,
        arena_tail BIGINT,
        arena_used BIGINT,
        stack_high_water BIGINT,
        wall_ms BIGINT NOT NULL
    );
    CREATE INDEX board_runs_pair ON board_runs (scenario, board);
    CREATE TABLE op_figures (
        board_run_id BIGINT NOT NULL REFERENCES board_runs (id),
        op BIGINT NOT NULL,
        name TEXT NOT NULL,
        cycles BIGINT,
        instructions BIGINT,
        estimated_cycles BIGINT
    );
    CREATE INDEX op_figures_run ON op_figures (board_run_id);",
];

/// Brings the store up to [`VERSION`]; refuses one that is newer.
pub fn migrate(db: &mut Db, store: &str) -> Result<(), StoreError> {
    db.batch("CREATE TABLE IF NOT EXISTS hilt_schema (version BIGINT NOT NULL)")?;
    let rows = db.query("SELECT MAX(version) FROM hilt_schema", &[])?;
    let found = rows.first().and_then(|r| r[0].int()).unwrap_or(0);
    if found > VERSION {
        return Err(StoreError::Newer {
            store: store.to_string(),
            found,
            known: VERSION,
        });
    }
    for (k, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let sql = sql.replace("{id}", db.identity());
        let version = k as i64 + 1;
        db.transaction(|db| {
            db.batch(&sql)?;
            db.query(
                "INSERT INTO hilt_schema (version) VALUES ($1)",
                &[version.into()],
            )?;
            Ok(())
        })?;
    }
    Ok(())
}
