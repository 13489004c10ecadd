//! Who may call what: the admin token on every admin route (enumerated from the route table, the
//! public exceptions listed with their reasons and checked against the OpenAPI document), and
//! stale or replayed webhook signatures.

use std::collections::BTreeSet;

use ctxgate_webhook::signature;
use reqwest::Method;
use serde_json::json;

use super::{app_with_bot, concrete, documented_operations, error_of, task_count};
use crate::helpers::{ADMIN_TOKEN, SECRET, spawn_app_with};

/// The routes answered without the admin token, each with why. Everything else the gateway
/// serves is an admin route and needs the token.
const PUBLIC_ROUTES: &[(&str, &str, &str)] = &[
    (
        "GET",
        "/healthz",
        "liveness probe for orchestrators: says `ok`, reads nothing",
    ),
    (
        "GET",
        "/readyz",
        "readiness probe: pings the store, tells only ready or not",
    ),
    (
        "GET",
        "/metrics",
        "Prometheus scrape: counters and latencies by channel and brain, no message content",
    ),
    (
        "POST",
        "/webhooks/{name}",
        "inbound channel: authenticated by the webhook's HMAC signature instead",
    ),
    (
        "POST",
        "/talk/{account}/bot",
        "inbound channel: authenticated by the Talk bot's HMAC signature instead",
    ),
];

#[tokio::test]
async fn every_admin_route_refuses_missing_wrong_and_misplaced_tokens() {
    let app = app_with_bot(1024 * 1024).await;
    let routes = ctxgate::admin::routes();
    assert!(routes.len() >= 20, "{routes:?}");
    let almost = &ADMIN_TOKEN[..ADMIN_TOKEN.len() - 1];
    let refused: Vec<Option<String>> = vec![
        None,
        Some("Bearer wrong".into()),
        Some("Bearer ".into()),
        Some(format!("Bearer {almost}")),
        Some(format!("Bearer {ADMIN_TOKEN}x")),
        Some(format!("Bearer {ADMIN_TOKEN} {ADMIN_TOKEN}")),
        Some(format!("Bearer {}", ADMIN_TOKEN.to_uppercase())),
        Some(format!("Basic {ADMIN_TOKEN}")),
        Some(format!("Token {ADMIN_TOKEN}")),
        Some(ADMIN_TOKEN.into()),
    ];
    for (method, path) in &routes {
        let url = concrete(path);
        for auth in &refused {
            let mut r = app
                .http
                .request(method.clone(), format!("{}{url}", app.base));
            if let Some(a) = auth {
                r = r.header("authorization", a);
            }
            if *method == Method::POST || *method == Method::PUT {
                r = r.json(&json!({}));
            }
            let (status, code) = error_of(r.send().await.unwrap()).await;
            assert_eq!(
                (status, code.as_str()),
                (401, "unauthorized"),
                "{method} {url} with {auth:?}"
            );
        }
        // The token anywhere but the Authorization header does not count.
        let r = app
            .http
            .request(
                method.clone(),
                format!(
                    "{}{url}?token={ADMIN_TOKEN}&access_token={ADMIN_TOKEN}",
                    app.base
                ),
            )
            .header("cookie", format!("token={ADMIN_TOKEN}"))
            .header("x-admin-token", ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.status(),
            401,
            "{method} {url} with the token in the query"
        );
        if *method == Method::GET {
            let r = app
                .http
                .head(format!("{}{url}", app.base))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 401, "HEAD {url}");
        }
    }
    // Unknown admin paths do not tell what exists without the token.
    for path in [
        "/admin/nope",
        "/admin/tasks/1/nope",
        "/admin/tasks/1/cancel/x",
    ] {
        let r = app
            .http
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{path}");
    }

    // What the document lists outside /admin is exactly the public list above...
    let documented: BTreeSet<(String, String)> = documented_operations(&app)
        .await
        .into_iter()
        .filter(|(_, p, _)| !p.starts_with("/admin"))
        .map(|(m, p, _)| (m, p))
        .collect();
    let public: BTreeSet<(String, String)> = PUBLIC_ROUTES
        .iter()
        .map(|(m, p, _)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(
        documented, public,
        "a route outside /admin must be listed in PUBLIC_ROUTES with its reason"
    );
    // ...the probes answer without a token, and the inbound routes refuse unsigned requests.
    for (method, path, why) in PUBLIC_ROUTES {
        let url = format!("{}{}", app.base, concrete(path));
        let r = app
            .http
            .request(Method::from_bytes(method.as_bytes()).unwrap(), &url)
            .body("{}")
            .send()
            .await
            .unwrap();
        if *method == "GET" {
            assert_eq!(r.status(), 200, "{path} ({why})");
        } else {
            let (status, code) = error_of(r).await;
            assert_eq!(
                (status, code.as_str()),
                (401, "missing_signature"),
                "{path} ({why})"
            );
        }
    }
    // And a valid token does open a route (the refusals above are about the token).
    assert_eq!(app.admin_get("/admin/tasks").await.status(), 200);
}

#[tokio::test]
async fn stale_and_replayed_webhook_signatures_are_refused() {
    let app = spawn_app_with(|_| {}).await;
    let body = |n: u32| {
        serde_json::to_vec(
            &json!({"conversation": "c", "sender": "u", "text": format!("hello {n}")}),
        )
        .unwrap()
    };
    let send = |raw: Vec<u8>, ts: String, sig: String| {
        let app = &app;
        async move {
            app.http
                .post(format!("{}/webhooks/default", app.base))
                .header(signature::TIMESTAMP_HEADER, ts)
                .header(signature::SIGNATURE_HEADER, sig)
                .body(raw)
                .send()
                .await
                .unwrap()
        }
    };
    let sign = |ts: i64, raw: &[u8]| signature::sign(SECRET.as_bytes(), ts, raw);
    let now = chrono::Utc::now().timestamp();

    // Outside the 5 minute window, in the past or in the future.
    for ts in [now - 301, now + 301, now - 86_400, 0, i64::MAX] {
        let raw = body(1);
        let r = send(raw.clone(), ts.to_string(), sign(ts, &raw)).await;
        assert_eq!(
            error_of(r).await,
            (401, "stale_timestamp".into()),
            "timestamp {ts} at {now}"
        );
    }
    // A refused stale request burns nothing: the same body signed now is taken.
    let raw = body(1);
    let r = send(raw.clone(), now.to_string(), sign(now, &raw)).await;
    assert_eq!(r.status(), 202);

    // A captured request replayed as it is, with the signature in upper case, with blanks
    // around the headers, or with a moved timestamp: refused, one task in all.
    let raw = body(2);
    let ts = now - 250;
    let sig = sign(ts, &raw);
    assert_eq!(
        send(raw.clone(), ts.to_string(), sig.clone())
            .await
            .status(),
        202
    );
    let upper = format!(
        "sha256={}",
        sig.trim_start_matches("sha256=").to_uppercase()
    );
    for (ts_header, sig_header) in [
        (ts.to_string(), sig.clone()),
        (ts.to_string(), upper),
        (format!(" {ts} "), format!(" {sig}")),
    ] {
        let r = send(raw.clone(), ts_header.clone(), sig_header.clone()).await;
        assert_eq!(
            error_of(r).await,
            (401, "replayed".into()),
            "{ts_header:?} {sig_header:?}"
        );
    }
    let r = send(raw.clone(), (ts + 1).to_string(), sig.clone()).await;
    assert_eq!(error_of(r).await, (401, "bad_signature".into()));
    let r = send(body(3), ts.to_string(), sig.clone()).await;
    assert_eq!(error_of(r).await, (401, "bad_signature".into()));
    assert_eq!(task_count(&app).await, 2);
}
