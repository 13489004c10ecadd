//! A fault-injecting HTTP proxy in front of the fake Talk server (`ctxgate_talk::fake::FakeTalk`,
//! which follows nextcloud/spreed `docs/chat.md` and `docs/conversation.md`). The gateway talks
//! to the proxy; the proxy forwards every request unchanged and hands back the fake's answer —
//! unless a fault is set for that kind of request:
//!
//! * an HTTP status (500, 503, 429 with `Retry-After`) in the OCS failure envelope,
//! * a hang (before forwarding: Talk never sees the request; after forwarding: the post exists
//!   but its answer never comes, until the client gives up),
//! * a dropped connection (after forwarding: status and headers go out, then the connection is
//!   closed half-way through the body).
//!
//! It also tells the crash driver when Talk created one of the gateway's posts and when a long
//! poll returns new messages, before the gateway sees either answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::killer::{Killer, Phase};

/// Kinds of Talk requests a fault can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// `GET /api/v4/room` (the room list)
    RoomList,
    /// `GET /api/v1/chat/{token}` (long poll or history)
    ChatGet,
    /// `POST /api/v1/chat/{token}` (the gateway's answers)
    ChatPost,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ProxyFault {
    Status(u16, Option<u64>),
    /// Never answer; `forward` sends the request on to Talk first.
    Hang {
        forward: bool,
    },
    /// Forward, then cut the connection in the middle of the answer.
    Drop,
}

/// One request the proxy saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub class: Class,
    pub room: Option<String>,
    pub at: Instant,
}

struct Inner {
    upstream: String,
    http: reqwest::Client,
    faults: Mutex<HashMap<Class, ProxyFault>>,
    seen: Mutex<Vec<Seen>>,
    killer: Option<Arc<Killer>>,
}

#[derive(Clone)]
pub struct TalkProxy {
    inner: Arc<Inner>,
    base: String,
}

const CHAT: &str = "/ocs/v2.php/apps/spreed/api/v1/chat/";
const ROOMS: &str = "/ocs/v2.php/apps/spreed/api/v4/room";

fn classify(method: &Method, path: &str) -> (Class, Option<String>) {
    if let Some(rest) = path.strip_prefix(CHAT) {
        let room = rest.split('/').next().map(str::to_owned);
        let single = !rest.contains('/');
        return match *method {
            Method::GET if single => (Class::ChatGet, room),
            Method::POST if single => (Class::ChatPost, room),
            _ => (Class::Other, room),
        };
    }
    if path == ROOMS && method == Method::GET {
        return (Class::RoomList, None);
    }
    (Class::Other, None)
}

impl TalkProxy {
    pub async fn start(upstream: &str, killer: Option<Arc<Killer>>) -> TalkProxy {
        let inner = Arc::new(Inner {
            upstream: upstream.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            faults: Mutex::default(),
            seen: Mutex::default(),
            killer,
        });
        let app = Router::new().fallback(handle).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        TalkProxy { inner, base }
    }

    /// The Talk `base_url` the gateway is given.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub fn set_fault(&self, class: Class, fault: ProxyFault) {
        self.inner.faults.lock().unwrap().insert(class, fault);
    }

    pub fn clear_faults(&self) {
        self.inner.faults.lock().unwrap().clear();
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.inner.seen.lock().unwrap().clone()
    }
}

async fn handle(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let (class, room) = classify(&parts.method, &path);
    let fault = inner.faults.lock().unwrap().get(&class).copied();
    inner.seen.lock().unwrap().push(Seen {
        class,
        room,
        at: Instant::now(),
    });
    match fault {
        Some(ProxyFault::Status(code, retry_after)) => return ocs_failure(code, retry_after),
        Some(ProxyFault::Hang { forward: false }) => std::future::pending::<()>().await,
        _ => {}
    }
    let body = axum::body::to_bytes(body, 4 << 20)
        .await
        .unwrap_or_default();
    let query = parts
        .uri
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let mut upstream = inner
        .http
        .request(
            parts.method.clone(),
            format!("{}{path}{query}", inner.upstream),
        )
        .body(body);
    for (name, value) in &parts.headers {
        if !matches!(name.as_str(), "host" | "content-length" | "connection") {
            upstream = upstream.header(name, value);
        }
    }
    let answer = match upstream.send().await {
        Ok(a) => a,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = answer.status();
    let headers = answer.headers().clone();
    let bytes = answer.bytes().await.unwrap_or_default();
    if let Some(killer) = &inner.killer {
        let long_poll = parts.uri.query().is_some_and(future);
        match class {
            Class::ChatPost if status == StatusCode::CREATED => killer.event(Phase::TalkPost),
            Class::ChatGet if status == StatusCode::OK && long_poll && has_messages(&bytes) => {
                killer.event(Phase::TalkIntake)
            }
            _ => {}
        }
    }
    match fault {
        Some(ProxyFault::Hang { forward: true }) => std::future::pending::<()>().await,
        Some(ProxyFault::Drop) => return super::llm::cut_response(bytes.to_vec()),
        _ => {}
    }
    respond(status, &headers, bytes)
}

fn future(query: &str) -> bool {
    query.split('&').any(|kv| kv == "lookIntoFuture=1")
}

fn has_messages(bytes: &Bytes) -> bool {
    serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|v| v["ocs"]["data"].as_array().map(|a| !a.is_empty()))
        .unwrap_or(false)
}

fn respond(status: StatusCode, headers: &HeaderMap, bytes: Bytes) -> Response {
    let mut r = Response::new(Body::from(bytes));
    *r.status_mut() = status;
    for (name, value) in headers {
        if !matches!(
            name.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            r.headers_mut().append(name, value.clone());
        }
    }
    r
}

/// The OCS failure envelope Talk answers errors with (`{"ocs": {"meta": …, "data": []}}`).
fn ocs_failure(code: u16, retry_after: Option<u64>) -> Response {
    let status = StatusCode::from_u16(code).unwrap();
    let body = json!({"ocs": {"meta": {"status": "failure", "statuscode": code,
                                       "message": status.canonical_reason()},
                              "data": []}});
    let mut r = (status, axum::Json(body)).into_response();
    if let Some(s) = retry_after {
        r.headers_mut()
            .insert("retry-after", s.to_string().parse().unwrap());
    }
    r
}
