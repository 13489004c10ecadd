//! The durable task queue on PostgreSQL: claims with `FOR UPDATE SKIP LOCKED`, so instances
//! never wait for each other's claims and never take the same task.

use sqlx::{PgConnection, Postgres, QueryBuilder, Row};

use super::rows::{self, json_text, nul_free};
use super::{PgStore, retrying};
use crate::domain::{ConversationId, MessageId, TaskId};
use crate::store::{
    AgentActivity, AttemptRecord, Completion, SessionRecord, StoreResult, TaskFilter, TaskRecord,
    UsageGroup, UsageRow,
};

const LEASE_EXPIRED: &str = "the worker holding this task stopped renewing its lease";

impl PgStore {
    pub(super) async fn claim_task_tx(
        &self,
        worker: &str,
        now: i64,
        lease_ms: i64,
    ) -> StoreResult<Option<TaskRecord>> {
        retrying(|| async move {
            let mut tx = self.pool.begin().await?;
            take_back_expired(&mut tx, now).await?;
            let task = claim_next(&mut tx, worker, now, lease_ms).await?;
            tx.commit().await?;
            Ok(task)
        })
        .await
    }

    pub(super) async fn heartbeat(
        &self,
        id: TaskId,
        worker: &str,
        now: i64,
        lease_ms: i64,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE tasks SET lease_expires_at = $1, updated_at = $2
             WHERE id = $3 AND status = 'running' AND lease_owner = $4",
        )
        .bind(now + lease_ms)
        .bind(now)
        .bind(id.0)
        .bind(nul_free(worker))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub(super) async fn complete_tx(&self, done: &Completion, now: i64) -> StoreResult<bool> {
        let actions = json_text(&done.actions, "actions")?;
        let context = json_text(&done.context, "context")?;
        let (actions, context) = (actions.as_str(), context.as_str());
        retrying(|| async move {
            let mut tx = self.pool.begin().await?;
            if !complete_one(&mut tx, done, actions, context, now).await? {
                tx.rollback().await?;
                return Ok(false);
            }
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    pub(super) async fn fail_tx(
        &self,
        id: TaskId,
        worker: &str,
        error: &str,
        retry_at: Option<i64>,
        now: i64,
    ) -> StoreResult<bool> {
        let error = nul_free(error);
        let mut tx = self.pool.begin().await?;
        let updated = sqlx::query(
            "UPDATE tasks SET
                 status = CASE WHEN $1::bigint IS NULL THEN 'failed' ELSE 'pending' END,
                 available_at = COALESCE($1, available_at),
                 finished_at = CASE WHEN $1::bigint IS NULL THEN $2 ELSE NULL END,
                 last_error = $3, lease_owner = NULL, lease_expires_at = NULL, updated_at = $2
             WHERE id = $4 AND status = 'running' AND lease_owner = $5",
        )
        .bind(retry_at)
        .bind(now)
        .bind(error.as_ref())
        .bind(id.0)
        .bind(nul_free(worker))
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        let outcome = if retry_at.is_some() {
            "retry"
        } else {
            "failed"
        };
        finish_attempt(&mut tx, id, now, outcome, Some(&error)).await?;
        if retry_at.is_none() {
            super::schedules::record_outcome(&mut tx, id, "failed", Some(&error), now).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    pub(super) async fn cancel_tx(&self, id: TaskId, now: i64) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "UPDATE tasks SET status = 'cancelled', finished_at = $1, updated_at = $1
             WHERE id = $2 AND status = 'pending'",
        )
        .bind(now)
        .bind(id.0)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE schedule_runs SET outcome = 'cancelled' WHERE task_id = $1")
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    pub(super) async fn retry_tx(
        &self,
        id: TaskId,
        extra_attempts: u32,
        now: i64,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE tasks SET status = 'pending', available_at = $1, finished_at = NULL,
                 max_attempts = attempts + $2, updated_at = $1
             WHERE id = $3 AND status IN ('failed', 'cancelled')",
        )
        .bind(now)
        .bind(extra_attempts as i64)
        .bind(id.0)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub(super) async fn release_tx(&self, id: TaskId, worker: &str, now: i64) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        let updated = sqlx::query(
            "UPDATE tasks SET status = 'pending', attempts = attempts - 1, lease_owner = NULL,
                 lease_expires_at = NULL, updated_at = $1
             WHERE id = $2 AND status = 'running' AND lease_owner = $3",
        )
        .bind(now)
        .bind(id.0)
        .bind(nul_free(worker))
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        // The attempt did not count: forget it, so attempt numbers stay consecutive.
        sqlx::query("DELETE FROM task_attempts WHERE task_id = $1 AND finished_at IS NULL")
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    pub(super) async fn reset_sessions_tx(
        &self,
        agent: &str,
        conversation: Option<ConversationId>,
        reason: &str,
    ) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE brain_sessions SET renew_reason = $1
             WHERE agent = $2 AND ($3::bigint IS NULL OR conversation_id = $3)",
        )
        .bind(nul_free(reason))
        .bind(nul_free(agent))
        .bind(conversation.map(|c| c.0))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    pub(super) async fn agent_activity_all(&self) -> StoreResult<Vec<AgentActivity>> {
        use sqlx::Row;
        let mut by_agent: std::collections::BTreeMap<String, AgentActivity> = Default::default();
        let entry = |map: &mut std::collections::BTreeMap<String, AgentActivity>, agent: String| {
            map.entry(agent.clone())
                .or_insert_with(|| AgentActivity {
                    agent,
                    ..AgentActivity::default()
                })
                .clone()
        };
        for r in sqlx::query(
            "SELECT agent,
                    SUM(CASE WHEN status = 'running' THEN 1 ELSE 0 END) AS running,
                    SUM(CASE WHEN status = 'pending' THEN 1 ELSE 0 END) AS pending,
                    MAX(updated_at) AS last_activity
             FROM tasks GROUP BY agent",
        )
        .fetch_all(&self.pool)
        .await?
        {
            let agent: String = r.try_get("agent")?;
            let mut a = entry(&mut by_agent, agent.clone());
            a.running = r.try_get::<Option<i64>, _>("running")?.unwrap_or(0);
            a.pending = r.try_get::<Option<i64>, _>("pending")?.unwrap_or(0);
            a.last_activity = r.try_get("last_activity")?;
            by_agent.insert(agent, a);
        }
        for r in sqlx::query(
            "SELECT agent, status, last_error FROM tasks
             WHERE id IN (SELECT MAX(id) FROM tasks WHERE status IN ('completed', 'failed')
                          GROUP BY agent)",
        )
        .fetch_all(&self.pool)
        .await?
        {
            let agent: String = r.try_get("agent")?;
            let mut a = entry(&mut by_agent, agent.clone());
            a.last_outcome = r.try_get("status")?;
            a.last_error = r.try_get("last_error")?;
            by_agent.insert(agent, a);
        }
        for r in sqlx::query(
            "SELECT agent, COUNT(*) AS n, MAX(started_at) AS newest,
                    MAX(input_tokens) AS tokens
             FROM brain_sessions GROUP BY agent",
        )
        .fetch_all(&self.pool)
        .await?
        {
            let agent: String = r.try_get("agent")?;
            let mut a = entry(&mut by_agent, agent.clone());
            a.sessions = r.try_get("n")?;
            a.newest_session_started_at = r.try_get("newest")?;
            a.max_session_input_tokens = r.try_get::<Option<i64>, _>("tokens")?.unwrap_or(0);
            by_agent.insert(agent, a);
        }
        Ok(by_agent.into_values().collect())
    }

    pub(super) async fn session_of(
        &self,
        conversation: ConversationId,
        agent: &str,
    ) -> StoreResult<Option<SessionRecord>> {
        let row =
            sqlx::query("SELECT * FROM brain_sessions WHERE conversation_id = $1 AND agent = $2")
                .bind(conversation.0)
                .bind(nul_free(agent))
                .fetch_optional(&self.pool)
                .await?;
        row.map(|r| {
            Ok(SessionRecord {
                conversation_id: conversation,
                agent: r.try_get("agent")?,
                brain: r.try_get("brain")?,
                session_id: r.try_get("session_id")?,
                last_injected: MessageId(r.try_get("last_injected_message_id")?),
                prompt_hash: r.try_get("prompt_hash")?,
                input_tokens: r.try_get::<i64, _>("input_tokens")?.max(0) as u64,
                started_at: r.try_get("started_at")?,
                updated_at: r.try_get("updated_at")?,
                renew_reason: r.try_get("renew_reason")?,
            })
        })
        .transpose()
    }

    pub(super) async fn task_by_id(&self, id: TaskId) -> StoreResult<Option<TaskRecord>> {
        sqlx::query("SELECT * FROM tasks WHERE id = $1")
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?
            .map(|r| rows::task(&r))
            .transpose()
    }

    pub(super) async fn tasks_filtered(&self, f: &TaskFilter) -> StoreResult<Vec<TaskRecord>> {
        let mut q: QueryBuilder<Postgres> = QueryBuilder::new("SELECT t.* FROM tasks t");
        if f.channel.is_some() {
            q.push(" JOIN conversations c ON c.id = t.conversation_id");
        }
        q.push(" WHERE TRUE");
        if let Some(s) = f.status {
            q.push(" AND t.status = ").push_bind(s.as_str());
        }
        if let Some(s) = f.source_type {
            q.push(" AND t.source_type = ").push_bind(s.as_str());
        }
        if let Some(c) = &f.channel {
            q.push(" AND c.channel = ")
                .push_bind(nul_free(c).into_owned());
        }
        if let Some(c) = f.conversation {
            q.push(" AND t.conversation_id = ").push_bind(c.0);
        }
        if let Some(t) = f.created_after {
            q.push(" AND t.created_at >= ").push_bind(t);
        }
        if let Some(t) = f.created_before {
            q.push(" AND t.created_at < ").push_bind(t);
        }
        if let Some(b) = f.page.before {
            q.push(" AND t.id < ").push_bind(b);
        }
        q.push(" ORDER BY t.id DESC LIMIT ")
            .push_bind(f.page.limit as i64);
        q.build()
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(rows::task)
            .collect()
    }

    pub(super) async fn usage(
        &self,
        by: UsageGroup,
        since: Option<i64>,
        until: Option<i64>,
    ) -> StoreResult<Vec<UsageRow>> {
        let key = match by {
            UsageGroup::Conversation => "t.conversation_id::text",
            UsageGroup::User => "COALESCE(m.sender_id, '')",
            UsageGroup::Day => {
                "to_char(to_timestamp(t.created_at / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
            }
            UsageGroup::Brain => "t.brain",
        };
        // Keys sort bytewise (COLLATE "C"), as SQLite sorts them, whatever the database's locale.
        let rows = sqlx::query(&format!(
            "SELECT {key} COLLATE \"C\" AS key, COUNT(*) AS tasks,
                 COALESCE(SUM(t.prompt_tokens), 0)::bigint AS p,
                 COALESCE(SUM(t.completion_tokens), 0)::bigint AS c,
                 COALESCE(SUM(t.triage_prompt_tokens), 0)::bigint AS tp,
                 COALESCE(SUM(t.triage_completion_tokens), 0)::bigint AS tc,
                 COALESCE(SUM(t.cost), 0)::float8 AS cost
             FROM tasks t LEFT JOIN messages m ON m.id = t.message_id
             WHERE t.created_at >= $1 AND t.created_at < $2
             GROUP BY 1 ORDER BY 1"
        ))
        .bind(since.unwrap_or(i64::MIN))
        .bind(until.unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(UsageRow {
                    key: r.try_get("key")?,
                    tasks: r.try_get::<i64, _>("tasks")? as u64,
                    prompt_tokens: r.try_get::<i64, _>("p")? as u64,
                    completion_tokens: r.try_get::<i64, _>("c")? as u64,
                    triage_prompt_tokens: r.try_get::<i64, _>("tp")? as u64,
                    triage_completion_tokens: r.try_get::<i64, _>("tc")? as u64,
                    cost: r.try_get("cost")?,
                })
            })
            .collect()
    }

    pub(super) async fn attempts_of(&self, id: TaskId) -> StoreResult<Vec<AttemptRecord>> {
        sqlx::query("SELECT * FROM task_attempts WHERE task_id = $1 ORDER BY attempt")
            .bind(id.0)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(rows::attempt)
            .collect()
    }
}

/// Takes back tasks whose worker stopped renewing its lease; that attempt counts, and a task
/// on its last attempt fails (with its briefing run). Rows another transaction holds are left
/// for the next claim, so concurrent claimers never wait for each other here.
async fn take_back_expired(tx: &mut PgConnection, now: i64) -> StoreResult<()> {
    sqlx::query(
        "WITH expired AS (
             UPDATE tasks SET
                 status = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END,
                 finished_at = CASE WHEN attempts >= max_attempts THEN $1 ELSE NULL END,
                 last_error = $2,
                 lease_owner = NULL, lease_expires_at = NULL, available_at = $1, updated_at = $1
             WHERE id IN (SELECT id FROM tasks
                          WHERE status = 'running' AND lease_expires_at < $1
                          FOR UPDATE SKIP LOCKED)
               AND status = 'running' AND lease_expires_at < $1
             RETURNING id, status),
         attempts AS (
             UPDATE task_attempts SET finished_at = $1, outcome = 'lease_expired'
             WHERE finished_at IS NULL AND task_id IN (SELECT id FROM expired))
         UPDATE schedule_runs SET outcome = 'failed', detail = $2
         WHERE outcome = 'pending'
           AND task_id IN (SELECT id FROM expired WHERE status = 'failed')",
    )
    .bind(now)
    .bind(LEASE_EXPIRED)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Claims the oldest due task whose conversation has nothing running and nothing older
/// waiting, in one statement.
///
/// Why this holds across instances: a task another claimer is taking is locked, so it is
/// skipped, and the conversation's later tasks still see it pending (this statement's
/// snapshot) and wait behind it; a task claimed and committed meanwhile no longer passes the
/// re-check of `status = 'pending'` that PostgreSQL makes on a row it locks. Tasks of one
/// conversation get their ids in commit order (see intake), so "nothing older" is exact.
async fn claim_next(
    tx: &mut PgConnection,
    worker: &str,
    now: i64,
    lease_ms: i64,
) -> StoreResult<Option<TaskRecord>> {
    let row = sqlx::query(
        "WITH next AS (
             SELECT t.id FROM tasks t
             WHERE t.status = 'pending' AND t.available_at <= $1
               AND NOT EXISTS (SELECT 1 FROM tasks r
                   WHERE r.conversation_id = t.conversation_id AND r.agent = t.agent
                     AND r.status = 'running')
               AND NOT EXISTS (SELECT 1 FROM tasks e
                   WHERE e.conversation_id = t.conversation_id AND e.agent = t.agent
                     AND e.status = 'pending'
                     AND e.id < t.id)
             ORDER BY t.available_at, t.id
             LIMIT 1
             FOR UPDATE OF t SKIP LOCKED)
         UPDATE tasks SET status = 'running', attempts = attempts + 1, lease_owner = $2,
             lease_expires_at = $3, updated_at = $1
         FROM next WHERE tasks.id = next.id
         RETURNING tasks.*",
    )
    .bind(now)
    .bind(nul_free(worker))
    .bind(now + lease_ms)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let task = rows::task(&row)?;
    sqlx::query(
        "INSERT INTO task_attempts (task_id, attempt, worker, started_at) VALUES ($1, $2, $3, $4)",
    )
    .bind(task.id.0)
    .bind(task.attempts as i64)
    .bind(nul_free(worker))
    .bind(now)
    .execute(&mut *tx)
    .await?;
    Ok(Some(task))
}

/// A completion's writes; false (caller rolls back) when the lease was lost.
async fn complete_one(
    tx: &mut PgConnection,
    done: &Completion,
    actions: &str,
    context: &str,
    now: i64,
) -> StoreResult<bool> {
    let text = nul_free(&done.text);
    let updated = sqlx::query(
        "UPDATE tasks SET status = 'completed', result_text = $1, actions = $2, context = $3,
             prompt_tokens = $4, completion_tokens = $5,
             triage_prompt_tokens = $6, triage_completion_tokens = $7, cost = $11,
             lease_owner = NULL, lease_expires_at = NULL, last_error = NULL,
             finished_at = $8, updated_at = $8
         WHERE id = $9 AND status = 'running' AND lease_owner = $10",
    )
    .bind(text.as_ref())
    .bind(actions)
    .bind(context)
    .bind(done.usage.prompt_tokens as i64)
    .bind(done.usage.completion_tokens as i64)
    .bind(done.triage_usage.map(|u| u.prompt_tokens as i64))
    .bind(done.triage_usage.map(|u| u.completion_tokens as i64))
    .bind(now)
    .bind(done.task_id.0)
    .bind(nul_free(&done.worker))
    .bind(done.cost)
    .execute(&mut *tx)
    .await?;
    if updated.rows_affected() != 1 {
        return Ok(false);
    }
    finish_attempt(tx, done.task_id, now, "completed", None).await?;
    let outcome = if done.silent { "silent" } else { "completed" };
    super::schedules::record_outcome(tx, done.task_id, outcome, None, now).await?;
    if let Some(s) = &done.session {
        sqlx::query(
            "INSERT INTO brain_sessions (conversation_id, agent, brain, session_id,
                 last_injected_message_id, updated_at, prompt_hash, input_tokens, started_at,
                 renew_reason)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL)
             ON CONFLICT (conversation_id, agent) DO UPDATE SET brain = excluded.brain,
                 session_id = excluded.session_id,
                 last_injected_message_id = excluded.last_injected_message_id,
                 updated_at = excluded.updated_at, prompt_hash = excluded.prompt_hash,
                 input_tokens = excluded.input_tokens, started_at = excluded.started_at,
                 renew_reason = NULL",
        )
        .bind(s.conversation_id.0)
        .bind(nul_free(&s.agent))
        .bind(nul_free(&s.brain))
        .bind(nul_free(&s.session_id))
        .bind(s.last_injected.0)
        .bind(now)
        .bind(nul_free(&s.prompt_hash))
        .bind(s.input_tokens as i64)
        .bind(if s.started_at > 0 { s.started_at } else { now })
        .execute(&mut *tx)
        .await?;
    }
    if let Some(d) = &done.delivery {
        super::outbox::insert_delivery(tx, done.task_id, d, now).await?;
    }
    // The answer joins the conversation history now, in task order, so the conversation's
    // next task sees it even before it is delivered. It is tagged with its task's source so
    // background output can be kept out of interactive context; delivery later adds the
    // channel's own id for it.
    if !done.silent {
        // Like intake, hold the conversation's row until commit, so that the messages of one
        // conversation get their ids in commit order (after the schedule rows that
        // `record_outcome` may lock, the order a schedule fire takes them in).
        sqlx::query(
            "SELECT 1 FROM conversations
             WHERE id = (SELECT conversation_id FROM tasks WHERE id = $1) FOR UPDATE",
        )
        .bind(done.task_id.0)
        .execute(&mut *tx)
        .await?;
        let key = done.delivery.as_ref().map_or_else(
            || format!("ctxgate:task:{}:result", done.task_id),
            |d| nul_free(&d.idempotency_key).into_owned(),
        );
        let kind = done.delivery.as_ref().map_or("result", |d| d.kind.as_str());
        sqlx::query(
            "INSERT INTO messages (conversation_id, channel_message_id, sender_id, sender_kind,
                 role, kind, text, created_at, stored_at, reply_to_channel_id,
                 reply_to_message_id, source_type, task_id, agent, actions, audience)
             SELECT t.conversation_id, $1, t.agent, 'self_bot', 'assistant',
                 CASE $2 WHEN 'result' THEN 'message' ELSE $2 END, $3, $4, $4,
                 m.channel_message_id, t.message_id, t.source_type, t.id, t.agent, t.actions,
                 json_build_object('kind', 'addressed', 'agents', json_build_array(t.agent),
                                   'users', CASE WHEN m.sender_id IS NULL THEN json_build_array()
                                                 ELSE json_build_array(m.sender_id) END)::text
             FROM tasks t LEFT JOIN messages m ON m.id = t.message_id
             WHERE t.id = $5
             ON CONFLICT (conversation_id, channel_message_id) DO NOTHING",
        )
        .bind(&key)
        .bind(nul_free(kind))
        .bind(text.as_ref())
        .bind(now)
        .bind(done.task_id.0)
        .execute(&mut *tx)
        .await?;
    }
    Ok(true)
}

async fn finish_attempt(
    tx: &mut PgConnection,
    id: TaskId,
    now: i64,
    outcome: &str,
    error: Option<&str>,
) -> StoreResult<()> {
    sqlx::query(
        "UPDATE task_attempts SET finished_at = $1, outcome = $2, error = $3
         WHERE task_id = $4 AND finished_at IS NULL",
    )
    .bind(now)
    .bind(outcome)
    .bind(error)
    .bind(id.0)
    .execute(&mut *tx)
    .await?;
    Ok(())
}
