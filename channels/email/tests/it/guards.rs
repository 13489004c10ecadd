//! One test per "never answer" rule, on fixtures and on small inline messages.

use ctxgate_email::guards::check;
use ctxgate_email::{EmailAddress, NormalizedMail, SkipReason};

use crate::support::{mail, parse_text};

fn own() -> Vec<EmailAddress> {
    vec![EmailAddress::parse("bot@example.org").expect("address")]
}

/// A minimal message with `headers` added before a fixed Message-ID, Subject and body.
fn with_headers(headers: &str) -> NormalizedMail {
    parse_text(&format!(
        "{headers}\nTo: bot@example.org\nMessage-ID: <g@x>\nSubject: t\n\nbody\n"
    ))
}

fn verdict(headers: &str) -> Option<SkipReason> {
    check(&with_headers(headers), &own())
}

#[test]
fn ordinary_mail_is_answered() {
    for name in [
        "plain",
        "html_only",
        "alternative",
        "quoted_reply",
        "outlook_reply",
        "forwarded",
    ] {
        assert_eq!(check(&mail(name), &own()), None, "{name}");
    }
    assert_eq!(verdict("From: alice@example.org\nAuto-Submitted: no"), None);
    assert_eq!(
        verdict("From: alice@example.org\nX-Auto-Response-Suppress: OOF, DR"),
        None
    );
    assert_eq!(
        verdict("From: alice@example.org\nPrecedence: first-class"),
        None
    );
}

#[test]
fn own_address_is_never_answered_and_wins() {
    assert_eq!(
        verdict("From: Assistant <BOT@Example.ORG>"),
        Some(SkipReason::OwnAddress)
    );
    assert_eq!(
        verdict("From: alice@example.org\nSender: bot@example.org"),
        Some(SkipReason::OwnAddress)
    );
    assert_eq!(
        verdict("From: alice@example.org\nReturn-Path: <bot@example.org>"),
        Some(SkipReason::OwnAddress)
    );
    // Checked before everything else: a loop is the worst outcome.
    assert_eq!(
        verdict("From: bot@example.org\nAuto-Submitted: auto-replied"),
        Some(SkipReason::OwnAddress)
    );
}

#[test]
fn auto_submitted_other_than_no() {
    assert_eq!(
        check(&mail("auto_reply"), &own()),
        Some(SkipReason::AutoSubmitted)
    );
    for value in [
        "auto-generated",
        "auto-replied",
        "AUTO-NOTIFIED",
        "auto-replied (vacation)",
    ] {
        assert_eq!(
            verdict(&format!("From: alice@example.org\nAuto-Submitted: {value}")),
            Some(SkipReason::AutoSubmitted),
            "{value}"
        );
    }
}

#[test]
fn null_return_path() {
    assert_eq!(
        verdict("From: alice@example.org\nReturn-Path: <>"),
        Some(SkipReason::NullReturnPath)
    );
    assert_eq!(
        verdict("From: alice@example.org\nReturn-Path: < >"),
        Some(SkipReason::NullReturnPath)
    );
}

#[test]
fn robot_local_parts() {
    for from in [
        "MAILER-DAEMON@mx.example.org",
        "mailer-daemon",
        "postmaster@example.org",
        "owner-dev@lists.example.org",
        "dev-request@lists.example.org",
        "noreply@shop.example",
        "No-Reply@shop.example",
    ] {
        assert_eq!(
            verdict(&format!("From: {from}")),
            Some(SkipReason::RobotSender),
            "{from}"
        );
    }
    assert_eq!(
        verdict("From: alice@example.org\nReturn-Path: <noreply@bulk.example>"),
        Some(SkipReason::RobotSender)
    );
}

#[test]
fn bulk_list_and_junk_precedence() {
    for value in ["bulk", "list", "junk", "Bulk"] {
        assert_eq!(
            verdict(&format!("From: alice@example.org\nPrecedence: {value}")),
            Some(SkipReason::BulkPrecedence),
            "{value}"
        );
    }
    assert_eq!(
        check(&mail("mailing_list"), &own()),
        Some(SkipReason::BulkPrecedence)
    );
}

#[test]
fn any_list_header() {
    for header in [
        "List-Id: <dev.lists.example.org>",
        "List-Unsubscribe: <mailto:x@y>",
        "List-Post: NO",
        "list-archive: <https://x>",
        "List-Unsubscribe-Post: List-Unsubscribe=One-Click",
    ] {
        assert_eq!(
            verdict(&format!("From: alice@example.org\n{header}")),
            Some(SkipReason::MailingList),
            "{header}"
        );
    }
}

#[test]
fn delivery_reports() {
    let report = parse_text(
        "From: reports@example.org\nTo: bot@example.org\nSubject: Read\nMessage-ID: <r@x>\n\
         Content-Type: multipart/report; report-type=disposition-notification; boundary=B\n\n\
         --B\nContent-Type: text/plain\n\nYour message was read.\n--B--\n",
    );
    assert_eq!(check(&report, &own()), Some(SkipReason::DeliveryReport));
    // The bounce fixture carries several signals; Auto-Submitted is checked first.
    assert_eq!(
        check(&mail("bounce"), &own()),
        Some(SkipReason::AutoSubmitted)
    );
}

#[test]
fn auto_response_suppression() {
    for value in ["All", "DR, RN, NRN, OOF, AutoReply", "autoreply"] {
        assert_eq!(
            verdict(&format!(
                "From: alice@example.org\nX-Auto-Response-Suppress: {value}"
            )),
            Some(SkipReason::AutoResponseSuppressed),
            "{value}"
        );
    }
}

#[test]
fn nobody_to_answer() {
    assert_eq!(verdict("X-Nothing: here"), Some(SkipReason::NoSender));
    assert_eq!(
        verdict("From: Undisclosed"),
        Some(SkipReason::NoSender),
        "no domain"
    );
    // Reply-To alone is enough.
    assert_eq!(verdict("Reply-To: alice@example.org"), None);
}
