//! Hostile input and security, through the real entry points: oversized, deeply nested and
//! invalid bodies on the webhook, Talk bot and admin routes; the admin token on every admin route
//! (enumerated from the route table and the OpenAPI document); stale and replayed webhook
//! signatures; header injection into our e-mail replies; and conversation isolation of the
//! context under random interleavings of many conversations.
//!
//! This file holds what the parts share: an app with a Talk account in bot mode, signed requests
//! and the checks of the JSON error shape.

mod auth;
mod bodies;
mod email;
mod isolation;

use ctxgate::config::{Secret, TalkMode, TalkSettings};
use ctxgate_talk::bot;
use ctxgate_webhook::signature;
use reqwest::Method;
use serde_json::Value;

use crate::helpers::{ADMIN_TOKEN, SECRET, TestApp, spawn_app_with};

/// The bot secret and server of the Talk account in bot mode (`docs/bots.md`).
pub const BOT_SECRET: &str = "a-bot-secret-of-at-least-forty-characters-0123";
pub const BOT_BACKEND: &str = "https://cloud.example.org";
/// The body limit of the app that checks 413s.
pub const SMALL_LIMIT: usize = 4096;
/// Nesting far beyond serde_json's recursion limit of 128.
pub const DEEP: usize = 10_000;

pub async fn app_with_bot(body_limit: usize) -> TestApp {
    spawn_app_with(|s| {
        s.http.body_limit_bytes = body_limit;
        s.talk.insert(
            "bots".into(),
            TalkSettings {
                base_url: BOT_BACKEND.into(),
                mode: TalkMode::Bot,
                secret: Some(Secret::new(BOT_SECRET)),
                bot_name: "assistant".into(),
                ..TalkSettings::default()
            },
        );
    })
    .await
}

/// A webhook body signed now with the test secret.
pub async fn post_webhook_raw(app: &TestApp, body: &[u8]) -> reqwest::Response {
    let ts = chrono::Utc::now().timestamp();
    app.post_signed(body, ts, &signature::sign(SECRET.as_bytes(), ts, body))
        .await
}

/// A Talk bot event signed like Talk signs it.
pub async fn post_bot_raw(app: &TestApp, body: &[u8]) -> reqwest::Response {
    let random = bot::random_token();
    app.http
        .post(format!("{}/talk/bots/bot", app.base))
        .header(bot::RANDOM_HEADER, &random)
        .header(bot::SIGNATURE_HEADER, bot::sign(BOT_SECRET, &random, body))
        .header(bot::BACKEND_HEADER, BOT_BACKEND)
        .body(body.to_vec())
        .send()
        .await
        .unwrap()
}

pub async fn admin_raw(
    app: &TestApp,
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
) -> reqwest::Response {
    let mut r = app
        .http
        .request(method, format!("{}{path}", app.base))
        .bearer_auth(ADMIN_TOKEN);
    if let Some(body) = body {
        r = r.header("content-type", "application/json").body(body);
    }
    r.send().await.unwrap()
}

/// Status and error code of an error answer, which must be the JSON error shape.
pub async fn error_of(r: reqwest::Response) -> (u16, String) {
    let status = r.status().as_u16();
    let content_type = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = r.text().await.unwrap();
    assert!(
        content_type.starts_with("application/json"),
        "{status} answered {content_type:?}: {body}"
    );
    let json: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    let code = json["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("{status} without an error code: {body}"))
        .to_owned();
    (status, code)
}

/// The OpenAPI document's operations as (METHOD, path).
pub async fn documented_operations(app: &TestApp) -> Vec<(String, String, Value)> {
    let doc: Value = app.admin_json("/admin/openapi.json").await;
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            ops.push((method.to_uppercase(), path.clone(), op.clone()));
        }
    }
    assert!(ops.len() >= 20, "{ops:?}");
    ops
}

pub fn concrete(path: &str) -> String {
    path.replace("{id}", "1")
        .replace("{name}", "default")
        .replace("{account}", "bots")
}

pub async fn task_count(app: &TestApp) -> usize {
    app.admin_json("/admin/tasks?limit=500").await["items"]
        .as_array()
        .unwrap()
        .len()
}
