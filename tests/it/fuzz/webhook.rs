//! Target: the webhook payload JSON and its signature, then the real route.

use std::sync::{Arc, LazyLock};

use super::engine::Outcome;
use super::support::{AcceptAll, no_controls, through_router};

const WEBHOOK_SECRET: &str = "test-webhook-secret-0123456789";
const WINDOW: i64 = 300;

static WEBHOOK_ROUTER: LazyLock<axum::Router> = LazyLock::new(|| {
    let endpoint = ctxgate_webhook::WebhookEndpoint {
        name: "default".into(),
        secret: WEBHOOK_SECRET.as_bytes().to_vec(),
        agent: None,
        window_secs: WINDOW,
    };
    ctxgate_webhook::WebhookReceiver::new(vec![endpoint], Arc::new(AcceptAll)).router()
});

pub fn run(input: &[u8]) -> Outcome {
    use ctxgate_webhook::signature::{self, SignatureError};
    use ctxgate_webhook::{PayloadError, WebhookPayload};
    let secret = WEBHOOK_SECRET.as_bytes();
    let now = 1_767_225_600;

    // Signatures: a timestamp taken from the input verifies exactly when it is in the window.
    let ts = i64::from_le_bytes(
        input
            .iter()
            .copied()
            .chain(std::iter::repeat(0))
            .take(8)
            .collect::<Vec<u8>>()
            .try_into()
            .expect("8 bytes"),
    ) % 1_000
        + now
        - 500;
    let sig = signature::sign(secret, ts, input);
    let verdict = signature::verify(
        secret,
        Some(&sig),
        Some(&ts.to_string()),
        input,
        now,
        WINDOW,
    );
    match verdict {
        Ok(canonical) if now.abs_diff(ts) <= WINDOW as u64 => {
            if format!("sha256={canonical}") != sig {
                return Err(format!("canonical {canonical} differs from {sig}"));
            }
        }
        Err(SignatureError::Stale { .. }) if now.abs_diff(ts) > WINDOW as u64 => {}
        other => return Err(format!("timestamp {ts} at {now}: {other:?}")),
    }
    // Header values taken from the input (split at newlines) never verify and never panic.
    let mut parts = input.splitn(3, |b| *b == b'\n');
    let sig_header = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let ts_header = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let body = parts.next().unwrap_or_default();
    if let Ok(c) = signature::verify(
        secret,
        Some(&sig_header),
        Some(&ts_header),
        body,
        now,
        WINDOW,
    ) {
        return Err(format!("forged headers verified as {c}"));
    }

    // The payload.
    let parsed = match WebhookPayload::parse(input) {
        Ok(p) => {
            for (field, value) in [
                ("conversation", Some(&p.conversation)),
                ("sender", Some(&p.sender)),
                ("message_id", p.message_id.as_ref()),
                ("reply_to", p.reply_to.as_ref()),
                ("agent", p.agent.as_ref()),
            ] {
                let Some(value) = value else { continue };
                // docs/webhooks.md: not empty, at most 256 bytes, no control characters.
                if value.trim().is_empty() || value.len() > 256 {
                    return Err(format!("{field} {value:?} was accepted"));
                }
                no_controls(field, value)?;
            }
            if p.text.trim().is_empty() || p.text.len() > 64 * 1024 {
                return Err(format!("a text of {} bytes was accepted", p.text.len()));
            }
            if let Some(url) = &p.callback_url {
                let u = reqwest::Url::parse(url).map_err(|e| format!("callback {url:?}: {e}"))?;
                if !matches!(u.scheme(), "http" | "https") {
                    return Err(format!("callback {url:?} was accepted"));
                }
            }
            "ok".to_owned()
        }
        Err(e) => {
            let code = e.code();
            if !matches!(
                (&e, code),
                (PayloadError::Json(_), "invalid_json")
                    | (PayloadError::Field { .. }, "invalid_payload")
            ) || e.to_string().is_empty()
            {
                return Err(format!("an unnamed refusal {e:?}"));
            }
            format!("err {code}")
        }
    };

    // The same body through the real route, signed now.
    let now = chrono::Utc::now().timestamp();
    let request = axum::http::Request::post("/webhooks/default")
        .header(signature::TIMESTAMP_HEADER, now.to_string())
        .header(
            signature::SIGNATURE_HEADER,
            signature::sign(secret, now, input),
        )
        .body(axum::body::Body::from(input.to_vec()))
        .map_err(|e| e.to_string())?;
    let http = through_router(&WEBHOOK_ROUTER, request)?;
    Ok(format!("{parsed}; {http}"))
}

pub const TOKENS: &[&[u8]] = &[
    b"\"conversation\":",
    b"\"sender\":",
    b"\"sender_name\":",
    b"\"text\":",
    b"\"message_id\":",
    b"\"reply_to\":",
    b"\"callback_url\":\"http://",
    b"\"callback_url\":\"file:///",
    b"\"trigger\":",
    b"\"agent\":",
    b"sha256=",
    b"\n",
    b"1767225600\n",
];
