//! The OpenAPI document at `/admin/openapi.json`: it lists exactly the routes the router serves,
//! every admin route needs the token, real answers match their documented schemas, and the
//! framework's own rejections come back in the JSON error shape.

use std::collections::BTreeSet;

use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, TestApp, spawn_app, spawn_app_with};

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "DELETE", "PATCH"];

async fn document(app: &TestApp) -> Value {
    let r = app.admin_get("/admin/openapi.json").await;
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    r.json().await.unwrap()
}

/// Every (method, path) of the document, methods upper-case.
fn operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, _) in item.as_object().unwrap() {
            let method = method.to_uppercase();
            if METHODS.contains(&method.as_str()) || method == "HEAD" || method == "OPTIONS" {
                ops.insert((method, path.clone()));
            }
        }
    }
    ops
}

/// A concrete URL path for a documented one.
fn concrete(path: &str) -> String {
    path.replace("{id}", "1")
        .replace("{name}", "default")
        .replace("{account}", "main")
}

async fn send(app: &TestApp, method: &str, path: &str, token: Option<&str>) -> reqwest::Response {
    let mut r = app.http.request(
        Method::from_bytes(method.as_bytes()).unwrap(),
        format!("{}{path}", app.base),
    );
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    if method == "POST" || method == "PUT" {
        r = r.json(&json!({}));
    }
    r.send().await.unwrap()
}

/// Whether the router has no route there: its fallback (`... route not found`) or a 405.
async fn unrouted(r: reqwest::Response) -> Option<String> {
    let status = r.status();
    let body: Value = r.json().await.unwrap_or(Value::Null);
    let message = body["error"]["message"].as_str().unwrap_or("");
    (status == 405 || (status == 404 && message.ends_with("route not found")))
        .then(|| format!("{status} {body}"))
}

#[tokio::test]
async fn the_document_lists_exactly_the_routes_served() {
    let app = spawn_app().await;
    let doc = document(&app).await;
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["title"], "ctxgate");

    // The router is built from `ctxgate::admin::routes()`'s table: it and the document agree.
    let served: BTreeSet<(String, String)> = ctxgate::admin::routes()
        .into_iter()
        .map(|(m, p)| (m.to_string(), p))
        .collect();
    let documented: BTreeSet<(String, String)> = operations(&doc)
        .into_iter()
        .filter(|(_, p)| p.starts_with("/admin/"))
        .collect();
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(
        undocumented.is_empty(),
        "served but not in the OpenAPI document (add #[utoipa::path] and list it in \
         src/admin/openapi.rs): {undocumented:?}"
    );
    assert!(
        unserved.is_empty(),
        "in the OpenAPI document but not served: {unserved:?}"
    );
    assert!(served.len() >= 22, "{served:?}");

    // And the real server agrees: every documented route (public ones too) reaches a handler,
    // and on a documented path every other method is a 405 in the JSON shape.
    let all = operations(&doc);
    let paths: BTreeSet<&String> = all.iter().map(|(_, p)| p).collect();
    for path in paths {
        for method in METHODS {
            let r = send(&app, method, &concrete(path), Some(ADMIN_TOKEN)).await;
            let documented = all.contains(&(method.to_owned(), path.clone()));
            let status = r.status();
            let allow = r
                .headers()
                .get("allow")
                .map(|v| v.to_str().unwrap().to_owned());
            let content_type = r
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            let unrouted = unrouted(r).await;
            if documented {
                assert_eq!(
                    unrouted, None,
                    "{method} {path} is documented but not served"
                );
            } else {
                assert_eq!(
                    status, 405,
                    "{method} {path} is served but not documented ({unrouted:?})"
                );
                assert!(
                    content_type.starts_with("application/json"),
                    "{method} {path}"
                );
                assert!(allow.is_some(), "{method} {path}: 405 without Allow");
            }
        }
    }

    // Operation ids are unique, and every operation has a summary and a 2xx answer.
    let mut ids = BTreeSet::new();
    for (method, path) in &all {
        let op = &doc["paths"][path][method.to_lowercase()];
        let id = op["operationId"].as_str().unwrap().to_owned();
        assert!(ids.insert(id.clone()), "operationId {id} twice");
        assert!(op["summary"].is_string(), "{method} {path}: no summary");
        assert!(
            op["responses"]
                .as_object()
                .unwrap()
                .keys()
                .any(|s| s.starts_with('2')),
            "{method} {path}: no success answer"
        );
    }
}

#[tokio::test]
async fn every_documented_admin_route_needs_the_token() {
    let app = spawn_app_with(|s| {
        s.admin.read_only_token = Some(ctxgate::config::Secret::new("read-only-token-for-tests"));
    })
    .await;
    let doc = document(&app).await;
    let scheme = &doc["components"]["securitySchemes"]["admin_token"];
    assert_eq!(
        (&scheme["type"], &scheme["scheme"]),
        (&json!("http"), &json!("bearer"))
    );
    let admin: Vec<(String, String)> = operations(&doc)
        .into_iter()
        .filter(|(_, p)| p.starts_with("/admin/"))
        .collect();
    for (method, path) in &admin {
        let op = &doc["paths"][path][method.to_lowercase()];
        assert_eq!(
            op["security"],
            json!([{"admin_token": []}]),
            "{method} {path}"
        );
        assert!(op["responses"]["401"].is_object(), "{method} {path}");
        assert_eq!(
            op["responses"]["403"].is_object(),
            method != "GET",
            "{method} {path}: 403 is documented exactly for the methods that change things"
        );
        for token in [None, Some("wrong")] {
            let r = send(&app, method, &concrete(path), token).await;
            assert_eq!(r.status(), 401, "{method} {path} with {token:?}");
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["error"]["code"], "unauthorized", "{method} {path}");
        }
        if method != "GET" {
            let r = send(
                &app,
                method,
                &concrete(path),
                Some("read-only-token-for-tests"),
            )
            .await;
            assert_eq!(r.status(), 403, "{method} {path} with the read-only token");
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["error"]["code"], "read_only_token");
        }
    }
    // The public routes carry no security requirement.
    for (method, path) in operations(&doc) {
        if !path.starts_with("/admin/") {
            let op = &doc["paths"][&path][method.to_lowercase()];
            assert!(op.get("security").is_none(), "{method} {path}");
        }
    }
}

#[tokio::test]
async fn answers_match_their_documented_schemas() {
    let app = spawn_app().await;
    app.brain.then_reply("noted");
    for (conv, text) in [("a", "the boat is called Nautilus"), ("b", "hi")] {
        let r = app
            .post_webhook(&json!({"conversation": conv, "sender": "u", "text": text}))
            .await;
        assert_eq!(r.status(), 202);
    }
    app.worker("w").run_once().await.unwrap();
    app.outbox().run_once().await.unwrap();
    let task = app.admin_json("/admin/tasks?status=completed").await["items"][0]["id"]
        .as_i64()
        .unwrap();
    let conversation = app.admin_json("/admin/conversations").await["items"][0]["id"]
        .as_i64()
        .unwrap();

    let doc = document(&app).await;
    let example = doc["components"]["schemas"]["ScheduleSpec"]["examples"][0].clone();
    assert!(example.is_object(), "ScheduleSpec has an example");
    // The documented example is accepted as it stands.
    let r = app
        .http
        .post(format!("{}/admin/schedules", app.base))
        .bearer_auth(ADMIN_TOKEN)
        .json(&example)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let schedule: Value = r.json().await.unwrap();
    validate(&doc, "POST", "/admin/schedules", 201, &schedule);
    let schedule = schedule["id"].as_i64().unwrap();
    let r = app
        .http
        .post(format!("{}/admin/schedules/{schedule}/run", app.base))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    validate(
        &doc,
        "POST",
        "/admin/schedules/{id}/run",
        202,
        &r.json().await.unwrap(),
    );

    let mut checked = BTreeSet::new();
    for (method, path) in operations(&doc) {
        if method != "GET" || path == "/admin/openapi.json" {
            continue;
        }
        let id = if path.starts_with("/admin/tasks/") {
            task
        } else if path.starts_with("/admin/schedules/") {
            schedule
        } else {
            conversation
        };
        let mut url = path.replace("{id}", &id.to_string());
        if path.ends_with("/context") {
            url.push_str("?text=what%20is%20the%20boat%20called&triage=false");
        }
        let r = app
            .http
            .get(format!("{}{url}", app.base))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        if path == "/metrics" {
            assert_eq!(status, 200);
            continue;
        }
        let body: Value = r.json().await.unwrap();
        assert_eq!(status, 200, "GET {url}: {body}");
        validate(&doc, &method, &path, status, &body);
        checked.insert(path);
    }
    assert!(checked.len() >= 14, "{checked:?}");

    // Errors have the documented shape and status.
    let cancel_completed = format!("/admin/tasks/{task}/cancel");
    for (method, url, path, status) in [
        ("GET", "/admin/tasks/999", "/admin/tasks/{id}", 404),
        ("GET", "/admin/tasks/abc", "/admin/tasks/{id}", 400),
        ("GET", "/admin/tasks?limit=0", "/admin/tasks", 400),
        (
            "POST",
            "/admin/tasks/999/cancel",
            "/admin/tasks/{id}/cancel",
            404,
        ),
        (
            "POST",
            cancel_completed.as_str(),
            "/admin/tasks/{id}/cancel",
            409,
        ),
        ("POST", "/admin/schedules", "/admin/schedules", 400),
    ] {
        let r = send(&app, method, url, Some(ADMIN_TOKEN)).await;
        assert_eq!(r.status().as_u16(), status, "{method} {url}");
        validate(&doc, method, path, status, &r.json().await.unwrap());
    }
}

#[tokio::test]
async fn framework_rejections_come_back_as_json_errors() {
    let app = spawn_app_with(|s| s.http.body_limit_bytes = 4096).await;
    let admin = |method: Method, path: &str| {
        app.http
            .request(method, format!("{}{path}", app.base))
            .bearer_auth(ADMIN_TOKEN)
    };
    async fn error(r: reqwest::RequestBuilder) -> (u16, String, reqwest::header::HeaderMap) {
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        assert!(
            headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json"),
            "{status}: {headers:?}"
        );
        let body: Value = r.json().await.unwrap();
        assert!(body["error"]["message"].is_string(), "{body}");
        let code = body["error"]["code"].as_str().unwrap().to_owned();
        (status, code, headers)
    }

    // A wrong method: 405 with the Allow header.
    let (status, code, headers) = error(admin(Method::DELETE, "/admin/tasks")).await;
    assert_eq!((status, code.as_str()), (405, "method_not_allowed"));
    assert!(headers["allow"].to_str().unwrap().contains("GET"));
    let (status, code, headers) = error(admin(Method::PATCH, "/admin/schedules/1")).await;
    assert_eq!((status, code.as_str()), (405, "method_not_allowed"));
    let allow = headers["allow"].to_str().unwrap();
    for m in ["GET", "PUT", "DELETE"] {
        assert!(allow.contains(m), "{allow}");
    }
    // ...but the token comes first.
    let r = app
        .http
        .delete(format!("{}/admin/tasks", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // Path and query parameters that do not parse.
    for path in [
        "/admin/tasks/abc",
        "/admin/tasks/99999999999999999999",
        "/admin/schedules/x/runs",
        "/admin/conversations/1.5/messages",
        "/admin/tasks?conversation=abc",
        "/admin/skipped?limit=-1",
    ] {
        let (status, code, _) = error(admin(Method::GET, path)).await;
        assert_eq!(
            (status, code.as_str()),
            (400, "invalid_parameter"),
            "{path}"
        );
    }
    let (status, code, _) = error(admin(Method::POST, "/admin/tasks/abc/cancel")).await;
    assert_eq!((status, code.as_str()), (400, "invalid_parameter"));

    // JSON bodies: no JSON content type, not JSON, not a schedule, too large.
    let (status, code, _) = error(
        admin(Method::POST, "/admin/schedules")
            .header("content-type", "text/plain")
            .body("name=x"),
    )
    .await;
    assert_eq!((status, code.as_str()), (415, "unsupported_media_type"));
    let (status, code, _) = error(admin(Method::POST, "/admin/schedules")).await;
    assert_eq!((status, code.as_str()), (415, "unsupported_media_type"));
    let (status, code, _) = error(
        admin(Method::PUT, "/admin/schedules/1")
            .header("content-type", "application/json")
            .body("{\"name\": "),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "invalid_body"));
    let (status, code, _) = error(
        admin(Method::POST, "/admin/schedules").json(&json!({"name": "n", "cron": "0 7 * * *"})),
    )
    .await;
    assert_eq!((status, code.as_str()), (400, "invalid_body"));
    let (status, code, _) = error(admin(Method::POST, "/admin/schedules").json(
        &json!({"name": "n", "cron": "0 7 * * *", "prompt": "x".repeat(8192),
                "target": {"kind": "webhook", "webhook": "default", "conversation": "c"}}),
    ))
    .await;
    assert_eq!((status, code.as_str()), (413, "body_too_large"));

    // Unknown admin routes, and the framework's answers outside /admin too.
    let (status, code, _) = error(admin(Method::GET, "/admin/nothing/here")).await;
    assert_eq!((status, code.as_str()), (404, "not_found"));
    let (status, code, _) = error(app.http.get(format!("{}/webhooks/default", app.base))).await;
    assert_eq!((status, code.as_str()), (405, "method_not_allowed"));
    let (status, code, _) = error(app.http.post(format!("{}/healthz", app.base))).await;
    assert_eq!((status, code.as_str()), (405, "method_not_allowed"));
}

/// Checks `body` against the schema the document gives for `status` of `method path`.
fn validate(doc: &Value, method: &str, path: &str, status: u16, body: &Value) {
    let op = &doc["paths"][path][method.to_lowercase()];
    let mut response = &op["responses"][status.to_string()];
    if let Some(r) = response["$ref"].as_str() {
        response = resolve(doc, r);
    }
    let schema = &response["content"]["application/json"]["schema"];
    assert!(
        schema.is_object(),
        "{method} {path}: no JSON schema for {status}"
    );
    let mut errors = Vec::new();
    check(doc, schema, body, "$", &mut errors);
    assert!(
        errors.is_empty(),
        "{method} {path} {status} does not match its schema:\n{}\nbody: {body:#}",
        errors.join("\n")
    );
}

fn resolve<'a>(doc: &'a Value, reference: &str) -> &'a Value {
    let mut at = doc;
    for part in reference.trim_start_matches("#/").split('/') {
        at = &at[part];
    }
    assert!(!at.is_null(), "dangling {reference}");
    at
}

/// A strict subset of JSON Schema: `$ref`, `type`, `enum`, `oneOf`/`anyOf`/`allOf`,
/// `properties` (an object may have no key it does not describe, unless
/// `additionalProperties` allows it), `required`, `items`, `minimum`, `maximum`.
fn check(doc: &Value, schema: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    if let Some(r) = schema["$ref"].as_str() {
        return check(doc, resolve(doc, r), v, at, errors);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(alternatives) = schema[key].as_array() {
            let mut why = Vec::new();
            let fits = alternatives.iter().any(|s| {
                let mut e = Vec::new();
                check(doc, s, v, at, &mut e);
                why.extend(e.iter().cloned());
                e.is_empty()
            });
            if !fits {
                errors.push(format!("{at}: fits no alternative of {key}: {why:?}"));
            }
        }
    }
    if let Some(all) = schema["allOf"].as_array() {
        for s in all {
            check(doc, s, v, at, errors);
        }
    }
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let fits = types.iter().any(|t| match *t {
            "null" => v.is_null(),
            "boolean" => v.is_boolean(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "string" => v.is_string(),
            "array" => v.is_array(),
            "object" => v.is_object(),
            _ => false,
        });
        if !fits {
            errors.push(format!("{at}: {v} is not of type {t}"));
            return;
        }
    }
    if let Some(values) = schema["enum"].as_array()
        && !values.contains(v)
    {
        errors.push(format!("{at}: {v} is not one of {values:?}"));
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = schema["minimum"].as_f64()
            && n < min
        {
            errors.push(format!("{at}: {n} < minimum {min}"));
        }
        if let Some(max) = schema["maximum"].as_f64()
            && n > max
        {
            errors.push(format!("{at}: {n} > maximum {max}"));
        }
    }
    if let Some(object) = v.as_object() {
        let properties = schema["properties"].as_object();
        if let Some(properties) = properties {
            let open = schema
                .get("additionalProperties")
                .is_some_and(|a| a != &Value::Bool(false));
            for (key, value) in object {
                match properties.get(key) {
                    Some(s) => check(doc, s, value, &format!("{at}.{key}"), errors),
                    None if open => {}
                    None => errors.push(format!("{at}: key {key:?} is not documented")),
                }
            }
        }
        for key in schema["required"].as_array().into_iter().flatten() {
            let key = key.as_str().unwrap();
            if !object.contains_key(key) {
                errors.push(format!("{at}: required key {key:?} is missing"));
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), v.as_array()) {
        for (i, item) in array.iter().enumerate() {
            check(doc, items, item, &format!("{at}[{i}]"), errors);
        }
    }
}
