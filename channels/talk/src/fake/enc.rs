//! Byte-level helpers of the fake server: PHP-style JSON, the OCS XML rendering, basic-auth
//! base64, form/query decoding, SHA-1 (bot actor ids), HMAC-SHA256 (bot signatures) and the
//! random strings the server puts in `X-Nextcloud-Talk-Random`.

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicU64, Ordering};

/// Encode like PHP's `json_encode`: `/` becomes `\/`, every non-ASCII character becomes a
/// lowercase `\uXXXX` escape (UTF-16, surrogate pairs for astral characters), and with
/// `hex_tag` (`JSON_HEX_TAG`, used by the OCS responses) `<`/`>` become `\u003C`/`\u003E`.
/// Clients must therefore decode JSON properly and verify bot signatures over the raw bytes.
pub(crate) fn php_json(v: &Value, hex_tag: bool) -> String {
    let mut out = String::new();
    write_value(&mut out, v, hex_tag);
    out
}

fn write_value(out: &mut String, v: &Value, hex_tag: bool) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_str(out, s, hex_tag),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, x, hex_tag);
            }
            out.push(']');
        }
        Value::Object(o) => {
            out.push('{');
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_str(out, k, hex_tag);
                out.push(':');
                write_value(out, x, hex_tag);
            }
            out.push('}');
        }
    }
}

fn write_str(out: &mut String, s: &str, hex_tag: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' if hex_tag => out.push_str("\\u003C"),
            '>' if hex_tag => out.push_str("\\u003E"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if c.is_ascii() => out.push(c),
            c => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{:04x}", unit));
                }
            }
        }
    }
    out.push('"');
}

/// The OCS XML rendering (`BaseResponse::toXML` with PHP's `XMLWriter`, one-space indent):
/// list items become `<element>`, `true` becomes `1`, `false` an empty element.
pub(crate) fn ocs_xml(v: &Value) -> String {
    let mut out = String::from("<?xml version=\"1.0\"?>\n");
    if let Value::Object(o) = v {
        for (k, x) in o {
            write_xml(&mut out, k, x, 0);
        }
    }
    out
}

fn write_xml(out: &mut String, key: &str, v: &Value, depth: usize) {
    let pad = " ".repeat(depth);
    match v {
        Value::Object(o) if !o.is_empty() => {
            out.push_str(&format!("{pad}<{key}>\n"));
            for (k, x) in o {
                write_xml(out, k, x, depth + 1);
            }
            out.push_str(&format!("{pad}</{key}>\n"));
        }
        Value::Array(a) if !a.is_empty() => {
            out.push_str(&format!("{pad}<{key}>\n"));
            for x in a {
                write_xml(out, "element", x, depth + 1);
            }
            out.push_str(&format!("{pad}</{key}>\n"));
        }
        Value::Object(_) | Value::Array(_) | Value::Null => {
            out.push_str(&format!("{pad}<{key}/>\n"))
        }
        Value::Bool(true) => out.push_str(&format!("{pad}<{key}>1</{key}>\n")),
        Value::Bool(false) => out.push_str(&format!("{pad}<{key}></{key}>\n")),
        Value::Number(n) => out.push_str(&format!("{pad}<{key}>{n}</{key}>\n")),
        Value::String(s) => out.push_str(&format!("{pad}<{key}>{}</{key}>\n", xml_escape(s))),
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Standard base64 (RFC 4648) decoding, padding optional; `None` on any invalid byte.
pub(crate) fn base64_decode(s: &str) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        match c {
            b'A'..=b'Z' => Some((c - b'A') as u32),
            b'a'..=b'z' => Some((c - b'a') as u32 + 26),
            b'0'..=b'9' => Some((c - b'0') as u32 + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let bytes: Vec<u8> = s.trim().bytes().filter(|b| *b != b'=').collect();
    if bytes.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut acc = 0u32;
        for (i, b) in chunk.iter().enumerate() {
            acc |= val(*b)? << (18 - 6 * i);
        }
        out.push((acc >> 16) as u8);
        if chunk.len() > 2 {
            out.push((acc >> 8) as u8);
        }
        if chunk.len() > 3 {
            out.push(acc as u8);
        }
    }
    Some(out)
}

/// `application/x-www-form-urlencoded` / query string decoding (`+` is a space).
pub(crate) fn parse_urlencoded(s: &str) -> Vec<(String, String)> {
    s.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Lowercase hex SHA-1 (Talk derives a bot's actor id as `bot-` + sha1(url)).
pub(crate) fn sha1_hex(data: &[u8]) -> String {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let bit_len = (data.len() as u64).wrapping_mul(8);
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for chunk in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (slot, word) in w.iter_mut().zip(chunk.chunks_exact(4)) {
            *slot = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let (mut a, mut b, mut c, mut d, mut e) = (h[0], h[1], h[2], h[3], h[4]);
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

/// Lowercase hex HMAC-SHA256 of `random + payload` with `secret`, the signature scheme of
/// `docs/bots.md` in both directions (server→bot over the raw body, bot→server over the
/// message text, or the reaction for the reaction endpoints).
pub fn talk_signature(secret: &str, random: &str, payload: &str) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("hmac accepts any key length");
    mac.update(random.as_bytes());
    mac.update(payload.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// Constant-time comparison of two strings (bot signature checks).
pub(crate) fn ct_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A random string from `ISecureRandom`'s default alphabet (`A-Za-z0-9+/`), as the server
/// generates for `X-Nextcloud-Talk-Random`. Not cryptographically strong; it does not need to be.
pub(crate) fn random_string(len: usize) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut out = String::with_capacity(len);
    let mut block = 0u64;
    while out.len() < len {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let digest = Sha256::new()
            .chain_update(nanos.to_le_bytes())
            .chain_update(n.to_le_bytes())
            .chain_update(block.to_le_bytes())
            .finalize();
        for b in digest {
            if out.len() == len {
                break;
            }
            out.push(ALPHABET[(b & 63) as usize] as char);
        }
        block += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sha1_known_vectors() {
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        let long = "a".repeat(1000);
        assert_eq!(
            sha1_hex(long.as_bytes()),
            "291e9a6c66994949b57ba5e650361e98fc36b1ba"
        );
    }

    #[test]
    fn php_json_escapes_like_php() {
        let v = json!({"a": "x/y <b> é 😆", "e": [], "o": {}});
        assert_eq!(
            php_json(&v, true),
            r#"{"a":"x\/y \u003Cb\u003E \u00e9 \ud83d\ude06","e":[],"o":{}}"#
        );
        let back: Value = serde_json::from_str(&php_json(&v, false)).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn base64_and_urlencoded() {
        assert_eq!(base64_decode("YWxpY2U6c2VjcmV0").unwrap(), b"alice:secret");
        assert_eq!(base64_decode("YQ==").unwrap(), b"a");
        assert!(base64_decode("!!").is_none());
        assert_eq!(
            parse_urlencoded("message=hi+there%21&replyTo=5&x=%"),
            vec![
                ("message".into(), "hi there!".into()),
                ("replyTo".into(), "5".into()),
                ("x".into(), "%".into())
            ]
        );
    }

    #[test]
    fn random_has_alphabet_and_length() {
        let r = random_string(64);
        assert_eq!(r.len(), 64);
        assert!(
            r.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
        );
        assert_ne!(r, random_string(64));
    }
}
