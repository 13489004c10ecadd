use sqlx::{QueryBuilder, Sqlite};

use super::{SqliteStore, rows};
use crate::domain::{ConversationId, MessageId, TaskId};
use crate::store::{
    AgentActivity, AttemptRecord, Completion, SessionRecord, StoreError, StoreResult, TaskFilter,
    TaskRecord, UsageGroup, UsageRow,
};

impl SqliteStore {
    pub(super) async fn claim_task_tx(
        &self,
        worker: &str,
        now: i64,
        lease_ms: i64,
    ) -> StoreResult<Option<TaskRecord>> {
        let mut tx = self.write.begin().await?;
        // Take back tasks whose worker stopped renewing its lease; that attempt counts.
        sqlx::query(
            "UPDATE task_attempts SET finished_at = ?1, outcome = 'lease_expired'
             WHERE finished_at IS NULL AND task_id IN
                 (SELECT id FROM tasks WHERE status = 'running' AND lease_expires_at < ?1)",
        )
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE tasks SET
                 status = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END,
                 finished_at = CASE WHEN attempts >= max_attempts THEN ?1 ELSE NULL END,
                 last_error = 'the worker holding this task stopped renewing its lease',
                 lease_owner = NULL, lease_expires_at = NULL, available_at = ?1, updated_at = ?1
             WHERE status = 'running' AND lease_expires_at < ?1",
        )
        .bind(now)
        .execute(&mut *tx)
        .await?;
        // Briefing runs whose task ended there (its last attempt's lease expired) are failed too.
        sqlx::query(
            "UPDATE schedule_runs SET outcome = 'failed',
                 detail = 'the worker holding this task stopped renewing its lease'
             WHERE outcome = 'pending'
               AND task_id IN (SELECT id FROM tasks WHERE status = 'failed')",
        )
        .execute(&mut *tx)
        .await?;
        // The oldest due task whose conversation has nothing running and nothing older waiting for
        // the same agent (agents of one conversation answer in parallel; each sees only its
        // own answers, so their order does not matter to each other).
        let id: Option<i64> = sqlx::query_scalar(
            "SELECT t.id FROM tasks t
             WHERE t.status = 'pending' AND t.available_at <= ?1
               AND NOT EXISTS (SELECT 1 FROM tasks r
                   WHERE r.conversation_id = t.conversation_id AND r.agent = t.agent
                     AND r.status = 'running')
               AND NOT EXISTS (SELECT 1 FROM tasks e
                   WHERE e.conversation_id = t.conversation_id AND e.agent = t.agent
                     AND e.status = 'pending'
                     AND e.id < t.id)
             ORDER BY t.available_at, t.id
             LIMIT 1",
        )
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(id) = id else {
            tx.commit().await?;
            return Ok(None);
        };
        let row = sqlx::query(
            "UPDATE tasks SET status = 'running', attempts = attempts + 1, lease_owner = ?1,
                 lease_expires_at = ?2, updated_at = ?3
             WHERE id = ?4
             RETURNING *",
        )
        .bind(worker)
        .bind(now + lease_ms)
        .bind(now)
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
        let task = rows::task(&row)?;
        sqlx::query(
            "INSERT INTO task_attempts (task_id, attempt, worker, started_at) VALUES (?1, ?2, ?3, ?4)",
        )
        .bind(id)
        .bind(task.attempts as i64)
        .bind(worker)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(task))
    }

    pub(super) async fn heartbeat(
        &self,
        id: TaskId,
        worker: &str,
        now: i64,
        lease_ms: i64,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE tasks SET lease_expires_at = ?1, updated_at = ?2
             WHERE id = ?3 AND status = 'running' AND lease_owner = ?4",
        )
        .bind(now + lease_ms)
        .bind(now)
        .bind(id.0)
        .bind(worker)
        .execute(&self.write)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub(super) async fn complete_tx(&self, done: &Completion, now: i64) -> StoreResult<bool> {
        let actions = serde_json::to_string(&done.actions)
            .map_err(|e| StoreError::Invalid(format!("actions: {e}")))?;
        let mut tx = self.write.begin().await?;
        let updated = sqlx::query(
            "UPDATE tasks SET status = 'completed', result_text = ?1, actions = ?2, context = ?3,
                 prompt_tokens = ?4, completion_tokens = ?5,
                 triage_prompt_tokens = ?6, triage_completion_tokens = ?7, cost = ?11,
                 lease_owner = NULL, lease_expires_at = NULL, last_error = NULL,
                 finished_at = ?8, updated_at = ?8
             WHERE id = ?9 AND status = 'running' AND lease_owner = ?10",
        )
        .bind(&done.text)
        .bind(actions)
        .bind(done.context.to_string())
        .bind(done.usage.prompt_tokens as i64)
        .bind(done.usage.completion_tokens as i64)
        .bind(done.triage_usage.map(|u| u.prompt_tokens as i64))
        .bind(done.triage_usage.map(|u| u.completion_tokens as i64))
        .bind(now)
        .bind(done.task_id.0)
        .bind(&done.worker)
        .bind(done.cost)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        finish_attempt(&mut tx, done.task_id, now, "completed", None).await?;
        let outcome = if done.silent { "silent" } else { "completed" };
        super::schedules::record_outcome(&mut tx, done.task_id, outcome, None, now).await?;
        if let Some(s) = &done.session {
            sqlx::query(
                "INSERT INTO brain_sessions (conversation_id, agent, brain, session_id,
                     last_injected_message_id, updated_at, prompt_hash, input_tokens, started_at,
                     renew_reason)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, NULL)
                 ON CONFLICT (conversation_id, agent) DO UPDATE SET brain = excluded.brain,
                     session_id = excluded.session_id,
                     last_injected_message_id = excluded.last_injected_message_id,
                     updated_at = excluded.updated_at, prompt_hash = excluded.prompt_hash,
                     input_tokens = excluded.input_tokens, started_at = excluded.started_at,
                     renew_reason = NULL",
            )
            .bind(s.conversation_id.0)
            .bind(&s.agent)
            .bind(&s.brain)
            .bind(&s.session_id)
            .bind(s.last_injected.0)
            .bind(now)
            .bind(&s.prompt_hash)
            .bind(s.input_tokens as i64)
            .bind(if s.started_at > 0 { s.started_at } else { now })
            .execute(&mut *tx)
            .await?;
        }
        if let Some(d) = &done.delivery {
            sqlx::query(
                "INSERT INTO outbox (task_id, conversation_id, channel, idempotency_key, kind, text,
                     reply_to, meta, status, available_at, created_at)
                 SELECT id, conversation_id, ?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?7
                 FROM tasks WHERE id = ?8
                 ON CONFLICT (idempotency_key) DO NOTHING",
            )
            .bind(&d.channel)
            .bind(&d.idempotency_key)
            .bind(&d.kind)
            .bind(&d.text)
            .bind(&d.reply_to)
            .bind((!d.meta.is_null()).then(|| d.meta.to_string()))
            .bind(now)
            .bind(done.task_id.0)
            .execute(&mut *tx)
            .await?;
        }
        // The answer joins the conversation history now, in task order, so the conversation's
        // next task sees it even before it is delivered. It is tagged with its task's source so
        // background output can be kept out of interactive context; delivery later adds the
        // channel's own id for it.
        if !done.silent {
            let key = done.delivery.as_ref().map_or_else(
                || format!("ctxgate:task:{}:result", done.task_id),
                |d| d.idempotency_key.clone(),
            );
            let kind = done.delivery.as_ref().map_or("result", |d| d.kind.as_str());
            sqlx::query(
                "INSERT INTO messages (conversation_id, channel_message_id, sender_id, sender_kind,
                     role, kind, text, created_at, stored_at, reply_to_channel_id,
                     reply_to_message_id, source_type, task_id, agent, actions, audience)
                 SELECT t.conversation_id, ?1, t.agent, 'self_bot', 'assistant',
                     CASE ?2 WHEN 'result' THEN 'message' ELSE ?2 END, ?3, ?4, ?4,
                     m.channel_message_id, t.message_id, t.source_type, t.id, t.agent, t.actions,
                     json_object('kind', 'addressed', 'agents', json_array(t.agent),
                                 'users', CASE WHEN m.sender_id IS NULL THEN json_array()
                                               ELSE json_array(m.sender_id) END)
                 FROM tasks t LEFT JOIN messages m ON m.id = t.message_id
                 WHERE t.id = ?5
                 ON CONFLICT (conversation_id, channel_message_id) DO NOTHING",
            )
            .bind(&key)
            .bind(kind)
            .bind(&done.text)
            .bind(now)
            .bind(done.task_id.0)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    pub(super) async fn fail_tx(
        &self,
        id: TaskId,
        worker: &str,
        error: &str,
        retry_at: Option<i64>,
        now: i64,
    ) -> StoreResult<bool> {
        let mut tx = self.write.begin().await?;
        let updated = sqlx::query(
            "UPDATE tasks SET
                 status = CASE WHEN ?1 IS NULL THEN 'failed' ELSE 'pending' END,
                 available_at = COALESCE(?1, available_at),
                 finished_at = CASE WHEN ?1 IS NULL THEN ?2 ELSE NULL END,
                 last_error = ?3, lease_owner = NULL, lease_expires_at = NULL, updated_at = ?2
             WHERE id = ?4 AND status = 'running' AND lease_owner = ?5",
        )
        .bind(retry_at)
        .bind(now)
        .bind(error)
        .bind(id.0)
        .bind(worker)
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
        finish_attempt(&mut tx, id, now, outcome, Some(error)).await?;
        if retry_at.is_none() {
            super::schedules::record_outcome(&mut tx, id, "failed", Some(error), now).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    pub(super) async fn release_tx(&self, id: TaskId, worker: &str, now: i64) -> StoreResult<bool> {
        let mut tx = self.write.begin().await?;
        let updated = sqlx::query(
            "UPDATE tasks SET status = 'pending', attempts = attempts - 1, lease_owner = NULL,
                 lease_expires_at = NULL, updated_at = ?1
             WHERE id = ?2 AND status = 'running' AND lease_owner = ?3",
        )
        .bind(now)
        .bind(id.0)
        .bind(worker)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        // The attempt did not count: forget it, so attempt numbers stay consecutive.
        sqlx::query("DELETE FROM task_attempts WHERE task_id = ?1 AND finished_at IS NULL")
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
            "UPDATE brain_sessions SET renew_reason = ?1
             WHERE agent = ?2 AND (?3 IS NULL OR conversation_id = ?3)",
        )
        .bind(reason)
        .bind(agent)
        .bind(conversation.map(|c| c.0))
        .execute(&self.write)
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
        .fetch_all(&self.read)
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
        .fetch_all(&self.read)
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
        .fetch_all(&self.read)
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
            sqlx::query("SELECT * FROM brain_sessions WHERE conversation_id = ?1 AND agent = ?2")
                .bind(conversation.0)
                .bind(agent)
                .fetch_optional(&self.read)
                .await?;
        row.map(|r| {
            use sqlx::Row;
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
        sqlx::query("SELECT * FROM tasks WHERE id = ?1")
            .bind(id.0)
            .fetch_optional(&self.read)
            .await?
            .map(|r| rows::task(&r))
            .transpose()
    }

    pub(super) async fn tasks_filtered(&self, f: &TaskFilter) -> StoreResult<Vec<TaskRecord>> {
        let mut q: QueryBuilder<Sqlite> = QueryBuilder::new("SELECT t.* FROM tasks t");
        if f.channel.is_some() {
            q.push(" JOIN conversations c ON c.id = t.conversation_id");
        }
        q.push(" WHERE 1 = 1");
        if let Some(s) = f.status {
            q.push(" AND t.status = ").push_bind(s.as_str());
        }
        if let Some(s) = f.source_type {
            q.push(" AND t.source_type = ").push_bind(s.as_str());
        }
        if let Some(c) = &f.channel {
            q.push(" AND c.channel = ").push_bind(c.clone());
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
            .fetch_all(&self.read)
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
            UsageGroup::Conversation => "CAST(t.conversation_id AS TEXT)",
            UsageGroup::User => "COALESCE(m.sender_id, '')",
            UsageGroup::Day => "strftime('%Y-%m-%d', t.created_at / 1000, 'unixepoch')",
            UsageGroup::Brain => "t.brain",
        };
        let rows = sqlx::query(&format!(
            "SELECT {key} AS key, COUNT(*) AS tasks,
                 COALESCE(SUM(t.prompt_tokens), 0) AS p, COALESCE(SUM(t.completion_tokens), 0) AS c,
                 COALESCE(SUM(t.triage_prompt_tokens), 0) AS tp,
                 COALESCE(SUM(t.triage_completion_tokens), 0) AS tc,
                 COALESCE(SUM(t.cost), 0.0) AS cost
             FROM tasks t LEFT JOIN messages m ON m.id = t.message_id
             WHERE t.created_at >= ?1 AND t.created_at < ?2
             GROUP BY key ORDER BY key"
        ))
        .bind(since.unwrap_or(i64::MIN))
        .bind(until.unwrap_or(i64::MAX))
        .fetch_all(&self.read)
        .await?;
        rows.iter()
            .map(|r| {
                use sqlx::Row;
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
        sqlx::query("SELECT * FROM task_attempts WHERE task_id = ?1 ORDER BY attempt")
            .bind(id.0)
            .fetch_all(&self.read)
            .await?
            .iter()
            .map(rows::attempt)
            .collect()
    }
}

async fn finish_attempt(
    tx: &mut sqlx::Transaction<'_, Sqlite>,
    id: TaskId,
    now: i64,
    outcome: &str,
    error: Option<&str>,
) -> StoreResult<()> {
    sqlx::query(
        "UPDATE task_attempts SET finished_at = ?1, outcome = ?2, error = ?3
         WHERE task_id = ?4 AND finished_at IS NULL",
    )
    .bind(now)
    .bind(outcome)
    .bind(error)
    .bind(id.0)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
