//! Logs and traces via `tracing`: `pretty` or `json`, filtered by config (or `RUST_LOG`).

use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, TelemetrySettings};

pub fn init(settings: &TelemetrySettings) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&settings.filter))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match settings.format {
        LogFormat::Pretty => builder.compact().try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
