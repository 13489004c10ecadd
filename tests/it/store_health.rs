//! A full disk, for real: the SQLite store lives on a small tmpfs that fills up under webhook
//! intake. The gateway reports it (`/readyz` 503 `store_unwritable`, the metric), stops taking
//! work (intake 503, so senders retry), and resumes by itself once the filesystem is grown;
//! nothing accepted is lost and the rejected messages go through when sent again.
//!
//! Needs root (it mounts a tmpfs), as CI has.

use std::process::Command;
use std::time::Duration;

use ctxgate::store::TaskFilter;
use ctxgate::worker::RunOnce;
use serde_json::{Value, json};

use crate::helpers::spawn_app_with;

const WAIT: Duration = Duration::from_secs(30);

/// A tmpfs mounted for the test, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "this test mounts a tmpfs to fill a disk for real and needs root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs { dir }
    }

    fn grow(&self, size: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(self.dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_pauses_intake_and_work_until_space_returns() {
    let disk = Tmpfs::mount("3m");
    let db = disk.dir.path().join("ctxgate.db");
    let app = spawn_app_with(|s| {
        s.store.url = format!("sqlite://{}", db.display());
    })
    .await;
    let filler = "lorem ipsum dolor sit amet ".repeat(2_200); // about 60 KB
    let mut accepted = Vec::new();
    let mut refused = None;
    for n in 0..200 {
        let text = format!("message {n}: {filler}");
        let r = app
            .post_webhook(&json!({"conversation": "big", "sender": "u", "text": text,
                                  "message_id": format!("m{n}")}))
            .await;
        match r.status().as_u16() {
            202 => accepted.push(n),
            503 => {
                let body: Value = r.json().await.unwrap();
                refused = Some((n, body));
                break;
            }
            other => panic!("unexpected status {other}: {}", r.text().await.unwrap()),
        }
    }
    let (first_refused, body) = refused.expect("the 3 MB disk filled up");
    assert!(!accepted.is_empty());
    assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
    // Reported, and intake stays closed (answered at once, nothing attempted).
    let ready = app
        .http
        .get(format!("{}/readyz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(ready["error"]["code"], "store_unwritable");
    assert_eq!(ready["error"]["reason"], "disk_full");
    let again = app
        .post_webhook(
            &json!({"conversation": "big", "sender": "u", "text": "small one",
                              "message_id": "small"}),
        )
        .await;
    assert_eq!(again.status(), 503);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let metrics = app
            .http
            .get(format!("{}/metrics", app.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if metrics.contains("ctxgate_store_writable 0") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "metric never dropped: {:?}",
            metrics
                .lines()
                .filter(|l| l.contains("writable"))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Space returns: the gateway notices by itself and takes work again.
    disk.grow("64m");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let r = app
            .http
            .get(format!("{}/readyz", app.base))
            .send()
            .await
            .unwrap();
        if r.status() == 200 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never writable again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for n in [first_refused] {
        let text = format!("message {n}: {filler}");
        let r = app
            .post_webhook(&json!({"conversation": "big", "sender": "u", "text": text,
                                  "message_id": format!("m{n}")}))
            .await;
        assert_eq!(r.status(), 202, "sent again after the disk was grown");
        accepted.push(n);
    }
    let r = app
        .post_webhook(
            &json!({"conversation": "big", "sender": "u", "text": "small one",
                              "message_id": "small"}),
        )
        .await;
    assert_eq!(r.status(), 202);

    // Nothing accepted was lost: one task per accepted message, all answered. (Before the write
    // connection was checked on release, the two messages accepted after the disk was grown
    // were acknowledged inside a transaction SQLite never committed.)
    let tasks = app
        .deps
        .store
        .list_tasks(&TaskFilter::default())
        .await
        .unwrap();
    // Dedup keys are JSON arrays: [channel, conversation, message id, agent].
    let keys: Vec<&str> = tasks.iter().map(|t| t.dedup_key.as_str()).collect();
    let missing: Vec<_> = accepted
        .iter()
        .map(|n| format!("m{n}"))
        .chain(["small".to_owned()])
        .filter(|id| !keys.iter().any(|k| k.contains(&format!("\"{id}\""))))
        .collect();
    assert!(
        missing.is_empty(),
        "accepted but without a task: {missing:?}; keys {keys:?}"
    );
    assert_eq!(tasks.len(), accepted.len() + 1);
    let worker = app.worker("w");
    let mut done = 0;
    while let RunOnce::Processed { .. } = worker.run_once().await.unwrap() {
        done += 1;
    }
    assert_eq!(done, accepted.len() + 1);
}
