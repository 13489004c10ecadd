//! Target: configuration text.

use super::engine::Outcome;

pub fn run(input: &[u8]) -> Outcome {
    // `load` reads the file as UTF-8 (and names the file in its I/O error otherwise), so the
    // text is what matters: invalid bytes become U+FFFD instead of ending the run early.
    let text = String::from_utf8_lossy(input);
    match ctxgate::config::load_str(&text, "fuzz.toml") {
        Ok(settings) => {
            // What was accepted serialises back (it is shown at GET /admin/config).
            toml::to_string(&settings)
                .map_err(|e| format!("accepted settings do not serialise: {e}"))?;
            Ok("ok".into())
        }
        Err(e) => {
            use ctxgate::config::ConfigError;
            let (label, origin, message) = match &e {
                ConfigError::Syntax { origin, message } => ("err syntax", origin.as_str(), message),
                ConfigError::Key {
                    origin, message, ..
                } => ("err key", origin.as_str(), message),
                ConfigError::Read { .. } => return Err(format!("load_str read a file: {e}")),
            };
            // Named: where (the file, a variable, a secret file) and what.
            if origin.is_empty() || message.trim().is_empty() {
                return Err(format!("an error without origin or message: {e:?}"));
            }
            Ok(label.into())
        }
    }
}

pub const TOKENS: &[&[u8]] = &[
    b"\n[http]\n",
    b"\n[worker]\n",
    b"\n[admin]\n",
    b"\n[conversation]\n",
    b"\n[webhooks.default]\n",
    b"\n[email.x]\n",
    b"\n[talk.x]\n",
    b"\n[brains.default]\n",
    b"\n[[schedules]]\n",
    b"\ncron = \"",
    b"\ntimezone = \"",
    b"\nlisten = \"",
    b" = \"",
    b" = [",
    b" = {",
    b" = 1\n",
    b"\"5m\"",
    b"\"0s\"",
    b"\"99999999999y\"",
    b"\"\"\"",
    b"'''",
    b"\\u0000",
    b"\\uD800",
    b"1979-05-27T07:32:00Z",
    b"inf",
    b"nan",
    b"0x7fffffffffffffff",
    b"#",
    b"=",
    b".",
];
