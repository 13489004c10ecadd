//! Peer faults against the whole in-process `App` (workers, outbox, Talk poller, real clock):
//! the fake Talk server (through the fault proxy) answers 500 / 429 with `Retry-After`, hangs
//! or drops the connection; the fake LLM answers 500 / 429, hangs past the brain timeout or
//! closes the connection mid-response. During the fault the gateway must back off (request
//! counts stay bounded); once it clears, every trigger is answered exactly once.

mod brain;
mod talk;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ctxgate::App;
use ctxgate::config::{BrainKind, Secret, Settings, TalkSettings};
use ctxgate::deps::Deps;
use ctxgate_talk::fake::FakeTalk;
use tokio::task::JoinHandle;

use super::hooks::{CallbackReceiver, Sender};
use super::llm::{self, FakeLlm, LlmFault};
use super::proxy::{Class, ProxyFault, TalkProxy};
use super::store::{self, Expected};
use super::world::{self, DMS, GROUPS, USERS};
use crate::helpers::{SECRET, test_settings};

const TALK_PASSWORD: &str = "fault-tests-talk-app-password";
const WAIT: Duration = Duration::from_secs(30);

/// The running gateway and its peers.
struct Rig {
    talk: Option<(FakeTalk, TalkProxy)>,
    llm: FakeLlm,
    callbacks: CallbackReceiver,
    sender: Sender,
    deps: Deps,
    running: JoinHandle<anyhow::Result<()>>,
    dir: tempfile::TempDir,
    expected: Expected,
}

/// Quick retries and backoffs, so that a few seconds of fault show their shape:
/// brain — 2 quick re-tries 200 ms, 400 ms apart, then attempts 500 ms, 1 s, 2 s apart;
/// outbox — 300 ms doubling up to 5 s; Talk poller — 1 s doubling up to 5 s.
fn settings(dir: &std::path::Path, llm: &FakeLlm, talk: Option<&TalkProxy>) -> Settings {
    let mut s = test_settings(dir);
    s.scheduler.enabled = false;
    let brain = s.brains.get_mut("default").unwrap();
    brain.kind = BrainKind::Openai;
    brain.base_url = Some(llm.base_url().to_owned());
    brain.model = Some("fake-model".into());
    brain.api_key = Some(Secret::new(llm::API_KEY));
    brain.timeout = Duration::from_secs(1);
    let w = &mut s.worker;
    w.count = 3;
    w.lease = Duration::from_secs(10);
    w.heartbeat = Duration::from_secs(1);
    w.poll_interval = Duration::from_millis(100);
    w.max_attempts = 20;
    w.retry_backoff = vec![
        Duration::from_millis(500),
        Duration::from_secs(1),
        Duration::from_secs(2),
    ];
    w.fast_retries = 2;
    w.fast_retry_backoff = Duration::from_millis(200);
    let o = &mut s.outbox;
    o.poll_interval = Duration::from_millis(100);
    o.initial_backoff = Duration::from_millis(300);
    o.max_backoff = Duration::from_secs(5);
    o.max_attempts = 30;
    o.lease = Duration::from_secs(30);
    if let Some(proxy) = talk {
        s.talk.insert(
            "main".into(),
            TalkSettings {
                base_url: proxy.base_url().to_owned(),
                user: "assistant".into(),
                password: Some(Secret::new(TALK_PASSWORD)),
                room_list_interval: Duration::from_millis(100),
                long_poll_timeout: Duration::from_secs(1),
                request_timeout: Duration::from_secs(2),
                max_backoff: Duration::from_secs(5),
                ..TalkSettings::default()
            },
        );
    }
    s
}

async fn rig(with_talk: bool) -> Rig {
    let llm = FakeLlm::start((2, 20), None).await;
    let callbacks = CallbackReceiver::start(SECRET, None).await;
    let talk = if with_talk {
        let fake = world::fake_talk(TALK_PASSWORD).await;
        let proxy = TalkProxy::start(&fake.base_url(), None).await;
        Some((fake, proxy))
    } else {
        None
    };
    let dir = tempfile::tempdir().unwrap();
    let settings = settings(dir.path(), &llm, talk.as_ref().map(|(_, p)| p));
    let app = App::build(settings).await.unwrap();
    let deps = app.deps().clone();
    let sender = Sender {
        base: format!("http://{}", app.address()),
        secret: SECRET.into(),
        callback_url: callbacks.url().into(),
        http: reqwest::Client::new(),
        killer: None,
    };
    let running = tokio::spawn(app.run());
    let rig = Rig {
        talk,
        llm,
        callbacks,
        sender,
        deps,
        running,
        dir,
        expected: Expected::default(),
    };
    if let Some((fake, _)) = &rig.talk {
        rig.wait_watching().await;
        // Messages from the second the account was first watched count as history: move on.
        fake.advance_time(Duration::from_secs(2));
    }
    rig
}

/// Polls `check` until it holds; fails naming `what` after `within`.
async fn eventually(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Rig {
    fn fake(&self) -> &FakeTalk {
        &self.talk.as_ref().unwrap().0
    }

    fn proxy(&self) -> &TalkProxy {
        &self.talk.as_ref().unwrap().1
    }

    async fn wait_watching(&self) {
        let base = self.sender.base.clone();
        store::wait_watching(&base, crate::helpers::ADMIN_TOKEN, DMS.len() + GROUPS.len()).await;
    }

    /// A trigger in one-to-one room `k`.
    fn talk_trigger(&mut self, k: usize, tag: &str) {
        let id = world::talk_trigger(self.fake(), DMS[k], USERS[k], tag);
        self.expected
            .talk_triggers
            .push((DMS[k].to_owned(), id, tag.to_owned()));
    }

    fn group_trigger(&mut self, g: usize, tag: &str) {
        let id = world::talk_trigger(self.fake(), GROUPS[g], "bob", tag);
        self.expected
            .talk_triggers
            .push((GROUPS[g].to_owned(), id, tag.to_owned()));
    }

    async fn webhook_trigger(&mut self, conversation: &str, tag: &str) {
        let id = format!("msg-{tag}");
        let sent = self
            .sender
            .send(conversation, &id, &format!("{tag} please answer"))
            .await;
        assert_eq!(sent.attempts, 1, "the gateway itself is up");
        self.expected
            .webhook_triggers
            .push((conversation.to_owned(), id, tag.to_owned()));
    }

    /// Waits until every trigger so far has its task done and its answer delivered.
    async fn wait_idle(&self) {
        let db = self.dir.path().join("ctxgate.db");
        let deadline = Instant::now() + WAIT;
        while !store::queues(&db).await.idle(self.triggers()) {
            assert!(Instant::now() < deadline, "the queues never emptied");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn triggers(&self) -> usize {
        self.expected.talk_triggers.len() + self.expected.webhook_triggers.len()
    }

    /// Every trigger answered at its peer exactly once, and the store agrees.
    async fn assert_answered_once(mut self) {
        let talk_tags: Vec<String> = self
            .expected
            .talk_triggers
            .iter()
            .map(|t| t.2.clone())
            .collect();
        let hook_tags: Vec<String> = self
            .expected
            .webhook_triggers
            .iter()
            .map(|t| t.2.clone())
            .collect();
        let rooms: Vec<String> = self
            .expected
            .talk_triggers
            .iter()
            .map(|t| t.0.clone())
            .collect();
        eventually("every trigger is answered", WAIT, || {
            let posts = self
                .talk
                .as_ref()
                .map(|(f, _)| world::count_posts_in(f, &rooms));
            let got = self.callbacks.callbacks();
            talk_tags
                .iter()
                .all(|t| posts.as_ref().is_some_and(|p| p.by_tag.contains_key(t)))
                && hook_tags
                    .iter()
                    .all(|t| got.iter().any(|c| c.tag.as_ref() == Some(t)))
        })
        .await;
        self.wait_idle().await;
        let db = self.dir.path().join("ctxgate.db");
        // Stopped: nothing more can arrive.
        self.deps.shutdown.cancel();
        (&mut self.running).await.unwrap().unwrap();
        if let Some((fake, _)) = &self.talk {
            let posts = world::count_posts_in(fake, &rooms);
            for t in &talk_tags {
                assert_eq!(posts.by_tag[t].len(), 1, "{t} posted once: {posts:?}");
            }
            assert!(posts.by_reference.values().all(|n| *n == 1), "{posts:?}");
            assert!(posts.untagged.is_empty(), "{posts:?}");
        }
        let got = self.callbacks.callbacks();
        assert_eq!(
            got.len(),
            hook_tags.len(),
            "one callback per trigger: {got:?}"
        );
        for t in &hook_tags {
            assert_eq!(
                got.iter().filter(|c| c.tag.as_ref() == Some(t)).count(),
                1,
                "{t}"
            );
        }
        assert_eq!(self.callbacks.bad_signatures(), 0);
        store::check(&db, &self.expected)
            .await
            .assert_complete(self.triggers());
    }
}

/// When each room's requests of `class` arrived within `[from, to)`.
fn times_by_room(
    proxy: &TalkProxy,
    class: Class,
    from: Instant,
    to: Instant,
) -> BTreeMap<Option<String>, Vec<Instant>> {
    let mut by_room: BTreeMap<Option<String>, Vec<Instant>> = BTreeMap::new();
    for s in proxy.seen() {
        if s.class == class && s.at >= from && s.at < to {
            by_room.entry(s.room).or_default().push(s.at);
        }
    }
    by_room
}

/// The most requests one key saw, the fewest, and the shortest gap between two of one key.
fn shape<K>(times: &BTreeMap<K, Vec<Instant>>) -> (usize, usize, Duration) {
    let most = times.values().map(Vec::len).max().unwrap_or(0);
    let fewest = times.values().map(Vec::len).min().unwrap_or(0);
    let gap = times
        .values()
        .flat_map(|at| at.windows(2).map(|w| w[1] - w[0]))
        .min()
        .unwrap_or(Duration::MAX);
    (most, fewest, gap)
}
