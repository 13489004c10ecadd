//! The Talk poller against the fake Talk server with 1,000 rooms: idle requests per minute
//! (target ≤ 60, independent of the room count), post-to-task latency in active rooms (target
//! p50 < 1 s, p99 < 3 s) and the gateway's RSS growth per 1,000 watched rooms (target < 20 MB).
//!
//! Run: `cargo bench --bench talk` (about 1.5 minutes).
//!
//! The fake server runs in a child process (this binary re-executed with `--fake-server`), so
//! the RSS read from `/proc/self/status` is the gateway's alone. The child creates every user
//! and room up front, prints `ready <base url>`, then answers one line per command on stdin:
//! `post <room> <n>` (alice mentions the assistant; answers `posted <id> <unix µs>` taken when
//! the fake has accepted the message), `reset` (forgets the request log) and `counts` (a JSON
//! summary of the request log by user). It exits when stdin closes.
//!
//! The gateway is the real `App` (SQLite in a temp dir, the default echo brain, workers and the
//! outbox running) with two poll-mode accounts: `main` (user `assistant`, 1,000 group rooms)
//! and `small` (user `helper`, 100 group rooms), so one idle window measures both room counts,
//! told apart by the basic-auth user the fake recorded. Talk timings are the defaults except
//! `active_window`, 5 s instead of 10 min: the rooms are created when the bench starts, and a
//! room is long-polled until it has been quiet that long.

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::time::{Duration, Instant};

use ctxgate::config::{Secret, Settings, TalkSettings};
use ctxgate::outbox::Outbox;
use ctxgate::store::{Page, Store, TaskFilter};
use ctxgate::worker::Worker;
use ctxgate::{App, Overrides};
use ctxgate_talk::fake::FakeTalk;
use ctxgate_talk::poller::Poller;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout};

const PASSWORD: &str = "app-password-of-the-assistant";
const BIG: usize = 1_000;
const SMALL: usize = 100;
const ACTIVE_WINDOW: Duration = Duration::from_secs(5);
const IDLE_WINDOW: Duration = Duration::from_secs(60);
/// Rooms of `main` that get mentions, and how many mentions in all.
const ACTIVE_ROOMS: usize = 20;
const MENTIONS: usize = 200;
/// One mention every 50 ms: each active room gets one a second.
const MENTION_GAP: Duration = Duration::from_millis(50);
/// Gap between the first mentions into the idle rooms.
const WAKE_GAP: Duration = Duration::from_millis(150);
/// How often the store is asked whether the tasks exist.
const STORE_POLL: Duration = Duration::from_millis(5);

fn big_token(i: usize) -> String {
    format!("big{i:04}")
}

fn small_token(i: usize) -> String {
    format!("small{i:03}")
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// Hands the allocator's free memory back to the system, so that RSS shows live memory.
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap pages.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn mb(kb: i64) -> f64 {
    kb as f64 / 1024.0
}

fn unix_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    if let Some(i) = args.iter().position(|a| a == "--fake-server") {
        let n = |k: usize| args.get(i + k).and_then(|v| v.parse().ok());
        rt.block_on(fake_server(n(1).unwrap_or(BIG), n(2).unwrap_or(SMALL)));
    } else {
        rt.block_on(gateway());
    }
}

// ---------------------------------------------------------------- the child: fake Talk

async fn fake_server(big: usize, small: usize) {
    let fake = FakeTalk::start().await;
    fake.add_user("assistant", "Assistant", Some(PASSWORD));
    fake.add_user("helper", "Helper", Some(PASSWORD));
    fake.add_user("alice", "Alice", Some("alice-pw"));
    fake.add_user("bob", "Bob", Some("bob-pw"));
    for i in 0..big {
        let name = format!("Team {i}");
        fake.create_room(&big_token(i), 2, &name, &["alice", "assistant", "bob"]);
    }
    for i in 0..small {
        let name = format!("Small team {i}");
        fake.create_room(&small_token(i), 2, &name, &["alice", "helper", "bob"]);
    }
    let mut out = tokio::io::stdout();
    let mut say = async |line: String| {
        out.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        out.flush().await.unwrap();
    };
    say(format!("ready {}", fake.base_url())).await;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        let answer = match words.as_slice() {
            ["post", room, n] => {
                let id = fake.post(
                    room,
                    "alice",
                    &format!("{{mention-user1}} question {n}?"),
                    json!({"mention-user1": {"type": "user", "id": "assistant", "name": "Assistant"}}),
                    None,
                );
                format!("posted {id} {}", unix_us())
            }
            ["reset"] => {
                fake.reset_counts();
                "ok".to_owned()
            }
            ["counts"] => counts(&fake).to_string(),
            _ => format!("error unknown command {line:?}"),
        };
        say(answer).await;
    }
    fake.shutdown().await;
}

/// The request log by user: total, per route, rooms read through the chat endpoint, still
/// open, and a few examples of requests other than the room list.
fn counts(fake: &FakeTalk) -> Value {
    let mut by_user: BTreeMap<String, Value> = BTreeMap::new();
    for r in fake.requests() {
        let user = r.user.clone().unwrap_or_else(|| "(none)".to_owned());
        let e = by_user.entry(user).or_insert_with(
            || json!({"total": 0, "routes": {}, "open": 0, "chat_rooms": [], "examples": []}),
        );
        e["total"] = json!(e["total"].as_u64().unwrap() + 1);
        let route = format!("{:?}", r.route);
        let n = e["routes"][&route].as_u64().unwrap_or(0);
        e["routes"][&route] = json!(n + 1);
        if r.status.is_none() {
            e["open"] = json!(e["open"].as_u64().unwrap() + 1);
        }
        if route == "Chat" {
            let token = r.path.rsplit('/').next().unwrap_or_default().to_owned();
            let rooms = e["chat_rooms"].as_array_mut().unwrap();
            if !rooms.iter().any(|t| t == &token) {
                rooms.push(json!(token));
            }
        }
        if route != "RoomList" && e["examples"].as_array().unwrap().len() < 5 {
            let status = r.status.map_or("open".to_owned(), |s| s.to_string());
            let example = format!("{} {}?{} -> {status}", r.method, r.path, r.query);
            e["examples"].as_array_mut().unwrap().push(json!(example));
        }
    }
    json!(by_user)
}

// ---------------------------------------------------------------- the parent: the gateway

struct Control {
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Control {
    async fn ask(&mut self, command: &str) -> String {
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
        let line = self.lines.next_line().await.unwrap();
        line.expect("the fake server exited")
    }

    async fn counts(&mut self) -> Value {
        serde_json::from_str(&self.ask("counts").await).unwrap()
    }

    /// Posts a mention into `room`; the message id and when the fake accepted it (unix µs).
    async fn post(&mut self, room: &str, n: usize) -> (i64, i64) {
        let answer = self.ask(&format!("post {room} {n}")).await;
        let mut w = answer.split_whitespace().skip(1);
        let mut next = || w.next().and_then(|v| v.parse().ok()).expect(&answer);
        (next(), next())
    }
}

fn account(base_url: &str, user: &str) -> TalkSettings {
    TalkSettings {
        base_url: base_url.to_owned(),
        user: user.to_owned(),
        password: Some(Secret::new(PASSWORD)),
        active_window: ACTIVE_WINDOW,
        ..TalkSettings::default()
    }
}

/// Waits (looking at the poller's status every 50 ms, up to `limit`) until `n` rooms have a
/// cursor and none is being polled any more.
async fn wait_watched_and_idle(poller: &Poller, n: usize, limit: Duration) -> Duration {
    let t = Instant::now();
    loop {
        let status = poller.status();
        let watched = status.rooms.iter().filter(|r| r.cursor.is_some()).count();
        if watched == n && status.rooms_polling == 0 {
            return t.elapsed();
        }
        assert!(
            t.elapsed() < limit,
            "{watched} of {n} rooms watched, {} polling after {limit:?}",
            status.rooms_polling
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for the poller's next room list.
async fn next_room_list(poller: &Poller) {
    let before = poller.status().last_room_list_at;
    let t = Instant::now();
    while poller.status().last_room_list_at == before {
        assert!(t.elapsed() < Duration::from_secs(30), "no room list");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn routes(user: &Value) -> String {
    let routes: Vec<String> = user["routes"]
        .as_object()
        .map(|o| o.iter().map(|(k, v)| format!("{k} {v}")).collect())
        .unwrap_or_default();
    routes.join(", ")
}

struct Latencies {
    /// Post accepted → task seen in the store (polled every `STORE_POLL`).
    observed_ms: Vec<f64>,
    /// Post accepted → the task's `created_at` stamp (taken by intake, ms resolution).
    stamped_ms: Vec<f64>,
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn summary(v: &mut [f64], decimals: usize) -> String {
    v.sort_by(|a, b| a.total_cmp(b));
    format!(
        "p50 {:.decimals$} ms, p99 {:.decimals$} ms, max {:.decimals$} ms",
        pct(v, 50.0),
        pct(v, 99.0),
        pct(v, 100.0)
    )
}

/// Posts `posts` (room, delay from the start) through the fake and waits, asking the store
/// every `STORE_POLL`, until each mention's task exists.
async fn post_to_task(
    mut ctl: Control,
    store: &dyn Store,
    posts: Vec<(String, Duration)>,
) -> (Control, Latencies) {
    let total = posts.len();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let poster = tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        for (n, (room, at)) in posts.into_iter().enumerate() {
            tokio::time::sleep_until(start + at).await;
            let (id, posted_us) = ctl.post(&room, n).await;
            tx.send(((room, id.to_string()), posted_us)).unwrap();
        }
        ctl
    });
    let mut outstanding: HashMap<(String, String), i64> = HashMap::new();
    let mut lat = Latencies {
        observed_ms: Vec::new(),
        stamped_ms: Vec::new(),
    };
    let mut received = 0;
    let mut last_progress = Instant::now();
    while lat.observed_ms.len() < total {
        while let Ok((key, posted_us)) = rx.try_recv() {
            outstanding.insert(key, posted_us);
            received += 1;
        }
        if let Some(oldest_us) = outstanding.values().min().copied() {
            let filter = TaskFilter {
                channel: Some("talk:main".to_owned()),
                created_after: Some(oldest_us / 1000 - 1_000),
                page: Page {
                    before: None,
                    limit: 1_000,
                },
                ..TaskFilter::default()
            };
            let tasks = store.list_tasks(&filter).await.unwrap();
            let seen_us = unix_us();
            for task in tasks {
                // [channel, conversation, channel message id, agent]
                let key: Vec<String> = serde_json::from_str(&task.dedup_key).unwrap();
                if let Some(posted_us) = outstanding.remove(&(key[1].clone(), key[2].clone())) {
                    lat.observed_ms.push((seen_us - posted_us) as f64 / 1000.0);
                    lat.stamped_ms
                        .push((task.created_at - posted_us / 1000) as f64);
                    last_progress = Instant::now();
                }
            }
        }
        assert!(
            last_progress.elapsed() < Duration::from_secs(30),
            "no task for {} of {received} posted mentions within 30 s",
            outstanding.len()
        );
        tokio::time::sleep(STORE_POLL).await;
    }
    (poster.await.unwrap(), lat)
}

async fn gateway() {
    let began = Instant::now();
    let exe = std::env::current_exe().unwrap();
    let mut child = tokio::process::Command::new(exe)
        .args(["--fake-server", &BIG.to_string(), &SMALL.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let fake_pid = child.id().unwrap();
    let mut ctl = Control {
        stdin: child.stdin.take().unwrap(),
        lines: BufReader::new(child.stdout.take().unwrap()).lines(),
    };
    let ready = ctl.lines.next_line().await.unwrap().expect("fake server");
    let rooms_created = Instant::now();
    let base_url = ready.strip_prefix("ready ").expect(&ready).to_owned();

    let dir = tempfile::tempdir().unwrap();
    let mut s = Settings::default();
    s.http.listen = "127.0.0.1:0".parse().unwrap();
    s.store.url = format!("sqlite://{}", dir.path().join("talk.db").display());
    let hook = s.webhooks.get_mut("default").unwrap();
    hook.secret = Some(Secret::new("bench-secret-0123456789"));
    hook.secret_file = None;
    s.talk
        .insert("main".into(), account(&base_url, "assistant"));
    s.talk.insert("small".into(), account(&base_url, "helper"));
    let talk = s.talk["main"].clone();
    let app = App::build_with(s, Overrides::default()).await.unwrap();
    let deps = app.deps().clone();
    for n in 0..deps.settings.worker.count {
        tokio::spawn(Worker::new(deps.clone(), format!("bench-w{n}")).run());
    }
    tokio::spawn(Outbox::new(deps.clone(), "bench-outbox").run());
    let pollers = deps.talk_pollers.get().unwrap();
    let (main, small) = (pollers["main"].current(), pollers["small"].current());

    // The rooms are older than the active window before the account is first watched, like
    // rooms of a gateway (re)started on a quiet afternoon: first sight reads their history and
    // long-polls none of them.
    tokio::time::sleep((rooms_created + ACTIVE_WINDOW + Duration::from_secs(1)) - Instant::now())
        .await;
    let me = std::process::id();
    let rss_before = rss_kb(me);
    trim();
    let live_before = rss_kb(me);

    ctl.ask("reset").await;
    tokio::spawn(main.clone().run());
    let first_sight = wait_watched_and_idle(&main, BIG, Duration::from_secs(120)).await;
    let sight_counts = ctl.counts().await;
    next_room_list(&main).await;
    let rss_after = rss_kb(me);
    trim();
    let live_after = rss_kb(me);

    tokio::spawn(small.clone().run());
    wait_watched_and_idle(&small, SMALL, Duration::from_secs(60)).await;
    next_room_list(&small).await;
    next_room_list(&main).await;

    ctl.ask("reset").await;
    tokio::time::sleep(IDLE_WINDOW).await;
    let idle = ctl.counts().await;
    let per_min = |user: &str| {
        idle[user]["total"].as_u64().unwrap_or(0) as f64 * 60.0 / IDLE_WINDOW.as_secs_f64()
    };

    // Idle rooms woken by a mention (the room list notices them), then mentions while they are
    // long-polled.
    ctl.ask("reset").await;
    let rooms: Vec<String> = (0..ACTIVE_ROOMS)
        .map(|i| big_token(i * BIG / ACTIVE_ROOMS))
        .collect();
    // Spread over more than one room-list interval, so that the wake-ups sample its phase.
    let wake: Vec<(String, Duration)> = (0..ACTIVE_ROOMS)
        .map(|i| (rooms[i].clone(), WAKE_GAP * i as u32))
        .collect();
    let (ctl, mut woken) = post_to_task(ctl, deps.store.as_ref(), wake).await;
    let active: Vec<(String, Duration)> = (0..MENTIONS)
        .map(|i| (rooms[i % ACTIVE_ROOMS].clone(), MENTION_GAP * i as u32))
        .collect();
    let (mut ctl, mut hot) = post_to_task(ctl, deps.store.as_ref(), active).await;
    let polling = main.status().rooms_polling;
    let fake_rss = rss_kb(fake_pid);
    let active_counts = ctl.counts().await;

    println!(
        "talk bench: fake Talk in a child process (pid {fake_pid}, RSS {:.1} MB), gateway pid {me}",
        mb(fake_rss as i64)
    );
    println!(
        "  settings: room_list_interval {:?}, full_refresh_interval {:?}, active_window {:?} \
         (default 600s), long_poll_timeout {:?}, backfill {} messages, {} backfills at once; \
         echo brain, {} workers + outbox; SQLite in a temp dir",
        talk.room_list_interval,
        talk.full_refresh_interval,
        talk.active_window,
        talk.long_poll_timeout,
        deps.settings.conversation.talk_context_limit,
        4,
        deps.settings.worker.count
    );
    println!(
        "  first sight of {BIG} rooms (group rooms, 3 system messages each): {:.1} s, {} requests ({})",
        first_sight.as_secs_f64(),
        sight_counts["assistant"]["total"],
        routes(&sight_counts["assistant"])
    );
    let growth = rss_after as i64 - rss_before as i64;
    let live = live_after as i64 - live_before as i64;
    println!(
        "  RSS: {:.1} MB before the account is watched, {:.1} MB with {BIG} rooms watched: \
         {:+.1} MB per 1,000 rooms (target < 20 MB); after malloc_trim(0) each time: {:.1} → \
         {:.1} MB, {:+.1} MB per 1,000 rooms",
        mb(rss_before as i64),
        mb(rss_after as i64),
        mb(growth) * 1000.0 / BIG as f64,
        mb(live_before as i64),
        mb(live_after as i64),
        mb(live) * 1000.0 / BIG as f64
    );
    println!(
        "  idle, {} s window (both accounts at once, told apart by login): {BIG} rooms {:.1} \
         requests/min ({}), {SMALL} rooms {:.1} requests/min ({}) (target ≤ 60/min, \
         independent of room count)",
        IDLE_WINDOW.as_secs(),
        per_min("assistant"),
        routes(&idle["assistant"]),
        per_min("helper"),
        routes(&idle["helper"])
    );
    for user in ["assistant", "helper"] {
        let examples = &idle[user]["examples"];
        if examples.as_array().is_some_and(|e| !e.is_empty()) {
            println!("    {user}: requests besides the room list: {examples}");
        }
    }
    println!(
        "  idle rooms woken by a mention ({ACTIVE_ROOMS} rooms, one every {WAKE_GAP:?}): \
         post→task {} (stamped by intake: {})",
        summary(&mut woken.observed_ms, 1),
        summary(&mut woken.stamped_ms, 0)
    );
    println!(
        "  active rooms ({MENTIONS} mentions over {ACTIVE_ROOMS} rooms, one every {:?}): \
         post→task {} (target p50 < 1 s, p99 < 3 s); stamped by intake: {}",
        MENTION_GAP,
        summary(&mut hot.observed_ms, 1),
        summary(&mut hot.stamped_ms, 0)
    );
    println!(
        "    post→task = the fake accepted the post → the task is seen in the store (asked every \
         {STORE_POLL:?}); stamped = → the task's created_at (both in whole ms). Rooms long-polled at the end: \
         {polling}; requests meanwhile: {} ({})",
        active_counts["assistant"]["total"],
        routes(&active_counts["assistant"])
    );
    println!("  total time {:.0} s", began.elapsed().as_secs_f64());

    deps.shutdown.cancel();
    drop(ctl);
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    drop(app);
}
