//! Shared helpers: fixture access and parsing shortcuts.

use std::path::PathBuf;

use ctxgate_email::{NormalizedMail, normalize};

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The raw bytes of `tests/fixtures/<name>.eml`.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = fixtures_dir().join(format!("{name}.eml"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// A fixture, normalised with the default limits.
pub fn mail(name: &str) -> NormalizedMail {
    normalize(&fixture(name)).unwrap_or_else(|e| panic!("fixture {name} does not parse: {e}"))
}

/// Normalises a message written inline (LF line ends are fine).
pub fn parse_text(text: &str) -> NormalizedMail {
    normalize(text.as_bytes()).unwrap_or_else(|e| panic!("inline message does not parse: {e}"))
}
