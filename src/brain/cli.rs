//! A command run per task (a coding agent): the prompt on stdin or in a file, the answer from
//! stdout (plain, or a field of a JSON object), a timeout that kills the whole process group, an
//! environment of allow-listed variables only, and a working directory per conversation.
//! Agents that can resume a session by id get `resume_args`; when a resumed run fails, the
//! worker restores the session from the store (see `BrainError::SessionLost`).

use std::path::PathBuf;
use std::process::Stdio;

use async_trait::async_trait;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::{Brain, BrainError, BrainReply, BrainRequest};
use crate::config::{BrainSettings, CliOutput, PromptInput};
use crate::domain::Usage;

/// Most characters of stderr kept in an error.
const STDERR_IN_ERRORS: usize = 1000;

/// Kills a process group when dropped, unless disarmed (`.0 = None`).
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.take() {
            // SAFETY: kill(2) with a negative pid signals a process group; no memory is touched.
            unsafe {
                libc::kill(-(pgid as i32), libc::SIGKILL);
            }
        }
    }
}

pub struct CliBrain {
    settings: BrainSettings,
}

impl CliBrain {
    pub fn new(settings: &BrainSettings) -> Self {
        Self {
            settings: settings.clone(),
        }
    }
}

/// The prompt as plain text, in the documented order: system prompt, restored notice, the
/// conversation so far (oldest first), then the message to answer.
pub fn render(request: &BrainRequest) -> String {
    let mut p = String::new();
    if !request.system.is_empty() {
        p.push_str(&request.system);
        p.push_str("\n\n");
    }
    if let Some(n) = &request.restored_notice {
        p.push_str(n);
        p.push_str("\n\n");
    }
    if !request.context.is_empty() {
        p.push_str("Conversation so far:\n");
        for t in &request.context {
            let who = if t.role == ctxgate_contract::Role::Assistant {
                "assistant"
            } else {
                &t.speaker
            };
            p.push_str(&format!(
                "[{}] {}: {}\n",
                t.timestamp.format("%Y-%m-%d %H:%M"),
                who,
                t.text
            ));
        }
        p.push('\n');
    }
    p.push_str(&format!(
        "New message from {}:\n{}\n",
        request.message.speaker, request.message.text
    ));
    p
}

fn tail(s: &str) -> String {
    let n = s.chars().count();
    s.chars()
        .skip(n.saturating_sub(STDERR_IN_ERRORS))
        .collect::<String>()
        .trim()
        .to_owned()
}

impl CliBrain {
    fn workdir(&self, request: &BrainRequest) -> PathBuf {
        self.settings
            .workdir
            .join(format!("conversation-{}", request.conversation_id))
    }

    fn parse(&self, stdout: &str) -> Result<(String, Option<String>, Usage), BrainError> {
        let s = &self.settings;
        if s.output == CliOutput::Plain {
            return Ok((stdout.trim().to_owned(), None, Usage::default()));
        }
        // The last line that is a JSON object (agents may log before it).
        let value: serde_json::Value = stdout
            .lines()
            .rev()
            .filter(|l| l.trim_start().starts_with('{'))
            .find_map(|l| serde_json::from_str(l).ok())
            .or_else(|| serde_json::from_str(stdout).ok())
            .ok_or_else(|| {
                BrainError::Permanent(format!(
                    "the agent printed no JSON object; stdout: {}",
                    tail(stdout)
                ))
            })?;
        let text = value
            .get(&s.answer_field)
            .and_then(|v| v.as_str())
            .ok_or_else(|| {
                BrainError::Permanent(format!(
                    "the agent's JSON has no string field {:?}",
                    s.answer_field
                ))
            })?
            .to_owned();
        let session = s
            .session_field
            .as_ref()
            .and_then(|f| value.get(f))
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        let usage = value.get("usage").map_or_else(Usage::default, |u| {
            let n = |keys: [&str; 2]| {
                keys.iter()
                    .find_map(|k| u.get(*k).and_then(|v| v.as_u64()))
                    .unwrap_or(0)
            };
            Usage {
                prompt_tokens: n(["input_tokens", "prompt_tokens"]),
                completion_tokens: n(["output_tokens", "completion_tokens"]),
            }
        });
        Ok((text, session, usage))
    }
}

#[async_trait]
impl Brain for CliBrain {
    fn keeps_sessions(&self) -> bool {
        !self.settings.resume_args.is_empty()
    }

    #[tracing::instrument(skip_all, fields(task_id = request.task_id))]
    async fn complete(&self, request: &BrainRequest) -> Result<BrainReply, BrainError> {
        let s = &self.settings;
        let prompt = render(request);
        let dir = self.workdir(request);
        std::fs::create_dir_all(&dir).map_err(|e| {
            BrainError::Permanent(format!(
                "cannot create the working directory {}: {e}",
                dir.display()
            ))
        })?;
        let prompt_file = dir.join(format!(".ctxgate-prompt-{}.txt", request.task_id));
        if s.prompt_input == PromptInput::File {
            std::fs::write(&prompt_file, &prompt)
                .map_err(|e| BrainError::Permanent(format!("cannot write the prompt file: {e}")))?;
        }
        let file_arg = prompt_file.display().to_string();
        let mut args: Vec<String> = s.command[1..]
            .iter()
            .map(|a| a.replace("{prompt_file}", &file_arg))
            .collect();
        let resuming = request.session.is_some() && self.keeps_sessions();
        if let Some(session) = request.session.as_deref().filter(|_| resuming) {
            args.extend(
                s.resume_args
                    .iter()
                    .map(|a| a.replace("{session}", session)),
            );
        }
        let mut command = Command::new(&s.command[0]);
        command
            .args(&args)
            .current_dir(&dir)
            .env_clear()
            .envs(
                s.env_allow
                    .iter()
                    .filter_map(|k| std::env::var(k).ok().map(|v| (k, v))),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| BrainError::Permanent(format!("cannot start {:?}: {e}", s.command[0])))?;
        let pgid = child.id();
        // However this call ends — timeout, or the task being dropped at shutdown — whatever the
        // agent started goes with it.
        let mut group = GroupGuard(pgid);
        if let Some(mut stdin) = child.stdin.take() {
            if s.prompt_input == PromptInput::Stdin {
                // An agent that exits without reading its input is not an error here.
                let _ = stdin.write_all(prompt.as_bytes()).await;
            }
            drop(stdin);
        }
        let output = match tokio::time::timeout(s.timeout, child.wait_with_output()).await {
            Ok(result) => {
                group.0 = None;
                result.map_err(|e| {
                    BrainError::Permanent(format!("waiting for the agent failed: {e}"))
                })?
            }
            Err(_) => {
                drop(group);
                let _ = std::fs::remove_file(&prompt_file);
                return Err(BrainError::Timeout(s.timeout));
            }
        };
        let _ = std::fs::remove_file(&prompt_file);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            let what = format!("the agent exited with {}: {}", output.status, tail(&stderr));
            return Err(if resuming {
                BrainError::SessionLost(what)
            } else {
                BrainError::Permanent(what)
            });
        }
        let (text, session, usage) = self.parse(&stdout)?;
        if text.is_empty() {
            return Err(BrainError::Permanent(
                "the agent printed an empty answer".into(),
            ));
        }
        Ok(BrainReply {
            session,
            ..BrainReply::text(text, usage)
        })
    }
}
