//! The `ctxgate` binary itself: config checking, migration, and `serve` answering a webhook and
//! shutting down cleanly on SIGTERM.

use std::process::Stdio;
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use ctxgate_webhook::signature;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_ctxgate");
const SECRET: &str = "a-process-test-secret-123";

fn ctxgate(dir: &std::path::Path) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(dir)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

#[tokio::test]
async fn check_config_names_the_bad_key_and_redacts_secrets() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.toml"), "[worker]\ncount = 0\n").unwrap();
    let out = ctxgate(dir.path())
        .args(["--config", "bad.toml", "check-config"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml") && err.contains("worker.count"),
        "{err}"
    );

    std::fs::write(dir.path().join("typo.toml"), "[http]\nlisten_on = 1\n").unwrap();
    let out = ctxgate(dir.path())
        .args(["--config", "typo.toml", "check-config"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("listen_on"));

    let out = ctxgate(dir.path())
        .args(["--config", "missing.toml", "check-config"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.toml"));

    // A secret read from the environment is checked too.
    let out = ctxgate(dir.path())
        .arg("check-config")
        .env("CTXGATE__ADMIN__TOKEN", "short")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("admin.token"));

    // A valid config from a file plus the environment; the secret never appears.
    std::fs::write(dir.path().join("ok.toml"), "[worker]\ncount = 4\n").unwrap();
    let out = ctxgate(dir.path())
        .args(["--config", "ok.toml", "check-config"])
        .env("CTXGATE__ADMIN__TOKEN", "super-secret-admin-token")
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("count = 4"), "{printed}");
    assert!(printed.contains("[redacted]"), "{printed}");
    assert!(!printed.contains("super-secret-admin-token"));
}

#[tokio::test]
async fn migrate_creates_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let out = ctxgate(dir.path()).arg("migrate").output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        said.starts_with("applied ") && !said.starts_with("applied 0"),
        "{said}"
    );
    assert!(dir.path().join("data/ctxgate.db").exists());
    let out = ctxgate(dir.path()).arg("migrate").output().await.unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("applied 0 migration"));
}

#[tokio::test]
async fn serve_answers_a_webhook_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    // The callback receiver: a small HTTP server that hands each body to the test.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let cb = Router::new().route(
        "/cb",
        post(move |body: axum::Json<Value>| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(body.0);
                "ok"
            }
        }),
    );
    let cb_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let cb_addr = cb_listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(cb_listener, cb).await });

    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = ctxgate(dir.path())
        .arg("serve")
        .env("CTXGATE__HTTP__LISTEN", format!("127.0.0.1:{port}"))
        .env("CTXGATE__WEBHOOKS__DEFAULT__SECRET", SECRET)
        .env("CTXGATE__TELEMETRY__FORMAT", "json")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let ready = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("ctxgate listening") {
                return true;
            }
        }
        false
    })
    .await
    .expect("serve starts within 30 s");
    assert!(ready, "serve printed its listening line");

    let raw = serde_json::to_vec(&json!({
        "conversation": "proc", "sender": "u", "text": "ping",
        "callback_url": format!("http://{cb_addr}/cb"),
    }))
    .unwrap();
    let ts = chrono::Utc::now().timestamp();
    let r = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/webhooks/default"))
        .header(signature::TIMESTAMP_HEADER, ts.to_string())
        .header(
            signature::SIGNATURE_HEADER,
            signature::sign(SECRET.as_bytes(), ts, &raw),
        )
        .body(raw)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let answer = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("the answer arrives within 30 s")
        .unwrap();
    assert!(
        answer["text"].as_str().unwrap().starts_with("echo: ping"),
        "{answer}"
    );

    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("exits within 30 s of SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
    // The process is gone, so nothing more can arrive: exactly one answer.
    assert!(rx.try_recv().is_err(), "exactly one answer");
}

/// Runs `ctxgate context select` over `h.jsonl` and `q.jsonl` in `dir`; its output lines.
async fn context_select(dir: &std::path::Path, budget: usize) -> Vec<Value> {
    let out = ctxgate(dir)
        .args([
            "context",
            "select",
            "--history",
            "h.jsonl",
            "--queries",
            "q.jsonl",
        ])
        .args(["--budget-tokens", &budget.to_string()])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn context_select_runs_the_selection_over_jsonl_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut history = String::new();
    for i in 0..80 {
        let (role, sender) = if i % 2 == 0 {
            ("user", "ann")
        } else {
            ("assistant", "bot")
        };
        let text = match i {
            4 => "My locker code at the gym is 4711, please keep it.".to_owned(),
            _ => format!("small talk number {i}"),
        };
        history.push_str(
            &json!({"id": i, "conversation": "c1", "sender": sender, "role": role, "text": text,
                    "timestamp": format!("2026-03-01T10:{:02}:00Z", i % 60), "reply_to": null,
                    "source_type": null})
            .to_string(),
        );
        history.push('\n');
    }
    history.push_str(
        &json!({"id": "x1", "conversation": "c2", "sender": "bob", "role": "user",
                "text": "my locker code is 1234", "timestamp": "2026-03-01T10:00:00Z"})
        .to_string(),
    );
    history.push('\n');
    std::fs::write(dir.path().join("h.jsonl"), history).unwrap();
    std::fs::write(
        dir.path().join("q.jsonl"),
        [
            json!({"id": "q1", "conversation": "c1", "text": "What is my gym locker code?"}),
            json!({"id": 2, "conversation": "c1", "text": "reply", "reply_to": 7}),
            json!({"id": "q3", "conversation": "nope", "text": "hello"}),
        ]
        .iter()
        .map(|q| q.to_string() + "\n")
        .collect::<String>(),
    )
    .unwrap();
    let lines = context_select(dir.path(), 400).await;
    assert_eq!(lines.len(), 3);
    let q1 = &lines[0];
    assert_eq!(q1["query"], "q1");
    let selected = q1["selected"].as_array().unwrap();
    let hit = selected
        .iter()
        .find(|s| s["id"] == 4)
        .expect("the locker code turn is recalled");
    assert_eq!(hit["reason"], "archive");
    assert!(
        selected.iter().all(|s| s["id"] != "x1"),
        "never another conversation"
    );
    assert!(q1["tokens"].as_u64().unwrap() <= 400);
    assert_eq!(
        q1["tokens"].as_u64().unwrap(),
        selected
            .iter()
            .map(|s| s["tokens"].as_u64().unwrap())
            .sum::<u64>()
    );
    assert!(q1["elapsed_us"].as_u64().is_some());
    let q2 = &lines[1];
    assert_eq!(q2["query"], 2);
    let parent = q2["selected"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == 7)
        .unwrap();
    assert_eq!(parent["reason"], "reply_parent");
    assert_eq!(lines[2]["selected"], json!([]));

    // A bad line is reported with its file and line number.
    std::fs::write(dir.path().join("bad.jsonl"), "{\"id\": 1}\n").unwrap();
    let out = ctxgate(dir.path())
        .args([
            "context",
            "select",
            "--history",
            "bad.jsonl",
            "--queries",
            "q.jsonl",
        ])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.jsonl line 1"), "{err}");
}

#[tokio::test]
async fn context_select_reads_a_named_speaker_as_whose_messages_matter() {
    // Two people chatting (both role "user", as in a group room or a dialogue corpus); Melanie
    // often addresses Caroline by name. "When did Caroline go to the support group?" is about
    // Caroline's own message, not about Melanie's questions that name her.
    let dir = tempfile::tempdir().unwrap();
    let topics = ["weather", "garden", "traffic", "coffee", "movies"];
    let history: String = (0..200)
        .map(|i| {
            let who = if i % 2 == 0 { "Caroline" } else { "Melanie" };
            let topic = topics[i % 5];
            let text = match i {
                20 => "The support group meeting last night was so powerful.".to_owned(),
                31 | 51 | 71 | 91 => {
                    format!("Caroline, is that support group still meeting? ({i})")
                }
                _ if i % 4 == 1 => format!("Thanks Caroline, {topic} chat {i}."),
                _ => format!("Chatting about {topic} again, number {i}."),
            };
            json!({"id": i, "conversation": "c1", "sender": who, "role": "user", "text": text,
                   "timestamp": format!("2026-03-01T{:02}:{:02}:00Z", 10 + i / 60, i % 60)})
            .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(dir.path().join("h.jsonl"), history).unwrap();
    std::fs::write(
        dir.path().join("q.jsonl"),
        json!({"id": "q", "conversation": "c1",
               "text": "When did Caroline go to the support group?"})
        .to_string()
            + "\n",
    )
    .unwrap();
    // Room for the five newest messages and about three more.
    let line = &context_select(dir.path(), 130).await[0];
    let selected: Vec<(u64, String)> = line["selected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_u64().unwrap(),
                s["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        selected.contains(&(20, "archive".to_owned())),
        "Caroline's own statement first: {selected:?}"
    );
    assert!(line["tokens"].as_u64().unwrap() <= 130);
}

#[tokio::test]
async fn import_twice_gives_the_same_history_which_a_webhook_conversation_continues() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (0..30)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"id": format!("old-{i}"), "conversation": "c1", "sender": "ann", "role": role,
                   "text": format!("imported line {i}"),
                   "timestamp": format!("2025-05-01T10:{i:02}:00Z")})
            .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(dir.path().join("h.jsonl"), lines).unwrap();
    for _ in 0..2 {
        let out = ctxgate(dir.path())
            .args(["import", "h.jsonl", "--channel", "webhook:default"])
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("imported 30 messages"));
    }
    // The same database through the gateway: 30 messages, once; a new webhook message in that
    // conversation gets the imported history as context.
    let mut settings = crate::helpers::test_settings(dir.path());
    settings.store.url = format!("sqlite://{}", dir.path().join("data/ctxgate.db").display());
    let app = crate::helpers::spawn_app_with(|s| *s = settings).await;
    let conv = app.admin_json("/admin/conversations").await["items"][0].clone();
    assert_eq!(conv["external_id"], "c1");
    let history = app
        .admin_json(&format!(
            "/admin/conversations/{}/messages?limit=100",
            conv["id"]
        ))
        .await;
    assert_eq!(history["items"].as_array().unwrap().len(), 30);
    app.post_webhook(&json!({"conversation": "c1", "sender": "ann", "text": "and now?"}))
        .await;
    app.worker("w").run_once().await.unwrap();
    let seen = app.brain.requests().pop().unwrap();
    assert_eq!(seen.context.last().unwrap().text, "imported line 29");
}

#[tokio::test]
async fn doctor_reports_each_check_and_fails_on_a_broken_peer() {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    let dir = tempfile::tempdir().unwrap();
    let out = ctxgate(dir.path()).arg("doctor").output().await.unwrap();
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{report}");
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("ok") && l.contains("store")),
        "{report}"
    );
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("warn") && l.contains("brain default")),
        "{report}"
    );

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_string("{\"error\":\"invalid api key\"}"))
        .mount(&server)
        .await;
    std::fs::write(
        dir.path().join("c.toml"),
        format!(
            "[brains.default]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\napi_key = \"sk-wrong\"\n",
            server.uri()
        ),
    )
    .unwrap();
    let out = ctxgate(dir.path())
        .args(["--config", "c.toml", "doctor"])
        .output()
        .await
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{report}");
    let line = report
        .lines()
        .find(|l| l.contains("brain default"))
        .unwrap();
    assert!(
        line.starts_with("FAIL") && line.contains("api_key"),
        "{line}"
    );
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("ok") && l.contains("store"))
    );
}

#[tokio::test]
async fn doctor_checks_talk_imap_and_smtp() {
    let fake = ctxgate_talk::fake::FakeTalk::start().await;
    fake.add_user("assistant", "Assistant", Some("right-password"));
    fake.create_room("room1234", 2, "Team", &["assistant"]);
    let dir = tempfile::tempdir().unwrap();
    let config = |talk_password: &str| {
        format!(
            "[talk.main]\nbase_url = \"{}\"\nuser = \"assistant\"\npassword = \"{talk_password}\"\n\n\
             [email.main]\naddress = \"bot@example.org\"\nimap_host = \"127.0.0.1\"\nimap_port = 14143\n\
             imap_security = \"plain\"\nusername = \"bot\"\npassword = \"secret\"\n\
             smtp_host = \"127.0.0.1\"\nsmtp_port = 14025\nsmtp_security = \"plain\"\nsmtp_auth = false\n",
            fake.base_url()
        )
    };
    std::fs::write(dir.path().join("good.toml"), config("right-password")).unwrap();
    std::fs::write(dir.path().join("bad.toml"), config("wrong-password")).unwrap();
    let run = |file: &'static str| {
        let mut cmd = ctxgate(dir.path());
        cmd.args(["--config", file, "doctor"]);
        cmd
    };
    let out = run("good.toml").output().await.unwrap();
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{report}");
    for (name, needle) in [
        ("talk main", "1 rooms, 1 watched"),
        ("imap main", "INBOX has"),
        ("smtp main", "accepts EHLO"),
    ] {
        let line = report
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("{report}"));
        assert!(line.starts_with("ok") && line.contains(needle), "{line}");
    }
    let out = run("bad.toml").output().await.unwrap();
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{report}");
    let line = report.lines().find(|l| l.contains("talk main")).unwrap();
    assert!(
        line.starts_with("FAIL") && line.contains("app password"),
        "{line}"
    );
}

/// The real process in a Talk room (the fake Talk server of `ctxgate-talk`), logging at debug
/// level: it answers a direct message, and none of the planted secrets appears in its logs, its
/// errors or the config endpoint.
#[tokio::test]
async fn serve_answers_in_talk_and_never_logs_a_secret() {
    const TALK_PASSWORD: &str = "planted-talk-app-password-7f3a";
    const ADMIN: &str = "planted-admin-token-9c1e2d";
    let fake = ctxgate_talk::fake::FakeTalk::start().await;
    fake.add_user("assistant", "Assistant", Some(TALK_PASSWORD));
    fake.add_user("alice", "Alice", Some("alice-pw"));
    fake.create_room("dmalice1", 1, "alice", &["alice", "assistant"]);
    fake.set_long_poll_cap(Duration::from_millis(500));
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = ctxgate(dir.path())
        .arg("serve")
        .env("RUST_LOG", "debug")
        .env("CTXGATE__HTTP__LISTEN", format!("127.0.0.1:{port}"))
        .env("CTXGATE__WEBHOOKS__DEFAULT__SECRET", SECRET)
        .env("CTXGATE__ADMIN__TOKEN", ADMIN)
        .env("CTXGATE__TALK__MAIN__BASE_URL", fake.base_url())
        .env("CTXGATE__TALK__MAIN__USER", "assistant")
        .env("CTXGATE__TALK__MAIN__PASSWORD", TALK_PASSWORD)
        .env("CTXGATE__TALK__MAIN__ROOM_LIST_INTERVAL", "100ms")
        .env("CTXGATE__TALK__MAIN__LONG_POLL_TIMEOUT", "1s")
        .env("CTXGATE__TALK__MAIN__REQUEST_TIMEOUT", "5s")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let (log_tx, mut log_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = log_tx.send(line);
        }
    });
    let mut log = Vec::new();
    let http = reqwest::Client::new();
    let admin = |path: &str| {
        http.get(format!("http://127.0.0.1:{port}/admin{path}"))
            .bearer_auth(ADMIN)
            .send()
    };
    // Watching the room (its cursor is committed), then Talk's clock moves past that second.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        while let Ok(line) = log_rx.try_recv() {
            log.push(line);
        }
        if let Ok(r) = admin("/channels").await
            && let Ok(body) = r.json::<Value>().await
            && body["channels"].as_array().is_some_and(|cs| {
                cs.iter().any(|c| {
                    c["poller"]["rooms"]
                        .as_array()
                        .is_some_and(|rs| rs.iter().any(|r| r["cursor"].is_i64()))
                })
            })
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never watched the room: {log:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    fake.advance_time(Duration::from_secs(2));
    fake.post("dmalice1", "alice", "ping from talk", json!([]), None);
    let answer = fake
        .wait_for(
            "dmalice1",
            |m| {
                m["actorId"] == "assistant"
                    && m["referenceId"]
                        .as_str()
                        .is_some_and(|r| r.starts_with("ctxgate:task:"))
            },
            Duration::from_secs(30),
        )
        .await
        .expect("the process answers in Talk");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .starts_with("echo: ping from talk"),
        "{answer}"
    );
    let config: Value = admin("/config").await.unwrap().json().await.unwrap();
    let config = config.to_string();
    assert!(
        config.contains("dmalice1") || config.contains("assistant"),
        "{config}"
    );
    // A request with a wrong token is refused without echoing anything secret.
    let refused = http
        .get(format!("http://127.0.0.1:{port}/admin/tasks"))
        .bearer_auth("wrong-token")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let refused = refused.text().await.unwrap();

    let pid = child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("exits within 30 s of SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        use tokio::io::AsyncReadExt;
        out.read_to_string(&mut stdout).await.unwrap();
    }
    // The reader task ends with the process; collect what is left.
    while let Some(line) = log_rx.recv().await {
        log.push(line);
    }
    let everything = format!("{}\n{stdout}\n{config}\n{refused}", log.join("\n"));
    assert!(log.len() > 20, "debug logging was on: {} lines", log.len());
    for secret in [TALK_PASSWORD, ADMIN, SECRET] {
        assert!(!everything.contains(secret), "{secret} leaked");
    }
}
