//! Thread keys, subjects and reply headers on real-looking messages.

use ctxgate_email::thread::{
    MAX_REFERENCES, base_subject, references, related_ids, reply_headers, reply_subject, thread_key,
};
use ctxgate_email::{MessageId, ThreadKey};

use crate::support::{mail, parse_text};

fn id(s: &str) -> MessageId {
    MessageId::parse(s).expect("message id")
}

#[test]
fn key_is_the_root_of_references() {
    let reply = mail("quoted_reply");
    assert_eq!(
        thread_key(&reply),
        ThreadKey::Root {
            id: id("CAF1plain.0001@mail.example.org")
        }
    );
    let folded = mail("folded_references");
    assert_eq!(
        thread_key(&folded),
        ThreadKey::Root {
            id: id("inc7-root@example.org")
        }
    );
}

#[test]
fn key_falls_back_to_in_reply_to_then_own_id() {
    assert_eq!(
        thread_key(&mail("html_only")),
        ThreadKey::Root {
            id: id("bob-asks-42@example.org")
        }
    );
    let first = mail("plain");
    let key = thread_key(&first);
    assert_eq!(
        key,
        ThreadKey::Root {
            id: id("CAF1plain.0001@mail.example.org")
        }
    );
    assert_eq!(key.to_string(), "id:<CAF1plain.0001@mail.example.org>");
    // The reply to the first message lands in the same thread.
    assert_eq!(thread_key(&mail("quoted_reply")), key);
}

#[test]
fn subject_and_participants_only_without_ids() {
    let original = parse_text(
        "From: Ann <ann@example.org>\nTo: bot@example.org\nSubject: Lunch  plans\n\nhi\n",
    );
    let reply = parse_text(
        "From: bot@example.org\nTo: ANN@example.org\nSubject: RE: Re[2]: lunch plans\n\nok\n",
    );
    let key = thread_key(&original);
    assert_eq!(
        key,
        ThreadKey::Subject {
            subject: "lunch plans".into(),
            participants: vec!["ann@example.org".into(), "bot@example.org".into()],
        }
    );
    assert_eq!(thread_key(&reply), key);
    assert_eq!(
        key.to_string(),
        "subject:lunch plans|ann@example.org,bot@example.org"
    );
    let other =
        parse_text("From: carl@example.org\nTo: bot@example.org\nSubject: Lunch plans\n\nx\n");
    assert_ne!(thread_key(&other), key, "other participants, other thread");
    // Garbage ids are not usable ids.
    let garbage = parse_text(
        "From: ann@example.org\nTo: bot@example.org\nSubject: Lunch plans\nMessage-ID: <>\n\
         References: no brackets here\n\nhi\n",
    );
    assert_eq!(thread_key(&garbage), key);
}

#[test]
fn related_ids_are_oldest_first_and_unique() {
    let ids = related_ids(&mail("quoted_reply"));
    assert_eq!(
        ids,
        [
            id("CAF1plain.0001@mail.example.org"),
            id("gw-answer-0002@gw.example.org"),
            id("bob-reply-0003@example.org"),
        ]
    );
}

#[test]
fn reply_headers_follow_rfc5322() {
    let parent = mail("quoted_reply");
    let reply = reply_headers(&parent, "gw.example.org").expect("reply");
    assert_eq!(reply.in_reply_to, Some(id("bob-reply-0003@example.org")));
    assert_eq!(
        reply.references,
        [
            id("CAF1plain.0001@mail.example.org"),
            id("gw-answer-0002@gw.example.org"),
            id("bob-reply-0003@example.org"),
        ]
    );
    assert_eq!(reply.subject, "Re: Can you summarise the Q2 plan?");
    assert_eq!(reply.to.len(), 1);
    assert_eq!(reply.to[0].address.as_str(), "bob@example.org");
    assert!(reply.message_id.as_str().ends_with("@gw.example.org"));
    let again = reply_headers(&parent, "gw.example.org").expect("reply");
    assert_ne!(
        again.message_id, reply.message_id,
        "every reply gets a fresh id"
    );
}

#[test]
fn references_from_in_reply_to_when_parent_has_none() {
    let parent = mail("html_only");
    assert_eq!(
        references(&parent),
        [
            id("bob-asks-42@example.org"),
            id("html-only-42@example.com")
        ]
    );
    let several =
        parse_text("From: a@x\nMessage-ID: <p@x>\nIn-Reply-To: <one@x> <two@x>\nSubject: s\n\nb\n");
    assert_eq!(
        references(&several),
        [id("p@x")],
        "ambiguous In-Reply-To is not used"
    );
    let bare = parse_text("From: a@x\nSubject: s\n\nb\n");
    assert!(references(&bare).is_empty());
    let reply = reply_headers(&bare, "gw.example.org").expect("reply");
    assert_eq!(reply.in_reply_to, None);
}

#[test]
fn reply_goes_to_reply_to_and_keeps_forward_prefix() {
    let parent = parse_text(
        "From: Ann <ann@example.org>\nReply-To: team@example.org, Bo <bo@example.org>\n\
         Subject: Fwd: Offer\nMessage-ID: <offer@x>\n\nsee below\n",
    );
    let reply = reply_headers(&parent, "gw.example.org").expect("reply");
    let to: Vec<&str> = reply.to.iter().map(|m| m.address.as_str()).collect();
    assert_eq!(to, ["team@example.org", "bo@example.org"]);
    assert_eq!(reply.subject, "Re: Fwd: Offer");
    let nobody = parse_text("To: bot@example.org\nSubject: x\n\nb\n");
    assert_eq!(reply_headers(&nobody, "gw.example.org"), None);
}

#[test]
fn long_reference_chains_keep_root_and_newest() {
    let chain: Vec<String> = (0..80).map(|i| format!("<m{i}@x>")).collect();
    let parent = parse_text(&format!(
        "From: a@x\nMessage-ID: <parent@x>\nReferences: {}\nSubject: s\n\nb\n",
        chain.join("\r\n ")
    ));
    assert_eq!(parent.references.len(), 80);
    let refs = references(&parent);
    assert_eq!(refs.len(), MAX_REFERENCES);
    assert_eq!(refs[0], id("m0@x"));
    assert_eq!(refs[MAX_REFERENCES - 1], id("parent@x"));
    assert_eq!(refs[MAX_REFERENCES - 2], id("m79@x"));
}

#[test]
fn a_parsed_reply_joins_the_parent_thread() {
    let parent = mail("folded_references");
    let headers = reply_headers(&parent, "gw.example.org").expect("reply");
    let refs: Vec<String> = headers.references.iter().map(ToString::to_string).collect();
    let wire = format!(
        "From: bot@example.org\nTo: {}\nSubject: {}\nMessage-ID: {}\nIn-Reply-To: {}\n\
         References: {}\n\nDone.\n",
        headers.to[0],
        headers.subject,
        headers.message_id,
        headers.in_reply_to.as_ref().expect("parent id"),
        refs.join("\r\n "),
    );
    let reply = parse_text(&wire);
    assert_eq!(thread_key(&reply), thread_key(&parent));
    assert_eq!(
        reply.subject.as_deref(),
        Some("Re: [ops] Re[2]: Incident 7 follow-up")
    );
    assert_eq!(reply.in_reply_to, [id("greta.0007@example.org")]);
}

#[test]
fn subjects() {
    assert_eq!(reply_subject("RE: Re[2]: AW: Budget"), "Re: Budget");
    assert_eq!(reply_subject("Fwd: Budget"), "Re: Fwd: Budget");
    assert_eq!(base_subject("Re: [ops] Fwd: Budget (fwd)"), "budget");
}
