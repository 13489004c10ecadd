//! Target: e-mail normalisation, and the headers of the reply we would send: built from the
//! parsed mail, and built from stored data that may hold anything (as the sink does with what
//! the tracker recorded, or with the configured display name and briefing subject).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use super::engine::Outcome;
use super::support::no_controls;

static NORMALIZER: LazyLock<ctxgate_email::Normalizer> =
    LazyLock::new(ctxgate_email::Normalizer::default);

fn bot() -> ctxgate_email::Mailbox {
    ctxgate_email::Mailbox::new(
        ctxgate_email::EmailAddress::parse("bot@example.org").expect("an address"),
        Some("Assistant"),
    )
}

pub fn run(input: &[u8]) -> Outcome {
    use ctxgate_email::ParseError;
    stored_reply(input)?;
    let mail = match NORMALIZER.normalize(input) {
        Ok(mail) => mail,
        // The normaliser turns a panic inside mail-parser into this: it is a crash, caught.
        Err(ParseError::ParserFailed) => {
            return Err("the MIME parser panicked (caught as parser_failed)".into());
        }
        Err(e) => return Ok(format!("err {}", e.code())),
    };
    serde_json::to_string(&mail).map_err(|e| format!("normalised mail does not serialise: {e}"))?;
    if let Some(subject) = &mail.subject {
        no_controls("the subject", subject)?;
    }
    for mailbox in mail
        .from
        .iter()
        .chain(&mail.reply_to)
        .chain(&mail.to)
        .chain(&mail.cc)
    {
        no_controls(
            "a display name",
            mailbox.name.as_deref().unwrap_or_default(),
        )?;
        no_controls("an address", mailbox.address.as_str())?;
    }
    let Some(reply) = ctxgate_email::smtp::OutgoingMail::reply(&mail, bot(), "the answer") else {
        return Ok("ok, nobody to answer".into());
    };
    match reply.to_message() {
        Ok(message) => {
            reply_headers_are_sound(&message.formatted())?;
            Ok("ok, reply built".into())
        }
        // An address lettre refuses is a named error the outbox records.
        Err(e @ ctxgate_email::smtp::SmtpError::Address { .. }) => {
            if e.to_string().is_empty() {
                return Err("an address error without a message".into());
            }
            Ok("ok, reply refused: address".into())
        }
        Err(e) => Err(format!("the reply cannot be built: {e}")),
    }
}

/// A reply whose subject and recipient's display name are the input's text itself, unparsed
/// (the first half and the rest): whatever a stored row holds, the message is built and sound.
fn stored_reply(input: &[u8]) -> Result<(), String> {
    use ctxgate_email::smtp::{AutoSubmitted, OutgoingMail};
    let text: Vec<char> = String::from_utf8_lossy(input).chars().take(1_000).collect();
    let (subject, name) = text.split_at(text.len() / 2);
    let mail = OutgoingMail {
        from: bot(),
        to: vec![ctxgate_email::Mailbox {
            address: ctxgate_email::EmailAddress::parse("alice@example.org").expect("an address"),
            name: Some(name.iter().collect()),
        }],
        subject: subject.iter().collect(),
        message_id: ctxgate_email::MessageId::parse("answer.1@example.org").expect("an id"),
        in_reply_to: ctxgate_email::MessageId::parse("question.1@example.org"),
        references: Vec::new(),
        auto_submitted: AutoSubmitted::AutoReplied,
        text: "the answer".into(),
        html: None,
    };
    let message = mail
        .to_message()
        .map_err(|e| format!("a reply from stored data cannot be built: {e}"))?;
    reply_headers_are_sound(&message.formatted())
        .map_err(|e| format!("the reply from stored data: {e}"))
}

/// The rendered reply has exactly the headers we write, each once, no extra recipient header,
/// and a head of lines ending in CRLF without control characters.
pub fn reply_headers_are_sound(formatted: &[u8]) -> Result<(), String> {
    let end = formatted
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("the reply has no end of header")?;
    let head = &formatted[..end + 2];
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for line in head.split_inclusive(|b| *b == b'\n') {
        let Some(line) = line.strip_suffix(b"\r\n") else {
            return Err(format!(
                "a header line does not end with CRLF: {:?}",
                String::from_utf8_lossy(line)
            ));
        };
        // UTF-8 is allowed (RFC 6532, e.g. an internationalised address); control characters,
        // a lone CR or LF among them, never are.
        let text = std::str::from_utf8(line)
            .map_err(|e| format!("a header line is not UTF-8 ({e}): {line:?}"))?;
        if let Some(c) = text.chars().find(|c| c.is_control() && *c != '\t') {
            return Err(format!(
                "the control character {c:?} in the header line {text:?}"
            ));
        }
        if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
            continue; // folded continuation
        }
        let colon = line.iter().position(|b| *b == b':').ok_or_else(|| {
            format!(
                "a header line without a name: {:?}",
                String::from_utf8_lossy(line)
            )
        })?;
        let name = String::from_utf8_lossy(&line[..colon]).to_ascii_lowercase();
        *names.entry(name).or_default() += 1;
    }
    for once in [
        "from",
        "to",
        "subject",
        "message-id",
        "date",
        "auto-submitted",
    ] {
        if names.get(once) != Some(&1) {
            return Err(format!(
                "{once:?} appears {:?} times: {names:?}",
                names.get(once)
            ));
        }
    }
    const ALLOWED: [&str; 11] = [
        "from",
        "to",
        "subject",
        "message-id",
        "date",
        "auto-submitted",
        "in-reply-to",
        "references",
        "mime-version",
        "content-type",
        "content-transfer-encoding",
    ];
    if let Some((name, _)) = names.iter().find(|(n, _)| !ALLOWED.contains(&n.as_str())) {
        return Err(format!(
            "an unexpected header {name:?} in the reply: {names:?}"
        ));
    }
    if names.values().any(|n| *n > 1) {
        return Err(format!("a header appears twice: {names:?}"));
    }
    Ok(())
}

pub const TOKENS: &[&[u8]] = &[
    b"\r\nSubject: ",
    b"\r\nFrom: ",
    b"\r\nTo: ",
    b"\r\nReply-To: ",
    b"\r\nBcc: victim@example.com",
    b"\r\nMessage-ID: <",
    b"\r\nIn-Reply-To: <",
    b"\r\nReferences: <",
    b"\r\nContent-Type: multipart/mixed; boundary=",
    b"\r\nContent-Type: message/rfc822\r\n\r\n",
    b"\r\nContent-Type: text/html; charset=",
    b"\r\nContent-Transfer-Encoding: base64\r\n",
    b"\r\nContent-Transfer-Encoding: quoted-printable\r\n",
    b"\r\nContent-Disposition: attachment; filename*=",
    b"=?utf-8?b?aGkNCkJjYzogdmljdGltQGV4YW1wbGUuY29t?=",
    b"=?utf-8?q?=0D=0A?=",
    b"=?iso-2022-jp?b?GyRC?=",
    b"=?",
    b"?=",
    b"--",
    b"\"",
    b"<",
    b">",
    b"(",
    b")",
    b"@",
    b",",
    b";",
    b"=0D=0A",
    b"<div>",
    b"&#0;",
    b"&#x10FFFF;",
];
