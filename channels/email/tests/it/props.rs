//! Property tests: arbitrary bytes and mail-shaped noise never panic, and what comes out honours
//! the caps and round-trips through JSON.

use ctxgate_email::{Limits, NormalizedMail, Normalizer, ParseError};
use proptest::prelude::*;

const MAX_BODY: usize = 512;

fn normalizer() -> Normalizer {
    Normalizer::new(Limits {
        max_body_bytes: MAX_BODY,
        max_attachments: 3,
        ..Limits::default()
    })
}

fn check_outcome(result: Result<NormalizedMail, ParseError>) -> Result<(), TestCaseError> {
    match result {
        Ok(mail) => {
            // Marker included, the body stays near the cap.
            prop_assert!(
                mail.body.text.len() <= MAX_BODY + 64,
                "{}",
                mail.body.text.len()
            );
            prop_assert!(mail.attachments.len() <= 3);
            let json = serde_json::to_string(&mail).expect("serialise");
            let back: NormalizedMail = serde_json::from_str(&json).expect("deserialise");
            prop_assert_eq!(back, mail);
        }
        Err(e) => prop_assert_ne!(e, ParseError::ParserFailed),
    }
    Ok(())
}

fn header_line() -> impl Strategy<Value = String> {
    let names = prop::sample::select(vec![
        "From",
        "To",
        "Cc",
        "Reply-To",
        "Subject",
        "Message-ID",
        "In-Reply-To",
        "References",
        "Date",
        "Content-Type",
        "Content-Transfer-Encoding",
        "Content-Disposition",
        "Auto-Submitted",
        "Return-Path",
        "List-Id",
        "X-Junk",
    ]);
    let values = prop::sample::select(vec![
        "a@b",
        "<x@y> <z@w>",
        "=?utf-8?q?caf=C3=A9?=",
        "multipart/mixed; boundary=B",
        "text/html; charset=shift_jis",
        "base64",
        "quoted-printable",
        "attachment; filename=../x",
        "<>",
        "Mon, 3 Jun 2024 10:00:00 +0200",
        "\"Name\" <n@m>, group: a@b, c@d;",
        "",
    ]);
    (names, values, "[ -~]{0,20}").prop_map(|(n, v, extra)| format!("{n}: {v}{extra}"))
}

fn body_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("--B".to_owned()),
        Just("--B--".to_owned()),
        Just("> quoted".to_owned()),
        Just("-- ".to_owned()),
        Just("On Mon, X wrote:".to_owned()),
        Just("<p>html</p>".to_owned()),
        Just(String::new()),
        "[ -~]{0,80}",
        header_line(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(raw in prop::collection::vec(any::<u8>(), 0..4096)) {
        check_outcome(normalizer().normalize(&raw))?;
    }

    #[test]
    fn mail_shaped_noise_never_panics(
        headers in prop::collection::vec(header_line(), 0..12),
        body in prop::collection::vec(body_line(), 0..40),
        crlf in any::<bool>(),
    ) {
        let eol = if crlf { "\r\n" } else { "\n" };
        let raw = format!("{}{eol}{eol}{}", headers.join(eol), body.join(eol));
        check_outcome(normalizer().normalize(raw.as_bytes()))?;
    }
}
