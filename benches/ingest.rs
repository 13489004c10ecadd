//! Webhook ingestion benchmark: signed requests accepted per second until durably stored, and
//! latency percentiles at a fixed 1,000 req/s, against the real `App` on SQLite; plus this
//! machine's raw SQLite single-row-transaction insert rate for comparison.
//!
//! Run: `cargo bench --bench ingest` (options: `-- --requests N --concurrency C --seconds S`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxgate::config::Secret;
use ctxgate::{App, Overrides, Settings};
use ctxgate_webhook::signature;
use hdrhistogram::Histogram;
use sqlx::Connection;

const SECRET: &str = "bench-secret-0123456789abcdef";

struct Args {
    requests: usize,
    concurrency: usize,
    seconds: u64,
    rate: u64,
}

fn args() -> Args {
    let mut a = Args {
        requests: 20_000,
        concurrency: 32,
        seconds: 10,
        rate: 1_000,
    };
    let raw: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < raw.len() {
        let val = || raw.get(i + 1).and_then(|v| v.parse::<u64>().ok());
        match raw[i].as_str() {
            "--requests" => a.requests = val().expect("--requests N") as usize,
            "--concurrency" => a.concurrency = val().expect("--concurrency N") as usize,
            "--seconds" => a.seconds = val().expect("--seconds N"),
            "--rate" => a.rate = val().expect("--rate N"),
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a
}

fn signed(i: usize) -> (Vec<u8>, String, String) {
    let body = serde_json::to_vec(&serde_json::json!({
        "conversation": format!("conv-{}", i % 500),
        "sender": "bench",
        "text": format!("message number {i} with a few words of ordinary length"),
        "message_id": format!("m-{i}"),
    }))
    .unwrap();
    let ts = chrono::Utc::now().timestamp();
    let sig = signature::sign(SECRET.as_bytes(), ts, &body);
    (body, ts.to_string(), sig)
}

async fn send(
    http: &reqwest::Client,
    url: &str,
    (body, ts, sig): (Vec<u8>, String, String),
) -> bool {
    let r = http
        .post(url)
        .header(signature::TIMESTAMP_HEADER, ts)
        .header(signature::SIGNATURE_HEADER, sig)
        .body(body)
        .send()
        .await;
    matches!(r, Ok(r) if r.status() == 202)
}

async fn start(dir: &std::path::Path) -> String {
    let mut s = Settings::default();
    s.http.listen = "127.0.0.1:0".parse().unwrap();
    s.store.url = format!("sqlite://{}", dir.join("bench.db").display());
    let hook = s.webhooks.get_mut("default").unwrap();
    hook.secret = Some(Secret::new(SECRET));
    hook.secret_file = None;
    let app = App::build_with(s, Overrides::default()).await.unwrap();
    let (addr, _deps) = app.spawn_http_only();
    format!("http://{addr}/webhooks/default")
}

async fn throughput(a: &Args, url: &str) -> f64 {
    let http = reqwest::Client::new();
    let bodies: Vec<_> = (0..a.requests).map(signed).collect();
    let queue = Arc::new(std::sync::Mutex::new(bodies));
    let started = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..a.concurrency {
        let (http, url, queue) = (http.clone(), url.to_owned(), queue.clone());
        handles.push(tokio::spawn(async move {
            let mut ok = 0usize;
            loop {
                let next = queue.lock().unwrap().pop();
                let Some(req) = next else { break };
                ok += send(&http, &url, req).await as usize;
            }
            ok
        }));
    }
    let mut accepted = 0;
    for h in handles {
        accepted += h.await.unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(accepted, a.requests, "every request accepted");
    accepted as f64 / secs
}

async fn fixed_rate(a: &Args, url: &str, offset: usize) -> (Histogram<u64>, usize) {
    let http = reqwest::Client::new();
    let total = (a.rate * a.seconds) as usize;
    let bodies: Vec<_> = (offset..offset + total).map(signed).collect();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / a.rate as f64));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for req in bodies {
        tick.tick().await;
        let (http, url, tx) = (http.clone(), url.to_owned(), tx.clone());
        // Latency is measured from the scheduled send time, so a stalled server shows up.
        let scheduled = Instant::now();
        tokio::spawn(async move {
            let ok = send(&http, &url, req).await;
            let _ = tx.send((ok, scheduled.elapsed()));
        });
    }
    drop(tx);
    let mut hist = Histogram::<u64>::new(3).unwrap();
    let mut failed = 0;
    while let Some((ok, took)) = rx.recv().await {
        failed += (!ok) as usize;
        hist.record(took.as_micros() as u64).unwrap();
    }
    (hist, failed)
}

/// The store alone: intake transactions issued back to back by 32 concurrent callers.
async fn store_rate(dir: &std::path::Path, n: usize) -> f64 {
    use ctxgate::store::{NewTask, Store};
    use ctxgate_contract::*;
    let settings = ctxgate::config::StoreSettings {
        url: format!("sqlite://{}", dir.join("store.db").display()),
        ..Default::default()
    };
    let store = Arc::new(
        ctxgate::store::sqlite::SqliteStore::connect(&settings)
            .await
            .unwrap(),
    );
    store.migrate().await.unwrap();
    let started = Instant::now();
    let mut handles = Vec::new();
    for c in 0..32 {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            for i in (c..n).step_by(32) {
                let event = InboundEvent {
                    channel: "webhook:default".into(),
                    conversation: format!("conv-{}", i % 500),
                    kind: EventKind::Posted(InboundMessage {
                        kind: MessageKind::Message,
                        channel_message_id: format!("m-{i}"),
                        sender_id: "bench".into(),
                        sender_name: None,
                        sender_kind: SenderKind::User,
                        role: Role::User,
                        text: format!("message number {i} with a few words of ordinary length"),
                        timestamp: chrono::Utc::now(),
                        reply_to: None,
                        source_type: SourceType::Webhook,
                        trigger: true,
                        agent: None,
                        audience: Audience::Everyone,
                        meta: serde_json::Value::Null,
                    }),
                    cursor: None,
                };
                let task = NewTask {
                    dedup_key: format!("k-{i}"),
                    source_type: SourceType::Webhook,
                    agent: "default".into(),
                    brain: "default".into(),
                    max_attempts: 3,
                };
                store.ingest(&event, Some(&task), 0).await.unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    n as f64 / started.elapsed().as_secs_f64()
}

async fn raw_sqlite_rate(dir: &std::path::Path, rows: usize) -> f64 {
    let url = format!("sqlite://{}?mode=rwc", dir.join("raw.db").display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    for pragma in ["PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL"] {
        sqlx::query(pragma).execute(&mut conn).await.unwrap();
    }
    sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        .execute(&mut conn)
        .await
        .unwrap();
    let started = Instant::now();
    for i in 0..rows {
        let mut tx = conn.begin().await.unwrap();
        sqlx::query("INSERT INTO t (body) VALUES (?1)")
            .bind(format!(
                "message number {i} with a few words of ordinary length"
            ))
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    rows as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let a = args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let url = start(dir.path()).await;
        // Warm up connections and SQLite pages.
        for i in 0..200 {
            assert!(send(&reqwest::Client::new(), &url, signed(10_000_000 + i)).await);
        }
        let rate = throughput(&a, &url).await;
        println!(
            "ingest throughput: {rate:.0} accepted/s ({} requests, {} concurrent clients)",
            a.requests, a.concurrency
        );
        let (hist, failed) = fixed_rate(&a, &url, 20_000_000).await;
        println!(
            "ingest at {} req/s for {} s: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, {} failed",
            a.rate,
            a.seconds,
            hist.value_at_quantile(0.50) as f64 / 1000.0,
            hist.value_at_quantile(0.99) as f64 / 1000.0,
            hist.max() as f64 / 1000.0,
            failed
        );
        let store = store_rate(dir.path(), 20_000).await;
        println!("store intake alone: {store:.0} events/s (message + task + conversation)");
        let raw = raw_sqlite_rate(dir.path(), 20_000).await;
        println!(
            "raw SQLite single-row transactions: {raw:.0} rows/s (ingest = {:.0}% of it)",
            100.0 * rate / raw
        );
    });
}
