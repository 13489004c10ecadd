//! A corpus of malformed mail: every input ends as a normalised message or a typed rejection,
//! never a panic (the normaliser's panic guard would show as `parser_failed`, which is also
//! asserted absent).

use ctxgate_email::{Limits, Normalizer, ParseError};

use crate::support::{fixture, fixtures_dir};

/// `ok` or the rejection code.
fn outcome(normalizer: &Normalizer, raw: &[u8]) -> &'static str {
    match normalizer.normalize(raw) {
        Ok(mail) => {
            // Whatever came out must serialise (it goes to the store as JSON).
            serde_json::to_string(&mail).expect("normalised mail serialises");
            "ok"
        }
        Err(e) => e.code(),
    }
}

/// Deterministic pseudo-random bytes (xorshift), so failures reproduce.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.max(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn corpus() -> Vec<(String, Vec<u8>, Option<&'static str>)> {
    let mut cases: Vec<(String, Vec<u8>, Option<&'static str>)> = vec![
        ("empty".into(), Vec::new(), Some("empty")),
        ("whitespace".into(), b" \r\n\t\r\n".to_vec(), Some("empty")),
        ("no colon".into(), b"just some words\nand more words\n".to_vec(), Some("no_headers")),
        ("only unknown headers".into(), b"X-Foo: 1\nX-Bar: 2\n\nbody".to_vec(), Some("no_headers")),
        ("headers only, no body".into(), b"From: a@b\nSubject: s".to_vec(), Some("ok")),
        ("nul bytes".into(), b"From: a@b\0\nSubject: \0\0\n\nbo\0dy".to_vec(), Some("ok")),
        ("lone CR line ends".into(), b"From: a@b\rSubject: s\r\rbody\r".to_vec(), None),
        (
            "invalid utf-8 without charset".into(),
            b"From: \xff\xfe <a@b>\nSubject: \xc3\x28 bad\n\nbody \xe2\x82 \xf0\x9f\n".to_vec(),
            Some("ok"),
        ),
        (
            "invalid utf-8 claiming utf-8, base64".into(),
            b"From: a@b\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n/////w==\n"
                .to_vec(),
            Some("ok"),
        ),
        (
            "unterminated encoded word".into(),
            b"From: =?utf-8?q?abc <a@b>\nSubject: =?utf-8?b?////\n\nx".to_vec(),
            Some("ok"),
        ),
        (
            "boundary never closed".into(),
            b"From: a@b\nContent-Type: multipart/mixed; boundary=Q\n\n--Q\nContent-Type: text/plain\n\nhello\n--Q\nContent-Type: text/html\n\n<p>never closed"
                .to_vec(),
            Some("ok"),
        ),
        (
            "multipart without boundary".into(),
            b"From: a@b\nContent-Type: multipart/mixed\n\n--x\n\nhello\n".to_vec(),
            Some("ok"),
        ),
        (
            "empty boundary".into(),
            b"From: a@b\nContent-Type: multipart/mixed; boundary=\"\"\n\n--\n\nhello\n----\n".to_vec(),
            Some("ok"),
        ),
        (
            "boundary right at the start".into(),
            b"Content-Type: multipart/mixed; boundary=a\n\n--a--".to_vec(),
            Some("ok"),
        ),
        (
            "message/rfc822 that is empty".into(),
            b"From: a@b\nContent-Type: message/rfc822\n\n".to_vec(),
            Some("ok"),
        ),
    ];

    let huge_header = format!("From: a@b\nSubject: {}\n\nbody\n", "x".repeat(1 << 20));
    cases.push(("1 MiB subject".into(), huge_header.into_bytes(), Some("ok")));
    let many_headers = format!("From: a@b\n{}\nbody\n", "X-Filler: yes\n".repeat(100_000));
    cases.push((
        "100k header lines".into(),
        many_headers.into_bytes(),
        Some("ok"),
    ));
    let many_addresses: Vec<String> = (0..20_000).map(|i| format!("u{i}@example.org")).collect();
    cases.push((
        "20k recipients".into(),
        format!("From: a@b\nTo: {}\n\nbody\n", many_addresses.join(", ")).into_bytes(),
        Some("ok"),
    ));
    let refs: Vec<String> = (0..50_000).map(|i| format!("<r{i}@x>")).collect();
    cases.push((
        "50k references".into(),
        format!("From: a@b\nReferences: {}\n\nbody\n", refs.join("\r\n ")).into_bytes(),
        Some("ok"),
    ));

    let mut deep = String::from("From: a@b\nContent-Type: multipart/mixed; boundary=b0\n\n");
    for level in 1..5_000 {
        deep.push_str(&format!(
            "--b{}\nContent-Type: multipart/mixed; boundary=b{level}\n\n",
            level - 1
        ));
    }
    deep.push_str("--b4999\nContent-Type: text/plain\n\ndeep inside\n");
    cases.push((
        "5000 nested multiparts".into(),
        deep.into_bytes(),
        Some("ok"),
    ));

    let mut nested = String::from("Subject: innermost\nFrom: a@b\n\ncore\n");
    for _ in 0..50 {
        nested = format!("From: a@b\nContent-Type: message/rfc822\n\n{nested}");
    }
    cases.push((
        "50 nested message/rfc822".into(),
        nested.into_bytes(),
        Some("ok"),
    ));

    let deep_html = format!(
        "From: a@b\nContent-Type: text/html\n\n{}text{}",
        "<div>".repeat(20_000),
        "</div>".repeat(20_000)
    );
    cases.push((
        "20k nested html elements".into(),
        deep_html.into_bytes(),
        Some("ok"),
    ));
    let wide_table = format!(
        "From: a@b\nContent-Type: text/html\n\n<table><tr>{}</tr></table>",
        "<td>cell</td>".repeat(20_000)
    );
    cases.push((
        "20k-column html table".into(),
        wide_table.into_bytes(),
        Some("ok"),
    ));

    for seed in 1..=40u64 {
        let len = (seed as usize * 1_637) % 65_536;
        cases.push((format!("noise seed {seed}"), noise(seed, len), None));
        let mut prefixed =
            b"From: a@b\nContent-Type: multipart/mixed; boundary=n\n\n--n\n".to_vec();
        prefixed.extend(noise(seed, len));
        cases.push((
            format!("noise after headers, seed {seed}"),
            prefixed,
            Some("ok"),
        ));
    }

    for entry in std::fs::read_dir(fixtures_dir()).expect("fixtures") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "eml") {
            continue;
        }
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        let raw = fixture(&name);
        for cut in (0..raw.len()).step_by(13) {
            cases.push((
                format!("{name} truncated at {cut}"),
                raw[..cut].to_vec(),
                None,
            ));
        }
        let mut flipped = raw.clone();
        for i in (0..flipped.len()).step_by(17) {
            flipped[i] ^= 0x80;
        }
        cases.push((format!("{name} with high bits flipped"), flipped, None));
    }
    cases
}

#[test]
fn every_malformed_input_has_an_outcome() {
    let normalizer = Normalizer::default();
    let mut failures = Vec::new();
    let mut tally = std::collections::BTreeMap::<&str, usize>::new();
    for (name, raw, expected) in corpus() {
        let got = outcome(&normalizer, &raw);
        *tally.entry(got).or_default() += 1;
        if got == "parser_failed" || expected.is_some_and(|e| e != got) {
            failures.push(format!("{name}: expected {expected:?}, got {got}"));
        }
    }
    assert!(
        failures.is_empty(),
        "unexpected outcomes:\n{}",
        failures.join("\n")
    );
    assert!(
        tally.get("ok").copied().unwrap_or(0) > 100,
        "tally {tally:?}"
    );
}

#[test]
fn oversized_messages_are_rejected_before_parsing() {
    let normalizer = Normalizer::new(Limits {
        max_message_bytes: 1_000,
        ..Limits::default()
    });
    let raw = format!("From: a@b\n\n{}", "x".repeat(2_000));
    assert_eq!(
        normalizer.normalize(raw.as_bytes()),
        Err(ParseError::TooLarge {
            size: raw.len(),
            limit: 1_000
        })
    );
    assert_eq!(
        ParseError::TooLarge { size: 1, limit: 0 }.code(),
        "too_large"
    );
}

#[test]
fn long_bodies_are_capped_with_a_marker() {
    let normalizer = Normalizer::new(Limits {
        max_body_bytes: 100,
        ..Limits::default()
    });
    let raw = format!("From: a@b\nSubject: long\n\n{}", "word ".repeat(1_000));
    let mail = normalizer.normalize(raw.as_bytes()).expect("parses");
    assert!(mail.body.truncated);
    assert!(mail.body.text.len() < 200, "{}", mail.body.text.len());
    assert!(
        mail.body.text.ends_with("more bytes not shown]"),
        "{}",
        mail.body.text
    );
}

#[test]
fn huge_html_is_converted_only_up_to_the_cap() {
    let normalizer = Normalizer::new(Limits {
        max_html_bytes: 1_000,
        ..Limits::default()
    });
    let raw = format!(
        "From: a@b\nContent-Type: text/html\n\n<p>start</p>{}<p>end</p>",
        "<p>filler</p>".repeat(1_000)
    );
    let mail = normalizer.normalize(raw.as_bytes()).expect("parses");
    assert!(mail.body.truncated);
    assert!(mail.body.text.starts_with("start"));
    assert!(!mail.body.text.contains("end"));
}

#[test]
fn attachments_beyond_the_cap_are_counted() {
    let normalizer = Normalizer::new(Limits {
        max_attachments: 2,
        ..Limits::default()
    });
    let mut raw =
        String::from("From: a@b\nContent-Type: multipart/mixed; boundary=M\n\n--M\n\ntext\n");
    for i in 0..5 {
        raw.push_str(&format!(
            "--M\nContent-Type: application/octet-stream\nContent-Disposition: attachment; filename=f{i}.bin\n\nxx\n"
        ));
    }
    raw.push_str("--M--\n");
    let mail = normalizer.normalize(raw.as_bytes()).expect("parses");
    let names: Vec<_> = mail.attachments.iter().map(|a| a.name.as_deref()).collect();
    assert_eq!(names, [Some("f0.bin"), Some("f1.bin")]);
    assert_eq!(mail.attachments_omitted, 3);
    assert_eq!(mail.body.text, "text");
}

#[test]
fn hostile_reference_chains_are_bounded() {
    let refs: Vec<String> = (0..5_000).map(|i| format!("<r{i}@x>")).collect();
    let raw = format!("From: a@b\nReferences: {}\n\nbody\n", refs.join("\r\n "));
    let mail = ctxgate_email::normalize(raw.as_bytes()).expect("parses");
    assert_eq!(mail.references.len(), 100);
    assert_eq!(mail.references[0].as_str(), "r0@x", "the root survives");
    assert_eq!(
        mail.references[99].as_str(),
        "r4999@x",
        "the newest survive"
    );
}
