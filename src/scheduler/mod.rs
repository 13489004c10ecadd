//! The scheduler: turns due cron schedules into briefing tasks, exactly once per fire time.
//!
//! Each schedule's next fire time is stored. A tick fires every schedule whose time has come, in
//! one transaction per fire (the briefing's message and task, the run record, the next fire
//! time), and only if the schedule is still due at that time — so a restart or a second loop
//! never fires it twice. A fire missed by more than `staleness` is skipped and recorded; the
//! next fire time is always computed after *now*, so missed fires never run as a burst.

mod cron;

use ctxgate_contract::{
    Audience, EventKind, InboundEvent, InboundMessage, MessageKind, Role, SenderKind, SourceType,
};
use serde_json::json;

pub use cron::CronSpec;

use crate::deps::Deps;
use crate::domain::TaskId;
use crate::intake::{DEFAULT_AGENT, dedup_key};
use crate::store::{Fire, NewTask, ScheduleRecord, StoreError, StoreResult};

const TICK_BATCH: usize = 200;

#[derive(Clone)]
pub struct Scheduler {
    deps: Deps,
}

impl Scheduler {
    pub fn new(deps: Deps) -> Self {
        Self { deps }
    }

    /// Brings the stored schedules in line with `[[schedules]]`: new ones are added with their
    /// next fire time, changed ones updated (their next fire time recomputed when the timing
    /// changed), ones no longer configured disabled with a reason.
    pub async fn sync_config(&self) -> StoreResult<()> {
        let settings = &self.deps.settings;
        let now = self.deps.clock.now_ms();
        let existing = self.deps.store.list_schedules().await?;
        for spec in &settings.schedules {
            let old = existing.iter().find(|s| s.name == spec.name);
            // Only a new schedule or changed timing gets a new next fire time: a finished
            // one-shot stays finished, and a restart keeps what the scheduler had.
            let timing_changed =
                old.is_none_or(|o| o.spec.cron != spec.cron || o.spec.timezone != spec.timezone);
            let next = if timing_changed {
                CronSpec::parse(&spec.cron, &spec.timezone)
                    .map_err(StoreError::Invalid)?
                    .next_after(now)
            } else {
                None
            };
            // The configured `enabled` applies when it changes; otherwise a schedule disabled by
            // an operator or after failures stays disabled across restarts.
            let enabled = match old {
                Some(o) if o.spec.enabled == spec.enabled => o.enabled,
                _ => spec.enabled,
            };
            if old.is_some_and(|o| o.source == "api") {
                tracing::warn!(schedule = %spec.name, "a schedule created through the admin API is now defined by the configuration");
            }
            self.deps
                .store
                .put_schedule(spec, "config", next, settings.scheduler.max_failures, now)
                .await?;
            if let Some(o) = old
                && enabled != spec.enabled
            {
                // Keep the stored state (and its reason) rather than the configured value.
                self.deps
                    .store
                    .set_schedule_enabled(o.id, enabled, None, o.disabled_reason.as_deref(), now)
                    .await?;
            }
        }
        for gone in existing.iter().filter(|s| {
            s.source == "config"
                && s.enabled
                && !settings.schedules.iter().any(|c| c.name == s.name)
        }) {
            self.deps
                .store
                .set_schedule_enabled(
                    gone.id,
                    false,
                    None,
                    Some("removed from the configuration"),
                    now,
                )
                .await?;
        }
        Ok(())
    }

    /// Fires every due schedule; returns how many fired (run or skipped).
    pub async fn tick(&self) -> StoreResult<usize> {
        let now = self.deps.clock.now_ms();
        let due = self.deps.store.due_schedules(now, TICK_BATCH).await?;
        let mut fired = 0;
        for s in &due {
            if self.fire_due(s, now).await? {
                fired += 1;
            }
        }
        Ok(fired)
    }

    async fn fire_due(&self, s: &ScheduleRecord, now: i64) -> StoreResult<bool> {
        let Some(fire_at) = s.next_fire_at else {
            return Ok(false);
        };
        let cron = match CronSpec::parse(&s.spec.cron, &s.spec.timezone) {
            Ok(c) => c,
            Err(e) => {
                self.deps
                    .store
                    .set_schedule_enabled(s.id, false, None, Some(&e), now)
                    .await?;
                return Ok(false);
            }
        };
        let next = if s.spec.one_shot {
            None
        } else {
            cron.next_after(now.max(fire_at))
        };
        let staleness = self.deps.settings.scheduler.staleness.as_millis() as i64;
        let late = now - fire_at;
        let fire = if late > staleness {
            Fire {
                schedule_id: s.id,
                fire_at,
                manual: false,
                next_fire_at: next,
                briefing: None,
                outcome: "skipped_stale",
                detail: Some(format!(
                    "missed by {} s, more than the staleness limit of {} s",
                    late / 1000,
                    staleness / 1000
                )),
            }
        } else {
            Fire {
                schedule_id: s.id,
                fire_at,
                manual: false,
                next_fire_at: next,
                briefing: Some(self.briefing(s, fire_at, false)),
                outcome: "pending",
                detail: None,
            }
        };
        let fired = self.deps.store.fire_schedule(&fire, now).await?;
        if let Some(Some(task)) = fired {
            tracing::info!(schedule = %s.name, task_id = %task, "schedule fired");
            self.deps.task_ready.notify_one();
        }
        Ok(fired.is_some())
    }

    /// Runs a schedule now, outside its timing (admin "run now"); returns the task.
    pub async fn run_now(&self, s: &ScheduleRecord) -> StoreResult<Option<TaskId>> {
        let now = self.deps.clock.now_ms();
        let fire = Fire {
            schedule_id: s.id,
            fire_at: now,
            manual: true,
            next_fire_at: None,
            briefing: Some(self.briefing(s, now, true)),
            outcome: "pending",
            detail: Some("run by an operator".into()),
        };
        let task = self.deps.store.fire_schedule(&fire, now).await?.flatten();
        self.deps.task_ready.notify_one();
        Ok(task)
    }

    /// The briefing's message and task; the message id (and so the dedup key) is derived from
    /// the schedule and the fire time.
    fn briefing(&self, s: &ScheduleRecord, fire_at: i64, manual: bool) -> (InboundEvent, NewTask) {
        let (channel, conversation) = s.spec.target.conversation();
        let id = format!(
            "schedule:{}:{fire_at}{}",
            s.id,
            if manual { ":manual" } else { "" }
        );
        let mut meta = json!({"schedule": s.id, "silent_unless_news": s.spec.silent_unless_news});
        if let crate::config::Target::Webhook {
            callback_url: Some(url),
            ..
        } = &s.spec.target
        {
            meta["callback_url"] = json!(url);
        }
        let event = InboundEvent {
            channel: channel.clone(),
            conversation: conversation.clone(),
            kind: EventKind::Posted(InboundMessage {
                kind: MessageKind::Message,
                channel_message_id: id.clone(),
                sender_id: "scheduler".into(),
                sender_name: Some(format!("schedule {}", s.name)),
                sender_kind: SenderKind::System,
                role: Role::User,
                text: s.spec.prompt.clone().unwrap_or_default(),
                timestamp: chrono::DateTime::from_timestamp_millis(fire_at).unwrap_or_default(),
                reply_to: None,
                source_type: SourceType::Briefing,
                trigger: true,
                agent: None,
                audience: Audience::Everyone,
                meta,
            }),
            cursor: None,
        };
        // The target channel's default agent writes the briefing (its prompt, its name).
        let agent = self
            .deps
            .settings
            .default_agent_for(&channel)
            .unwrap_or_else(|| DEFAULT_AGENT.into());
        let task = NewTask {
            dedup_key: dedup_key(&channel, &conversation, &id, &agent),
            source_type: SourceType::Briefing,
            agent,
            brain: s.spec.brain.clone(),
            max_attempts: self.deps.settings.worker.max_attempts,
        };
        (event, task)
    }

    /// Ticks until shutdown.
    pub async fn run(self) {
        let cancel = self.deps.shutdown.clone();
        let every = self.deps.settings.scheduler.poll_interval;
        loop {
            if let Err(e) = self.tick().await {
                tracing::error!(error = %e, "scheduler cannot reach the store");
            }
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = cancel.cancelled() => break,
            }
        }
    }
}

impl crate::duty::Exclusive for Scheduler {
    fn renew(&self, stop: tokio_util::sync::CancellationToken) -> Self {
        Self::new(Deps {
            shutdown: stop,
            ..self.deps.clone()
        })
    }

    fn drive(self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(self.run())
    }
}
