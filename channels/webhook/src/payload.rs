use serde::Deserialize;

/// Limits on what one webhook request may carry.
pub const MAX_ID_LEN: usize = 256;
pub const MAX_TEXT_LEN: usize = 64 * 1024;

/// The JSON body of `POST /webhooks/{name}`. Unknown fields are refused, so a typo in a field name
/// is reported instead of silently dropping data.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WebhookPayload {
    /// The caller's conversation id; messages with the same id share history.
    pub conversation: String,
    /// Who wrote the message (an id in the caller's system).
    pub sender: String,
    /// A display name for the sender.
    #[serde(default)]
    pub sender_name: Option<String>,
    pub text: String,
    /// The caller's id for this message. Re-sending the same id yields the same task.
    #[serde(default)]
    pub message_id: Option<String>,
    /// The `message_id` of an earlier message this one replies to.
    #[serde(default)]
    pub reply_to: Option<String>,
    /// Where the answer is POSTed (signed like the request). Without it the answer is only
    /// readable through the admin API.
    #[serde(default)]
    pub callback_url: Option<String>,
    /// False stores the message as context without asking for an answer.
    #[serde(default = "yes")]
    pub trigger: bool,
    /// The agent that should answer (default: the webhook's agent).
    #[serde(default)]
    pub agent: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("the body is not valid JSON for a webhook message: {0}")]
    Json(String),
    #[error("field `{field}` {problem}")]
    Field {
        field: &'static str,
        problem: &'static str,
    },
}

impl PayloadError {
    pub fn code(&self) -> &'static str {
        match self {
            PayloadError::Json(_) => "invalid_json",
            PayloadError::Field { .. } => "invalid_payload",
        }
    }
}

impl WebhookPayload {
    /// Parses and validates a raw request body.
    pub fn parse(body: &[u8]) -> Result<Self, PayloadError> {
        let payload: WebhookPayload =
            serde_json::from_slice(body).map_err(|e| PayloadError::Json(e.to_string()))?;
        payload.validate()?;
        Ok(payload)
    }

    fn validate(&self) -> Result<(), PayloadError> {
        let id_fields: [(&'static str, Option<&str>); 5] = [
            ("conversation", Some(&self.conversation)),
            ("sender", Some(&self.sender)),
            ("message_id", self.message_id.as_deref()),
            ("reply_to", self.reply_to.as_deref()),
            ("agent", self.agent.as_deref()),
        ];
        for (field, value) in id_fields {
            let Some(value) = value else { continue };
            if value.trim().is_empty() {
                return Err(PayloadError::Field {
                    field,
                    problem: "must not be empty",
                });
            }
            if value.len() > MAX_ID_LEN {
                return Err(PayloadError::Field {
                    field,
                    problem: "is longer than 256 bytes",
                });
            }
            if value.chars().any(char::is_control) {
                return Err(PayloadError::Field {
                    field,
                    problem: "must not contain control characters",
                });
            }
        }
        if self.text.trim().is_empty() {
            return Err(PayloadError::Field {
                field: "text",
                problem: "must not be empty",
            });
        }
        if self.text.len() > MAX_TEXT_LEN {
            return Err(PayloadError::Field {
                field: "text",
                problem: "is longer than 65536 bytes",
            });
        }
        if let Some(url) = &self.callback_url {
            let ok = reqwest::Url::parse(url)
                .map(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
                .unwrap_or(false);
            if !ok {
                return Err(PayloadError::Field {
                    field: "callback_url",
                    problem: "must be an absolute http(s) URL",
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_and_full() {
        let p = WebhookPayload::parse(br#"{"conversation":"c","sender":"u","text":"hi"}"#).unwrap();
        assert!(p.trigger);
        assert_eq!(p.message_id, None);
        let p = WebhookPayload::parse(
            br#"{"conversation":"c","sender":"u","text":"hi","message_id":"m1","reply_to":"m0",
                 "callback_url":"https://example.org/cb","trigger":false,"sender_name":"U"}"#,
        )
        .unwrap();
        assert!(!p.trigger);
        assert_eq!(p.reply_to.as_deref(), Some("m0"));
    }

    #[test]
    fn refusals_name_the_field() {
        let e = WebhookPayload::parse(br#"{"conversation":"c","sender":"u","text":"hi","txt":1}"#)
            .unwrap_err();
        assert_eq!(e.code(), "invalid_json");
        assert!(e.to_string().contains("txt"), "{e}");
        let e =
            WebhookPayload::parse(br#"{"conversation":" ","sender":"u","text":"hi"}"#).unwrap_err();
        assert_eq!(
            e,
            PayloadError::Field {
                field: "conversation",
                problem: "must not be empty"
            }
        );
        let e = WebhookPayload::parse(
            br#"{"conversation":"c","sender":"u","text":"hi","callback_url":"file:///etc/passwd"}"#,
        )
        .unwrap_err();
        assert!(matches!(
            e,
            PayloadError::Field {
                field: "callback_url",
                ..
            }
        ));
        let e = WebhookPayload::parse(b"\xff\xfe").unwrap_err();
        assert_eq!(e.code(), "invalid_json");
    }
}
