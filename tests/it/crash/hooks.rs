//! The webhook side of the tests: a sender of signed triggers that retries until the gateway
//! has stored them (as a real caller would across a restart), and the receiver of the signed
//! answer callbacks (`channels/webhook/src/sink.rs`: JSON body with `idempotency_key`, the same
//! key in an `idempotency-key` header, `X-Ctxgate-Signature` over `"{timestamp}.{body}"`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use ctxgate_webhook::signature;
use serde_json::{Value, json};

use super::killer::{Killer, Phase};
use super::llm::tag_in;

/// One callback as received.
#[derive(Debug, Clone)]
pub struct Callback {
    pub key: String,
    pub tag: Option<String>,
    pub conversation: String,
}

struct Inner {
    secret: Vec<u8>,
    got: Mutex<Vec<Callback>>,
    bad_signatures: Mutex<usize>,
    killer: Option<Arc<Killer>>,
}

#[derive(Clone)]
pub struct CallbackReceiver {
    inner: Arc<Inner>,
    url: String,
}

impl CallbackReceiver {
    pub async fn start(secret: &str, killer: Option<Arc<Killer>>) -> CallbackReceiver {
        let inner = Arc::new(Inner {
            secret: secret.as_bytes().to_vec(),
            got: Mutex::default(),
            bad_signatures: Mutex::new(0),
            killer,
        });
        let app = Router::new()
            .route("/cb", post(receive))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/cb", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        CallbackReceiver { inner, url }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn callbacks(&self) -> Vec<Callback> {
        self.inner.got.lock().unwrap().clone()
    }

    pub fn bad_signatures(&self) -> usize {
        *self.inner.bad_signatures.lock().unwrap()
    }
}

async fn receive(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let now = chrono::Utc::now().timestamp();
    if signature::verify(
        &inner.secret,
        header(signature::SIGNATURE_HEADER),
        header(signature::TIMESTAMP_HEADER),
        &body,
        now,
        300,
    )
    .is_err()
    {
        *inner.bad_signatures.lock().unwrap() += 1;
        return StatusCode::UNAUTHORIZED;
    }
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let key = v["idempotency_key"].as_str().unwrap_or_default().to_owned();
    assert_eq!(
        header("idempotency-key"),
        Some(key.as_str()),
        "the header and the body carry the same idempotency key"
    );
    let text = v["text"].as_str().unwrap_or_default();
    inner.got.lock().unwrap().push(Callback {
        key,
        tag: tag_in(text),
        conversation: v["conversation"].as_str().unwrap_or_default().to_owned(),
    });
    if let Some(k) = &inner.killer {
        k.event(Phase::Callback);
    }
    StatusCode::OK
}

/// Sends signed webhook triggers to a gateway.
#[derive(Clone)]
pub struct Sender {
    pub base: String,
    pub secret: String,
    pub callback_url: String,
    pub http: reqwest::Client,
    pub killer: Option<Arc<Killer>>,
}

/// What sending one trigger took.
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    /// POSTs until one was answered 202.
    pub attempts: u32,
    /// The last 202 said the message was already stored.
    pub duplicate: bool,
}

impl Sender {
    /// POSTs the trigger (same `message_id` every time, freshly signed) until the gateway answers
    /// 202; a gateway that is down or dying is simply tried again.
    pub async fn send(&self, conversation: &str, message_id: &str, text: &str) -> Sent {
        let raw = serde_json::to_vec(&json!({
            "conversation": conversation, "sender": "caller", "sender_name": "Caller",
            "text": text, "message_id": message_id, "callback_url": self.callback_url,
        }))
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut attempts = 0;
        loop {
            attempts += 1;
            if let Some(k) = &self.killer {
                k.event(Phase::WebhookIntake);
            }
            let ts = chrono::Utc::now().timestamp();
            let sent = self
                .http
                .post(format!("{}/webhooks/default", self.base))
                .header("content-type", "application/json")
                .header(signature::TIMESTAMP_HEADER, ts.to_string())
                .header(
                    signature::SIGNATURE_HEADER,
                    signature::sign(self.secret.as_bytes(), ts, &raw),
                )
                .timeout(Duration::from_secs(10))
                .body(raw.clone())
                .send()
                .await;
            if let Ok(r) = sent
                && r.status() == StatusCode::ACCEPTED
            {
                let body: Value = r.json().await.unwrap_or_default();
                return Sent {
                    attempts,
                    duplicate: body["duplicate"] == true,
                };
            }
            assert!(
                Instant::now() < deadline,
                "the gateway never accepted trigger {message_id}"
            );
            // The gateway is restarting: try again shortly (a caller's retry interval).
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
