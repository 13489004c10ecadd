//! Header injection into our e-mail replies: CR/LF and other control characters in the subject
//! or a display name of incoming mail (raw, or hidden in RFC 2047 encoded words) must not give
//! the answer an extra header or recipient, and the subject the recipient's client decodes has
//! no line breaks either.
//!
//! Two paths: the reply the crate builds from a parsed mail (`OutgoingMail::reply`), and the real
//! `EmailSink` delivering what the tracker stored with the message, to a fake SMTP server that
//! records the envelope and the data (RFC 5321's command sequence, nothing more).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctxgate_contract::{OutboundMessage, Sink};
use ctxgate_email::sink::EmailSink;
use ctxgate_email::smtp::{OutgoingMail, SmtpConfig, SmtpSender};
use ctxgate_email::{EmailAddress, Mailbox, Security, normalize};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::fuzz::reply_headers_are_sound;

fn b64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn unb64(text: &str) -> Vec<u8> {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.bytes().filter(|c| *c != b'=') {
        let v = ABC
            .iter()
            .position(|x| *x == c)
            .unwrap_or_else(|| panic!("{c:?} is not base64 in {text:?}")) as u32;
        acc = acc << 6 | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// The value of the one header called `name` (unfolded), as a recipient's client decodes it:
/// RFC 2047 `=?utf-8?b?...?=` words (what lettre writes) decoded, blanks between adjacent
/// encoded words dropped.
fn decoded_header(formatted: &[u8], name: &str) -> String {
    let text = String::from_utf8_lossy(formatted);
    let head = text.split("\r\n\r\n").next().unwrap();
    let unfolded = head.replace("\r\n ", " ").replace("\r\n\t", "\t");
    let mut values = unfolded.split("\r\n").filter_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
    });
    let value = values
        .next()
        .unwrap_or_else(|| panic!("no {name} in {head}"));
    assert!(values.next().is_none(), "two {name} headers in {head}");
    let mut out = String::new();
    let mut last_encoded = false;
    for (i, token) in value.split(' ').enumerate() {
        let inner = token
            .strip_prefix("=?utf-8?b?")
            .or_else(|| token.strip_prefix("=?UTF-8?B?"))
            .and_then(|t| t.strip_suffix("?="));
        match inner {
            Some(b) => {
                if i > 0 && !last_encoded {
                    out.push(' ');
                }
                out.push_str(&String::from_utf8_lossy(&unb64(b)));
                last_encoded = true;
            }
            None => {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(token);
                last_encoded = false;
            }
        }
    }
    out
}

/// The checks every reply must pass.
fn assert_no_injection(what: &str, formatted: &[u8], expected_rcpt: &str) {
    reply_headers_are_sound(formatted)
        .unwrap_or_else(|e| panic!("{what}: {e}\n{}", String::from_utf8_lossy(formatted)));
    let subject = decoded_header(formatted, "Subject");
    assert!(
        !subject.chars().any(char::is_control),
        "{what}: the decoded subject {subject:?} carries control characters"
    );
    let to = decoded_header(formatted, "To");
    assert!(
        !to.chars().any(char::is_control),
        "{what}: the decoded To {to:?} carries control characters"
    );
    // Read back as a recipient's client would: one addressee, the expected one.
    let read = normalize(formatted).unwrap_or_else(|e| panic!("{what}: {e}"));
    let addresses: Vec<&str> = read.to.iter().map(|m| m.address.as_str()).collect();
    assert_eq!(addresses, vec![expected_rcpt], "{what}: To is {to:?}");
    assert!(read.cc.is_empty(), "{what}: {:?}", read.cc);
}

fn bot() -> Mailbox {
    Mailbox::new(
        EmailAddress::parse("bot@example.org").unwrap(),
        Some("Assistant"),
    )
}

/// Incoming mail that tries to smuggle headers into our answer.
fn hostile_mails() -> Vec<(&'static str, Vec<u8>)> {
    let crlf_subject = b64(b"hi\r\nBcc: victim@example.com");
    let crlf_name = b64(b"Eve\r\nBcc: victim@example.com\r\nX:");
    vec![
        (
            "encoded-word subject decoding to CRLF",
            format!(
                "From: Eve <eve@example.org>\r\nTo: bot@example.org\r\n\
                 Subject: =?utf-8?b?{crlf_subject}?=\r\nMessage-ID: <i1@example.org>\r\n\r\nbody\r\n"
            )
            .into_bytes(),
        ),
        (
            "quoted-printable subject with CRLF and a blank line",
            b"From: eve@example.org\r\nTo: bot@example.org\r\n\
              Subject: =?utf-8?q?hi=0D=0ABcc:_victim@example.com=0D=0A=0D=0Abody?=\r\n\
              Message-ID: <i2@example.org>\r\n\r\nbody\r\n"
                .to_vec(),
        ),
        (
            "bare CR, NUL and escape in a raw subject",
            b"From: eve@example.org\r\nTo: bot@example.org\r\n\
              Subject: hi\rBcc: victim@example.com\x00\x1b[2J\r\n\
              Message-ID: <i3@example.org>\r\n\r\nbody\r\n"
                .to_vec(),
        ),
        (
            "encoded display name decoding to CRLF",
            format!(
                "From: =?utf-8?b?{crlf_name}?= <eve@example.org>\r\nTo: bot@example.org\r\n\
                 Subject: names\r\nMessage-ID: <i4@example.org>\r\n\r\nbody\r\n"
            )
            .into_bytes(),
        ),
        (
            "quoted display name in Reply-To with CR/LF",
            b"From: eve@example.org\r\nReply-To: \"Eve\rBcc: victim@example.com\" <eve@example.org>\r\n\
              To: bot@example.org\r\nSubject: reply-to\r\nMessage-ID: <i5@example.org>\r\n\r\nbody\r\n"
                .to_vec(),
        ),
        (
            "encoded CRLF in References",
            format!(
                "From: eve@example.org\r\nTo: bot@example.org\r\nSubject: refs\r\n\
                 Message-ID: <i6@example.org>\r\nReferences: <r1@x> =?utf-8?b?{}?=\r\n\r\nbody\r\n",
                b64(b"<r2@x>\r\nBcc: victim@example.com")
            )
            .into_bytes(),
        ),
    ]
}

#[test]
fn hostile_incoming_mail_cannot_add_headers_to_our_reply() {
    for (what, raw) in hostile_mails() {
        let mail = normalize(&raw).unwrap_or_else(|e| panic!("{what}: {e}"));
        let reply = OutgoingMail::reply(&mail, bot(), "the answer")
            .unwrap_or_else(|| panic!("{what}: nobody to answer"));
        let formatted = reply.to_message().unwrap().formatted();
        assert_no_injection(what, &formatted, "eve@example.org");
    }
    // The decoded subject keeps the text, on one line.
    let (_, raw) = &hostile_mails()[0];
    let reply = OutgoingMail::reply(&normalize(raw).unwrap(), bot(), "x").unwrap();
    let formatted = reply.to_message().unwrap().formatted();
    assert_eq!(
        decoded_header(&formatted, "Subject"),
        "Re: hi Bcc: victim@example.com"
    );
}

/// What the fake SMTP server saw of one message.
#[derive(Debug, Clone, Default)]
struct Envelope {
    rcpt: Vec<String>,
    data: Vec<u8>,
}

/// A minimal SMTP server (RFC 5321 §4.1: greeting, EHLO, MAIL, RCPT, DATA, QUIT, RSET, NOOP)
/// that accepts everything and records each message.
async fn fake_smtp() -> (u16, Arc<Mutex<Vec<Envelope>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Arc<Mutex<Vec<Envelope>>> = Arc::default();
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut lines = BufReader::new(read);
                let mut current = Envelope::default();
                write.write_all(b"220 fake.example ESMTP\r\n").await.ok();
                let mut line = Vec::new();
                loop {
                    line.clear();
                    if lines.read_until(b'\n', &mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let command = String::from_utf8_lossy(&line).trim_end().to_owned();
                    let verb = command.split(' ').next().unwrap_or("").to_ascii_uppercase();
                    let answer: &[u8] = match verb.as_str() {
                        "EHLO" | "HELO" => b"250 fake.example\r\n",
                        "MAIL" => {
                            current = Envelope::default();
                            b"250 ok\r\n"
                        }
                        "RCPT" => {
                            current.rcpt.push(command[8..].trim().to_owned());
                            b"250 ok\r\n"
                        }
                        "DATA" => {
                            write.write_all(b"354 go ahead\r\n").await.ok();
                            let mut data = Vec::new();
                            loop {
                                line.clear();
                                if lines.read_until(b'\n', &mut line).await.unwrap_or(0) == 0 {
                                    return;
                                }
                                if line == b".\r\n" {
                                    break;
                                }
                                // Dot-stuffing (RFC 5321 §4.5.2).
                                let l = line.strip_prefix(b".").unwrap_or(&line);
                                data.extend_from_slice(l);
                            }
                            current.data = data;
                            record.lock().unwrap().push(std::mem::take(&mut current));
                            b"250 queued\r\n"
                        }
                        "QUIT" => {
                            write.write_all(b"221 bye\r\n").await.ok();
                            return;
                        }
                        "RSET" | "NOOP" => b"250 ok\r\n",
                        _ => b"502 not implemented\r\n",
                    };
                    write.write_all(answer).await.ok();
                }
            });
        }
    });
    (port, seen)
}

async fn wait_for(seen: &Arc<Mutex<Vec<Envelope>>>, n: usize) -> Vec<Envelope> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let got = seen.lock().unwrap().clone();
        if got.len() >= n {
            return got;
        }
        assert!(tokio::time::Instant::now() < deadline, "only {got:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_email_sink_neutralises_control_characters_in_what_was_stored() {
    let (port, seen) = fake_smtp().await;
    let sender = SmtpSender::new(&SmtpConfig {
        host: "127.0.0.1".into(),
        port,
        security: Security::Plain,
        credentials: None,
        hello_name: "example.org".into(),
        timeout: Duration::from_secs(10),
    })
    .unwrap();
    // The briefing subject comes from the configuration, which may hold anything.
    let sink = EmailSink::new(
        "email:main",
        bot(),
        sender,
        "Briefing\r\nBcc: victim@example.com",
    );
    // What the tracker recorded with an incoming message (`meta.reply`), here with raw CR/LF as
    // an older version or a hand-edited row could hold it.
    let reply = OutboundMessage {
        idempotency_key: "ctxgate:task:1:result".into(),
        task_id: Some(1),
        conversation: "id:i1@example.org".into(),
        text: "the answer".into(),
        reply_to: Some("i1@example.org".into()),
        meta: json!({"reply": {
            "to": [{"address": "alice@example.org", "name": "Alice\r\nBcc: victim@example.com"}],
            "subject": "Re: hi\r\nBcc: victim@example.com\r\n\r\nforged body",
            "in_reply_to": "i1@example.org",
            "references": ["r0@example.org", "i1@example.org"],
        }}),
        attempt: 1,
    };
    let briefing = OutboundMessage {
        idempotency_key: "ctxgate:task:2:result".into(),
        task_id: Some(2),
        conversation: "alice@example.org".into(),
        text: "your day".into(),
        reply_to: None,
        meta: serde_json::Value::Null,
        attempt: 1,
    };
    sink.deliver(&reply).await.unwrap();
    sink.deliver(&briefing).await.unwrap();
    let got = wait_for(&seen, 2).await;
    for (what, envelope) in [("reply", &got[0]), ("briefing", &got[1])] {
        assert_eq!(
            envelope.rcpt,
            vec!["<alice@example.org>".to_owned()],
            "{what}"
        );
        assert_no_injection(what, &envelope.data, "alice@example.org");
    }
    assert_eq!(
        decoded_header(&got[0].data, "Subject"),
        "Re: hi  Bcc: victim@example.com    forged body"
    );
}
