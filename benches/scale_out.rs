//! Task throughput with 1, 2 and 3 `ctxgate serve` instances sharing one PostgreSQL database
//! (issue #10), with the echo brain or an `openai` brain on a fake model with a fixed latency:
//! how many tasks per second the instances complete together, the ratio to one instance, how
//! long tasks wait to be claimed, how much CPU the instances, PostgreSQL and the bench used,
//! and whether the guarantees held across instances: no task ran twice, and the tasks of one
//! conversation ran one at a time in id order.
//!
//! Run: `cargo bench --bench scale_out` (builds the release `ctxgate` binary first; needs
//! PostgreSQL, by default `postgres://postgres@127.0.0.1:5432` with trust authentication;
//! about 5 minutes with the echo brain). With a model latency, for example
//! `SCALE_BRAIN_LATENCY_MS=50 SCALE_WORKERS=4 cargo bench --bench scale_out` (about 10
//! minutes). Settings, as flags after `--` or environment variables:
//!
//! | flag | variable | default | meaning |
//! |---|---|---|---|
//! | `--pg` | `SCALE_PG` | `postgres://postgres@127.0.0.1:5432` | the server (no database) |
//! | `--instances` | `SCALE_INSTANCES` | `1,2,3` | instance counts to measure |
//! | `--runs` | `SCALE_RUNS` | 3 | runs per instance count (the median is reported) |
//! | `--tasks` | `SCALE_TASKS` | 3000 | tasks per run |
//! | `--conversations` | `SCALE_CONVERSATIONS` | 300 | conversations they are spread over |
//! | `--workers` | `SCALE_WORKERS` | 2 | `worker.count` of each instance |
//! | `--connections` | `SCALE_CONNECTIONS` | 32 | concurrent webhook requests while enqueuing |
//! | `--idle-tasks` | `SCALE_IDLE_TASKS` | 100 | tasks of the light-load phase |
//! | `--idle-rate` | `SCALE_IDLE_RATE` | 20 | their rate per second |
//! | `--brain-latency-ms` | `SCALE_BRAIN_LATENCY_MS` | 0 | 0: the echo brain; N: the fake model below, answering after N ms |
//!
//! Each run gets a fresh database (`ctxgate_bench_<random>`, dropped afterwards), migrated by
//! `ctxgate migrate`, then the instances start (each its own folder, port and log, the same
//! configuration otherwise: the brain, `worker.count` workers, defaults elsewhere).
//!
//! **The brain.** The echo brain answers at once, so every task costs only CPU: on a small
//! machine, where PostgreSQL, the instances and the bench share the cores, more instances
//! cannot add throughput once the cores are busy, whatever the database does. With
//! `--brain-latency-ms N` the bench serves a fake OpenAI-compatible model in its own process
//! (`POST /v1/chat/completions`, the response shape of the OpenAI Chat Completions API
//! reference, answered after N ms, concurrently) and every instance gets a `[brains.default]`
//! of kind `openai` with `base_url` pointing at it. A task then holds a worker for at least N
//! ms (twice that when context triage asks the model too, which it does once a conversation
//! has more candidates than `conversation.skip_selection_threshold`), as with a remote model,
//! so throughput is bounded by `instances × worker.count` workers waiting on the model until
//! the CPU or the database bounds it. The fake counts its requests: answer requests should equal
//! the tasks (more would be a brain call repeated), triage requests are reported beside them.
//!
//! **CPU.** For the burst phase the bench reads the CPU time of each instance, of all
//! `postgres` processes and of itself (the load generator and the fake model) from
//! `/proc/<pid>/stat`, and reports each as a share of one core over the phase, with how busy
//! the whole machine was: near 100% of every core means the CPU bounds the run; idle cores
//! with little throughput gain point at waiting (the model, or locks in the database).
//!
//! **Burst phase.** All tasks are enqueued through signed webhook requests (docs/webhooks.md)
//! as fast as `connections` concurrent clients manage, spread round robin over the instances
//! like a load balancer would, while the instances already work. Throughput = tasks / (last
//! `finished_at` − first `created_at`), from the database. Claim latency = the first attempt's
//! `started_at` − the task's `created_at`; under a backlog that is mostly waiting in line, so
//! the bench also gives "ready → claimed": from the later of `created_at` and the previous task
//! of the conversation finishing (before that, the task may not run).
//!
//! **Light-load phase.** Then `idle-tasks` more at `idle-rate` per second (each in a
//! conversation of its own, round robin over the instances), so that workers are idle when a
//! task arrives: their claim latency is the cost of noticing and claiming a task.
//!
//! **Checks** (from `tasks` and `task_attempts`): every task completed, attempts per task (more
//! than one = a task ran twice or was retried), and per conversation in id order: each task's
//! context (`tasks.context`) holds the previous task's answer (`ctxgate:task:<id>:result`), which
//! exists only once that task has completed, so the tasks ran one after the other in id order;
//! and, from the timestamps, each task's first attempt started no earlier than the previous task
//! finished. The timestamps are taken by each instance just before its statement runs, so under
//! CPU contention a claim can carry a time a few ms before the completion it waited for; the
//! context check has no such blur.

#[path = "support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Row};
use support::{
    FakeModel, FreshPg, Gateway, busy_percent, config_toml, cpu_seconds, fail, free_port,
    machine_cpu, median, named_cpu_seconds, percentile, setting,
};

/// Longest wait for a phase's tasks to be completed.
const PHASE_LIMIT: Duration = Duration::from_secs(600);

struct Params {
    pg: String,
    instances: Vec<usize>,
    runs: usize,
    tasks: u64,
    conversations: u64,
    workers: usize,
    connections: usize,
    idle_tasks: u64,
    idle_rate: u64,
    /// 0: the echo brain; else an `openai` brain on a fake model answering after this long.
    brain_latency_ms: u64,
}

impl Params {
    fn read() -> Params {
        let instances: String = setting("--instances", "SCALE_INSTANCES", "1,2,3".to_owned());
        let instances: Vec<usize> = instances
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .unwrap_or_else(|| fail(&format!("SCALE_INSTANCES: bad count {n:?}")))
            })
            .collect();
        let p = Params {
            pg: setting(
                "--pg",
                "SCALE_PG",
                "postgres://postgres@127.0.0.1:5432".to_owned(),
            )
            .trim_end_matches('/')
            .to_owned(),
            instances,
            runs: setting("--runs", "SCALE_RUNS", 3),
            tasks: setting("--tasks", "SCALE_TASKS", 3000),
            conversations: setting("--conversations", "SCALE_CONVERSATIONS", 300),
            workers: setting("--workers", "SCALE_WORKERS", 2),
            connections: setting("--connections", "SCALE_CONNECTIONS", 32),
            idle_tasks: setting("--idle-tasks", "SCALE_IDLE_TASKS", 100),
            idle_rate: setting("--idle-rate", "SCALE_IDLE_RATE", 20),
            brain_latency_ms: setting("--brain-latency-ms", "SCALE_BRAIN_LATENCY_MS", 0),
        };
        if p.runs == 0 || p.tasks == 0 || p.conversations == 0 || p.workers == 0 {
            fail("runs, tasks, conversations and workers must be at least 1");
        }
        if p.connections == 0 || p.idle_rate == 0 {
            fail("connections and idle-rate must be at least 1");
        }
        p
    }

    fn brain(&self) -> String {
        if self.brain_latency_ms == 0 {
            "echo brain".to_owned()
        } else {
            format!(
                "openai brain on a fake model in the bench answering after {} ms",
                self.brain_latency_ms
            )
        }
    }
}

/// What one run measured.
struct RunResult {
    tasks_per_s: f64,
    wall_tasks_per_s: f64,
    enqueue_per_s: f64,
    claim_ms: (f64, f64),
    ready_claim_ms: (f64, f64),
    idle_claim_ms: (f64, f64, f64),
    busy: f64,
    /// Machine busy before the run, with the instances idle (other processes).
    background: f64,
    ran_twice: usize,
    not_completed: usize,
    order_violations: usize,
    /// Largest overlap of an order violation, in ms.
    worst_overlap_ms: i64,
    /// Pairs (previous, next) of a conversation, and how many of the next tasks had the
    /// previous task's answer in their context.
    pairs: usize,
    saw_previous: usize,
    per_instance: Vec<u64>,
    /// CPU seconds of each instance over both phases.
    gateway_cpu: Vec<f64>,
    /// CPU use in the burst phase, in % of one core: each instance, PostgreSQL (all its
    /// processes), this bench (the load generator and the fake model).
    burst_cpu_percent: (Vec<f64>, f64, f64),
    /// Requests the fake model answered over both phases: (answers, triage, not understood);
    /// `None` with the echo brain.
    model_calls: Option<(u64, u64, u64)>,
    /// Tasks enqueued over both phases.
    accepted: u64,
    /// CPU ms per task in the burst phase: all instances, PostgreSQL, this bench.
    cpu_ms_per_task: (f64, f64, f64),
}

fn main() {
    if !support::started_by_cargo_bench("scale_out") {
        return;
    }
    let p = Params::read();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("cannot start the tokio runtime: {e}")));
    rt.block_on(async {
        println!(
            "scale-out bench: {} tasks over {} conversations per run, {} runs per instance count, \
             {}, worker.count = {} per instance, {} concurrent enqueue requests, \
             PostgreSQL at {}; machine: {} cores shared by PostgreSQL, the instances and the bench",
            p.tasks,
            p.conversations,
            p.runs,
            p.brain(),
            p.workers,
            p.connections,
            p.pg,
            support::cores()
        );
        let mut summary: Vec<(usize, Vec<RunResult>)> = Vec::new();
        for &n in &p.instances {
            let mut results = Vec::new();
            for run in 1..=p.runs {
                let r = one_run(&p, n).await;
                print_run(n, run, &r);
                results.push(r);
            }
            summary.push((n, results));
        }
        print_summary(&p, &summary);
    });
}

fn print_run(n: usize, run: usize, r: &RunResult) {
    let cpu: Vec<String> = r.gateway_cpu.iter().map(|c| format!("{c:.1}")).collect();
    let share: Vec<String> = r.per_instance.iter().map(u64::to_string).collect();
    let (instances, pg, bench) = &r.burst_cpu_percent;
    let instances: Vec<String> = instances.iter().map(|c| format!("{c:.0}%")).collect();
    let model = match r.model_calls {
        None => String::new(),
        Some((answers, triage, bad)) => format!(
            "; fake model: {answers} answer requests for {} tasks, {triage} triage requests, \
             {bad} not understood",
            r.accepted
        ),
    };
    println!(
        "  {n} instance(s), run {run}: {:.0} tasks/s ({:.0}/s by the bench's clock, enqueued at \
         {:.0}/s); claim p50 {:.0} ms p99 {:.0} ms; ready → claimed p50 {:.1} ms p99 {:.1} ms; \
         light load: claim p50 {:.1} ms p99 {:.1} ms max {:.1} ms; machine {:.0}% busy \
         ({:.0}% before the run); CPU per task: instances {:.2} ms, PostgreSQL {:.2} ms, bench \
         {:.2} ms; burst CPU (% of one core): instances [{}], PostgreSQL {:.0}%, bench {:.0}%; \
         tasks per instance [{}], gateway CPU s [{}]; ran twice {}, not completed {}; in order: \
         {} of {} next tasks had the previous answer in their context, {} started before the \
         previous finished by the timestamps (worst by {} ms){model}",
        r.tasks_per_s,
        r.wall_tasks_per_s,
        r.enqueue_per_s,
        r.claim_ms.0,
        r.claim_ms.1,
        r.ready_claim_ms.0,
        r.ready_claim_ms.1,
        r.idle_claim_ms.0,
        r.idle_claim_ms.1,
        r.idle_claim_ms.2,
        r.busy,
        r.background,
        r.cpu_ms_per_task.0,
        r.cpu_ms_per_task.1,
        r.cpu_ms_per_task.2,
        instances.join(", "),
        pg,
        bench,
        share.join(", "),
        cpu.join(", "),
        r.ran_twice,
        r.not_completed,
        r.saw_previous,
        r.pairs,
        r.order_violations,
        r.worst_overlap_ms
    );
}

fn print_summary(p: &Params, summary: &[(usize, Vec<RunResult>)]) {
    let med = |rs: &[RunResult], f: &dyn Fn(&RunResult) -> f64| {
        median(&rs.iter().map(f).collect::<Vec<_>>())
    };
    let base = summary
        .iter()
        .find(|(n, _)| *n == 1)
        .map(|(_, rs)| med(rs, &|r| r.tasks_per_s));
    println!(
        "\n  medians of {} runs | tasks/s | vs 1 instance | claim p50 / p99 ms | ready → claimed \
         p50 / p99 ms | light-load claim p50 / p99 ms | machine busy | burst CPU of the \
         instances / PostgreSQL / bench (% of one core) | ran twice | next task without the \
         previous answer | timestamp overlaps | not completed",
        p.runs
    );
    for (n, rs) in summary {
        let tps = med(rs, &|r| r.tasks_per_s);
        let ratio = base.map_or("-".to_owned(), |b| format!("{:.2}x", tps / b));
        println!(
            "  {n} instance(s) | {tps:.0} | {ratio} | {:.0} / {:.0} | {:.1} / {:.1} | {:.1} / {:.1} \
             | {:.0}% | {:.0}% / {:.0}% / {:.0}% | {} | {} | {} | {}",
            med(rs, &|r| r.claim_ms.0),
            med(rs, &|r| r.claim_ms.1),
            med(rs, &|r| r.ready_claim_ms.0),
            med(rs, &|r| r.ready_claim_ms.1),
            med(rs, &|r| r.idle_claim_ms.0),
            med(rs, &|r| r.idle_claim_ms.1),
            med(rs, &|r| r.busy),
            med(rs, &|r| r.burst_cpu_percent.0.iter().sum()),
            med(rs, &|r| r.burst_cpu_percent.1),
            med(rs, &|r| r.burst_cpu_percent.2),
            rs.iter().map(|r| r.ran_twice).sum::<usize>(),
            rs.iter().map(|r| r.pairs - r.saw_previous).sum::<usize>(),
            rs.iter().map(|r| r.order_violations).sum::<usize>(),
            rs.iter().map(|r| r.not_completed).sum::<usize>(),
        );
    }
    let model: Vec<(u64, u64, u64, u64)> = summary
        .iter()
        .flat_map(|(_, rs)| rs)
        .filter_map(|r| r.model_calls.map(|(a, t, b)| (a, t, b, r.accepted)))
        .collect();
    if !model.is_empty() {
        let sum = |f: fn(&(u64, u64, u64, u64)) -> u64| model.iter().map(f).sum::<u64>();
        println!(
            "  fake model over all runs: {} answer requests for {} tasks, {} triage requests, \
             {} not understood",
            sum(|m| m.0),
            sum(|m| m.3),
            sum(|m| m.1),
            sum(|m| m.2)
        );
    }
}

/// `ctxgate migrate` with the run's configuration.
async fn migrate(dir: &Path, config: &str) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| fail(&format!("cannot create a dir: {e}")));
    std::fs::write(dir.join("bench.toml"), config)
        .unwrap_or_else(|e| fail(&format!("cannot write the configuration: {e}")));
    let out = tokio::process::Command::new(support::BIN)
        .current_dir(dir)
        .args(["--config", "bench.toml", "migrate"])
        .env_remove("RUST_LOG")
        .env_remove("CTXGATE_CONFIG")
        .output()
        .await
        .unwrap_or_else(|e| fail(&format!("cannot run ctxgate migrate: {e}")));
    if !out.status.success() {
        fail(&format!(
            "ctxgate migrate failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
}

/// One instance's configuration: `worker.count`, and the fake model's brain when there is one
/// (the echo brain, the default, otherwise).
fn instance_config(p: &Params, port: u16, url: &str, model: Option<&FakeModel>) -> String {
    let brain = model.map(FakeModel::brain_toml).unwrap_or_default();
    config_toml(
        port,
        url,
        &format!("[worker]\ncount = {}\n\n{brain}", p.workers),
    )
}

async fn one_run(p: &Params, n: usize) -> RunResult {
    let db = FreshPg::create(&p.pg).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(&format!("no temp dir: {e}")));
    let model = match p.brain_latency_ms {
        0 => None,
        ms => Some(FakeModel::start(Duration::from_millis(ms)).await),
    };
    migrate(
        &dir.path().join("migrate"),
        &instance_config(p, 0, &db.url(), model.as_ref()),
    )
    .await;
    let mut gateways = Vec::new();
    for i in 0..n {
        let port = free_port();
        let config = instance_config(p, port, &db.url(), model.as_ref());
        gateways.push(Gateway::start(&dir.path().join(format!("i{i}")), port, &config).await);
    }
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(&db.url())
        .await
        .unwrap_or_else(|e| fail(&format!("cannot connect to {}: {e}", db.url())));
    let urls: Arc<Vec<String>> = Arc::new(gateways.iter().map(Gateway::webhook_url).collect());
    let background = support::background_busy(Duration::from_secs(1)).await;
    let cpu_before: Vec<f64> = gateways.iter().map(|g| cpu_seconds(g.pid)).collect();
    let me = std::process::id();
    let others_before = (named_cpu_seconds("postgres"), cpu_seconds(me));

    // Burst: as fast as the clients manage.
    let machine_before = machine_cpu();
    let t0 = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let mut senders = Vec::new();
    for _ in 0..p.connections {
        let (next, urls) = (next.clone(), urls.clone());
        let (tasks, conversations) = (p.tasks, p.conversations);
        senders.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut failures: Vec<String> = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= tasks {
                    break;
                }
                let conversation = format!("burst-{}", i % conversations);
                let text = format!(
                    "burst message {i}: what is the status of ticket {}?",
                    i % 97
                );
                let url = &urls[i as usize % urls.len()];
                if let Err(e) = send(&http, url, &conversation, &format!("m-{i}"), &text).await {
                    failures.push(e);
                }
            }
            failures
        }));
    }
    let mut failures = Vec::new();
    for s in senders {
        failures.extend(s.await.unwrap_or_default());
    }
    let enqueued = t0.elapsed();
    let accepted = p.tasks - failures.len() as u64;
    if !failures.is_empty() {
        println!(
            "    {} enqueue requests failed, e.g. {}",
            failures.len(),
            failures[0]
        );
    }
    wait_finished(&pool, "burst", accepted).await;
    let burst_wall = t0.elapsed();
    let busy = busy_percent(machine_before, machine_cpu());
    let instance_burst_cpu: Vec<f64> = gateways
        .iter()
        .zip(&cpu_before)
        .map(|(g, before)| cpu_seconds(g.pid) - before)
        .collect();
    let burst_cpu = (
        instance_burst_cpu.iter().sum::<f64>(),
        named_cpu_seconds("postgres") - others_before.0,
        cpu_seconds(me) - others_before.1,
    );
    let per_task = |s: f64| s * 1000.0 / accepted.max(1) as f64;
    let percent = |s: f64| 100.0 * s / burst_wall.as_secs_f64();
    let burst_cpu_percent = (
        instance_burst_cpu.iter().map(|&s| percent(s)).collect(),
        percent(burst_cpu.1),
        percent(burst_cpu.2),
    );

    // Light load: one task at a time, workers idle in between.
    let http = reqwest::Client::new();
    let start = Instant::now();
    let mut idle_accepted = 0;
    for i in 0..p.idle_tasks {
        let due = start + Duration::from_nanos(i * 1_000_000_000 / p.idle_rate);
        tokio::time::sleep_until(due.into()).await;
        let url = &urls[i as usize % urls.len()];
        let conversation = format!("idle-{i}");
        match send(&http, url, &conversation, "m-0", "a question at light load").await {
            Ok(()) => idle_accepted += 1,
            Err(e) => println!("    light-load request {i} failed: {e}"),
        }
    }
    wait_finished(&pool, "light-load", accepted + idle_accepted).await;

    let gateway_cpu: Vec<f64> = gateways
        .iter()
        .zip(&cpu_before)
        .map(|(g, before)| cpu_seconds(g.pid) - before)
        .collect();
    let mut problems = Vec::new();
    for g in &gateways {
        let (count, examples) = g.log_problems();
        if count > 0 {
            problems.push(format!(
                "{count} WARN/ERROR lines, e.g. {}",
                examples.join(" | ")
            ));
        }
    }
    let stops: Vec<_> = gateways.into_iter().map(Gateway::stop).collect();
    for s in stops {
        s.await;
    }
    for line in problems {
        println!("    gateway log: {line}");
    }
    let mut r = analyse(&pool, n).await;
    r.wall_tasks_per_s = accepted as f64 / burst_wall.as_secs_f64();
    r.enqueue_per_s = accepted as f64 / enqueued.as_secs_f64();
    r.busy = busy;
    r.cpu_ms_per_task = (
        per_task(burst_cpu.0),
        per_task(burst_cpu.1),
        per_task(burst_cpu.2),
    );
    r.background = background;
    r.gateway_cpu = gateway_cpu;
    r.burst_cpu_percent = burst_cpu_percent;
    r.accepted = accepted + idle_accepted;
    r.model_calls = model.map(|m| {
        let counts = m.counts();
        m.stop();
        counts
    });
    pool.close().await;
    db.drop_now().await;
    r
}

async fn send(
    http: &reqwest::Client,
    url: &str,
    conversation: &str,
    message_id: &str,
    text: &str,
) -> Result<(), String> {
    let req = support::signed(conversation, message_id, text);
    match req.request(http, url).send().await {
        Ok(r) if r.status().is_success() => Ok(()),
        Ok(r) => {
            let status = r.status();
            let body = r.bytes().await.unwrap_or_default();
            Err(support::refusal_kind(status, &body))
        }
        Err(e) => Err(support::error_kind(&e)),
    }
}

/// Polls the database every 200 ms (seldom enough not to load it noticeably; the figures come
/// from the task timestamps, not from this clock) until `expected` tasks in all have ended
/// (completed, failed or cancelled).
async fn wait_finished(pool: &PgPool, phase: &str, expected: u64) {
    let t = Instant::now();
    loop {
        let done: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM tasks WHERE status IN ('completed', 'failed', 'cancelled')",
        )
        .fetch_one(pool)
        .await
        .unwrap_or(0);
        if done as u64 >= expected {
            return;
        }
        if t.elapsed() > PHASE_LIMIT {
            println!(
                "    {phase} phase: only {done} of {expected} tasks ended within {} s",
                PHASE_LIMIT.as_secs()
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

struct Attempt {
    started: i64,
    finished: Option<i64>,
    worker: String,
}

struct TaskRow {
    id: i64,
    conversation: String,
    status: String,
    created: i64,
    finished: Option<i64>,
    /// `channel_message_id`s of the messages in the task's context.
    context: Vec<String>,
    attempts: Vec<Attempt>,
}

/// The `channel_message_id`s of `tasks.context` (`{"selected": [{...}, ...], ...}`).
fn context_ids(context: Option<&str>) -> Vec<String> {
    let Some(v) = context.and_then(|c| serde_json::from_str::<serde_json::Value>(c).ok()) else {
        return Vec::new();
    };
    v["selected"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["channel_message_id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The instance part of a worker id (`<host>-<pid>-<random>-w<n>`).
fn instance_of(worker: &str) -> &str {
    worker.rsplit_once("-w").map_or(worker, |(i, _)| i)
}

async fn analyse(pool: &PgPool, n: usize) -> RunResult {
    let rows = sqlx::query(
        "SELECT t.id, c.external_id, t.status, t.created_at, t.finished_at,
                a.started_at, a.finished_at AS attempt_finished, a.worker, t.context
         FROM tasks t
         JOIN conversations c ON c.id = t.conversation_id
         LEFT JOIN task_attempts a ON a.task_id = t.id
         ORDER BY t.id, a.attempt",
    )
    .fetch_all(pool)
    .await
    .unwrap_or_else(|e| fail(&format!("cannot read the tasks: {e}")));
    let mut tasks: Vec<TaskRow> = Vec::new();
    for row in rows {
        let id: i64 = row.get(0);
        if tasks.last().is_none_or(|t| t.id != id) {
            tasks.push(TaskRow {
                id,
                conversation: row.get(1),
                status: row.get(2),
                created: row.get(3),
                finished: row.get(4),
                context: context_ids(row.get::<Option<String>, _>(8).as_deref()),
                attempts: Vec::new(),
            });
        }
        let started: Option<i64> = row.get(5);
        if let (Some(started), Some(task)) = (started, tasks.last_mut()) {
            task.attempts.push(Attempt {
                started,
                finished: row.get(6),
                worker: row.get(7),
            });
        }
    }
    let ran_twice = tasks.iter().filter(|t| t.attempts.len() > 1).count();
    let not_completed = tasks.iter().filter(|t| t.status != "completed").count();

    // Per conversation, in id order (the rows are sorted by id).
    let mut by_conversation: HashMap<&str, Vec<&TaskRow>> = HashMap::new();
    for t in &tasks {
        by_conversation.entry(&t.conversation).or_default().push(t);
    }
    let mut order_violations = 0;
    let mut worst_overlap_ms = 0;
    let (mut pairs, mut saw_previous) = (0, 0);
    let mut claim = Vec::new();
    let mut ready_claim = Vec::new();
    let mut idle_claim = Vec::new();
    let mut per_instance: BTreeMap<String, u64> = BTreeMap::new();
    for list in by_conversation.values() {
        let mut previous_end: Option<i64> = None;
        for (k, t) in list.iter().enumerate() {
            if k > 0 {
                // The previous task's answer (see the outbox idempotency key in the worker).
                let answer = format!("ctxgate:task:{}:result", list[k - 1].id);
                pairs += 1;
                saw_previous += t.context.contains(&answer) as usize;
            }
            let Some(first) = t.attempts.first() else {
                continue;
            };
            *per_instance
                .entry(instance_of(&first.worker).to_owned())
                .or_default() += 1;
            if let Some(end) = previous_end
                && first.started < end
            {
                order_violations += 1;
                worst_overlap_ms = worst_overlap_ms.max(end - first.started);
            }
            let wait = (first.started - t.created) as f64;
            if t.conversation.starts_with("idle-") {
                idle_claim.push(wait);
            } else {
                claim.push(wait);
                let ready = previous_end.map_or(t.created, |e| e.max(t.created));
                ready_claim.push((first.started - ready) as f64);
            }
            let last = t.attempts.last().and_then(|a| a.finished).or(t.finished);
            previous_end = Some(previous_end.map_or(last.unwrap_or(i64::MAX), |p| {
                p.max(last.unwrap_or(i64::MAX))
            }));
        }
    }
    let burst: Vec<&TaskRow> = tasks
        .iter()
        .filter(|t| t.conversation.starts_with("burst-"))
        .collect();
    let first_created = burst.iter().map(|t| t.created).min().unwrap_or(0);
    let last_finished = burst.iter().filter_map(|t| t.finished).max().unwrap_or(0);
    let completed = burst.iter().filter(|t| t.status == "completed").count();
    let span_ms = (last_finished - first_created).max(1) as f64;
    for v in [&mut claim, &mut ready_claim, &mut idle_claim] {
        v.sort_by(|a, b| a.total_cmp(b));
    }
    let mut per_instance: Vec<u64> = per_instance.into_values().collect();
    per_instance.resize(n.max(per_instance.len()), 0);
    RunResult {
        tasks_per_s: completed as f64 * 1000.0 / span_ms,
        wall_tasks_per_s: 0.0,
        enqueue_per_s: 0.0,
        claim_ms: (percentile(&claim, 50.0), percentile(&claim, 99.0)),
        ready_claim_ms: (
            percentile(&ready_claim, 50.0),
            percentile(&ready_claim, 99.0),
        ),
        idle_claim_ms: (
            percentile(&idle_claim, 50.0),
            percentile(&idle_claim, 99.0),
            percentile(&idle_claim, 100.0),
        ),
        busy: 0.0,
        background: 0.0,
        ran_twice,
        not_completed,
        order_violations,
        worst_overlap_ms,
        pairs,
        saw_previous,
        per_instance,
        gateway_cpu: Vec::new(),
        burst_cpu_percent: (Vec::new(), 0.0, 0.0),
        model_calls: None,
        accepted: 0,
        cpu_ms_per_task: (0.0, 0.0, 0.0),
    }
}
