//! The crash suite: the real `ctxgate serve` on a SQLite file, with the fake Talk server (poll
//! mode, one-to-one and group rooms, behind the fault proxy), the fake OpenAI-compatible LLM and
//! the webhook channel with a callback receiver. Triggers arrive across many conversations while
//! a driver SIGKILLs the process at chosen moments — during intake, during brain calls, during
//! delivery — and starts it again on the same store.
//!
//! Verdict: every trigger answered exactly once (one Talk post per trigger and per reference id;
//! one distinct callback idempotency key per trigger, duplicate callbacks only counted), every
//! trigger in the stored history, every task completed and every delivery done.
//!
//! Short form by default (150 triggers, 8 kills); `CTXGATE_CRASH_TRIGGERS`, `CTXGATE_CRASH_KILLS`
//! and `CTXGATE_CRASH_SEED` choose another run (e.g. 600 / 60).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::gateway::{ADMIN_TOKEN, Gateway, Peers, TALK_PASSWORD, WEBHOOK_SECRET};
use super::hooks::{CallbackReceiver, Sender, Sent};
use super::killer::{Killer, Phase};
use super::llm::FakeLlm;
use super::proxy::TalkProxy;
use super::store::{self, Expected};
use super::world::{self, DMS, GROUPS, USERS};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One thing the sender does.
#[derive(Debug, Clone)]
enum Item {
    Talk {
        room: &'static str,
        user: &'static str,
        tag: String,
    },
    Chatter {
        room: &'static str,
        user: &'static str,
        n: usize,
    },
    Webhook {
        conversation: String,
        tag: String,
    },
}

fn plan(rng: &mut StdRng, triggers: usize) -> Vec<Item> {
    let mut items = Vec::new();
    for i in 0..triggers {
        let tag = format!("[q{i:04}]");
        let r: f64 = rng.random();
        items.push(if r < 0.35 {
            let k = rng.random_range(0..DMS.len());
            Item::Talk {
                room: DMS[k],
                user: USERS[k],
                tag,
            }
        } else if r < 0.6 {
            let room = GROUPS[rng.random_range(0..GROUPS.len())];
            let user = USERS[rng.random_range(0..3)];
            Item::Talk { room, user, tag }
        } else {
            let conversation = format!("hook-{}", rng.random_range(0..8));
            Item::Webhook { conversation, tag }
        });
        if rng.random_bool(0.2) {
            let room = GROUPS[rng.random_range(0..GROUPS.len())];
            let user = USERS[rng.random_range(0..3)];
            items.push(Item::Chatter { room, user, n: i });
        }
    }
    items
}

/// Roughly how many events of each phase one trigger brings (for spacing the kills).
fn per_trigger(phase: Phase) -> f64 {
    match phase {
        Phase::TalkIntake => 0.8,
        Phase::WebhookIntake => 0.4,
        Phase::Brain => 1.0,
        Phase::TalkPost => 0.6,
        Phase::Callback => 0.4,
        Phase::Timer => 1.0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_again_and_again_the_gateway_answers_every_trigger_exactly_once() {
    let triggers: usize = env_or("CTXGATE_CRASH_TRIGGERS", 150);
    let kills: usize = env_or("CTXGATE_CRASH_KILLS", 8);
    let seed: u64 = env_or("CTXGATE_CRASH_SEED", rand::random());
    println!("crash suite: {triggers} triggers, {kills} kills, CTXGATE_CRASH_SEED={seed}");
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(seed);
    let killer = Arc::new(Killer::default());
    let fake = world::fake_talk(TALK_PASSWORD).await;
    let proxy = TalkProxy::start(&fake.base_url(), Some(killer.clone())).await;
    let llm = FakeLlm::start((2, 40), Some(killer.clone())).await;
    let callbacks = CallbackReceiver::start(WEBHOOK_SECRET, Some(killer.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let peers = Peers {
        llm_base: llm.base_url(),
        talk_base: proxy.base_url(),
    };
    let mut gw = Gateway::new(dir.path(), &peers, killer.clone());
    gw.start().await;
    store::wait_watching(&gw.base(), ADMIN_TOKEN, DMS.len() + GROUPS.len()).await;
    // Messages from the second the account was first watched count as history: move on.
    fake.advance_time(Duration::from_secs(2));

    // The sender: triggers and chatter at a steady pace, whatever the gateway is doing.
    let items = plan(&mut rng, triggers);
    let sender = Sender {
        base: gw.base(),
        secret: WEBHOOK_SECRET.into(),
        callback_url: callbacks.url().into(),
        http: reqwest::Client::new(),
        killer: Some(killer.clone()),
    };
    let sending = {
        let fake = fake.clone();
        let pace_seed = rng.random::<u64>();
        tokio::spawn(async move {
            let mut pace = StdRng::seed_from_u64(pace_seed);
            let mut expected = Expected::default();
            let mut hooks = Vec::new();
            for item in items {
                match item {
                    Item::Talk { room, user, tag } => {
                        let id = world::talk_trigger(&fake, room, user, &tag);
                        expected.talk_triggers.push((room.to_owned(), id, tag));
                    }
                    Item::Chatter { room, user, n } => {
                        let id = world::talk_chatter(&fake, room, user, n);
                        expected.talk_chatter.push((room.to_owned(), id));
                    }
                    Item::Webhook { conversation, tag } => {
                        let id = format!("msg-{tag}");
                        let text = format!("{tag} please answer");
                        let s = sender.clone();
                        let conv = conversation.clone();
                        hooks.push(tokio::spawn(async move { s.send(&conv, &id, &text).await }));
                        expected
                            .webhook_triggers
                            .push((conversation, format!("msg-{tag}"), tag));
                    }
                }
                // The pace of arrivals (not a synchronisation).
                tokio::time::sleep(Duration::from_millis(pace.random_range(40..140))).await;
            }
            let mut sent: Vec<Sent> = Vec::new();
            for h in hooks {
                sent.push(h.await.unwrap());
            }
            (expected, sent)
        })
    };

    // The driver: arm a phase, wait for the kill (or kill at a random moment when the phase
    // stays quiet), reap, start again on the same store.
    let spacing = (triggers as f64 / kills.max(1) as f64).max(1.0);
    let mut kills_seen = killer.subscribe();
    for _ in 0..kills {
        let phase = Phase::ARMABLE[rng.random_range(0..Phase::ARMABLE.len())];
        let countdown = (spacing * per_trigger(phase) * rng.random_range(0.5..1.5))
            .round()
            .max(1.0) as u32;
        let delay = match phase {
            Phase::WebhookIntake => Some(Duration::from_millis(rng.random_range(0..40))),
            _ if rng.random_bool(0.5) => None,
            _ => Some(Duration::from_millis(rng.random_range(0..20))),
        };
        killer.arm(phase, countdown, delay);
        let patience = if sending.is_finished() { 2 } else { 5 };
        if tokio::time::timeout(Duration::from_secs(patience), kills_seen.changed())
            .await
            .is_err()
        {
            killer.disarm();
            killer.kill_now(Phase::Timer);
            tokio::time::timeout(Duration::from_secs(5), kills_seen.changed())
                .await
                .expect("a pending kill lands")
                .unwrap();
        }
        let status = gw.reap().await;
        assert!(!status.success(), "killed, not exited: {status}");
        gw.start().await;
    }
    let (expected, sent) = sending.await.unwrap();
    let sending_done = started.elapsed();

    // Every answer at its peer, and nothing left in the store's queues.
    let deadline = Instant::now() + Duration::from_secs(45 + triggers as u64 / 10);
    loop {
        let posts = world::count_posts(&fake);
        let got = callbacks.callbacks();
        let talk_missing = expected
            .talk_triggers
            .iter()
            .filter(|(_, _, tag)| !posts.by_tag.contains_key(tag))
            .count();
        let hook_missing = expected
            .webhook_triggers
            .iter()
            .filter(|(_, _, tag)| !got.iter().any(|c| c.tag.as_ref() == Some(tag)))
            .count();
        let queues = store::queues(&gw.db_path()).await;
        if talk_missing == 0 && hook_missing == 0 && queues.idle(triggers) {
            break;
        }
        if Instant::now() >= deadline {
            let mut unanswered = Vec::new();
            for (room, id, tag) in &expected.talk_triggers {
                if !posts.by_tag.contains_key(tag) {
                    let db = gw.db_path();
                    let known = store::describe(&db, "talk:main", room, &id.to_string()).await;
                    unanswered.push(format!("{tag} {known}"));
                }
            }
            let kept = dir.keep();
            panic!(
                "not everything was answered in time: {talk_missing} Talk and {hook_missing} \
                 webhook triggers unanswered, store queues {queues:?}; unanswered Talk \
                 triggers: {unanswered:#?}; store and log kept in {}",
                kept.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drained = started.elapsed();
    gw.stop().await;

    // The verdict.
    let posts = world::count_posts(&fake);
    let got = callbacks.callbacks();
    let mut lost = Vec::new();
    let mut doubled = Vec::new();
    for (room, _, tag) in &expected.talk_triggers {
        match posts.by_tag.get(tag).map(Vec::as_slice) {
            None | Some([]) => lost.push(tag.clone()),
            Some([(r, _)]) => assert_eq!(r, room, "{tag} answered in the wrong room"),
            Some(more) => doubled.push(format!("{tag}: {more:?}")),
        }
    }
    let doubled_refs: Vec<_> = posts.by_reference.iter().filter(|(_, n)| **n > 1).collect();
    let mut keys_by_tag: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for c in &got {
        let tag = c.tag.as_deref().unwrap_or("(none)");
        keys_by_tag.entry(tag).or_default().insert(c.key.as_str());
    }
    for (conv, _, tag) in &expected.webhook_triggers {
        match keys_by_tag.get(tag.as_str()) {
            None => lost.push(tag.clone()),
            Some(keys) if keys.len() > 1 => doubled.push(format!("{tag}: keys {keys:?}")),
            Some(_) => {
                let c = got.iter().find(|c| c.tag.as_ref() == Some(tag)).unwrap();
                assert_eq!(
                    &c.conversation, conv,
                    "{tag} answered in the wrong conversation"
                );
            }
        }
    }
    let distinct_keys: BTreeSet<&str> = got.iter().map(|c| c.key.as_str()).collect();
    let duplicate_callbacks = got.len() - distinct_keys.len();
    let history = store::check(&gw.db_path(), &expected).await;
    let resent = sent.iter().filter(|s| s.attempts > 1).count();
    let by_phase = killer.by_phase();
    let reused_posts = gw.log_count("found the earlier post; not posting again");
    let (post_kills, callback_kills) = (
        killer.in_handler(Phase::TalkPost),
        killer.in_handler(Phase::Callback),
    );
    let answers = posts.by_tag.len() + keys_by_tag.len();
    println!(
        "crash suite figures: kills survived {} {by_phase:?}, processes started {}, triggers {} \
         (Talk {}, webhook {}, plus {} chatter), answers {answers}, lost {}, duplicate Talk posts \
         {}, duplicate callbacks {duplicate_callbacks} (of {} callbacks), webhook triggers re-sent \
         {resent} (stored already: {}), kills between a Talk post and its answer {post_kills} \
         (earlier posts reused on retry: {reused_posts}), kills between a callback and its answer \
         {callback_kills}, brain calls {} for {triggers} triggers, tasks {:?}, sending took \
         {:.1}s, drained after {:.1}s",
        by_phase.values().sum::<u32>(),
        gw.starts,
        triggers,
        expected.talk_triggers.len(),
        expected.webhook_triggers.len(),
        expected.talk_chatter.len(),
        lost.len(),
        doubled.len() + doubled_refs.len(),
        got.len(),
        sent.iter().filter(|s| s.duplicate).count(),
        llm.answer_calls(),
        history.tasks_by_status,
        sending_done.as_secs_f64(),
        drained.as_secs_f64(),
    );
    assert_eq!(
        by_phase.values().sum::<u32>() as usize,
        kills,
        "every kill landed"
    );
    // A kill after the peer took the answer but before the gateway heard so means a retry: the
    // Talk sink must find its earlier post, a callback simply comes again.
    assert!(
        reused_posts >= post_kills,
        "{post_kills} posts were cut off from their answer, {reused_posts} found again on retry"
    );
    assert!(
        duplicate_callbacks >= callback_kills,
        "{callback_kills} callbacks were cut off from their answer, {duplicate_callbacks} came again"
    );
    assert!(lost.is_empty(), "triggers never answered: {lost:?}");
    assert!(doubled.is_empty(), "triggers answered twice: {doubled:?}");
    assert!(
        doubled_refs.is_empty(),
        "reference ids posted twice: {doubled_refs:?}"
    );
    assert!(
        posts.untagged.is_empty(),
        "stray posts: {:?}",
        posts.untagged
    );
    assert_eq!(answers, triggers);
    assert_eq!(callbacks.bad_signatures(), 0);
    assert_eq!(llm.unauthorized(), 0);
    history.assert_complete(triggers);
}
