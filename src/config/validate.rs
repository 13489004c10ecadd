use std::path::Path;

use super::{ConfigError, Secret, Settings};

impl Settings {
    /// Checks that need more than types, and reads secrets from their `*_file`s.
    /// `origin_of(key)` names where a key was set (file or environment variable).
    pub(super) fn validate(&self, origin_of: &dyn Fn(&str) -> String) -> Result<(), ConfigError> {
        let fail = |key: &str, msg: &str| Err(ConfigError::key(origin_of(key), key, msg));
        let w = &self.worker;
        if w.count == 0 {
            return fail("worker.count", "must be at least 1");
        }
        if w.max_attempts == 0 {
            return fail("worker.max_attempts", "must be at least 1");
        }
        if w.retry_backoff.is_empty() {
            return fail("worker.retry_backoff", "must list at least one duration");
        }
        if w.heartbeat.is_zero() || w.heartbeat * 2 > w.lease {
            return fail(
                "worker.heartbeat",
                "must be more than zero and at most half of worker.lease",
            );
        }
        if self.outbox.max_attempts == 0 {
            return fail("outbox.max_attempts", "must be at least 1");
        }
        if self.outbox.lease.is_zero() {
            return fail("outbox.lease", "must be more than zero");
        }
        if !self.store.url.starts_with("sqlite:")
            && !crate::store::postgres::is_postgres_url(&self.store.url)
        {
            return fail(
                "store.url",
                "must start with sqlite:// (e.g. sqlite://data/ctxgate.db), be sqlite::memory:, or be a postgres:// URL",
            );
        }
        if self.store.read_connections == 0 {
            return fail("store.read_connections", "must be at least 1");
        }
        if self.http.body_limit_bytes < 1024 {
            return fail("http.body_limit_bytes", "must be at least 1024");
        }
        if !self.brains.contains_key("default") {
            return fail("brains", "a brain named `default` is required");
        }
        for (name, brain) in &self.brains {
            if let Err((key, message)) = brain.check() {
                return fail(&format!("brains.{name}.{key}"), message);
            }
            if let Some(f) = &brain.fallback
                && (f == name || !self.brains.contains_key(f))
            {
                return fail(
                    &format!("brains.{name}.fallback"),
                    "must name another configured brain",
                );
            }
        }
        for (name, hook) in &self.webhooks {
            let key = format!("webhooks.{name}");
            if !valid_name(name) {
                return fail(
                    &key,
                    "webhook names use lowercase letters, digits, '-' and '_' only",
                );
            }
            if !self.brains.contains_key(&hook.brain) {
                return fail(&format!("{key}.brain"), "names no configured brain");
            }
            if hook.enabled && hook.secret.is_none() && hook.secret_file.is_none() {
                return fail(&format!("{key}.secret"), "set secret or secret_file");
            }
        }
        for (name, talk) in &self.talk {
            let key = format!("talk.{name}");
            if !valid_name(name) {
                return fail(
                    &key,
                    "Talk account names use lowercase letters, digits, '-' and '_' only",
                );
            }
            if let Err((field, message)) = talk.check() {
                return fail(&format!("{key}.{field}"), &message);
            }
            if !self.brains.contains_key(&talk.brain) {
                return fail(&format!("{key}.brain"), "names no configured brain");
            }
        }
        for (name, mail) in &self.email {
            let key = format!("email.{name}");
            if !valid_name(name) {
                return fail(
                    &key,
                    "mailbox names use lowercase letters, digits, '-' and '_' only",
                );
            }
            if let Err((field, message)) = mail.check() {
                return fail(&format!("{key}.{field}"), &message);
            }
            if !self.brains.contains_key(&mail.brain) {
                return fail(&format!("{key}.brain"), "names no configured brain");
            }
        }
        let mut names = std::collections::HashSet::new();
        for (i, s) in self.schedules.iter().enumerate() {
            let key = format!("schedules[{i}]");
            if !names.insert(s.name.as_str()) || s.name.trim().is_empty() {
                return fail(&format!("{key}.name"), "must be present and unique");
            }
            if let Err(e) = crate::scheduler::CronSpec::parse(&s.cron, &s.timezone) {
                return fail(&format!("{key}.cron"), &e);
            }
            if s.prompt.is_none() && s.prompt_file.is_none() {
                return fail(&format!("{key}.prompt"), "set prompt or prompt_file");
            }
            if !self.brains.contains_key(&s.brain) {
                return fail(&format!("{key}.brain"), "names no configured brain");
            }
            if let Err(e) = self.check_target(&s.target) {
                return fail(&format!("{key}.target"), &e);
            }
        }
        self.validate_agents(origin_of)?;
        let model = &self.conversation.selection_model;
        if model != "fast" && !self.brains.contains_key(model) {
            return fail(
                "conversation.selection_model",
                "must be \"fast\" (the task brain's fast completer) or the name of a brain",
            );
        }
        Ok(())
    }

    fn validate_agents(&self, origin_of: &dyn Fn(&str) -> String) -> Result<(), ConfigError> {
        let fail = |key: &str, msg: &str| Err(ConfigError::key(origin_of(key), key, msg));
        let mut ids = std::collections::HashSet::new();
        let channels = self.channel_instances();
        for (i, a) in self.agents.iter().enumerate() {
            let key = format!("agents[{i}]");
            if !valid_name(&a.id) || a.id.len() > 32 {
                return fail(
                    &format!("{key}.id"),
                    "agent ids use 1–32 lowercase letters, digits, '-' and '_'",
                );
            }
            if !ids.insert(a.id.as_str()) {
                return fail(&format!("{key}.id"), "must be unique");
            }
            if a.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
                return fail(&format!("{key}.name"), "must not be empty");
            }
            if let Some(b) = &a.brain
                && !self.brains.contains_key(b)
            {
                return fail(&format!("{key}.brain"), "names no configured brain");
            }
            for c in &a.serves {
                if !channels.contains(c) {
                    return fail(
                        &format!("{key}.serves"),
                        &format!(
                            "{c:?} is no configured channel instance (configured: {})",
                            channels.join(", ")
                        ),
                    );
                }
            }
            if a.session_max_input_tokens == 0 {
                return fail(
                    &format!("{key}.session_max_input_tokens"),
                    "must be at least 1",
                );
            }
            if a.session_idle_timeout.is_zero() {
                return fail(
                    &format!("{key}.session_idle_timeout"),
                    "must be more than zero",
                );
            }
        }
        if self.agents.is_empty() {
            return Ok(());
        }
        for c in &channels {
            let serving = self.agents_serving(c);
            if serving.is_empty() {
                return fail(
                    "agents",
                    &format!(
                        "no agent serves {c}: add it to an agent's `serves`, or leave `serves` empty"
                    ),
                );
            }
            let defaults: Vec<&str> = serving
                .iter()
                .filter(|a| a.default)
                .map(|a| a.id.as_str())
                .collect();
            if defaults.len() > 1 {
                return fail(
                    "agents",
                    &format!("{c} has several default agents: {}", defaults.join(", ")),
                );
            }
        }
        Ok(())
    }

    /// The enabled channel instances (`webhook:<name>`, `talk:<name>`, `email:<name>`).
    pub fn channel_instances(&self) -> Vec<String> {
        let webhooks = self
            .webhooks
            .iter()
            .filter(|(_, w)| w.enabled)
            .map(|(n, _)| format!("webhook:{n}"));
        let talk = self
            .talk
            .iter()
            .filter(|(_, t)| t.enabled)
            .map(|(n, _)| format!("talk:{n}"));
        let email = self
            .email
            .iter()
            .filter(|(_, e)| e.enabled)
            .map(|(n, _)| format!("email:{n}"));
        webhooks.chain(talk).chain(email).collect()
    }

    /// Whether a schedule target can be delivered to with the channels configured.
    pub fn check_target(&self, target: &super::Target) -> Result<(), String> {
        match target {
            super::Target::Webhook {
                webhook,
                conversation,
                callback_url,
            } => {
                if !self.webhooks.get(webhook).is_some_and(|w| w.enabled) {
                    return Err(format!("no enabled webhook named {webhook:?}"));
                }
                if conversation.trim().is_empty() {
                    return Err("the conversation must not be empty".into());
                }
                if let Some(url) = callback_url
                    && !(url.starts_with("http://") || url.starts_with("https://"))
                {
                    return Err("callback_url must be an http(s) URL".into());
                }
                Ok(())
            }
            super::Target::Talk { account, room } => {
                if !self.talk.get(account).is_some_and(|t| t.enabled) {
                    return Err(format!("no enabled Talk account named {account:?}"));
                }
                if room.trim().is_empty() {
                    return Err("the room token must not be empty".into());
                }
                Ok(())
            }
            super::Target::Email { account, to } => {
                if !self.email.get(account).is_some_and(|e| e.enabled) {
                    return Err(format!("no enabled mailbox named {account:?}"));
                }
                if !to.contains('@') {
                    return Err(format!("{to:?} is not an e-mail address"));
                }
                Ok(())
            }
        }
    }

    /// Checks on secrets, once they are read from their files.
    pub(super) fn validate_secrets(
        &self,
        origin_of: &dyn Fn(&str) -> String,
    ) -> Result<(), ConfigError> {
        let fail = |key: &str, msg: &str| Err(ConfigError::key(origin_of(key), key, msg));
        for (key, token) in [
            ("admin.token", &self.admin.token),
            ("admin.read_only_token", &self.admin.read_only_token),
        ] {
            if let Some(t) = token
                && t.expose().len() < 16
            {
                return fail(key, "must be at least 16 characters");
            }
        }
        if self.admin.read_only_token.is_some() && self.admin.token.is_none() {
            return fail("admin.read_only_token", "needs admin.token as well");
        }
        for (name, talk) in self.talk.iter().filter(|(_, t)| t.enabled) {
            if talk.mode == super::TalkMode::Bot
                && talk.secret.as_ref().is_some_and(|s| s.expose().len() < 40)
            {
                return fail(
                    &format!("talk.{name}.secret"),
                    "Talk requires bot secrets of at least 40 characters",
                );
            }
        }
        for (name, hook) in &self.webhooks {
            if let Some(s) = &hook.secret
                && s.expose().len() < 16
            {
                return fail(
                    &format!("webhooks.{name}.secret"),
                    "must be at least 16 characters",
                );
            }
        }
        Ok(())
    }

    /// Reads secrets given as files. A webhook secret file that does not exist yet is left for
    /// start-up to generate; the admin token file must exist.
    pub fn resolve_secrets(&mut self) -> Result<(), ConfigError> {
        if self.admin.token.is_none()
            && let Some(path) = &self.admin.token_file
        {
            self.admin.token = Some(read_secret(path, "admin.token_file")?);
        }
        if self.admin.read_only_token.is_none()
            && let Some(path) = &self.admin.read_only_token_file
        {
            self.admin.read_only_token = Some(read_secret(path, "admin.read_only_token_file")?);
        }
        for (name, brain) in self.brains.iter_mut() {
            if brain.api_key.is_none() {
                if let Some(path) = &brain.api_key_file {
                    brain.api_key =
                        Some(read_secret(path, &format!("brains.{name}.api_key_file"))?);
                } else if let Some(var) = &brain.api_key_env {
                    let value = std::env::var(var).map_err(|_| {
                        ConfigError::key(
                            "environment",
                            format!("brains.{name}.api_key_env"),
                            format!("the environment variable {var} is not set"),
                        )
                    })?;
                    brain.api_key = Some(Secret::new(value));
                }
            }
            if let Some(path) = &brain.system_prompt_file {
                brain.system_prompt =
                    read_prompt(path, &format!("brains.{name}.system_prompt_file"))?;
            }
        }
        for (i, s) in self.schedules.iter_mut().enumerate() {
            if let Some(path) = &s.prompt_file {
                s.prompt = Some(read_prompt(path, &format!("schedules[{i}].prompt_file"))?);
            }
        }
        for (name, mail) in self.email.iter_mut() {
            if mail.password.is_none()
                && let Some(path) = &mail.password_file
            {
                mail.password = Some(read_secret(path, &format!("email.{name}.password_file"))?);
            }
            if let Some(path) = &mail.system_prompt_file {
                mail.system_prompt = Some(read_prompt(
                    path,
                    &format!("email.{name}.system_prompt_file"),
                )?);
            }
        }
        for (i, agent) in self.agents.iter_mut().enumerate() {
            if let Some(path) = &agent.system_prompt_file {
                agent.system_prompt = Some(read_prompt(
                    path,
                    &format!("agents[{i}].system_prompt_file"),
                )?);
            }
        }
        for (name, talk) in self.talk.iter_mut() {
            if talk.password.is_none()
                && let Some(path) = &talk.password_file
            {
                talk.password = Some(read_secret(path, &format!("talk.{name}.password_file"))?);
            }
            if talk.secret.is_none()
                && let Some(path) = &talk.secret_file
            {
                talk.secret = Some(read_secret(path, &format!("talk.{name}.secret_file"))?);
            }
            if let Some(path) = &talk.system_prompt_file {
                talk.system_prompt = Some(read_prompt(
                    path,
                    &format!("talk.{name}.system_prompt_file"),
                )?);
            }
        }
        for (name, hook) in self.webhooks.iter_mut() {
            if let Some(path) = &hook.system_prompt_file {
                hook.system_prompt = Some(read_prompt(
                    path,
                    &format!("webhooks.{name}.system_prompt_file"),
                )?);
            }
            if hook.secret.is_none()
                && let Some(path) = &hook.secret_file
                && path.exists()
            {
                hook.secret = Some(read_secret(path, &format!("webhooks.{name}.secret_file"))?);
            }
        }
        Ok(())
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

fn read_prompt(path: &Path, key: &str) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| {
        ConfigError::key(
            path.display().to_string(),
            key,
            format!("cannot read the prompt file: {e}"),
        )
    })
}

fn read_secret(path: &Path, key: &str) -> Result<Secret, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError::key(
            path.display().to_string(),
            key,
            format!("cannot read the secret file: {e}"),
        )
    })?;
    let value = text.trim_end();
    if value.is_empty() {
        return Err(ConfigError::key(
            path.display().to_string(),
            key,
            "the secret file is empty",
        ));
    }
    Ok(Secret::new(value))
}
