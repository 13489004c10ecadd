//! The Talk side both test groups share: the fake Talk server with its users and rooms (several
//! one-to-one and group rooms), and what the assistant posted there.

use std::collections::BTreeMap;
use std::time::Duration;

use ctxgate_talk::fake::FakeTalk;
use serde_json::{Value, json};

use super::llm::tag_in;

pub const USERS: [&str; 4] = ["alice", "bob", "carol", "dave"];
/// One-to-one rooms, one per user (same order as [`USERS`]).
pub const DMS: [&str; 4] = ["dmalice1", "dmbob001", "dmcarol1", "dmdave01"];
/// Group rooms with alice, bob and carol: only mentions of the assistant are triggers.
pub const GROUPS: [&str; 3] = ["groupone", "grouptwo", "groupsix"];

pub async fn fake_talk(password: &str) -> FakeTalk {
    let fake = FakeTalk::start().await;
    fake.add_user("assistant", "Assistant", Some(password));
    for u in USERS {
        fake.add_user(u, &u.to_uppercase(), Some("user-password"));
    }
    for (room, user) in DMS.iter().zip(USERS) {
        fake.create_room(room, 1, user, &[user, "assistant"]);
    }
    for g in GROUPS {
        fake.create_room(g, 2, g, &["alice", "bob", "carol", "assistant"]);
    }
    fake.set_long_poll_cap(Duration::from_millis(500));
    fake
}

/// Posts a trigger: any message in a one-to-one room, a mention of the assistant in a group.
pub fn talk_trigger(fake: &FakeTalk, room: &str, user: &str, tag: &str) -> i64 {
    let text = if GROUPS.contains(&room) {
        format!("@assistant {tag} what do you think?")
    } else {
        format!("{tag} what do you think?")
    };
    fake.post(room, user, &text, json!([]), None)
}

/// A group message that mentions nobody: history, not a trigger.
pub fn talk_chatter(fake: &FakeTalk, room: &str, user: &str, n: usize) -> i64 {
    fake.post(
        room,
        user,
        &format!("just chatting, line {n}"),
        json!([]),
        None,
    )
}

/// The assistant's posts in the rooms of [`DMS`] and [`GROUPS`] and in `more`, as
/// `(room, message)`.
pub fn assistant_posts(fake: &FakeTalk, more: &[String]) -> Vec<(String, Value)> {
    let mut rooms: Vec<String> = DMS
        .iter()
        .chain(GROUPS.iter())
        .map(|r| r.to_string())
        .collect();
    rooms.extend(
        more.iter()
            .filter(|r| !rooms.contains(r))
            .cloned()
            .collect::<Vec<_>>(),
    );
    rooms
        .into_iter()
        .flat_map(|room| {
            fake.messages(&room)
                .into_iter()
                .filter(|m| m["actorType"] == "users" && m["actorId"] == "assistant")
                .map(move |m| (room.clone(), m))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// How the assistant's posts count up.
#[derive(Debug, Default)]
pub struct PostCount {
    /// Posts per trigger tag.
    pub by_tag: BTreeMap<String, Vec<(String, i64)>>,
    /// Posts per `referenceId`.
    pub by_reference: BTreeMap<String, usize>,
    /// Posts without a `ctxgate:task:{id}:result` reference or without a tag.
    pub untagged: Vec<Value>,
}

pub fn count_posts(fake: &FakeTalk) -> PostCount {
    count_posts_in(fake, &[])
}

/// Like [`count_posts`], also counting the rooms `more`.
pub fn count_posts_in(fake: &FakeTalk, more: &[String]) -> PostCount {
    let mut c = PostCount::default();
    for (room, m) in assistant_posts(fake, more) {
        let reference = m["referenceId"].as_str().unwrap_or_default().to_owned();
        let text = m["message"].as_str().unwrap_or_default();
        let good_ref = reference.starts_with("ctxgate:task:") && reference.ends_with(":result");
        match tag_in(text) {
            Some(tag) if good_ref => {
                c.by_tag
                    .entry(tag)
                    .or_default()
                    .push((room, m["id"].as_i64().unwrap_or_default()));
                *c.by_reference.entry(reference).or_default() += 1;
            }
            _ => c.untagged.push(m),
        }
    }
    c
}
