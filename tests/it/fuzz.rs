//! Fuzz targets on the stable toolchain (no cargo-fuzz): proptest generates the inputs.
//!
//! Each target first replays every file of its seed corpus `tests/corpus/<target>/` (shapes from
//! the published docs — spreed `docs/chat.md`, `docs/conversation.md`, `docs/bots.md`, our
//! `docs/webhooks.md` and `config/default.toml` — plus hostile ones: 10,000 levels of nesting,
//! invalid UTF-8, huge numbers, NUL, lone surrogates in JSON escapes, CR/LF in header-ish fields),
//! then runs proptest-generated inputs for a bounded time: byte-level mutations of corpus entries
//! (bit flips, interesting bytes, inserted tokens, deleted, repeated and spliced ranges) and
//! arbitrary bytes and token soup.
//!
//! The budget is about 3 s per target; `CTXGATE_FUZZ_SECS=60` runs longer and
//! `CTXGATE_FUZZ_SEED=<u64>` replays a run (the seed is printed). Executions per target are
//! printed to stderr (`--nocapture`).
//!
//! What is asserted for every input: no panic; no hang (each input runs on a watched thread with
//! the 2 MiB stack of a tokio worker and must finish within `PER_INPUT_LIMIT`); and the result
//! is `Ok` or a named error, with the target's invariants on what `Ok` carries. A failing input
//! is shrunk, saved under `$CARGO_TARGET_TMPDIR/fuzz-findings/` and belongs in the corpus once
//! fixed.

mod config;
mod email;
mod engine;
mod mutate;
mod support;
mod talk;
mod webhook;

use std::sync::LazyLock;

pub use email::reply_headers_are_sound;
use engine::{Target, fuzz};
use mutate::JSON_TOKENS;

#[test]
fn fuzz_email_normalisation() {
    fuzz(&Target {
        name: "email",
        run: email::run,
        dictionary: email::TOKENS,
    });
}

#[test]
fn fuzz_talk_ocs_payloads() {
    static DICT: LazyLock<Vec<&'static [u8]>> = LazyLock::new(|| {
        JSON_TOKENS
            .iter()
            .chain(talk::OCS_TOKENS)
            .copied()
            .collect()
    });
    fuzz(&Target {
        name: "talk_ocs",
        run: talk::ocs,
        dictionary: DICT.as_slice(),
    });
}

#[test]
fn fuzz_talk_bot_webhook() {
    static DICT: LazyLock<Vec<&'static [u8]>> = LazyLock::new(|| {
        JSON_TOKENS
            .iter()
            .chain(talk::BOT_TOKENS)
            .copied()
            .collect()
    });
    fuzz(&Target {
        name: "talk_bot",
        run: talk::bot,
        dictionary: DICT.as_slice(),
    });
}

#[test]
fn fuzz_webhook_payload_and_signature() {
    static DICT: LazyLock<Vec<&'static [u8]>> =
        LazyLock::new(|| JSON_TOKENS.iter().chain(webhook::TOKENS).copied().collect());
    fuzz(&Target {
        name: "webhook",
        run: webhook::run,
        dictionary: DICT.as_slice(),
    });
}

#[test]
fn fuzz_config_text() {
    fuzz(&Target {
        name: "config",
        run: config::run,
        dictionary: config::TOKENS,
    });
}
