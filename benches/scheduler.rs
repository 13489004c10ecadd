//! Scheduler tick cost with 10,000 enabled schedules: time per tick when nothing is due (the
//! steady state) and when 100 fire at once, and the memory the schedules add to the process.
//!
//! Run: `cargo bench --bench scheduler`

use std::time::{Duration, Instant};

use ctxgate::clock::Clock;
use ctxgate::config::{ScheduleSpec, Secret, Settings, Target};
use ctxgate::scheduler::Scheduler;
use ctxgate::{App, Overrides};

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Settings::default();
        s.http.listen = "127.0.0.1:0".parse().unwrap();
        s.store.url = format!("sqlite://{}", dir.path().join("sched.db").display());
        let hook = s.webhooks.get_mut("default").unwrap();
        hook.secret = Some(Secret::new("bench-secret-0123456789"));
        hook.secret_file = None;
        let start = 1_767_225_600_000i64; // 2026-01-01T00:00:00Z
        let clock = Clock::manual(start);
        let app = App::build_with(s, Overrides { clock: Some(clock.clone()), brains: Default::default() })
            .await
            .unwrap();
        let deps = app.deps().clone();
        let before = rss_kb();
        for i in 0..10_000 {
            let spec = ScheduleSpec {
                name: format!("s{i}"),
                // Spread over the day: minute i % 60, hour (i / 60) % 24.
                cron: format!("{} {} * * *", i % 60, (i / 60) % 24),
                timezone: "Europe/Berlin".into(),
                prompt: Some("news?".into()),
                prompt_file: None,
                target: Target::Webhook { webhook: "default".into(), conversation: format!("c{i}"), callback_url: None },
                brain: "default".into(),
                enabled: true,
                one_shot: false,
                silent_unless_news: false,
            };
            let next = ctxgate::scheduler::CronSpec::parse(&spec.cron, &spec.timezone)
                .unwrap()
                .next_after(start);
            deps.store.put_schedule(&spec, "api", next, 5, start).await.unwrap();
        }
        let sched = Scheduler::new(deps.clone());
        // Steady state: nothing due.
        let mut idle = Vec::new();
        for _ in 0..200 {
            let t = Instant::now();
            assert_eq!(sched.tick().await.unwrap(), 0);
            idle.push(t.elapsed());
        }
        idle.sort();
        // A busy minute: about 7 schedules share each minute of the day; jump to a time where
        // many are due at once.
        clock.advance(Duration::from_secs(60 * 15));
        let t = Instant::now();
        let mut fired = 0;
        loop {
            let n = sched.tick().await.unwrap();
            if n == 0 {
                break;
            }
            fired += n;
        }
        let busy = t.elapsed();
        println!(
            "scheduler, 10,000 schedules: idle tick p50 {:?}, p99 {:?}; {} due fired in {:?} ({:?} per fire); RSS +{} kB for the schedules",
            idle[idle.len() / 2],
            idle[idle.len() * 99 / 100],
            fired,
            busy,
            busy / fired.max(1) as u32,
            rss_kb().saturating_sub(before)
        );
    });
}
