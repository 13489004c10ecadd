//! Hostile bodies through the real HTTP entry points: oversized (with and without a length),
//! 10,000 levels deep, invalid UTF-8, lone surrogates, NUL, huge numbers; and hostile path and
//! query parameters on the admin routes. Always a 4xx in the JSON error shape, never a 5xx.

use std::collections::BTreeSet;
use std::time::Duration;

use ctxgate_talk::bot;
use ctxgate_webhook::signature;
use reqwest::Method;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{
    DEEP, SMALL_LIMIT, admin_raw, app_with_bot, concrete, documented_operations, error_of,
    post_bot_raw, post_webhook_raw, task_count,
};
use crate::helpers::ADMIN_TOKEN;

/// One raw HTTP/1.1 exchange (for what reqwest cannot send, such as a chunked body): returns the
/// status and the body.
async fn raw_http(base: &str, request: &[u8]) -> (u16, String) {
    let address = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer))
        .await
        .expect("the server answers and closes")
        .unwrap();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// A chunked POST of `total` bytes in pieces of at most 1000 (no Content-Length to check up
/// front: the limit must hold while reading).
fn chunked_post(path: &str, headers: &[(&str, String)], total: usize) -> Vec<u8> {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
    );
    for (name, value) in headers {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    req.push_str("\r\n");
    let mut left = total;
    while left > 0 {
        let n = left.min(1000);
        req.push_str(&format!("{n:x}\r\n{}\r\n", "x".repeat(n)));
        left -= n;
    }
    req.push_str("0\r\n\r\n");
    req.into_bytes()
}

#[tokio::test]
async fn oversized_bodies_get_413_on_webhook_bot_and_admin_routes() {
    let app = app_with_bot(SMALL_LIMIT).await;
    let big = format!(
        "{{\"conversation\":\"c\",\"sender\":\"u\",\"text\":\"{}\"}}",
        "x".repeat(SMALL_LIMIT)
    )
    .into_bytes();

    // Webhook: signed or not, the body is refused before anything else looks at it.
    assert_eq!(
        error_of(post_webhook_raw(&app, &big).await).await,
        (413, "body_too_large".into())
    );
    let r = app
        .http
        .post(format!("{}/webhooks/default", app.base))
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(r).await, (413, "body_too_large".into()));
    // Talk bot.
    assert_eq!(
        error_of(post_bot_raw(&app, &big).await).await,
        (413, "body_too_large".into())
    );

    // Chunked bodies without a length are cut off while reading, too.
    for (path, headers) in [
        (
            "/webhooks/default",
            vec![
                (signature::TIMESTAMP_HEADER, "1".to_owned()),
                (signature::SIGNATURE_HEADER, "sha256=00".to_owned()),
            ],
        ),
        (
            "/talk/bots/bot",
            vec![
                (bot::RANDOM_HEADER, "r".to_owned()),
                (bot::SIGNATURE_HEADER, "00".to_owned()),
            ],
        ),
        (
            "/admin/schedules",
            vec![("Authorization", format!("Bearer {ADMIN_TOKEN}"))],
        ),
    ] {
        let (status, body) =
            raw_http(&app.base, &chunked_post(path, &headers, SMALL_LIMIT + 1)).await;
        assert_eq!(status, 413, "chunked {path}: {body}");
        assert!(body.contains("body_too_large"), "chunked {path}: {body}");
    }

    // Admin: every documented operation that takes a body, with the token.
    let mut with_body = BTreeSet::new();
    for (method, path, op) in documented_operations(&app).await {
        if !path.starts_with("/admin/") || op.get("requestBody").is_none() {
            continue;
        }
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let r = admin_raw(&app, method.clone(), &concrete(&path), Some(big.clone())).await;
        assert_eq!(
            error_of(r).await,
            (413, "body_too_large".into()),
            "{method} {path}"
        );
        with_body.insert(format!("{method} {path}"));
    }
    assert!(
        with_body.contains("POST /admin/schedules")
            && with_body.contains("PUT /admin/schedules/{id}"),
        "{with_body:?}"
    );
    // Routes that read no body ignore it: an answer about the route, never a 5xx.
    for (method, path) in ctxgate::admin::routes() {
        if method == Method::GET {
            continue;
        }
        let r = admin_raw(&app, method.clone(), &concrete(&path), Some(big.clone())).await;
        let status = r.status();
        assert!(!status.is_server_error(), "{method} {path}: {status}");
    }
    assert_eq!(task_count(&app).await, 0);
    assert_eq!(
        app.http
            .get(format!("{}/healthz", app.base))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

#[tokio::test]
async fn deep_json_and_invalid_utf8_get_a_4xx_json_error_never_a_500() {
    let app = app_with_bot(1024 * 1024).await;
    let deep_array = format!("{}{}", "[".repeat(DEEP), "]".repeat(DEEP));
    let deep_in_field = format!(
        "{{\"conversation\":\"c\",\"sender\":\"u\",\"text\":{}1{}}}",
        "{\"a\":".repeat(DEEP),
        "}".repeat(DEEP)
    );
    let unclosed = format!("{{\"conversation\":{}", "[".repeat(DEEP));
    let bodies: Vec<(&str, Vec<u8>)> = vec![
        ("deep array", deep_array.into_bytes()),
        ("deep object in a field", deep_in_field.into_bytes()),
        ("deep and unclosed", unclosed.into_bytes()),
        (
            "invalid UTF-8",
            b"{\"conversation\":\"c\xff\xfe\",\"sender\":\"u\",\"text\":\"\xc3\x28\"}".to_vec(),
        ),
        (
            "UTF-16 surrogate as UTF-8",
            b"{\"conversation\":\"\xed\xa0\x80\",\"sender\":\"u\",\"text\":\"t\"}".to_vec(),
        ),
        (
            "lone surrogate escape",
            br#"{"conversation":"\ud800","sender":"u","text":"t"}"#.to_vec(),
        ),
        (
            "NUL bytes",
            b"{\"conversation\":\"c\0\",\"sender\":\"u\",\"text\":\"\0\"}\0".to_vec(),
        ),
        (
            "huge number",
            b"{\"conversation\":\"c\",\"sender\":\"u\",\"text\":\"t\",\"trigger\":1e999999}"
                .to_vec(),
        ),
    ];
    // A Talk bot event whose content (JSON inside JSON) is the hostile part.
    let bot_event = |content: &str| {
        serde_json::to_vec(&json!({
            "type": "Create",
            "actor": {"type": "Person", "id": "users/ada", "name": "Ada"},
            "object": {"type": "Note", "id": "1", "name": "message", "content": content},
            "target": {"type": "Collection", "id": "room1", "name": "Room"}
        }))
        .unwrap()
    };
    let deep_content = format!("{}{}", "[".repeat(DEEP), "]".repeat(DEEP));
    let admin_body_ops: Vec<(String, String)> = documented_operations(&app)
        .await
        .into_iter()
        .filter(|(_, p, op)| p.starts_with("/admin/") && op.get("requestBody").is_some())
        .map(|(m, p, _)| (m, p))
        .collect();
    assert!(admin_body_ops.len() >= 2, "{admin_body_ops:?}");

    for (what, body) in &bodies {
        let (status, code) = error_of(post_webhook_raw(&app, body).await).await;
        assert_eq!(
            (status, code.as_str()),
            (422, "invalid_json"),
            "webhook, {what}"
        );
        let (status, code) = error_of(post_bot_raw(&app, body).await).await;
        assert_eq!((status, code.as_str()), (400, "bad_payload"), "bot, {what}");
        for (method, path) in &admin_body_ops {
            let method = Method::from_bytes(method.as_bytes()).unwrap();
            let r = admin_raw(&app, method.clone(), &concrete(path), Some(body.clone())).await;
            let (status, code) = error_of(r).await;
            assert_eq!(
                (status, code.as_str()),
                (400, "invalid_body"),
                "{method} {path}, {what}"
            );
        }
    }
    let (status, code) = error_of(post_bot_raw(&app, &bot_event(&deep_content)).await).await;
    assert_eq!(
        (status, code.as_str()),
        (400, "bad_payload"),
        "bot, deep content"
    );

    // Hostile path and query parameters on every admin GET route: a 4xx in the error shape or
    // an answer, never a 5xx.
    for (method, path) in ctxgate::admin::routes() {
        if method != Method::GET {
            continue;
        }
        let mut urls = vec![
            format!("{path}?limit=%ff&cursor=%00"),
            format!("{path}?status=%0d%0a"),
        ];
        if path.contains("{id}") {
            for id in [
                "%ff",
                "%00",
                "99999999999999999999999",
                "-1",
                "%2e%2e",
                "1%0d%0aX:1",
            ] {
                urls.push(path.replace("{id}", id));
            }
        }
        for url in urls {
            let r = admin_raw(&app, Method::GET, &url, None).await;
            let status = r.status();
            assert!(!status.is_server_error(), "GET {url}: {status}");
            if status.is_client_error() {
                error_of(r).await;
            }
        }
    }
    assert_eq!(task_count(&app).await, 0);
}
