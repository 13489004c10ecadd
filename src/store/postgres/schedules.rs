use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use super::intake::ingest_one;
use super::rows::{json_text, nul_free};
use super::{PgStore, retrying};
use crate::config::ScheduleSpec;
use crate::domain::TaskId;
use crate::store::{Fire, Page, ScheduleRecord, ScheduleRun, StoreError, StoreResult};

fn schedule(row: &PgRow) -> StoreResult<ScheduleRecord> {
    let spec: String = row.try_get("spec")?;
    Ok(ScheduleRecord {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        source: row.try_get("source")?,
        spec: serde_json::from_str(&spec)
            .map_err(|e| StoreError::Corrupt(format!("schedule spec: {e}")))?,
        enabled: row.try_get("enabled")?,
        next_fire_at: row.try_get("next_fire_at")?,
        consecutive_failures: row.try_get::<i64, _>("consecutive_failures")? as u32,
        max_failures: row.try_get::<i64, _>("max_failures")? as u32,
        disabled_reason: row.try_get("disabled_reason")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

impl PgStore {
    pub(super) async fn put_schedule_tx(
        &self,
        spec: &ScheduleSpec,
        source: &str,
        next_fire_at: Option<i64>,
        max_failures: u32,
        now: i64,
    ) -> StoreResult<ScheduleRecord> {
        let json = json_text(spec, "schedule spec")?;
        let row = sqlx::query(
            "INSERT INTO schedules (name, source, spec, enabled, next_fire_at, max_failures,
                 created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
             ON CONFLICT (name) DO UPDATE SET source = excluded.source, spec = excluded.spec,
                 enabled = excluded.enabled,
                 next_fire_at = COALESCE($5, schedules.next_fire_at),
                 max_failures = excluded.max_failures,
                 disabled_reason = CASE WHEN excluded.enabled THEN NULL
                                        ELSE schedules.disabled_reason END,
                 updated_at = excluded.updated_at
             RETURNING *",
        )
        .bind(nul_free(&spec.name))
        .bind(source)
        .bind(json)
        .bind(spec.enabled)
        .bind(next_fire_at)
        .bind(max_failures as i64)
        .bind(now)
        .fetch_one(&self.pool)
        .await?;
        schedule(&row)
    }

    pub(super) async fn schedules_all(&self) -> StoreResult<Vec<ScheduleRecord>> {
        // Bytewise, as SQLite orders names, whatever the database's locale.
        sqlx::query("SELECT * FROM schedules ORDER BY name COLLATE \"C\"")
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(schedule)
            .collect()
    }

    pub(super) async fn schedule_by_id(&self, id: i64) -> StoreResult<Option<ScheduleRecord>> {
        sqlx::query("SELECT * FROM schedules WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .map(|r| schedule(&r))
            .transpose()
    }

    pub(super) async fn delete_schedule_tx(&self, id: i64) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM schedule_runs WHERE schedule_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query("DELETE FROM schedules WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    pub(super) async fn set_enabled_tx(
        &self,
        id: i64,
        enabled: bool,
        next_fire_at: Option<i64>,
        reason: Option<&str>,
        now: i64,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE schedules SET enabled = $1, next_fire_at = COALESCE($2, next_fire_at),
                 disabled_reason = $3,
                 consecutive_failures = CASE WHEN $1 THEN 0 ELSE consecutive_failures END,
                 updated_at = $4
             WHERE id = $5",
        )
        .bind(enabled)
        .bind(next_fire_at)
        .bind(reason.map(nul_free))
        .bind(now)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub(super) async fn due(&self, now: i64, limit: usize) -> StoreResult<Vec<ScheduleRecord>> {
        sqlx::query(
            "SELECT * FROM schedules WHERE enabled AND next_fire_at <= $1
             ORDER BY next_fire_at, id LIMIT $2",
        )
        .bind(now)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(schedule)
        .collect()
    }

    /// A scheduled fire moves `next_fire_at` on only if it still equals this fire time: of two
    /// instances firing at once, the second waits for the first's row lock, then finds the
    /// schedule moved on and fires nothing.
    pub(super) async fn fire_tx(
        &self,
        fire: &Fire,
        now: i64,
    ) -> StoreResult<Option<Option<TaskId>>> {
        retrying(|| async move {
            let mut tx = self.pool.begin().await?;
            if !fire.manual && !still_due(&mut tx, fire, now).await? {
                tx.rollback().await?;
                return Ok(None);
            }
            let task_id = match &fire.briefing {
                Some((event, task)) => {
                    ingest_one(&mut tx, event, std::slice::from_ref(task), now)
                        .await?
                        .task_id
                }
                None => None,
            };
            sqlx::query(
                "INSERT INTO schedule_runs (schedule_id, fire_at, manual, task_id, outcome,
                     detail, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (schedule_id, fire_at, manual) DO NOTHING",
            )
            .bind(fire.schedule_id)
            .bind(fire.fire_at)
            .bind(fire.manual)
            .bind(task_id)
            .bind(fire.outcome)
            .bind(fire.detail.as_deref().map(nul_free))
            .bind(now)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(Some(task_id.map(TaskId)))
        })
        .await
    }

    pub(super) async fn runs(&self, id: i64, page: &Page) -> StoreResult<Vec<ScheduleRun>> {
        let rows = sqlx::query(
            "SELECT * FROM schedule_runs WHERE schedule_id = $1 AND id < $2
             ORDER BY id DESC LIMIT $3",
        )
        .bind(id)
        .bind(page.before.unwrap_or(i64::MAX))
        .bind(page.limit as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ScheduleRun {
                    id: r.try_get("id")?,
                    fire_at: r.try_get("fire_at")?,
                    manual: r.try_get("manual")?,
                    task_id: r.try_get::<Option<i64>, _>("task_id")?.map(TaskId),
                    outcome: r.try_get("outcome")?,
                    detail: r.try_get("detail")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect()
    }
}

/// Moves the schedule to its next fire time if it is still due at this one.
async fn still_due(tx: &mut PgConnection, fire: &Fire, now: i64) -> StoreResult<bool> {
    let moved = sqlx::query(
        "UPDATE schedules SET next_fire_at = $1,
             enabled = CASE WHEN $1::bigint IS NULL THEN FALSE ELSE enabled END,
             disabled_reason = CASE WHEN $1::bigint IS NULL THEN 'no further fire time'
                                    ELSE disabled_reason END,
             updated_at = $2
         WHERE id = $3 AND enabled AND next_fire_at = $4",
    )
    .bind(fire.next_fire_at)
    .bind(now)
    .bind(fire.schedule_id)
    .bind(fire.fire_at)
    .execute(&mut *tx)
    .await?;
    Ok(moved.rows_affected() == 1)
}

/// After a briefing task ends: its run's outcome, and the schedule's failure count (a success
/// resets it; reaching `max_failures` disables the schedule with the reason).
pub(super) async fn record_outcome(
    tx: &mut PgConnection,
    task: TaskId,
    outcome: &str,
    error: Option<&str>,
    now: i64,
) -> StoreResult<()> {
    let run = sqlx::query(
        "UPDATE schedule_runs SET outcome = $1, detail = COALESCE($2, detail) WHERE task_id = $3",
    )
    .bind(outcome)
    .bind(error)
    .bind(task.0)
    .execute(&mut *tx)
    .await?;
    if run.rows_affected() == 0 {
        return Ok(());
    }
    if outcome == "failed" {
        sqlx::query(
            "UPDATE schedules SET consecutive_failures = consecutive_failures + 1,
                 enabled = CASE WHEN consecutive_failures + 1 >= max_failures THEN FALSE
                                ELSE enabled END,
                 disabled_reason = CASE WHEN consecutive_failures + 1 >= max_failures
                     THEN 'disabled after ' || (consecutive_failures + 1) ||
                          ' consecutive failures; last: ' || COALESCE($1, 'unknown')
                     ELSE disabled_reason END,
                 updated_at = $2
             WHERE id = (SELECT schedule_id FROM schedule_runs WHERE task_id = $3 LIMIT 1)",
        )
        .bind(error)
        .bind(now)
        .bind(task.0)
        .execute(&mut *tx)
        .await?;
    } else {
        sqlx::query(
            "UPDATE schedules SET consecutive_failures = 0, updated_at = $1
             WHERE id = (SELECT schedule_id FROM schedule_runs WHERE task_id = $2 LIMIT 1)",
        )
        .bind(now)
        .bind(task.0)
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}
