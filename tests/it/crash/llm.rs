//! A fake OpenAI-compatible LLM server, following the OpenAI Chat Completions API reference:
//! `POST /v1/chat/completions` with a bearer key and `{model, messages, max_tokens}`, answered
//! with `{id, object: "chat.completion", created, model, choices[0].message.content,
//! finish_reason, usage{prompt_tokens, completion_tokens, total_tokens}}`.
//!
//! The answer is derived from the prompt's last user message: it quotes the trigger's tag
//! (`[q0042]`), so every answer can be matched to the trigger that asked for it. Triage prompts
//! (the gateway's fast completer, one user message asking for `{"relevant": [...]}`) get an
//! empty selection. A small random latency makes calls overlap like real ones.
//!
//! Faults, switched on and off by the test: an HTTP status (500, 429 with `Retry-After`), a hang
//! (no answer at all), or a connection closed half-way through the body.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::killer::{Killer, Phase};

pub const API_KEY: &str = "sk-fake-llm-key-for-crash-tests";

/// What the fake does with the next requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LlmFault {
    None,
    /// Answer this status (with `Retry-After: secs` when given) and an OpenAI error body.
    Status(u16, Option<u64>),
    /// Never answer.
    Hang,
    /// Send the status line, headers and half of the body, then close the connection.
    Cut,
}

/// One chat-completions request the fake received.
#[derive(Debug, Clone)]
pub struct LlmCall {
    /// The trigger tag found in the last user message (`None` for triage).
    pub tag: Option<String>,
    pub triage: bool,
    pub at: Instant,
}

struct Inner {
    fault: Mutex<LlmFault>,
    calls: Mutex<Vec<LlmCall>>,
    unauthorized: AtomicUsize,
    latency_ms: (u64, u64),
    killer: Option<Arc<Killer>>,
}

#[derive(Clone)]
pub struct FakeLlm {
    inner: Arc<Inner>,
    base: String,
}

impl FakeLlm {
    /// Serves on `127.0.0.1:0`; `killer` (the crash driver) hears of every answer request.
    pub async fn start(latency_ms: (u64, u64), killer: Option<Arc<Killer>>) -> FakeLlm {
        let inner = Arc::new(Inner {
            fault: Mutex::new(LlmFault::None),
            calls: Mutex::default(),
            unauthorized: AtomicUsize::new(0),
            latency_ms,
            killer,
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(complete))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        FakeLlm { inner, base }
    }

    /// The `base_url` a brain is configured with (`…/v1`).
    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub fn set_fault(&self, fault: LlmFault) {
        *self.inner.fault.lock().unwrap() = fault;
    }

    pub fn calls(&self) -> Vec<LlmCall> {
        self.inner.calls.lock().unwrap().clone()
    }

    /// Answer (non-triage) requests received so far.
    pub fn answer_calls(&self) -> usize {
        self.calls().iter().filter(|c| !c.triage).count()
    }

    pub fn unauthorized(&self) -> usize {
        self.inner.unauthorized.load(Ordering::Relaxed)
    }
}

/// `[q0042]` in a text, if any.
pub fn tag_in(text: &str) -> Option<String> {
    let start = text.find("[q")?;
    let len = text[start..].find(']')?;
    Some(text[start..=start + len].to_owned())
}

/// What the fake answers to the trigger tagged `tag`.
pub fn answer_text(tag: &str) -> String {
    format!("the fake model answers {tag}")
}

async fn complete(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let bearer = format!("Bearer {API_KEY}");
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(bearer.as_str()) {
        inner.unauthorized.fetch_add(1, Ordering::Relaxed);
        return openai_error(StatusCode::UNAUTHORIZED, "invalid_api_key", None);
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let triage = !messages.iter().any(|m| m["role"] == "system")
        && messages.iter().any(|m| {
            m["content"]
                .as_str()
                .is_some_and(|c| c.contains("\"relevant\""))
        });
    let last_user = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let tag = if triage { None } else { tag_in(last_user) };
    let fault = *inner.fault.lock().unwrap();
    inner.calls.lock().unwrap().push(LlmCall {
        tag: tag.clone(),
        triage,
        at: Instant::now(),
    });
    if !triage && let Some(k) = &inner.killer {
        k.event(Phase::Brain);
    }
    match fault {
        LlmFault::None | LlmFault::Cut => {}
        LlmFault::Status(code, retry_after) => {
            let status = StatusCode::from_u16(code).unwrap();
            return openai_error(status, "fake_fault", retry_after);
        }
        LlmFault::Hang => std::future::pending::<()>().await,
    }
    let (lo, hi) = inner.latency_ms;
    let pause = if hi > lo {
        rand::random_range(lo..=hi)
    } else {
        lo
    };
    // Simulated model latency (not synchronisation): calls overlap as with a real provider.
    tokio::time::sleep(Duration::from_millis(pause)).await;
    let text = if triage {
        "{\"relevant\": []}".to_owned()
    } else {
        answer_text(tag.as_deref().unwrap_or("(no tag)"))
    };
    let answer = json!({
        "id": format!("chatcmpl-{}", rand::random::<u32>()),
        "object": "chat.completion",
        "created": chrono::Utc::now().timestamp(),
        "model": body["model"],
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48},
    });
    let bytes = serde_json::to_vec(&answer).unwrap();
    if fault == LlmFault::Cut {
        return cut_response(bytes);
    }
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        bytes,
    )
        .into_response()
}

/// The documented error object (`{"error": {message, type, code}}`).
fn openai_error(status: StatusCode, code: &str, retry_after: Option<u64>) -> Response {
    let body = json!({"error": {"message": format!("fake fault: {code}"), "type": "server_error",
                                "param": null, "code": code}});
    let mut r = (status, axum::Json(body)).into_response();
    if let Some(s) = retry_after {
        r.headers_mut()
            .insert("retry-after", s.to_string().parse().unwrap());
    }
    r
}

/// 200 with the full `Content-Length`, but the connection is closed after half the body.
pub fn cut_response(bytes: Vec<u8>) -> Response {
    let full = bytes.len();
    let half = bytes[..full / 2].to_vec();
    let stream = futures_util::stream::iter([
        Ok::<_, std::io::Error>(bytes::Bytes::from(half)),
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "fake fault: connection closed mid-response",
        )),
    ]);
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    r.headers_mut()
        .insert("content-length", full.to_string().parse().unwrap());
    r
}
