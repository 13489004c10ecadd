use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::Settings;

/// A configuration problem, naming where it is and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin}: {message}")]
    Syntax { origin: String, message: String },
    #[error("{origin}: key `{key}`: {message}")]
    Key {
        origin: String,
        key: String,
        message: String,
    },
}

impl ConfigError {
    pub fn key(
        origin: impl Into<String>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ConfigError::Key {
            origin: origin.into(),
            key: key.into(),
            message: message.into(),
        }
    }
}

const ENV_PREFIX: &str = "CTXGATE__";

/// Loads settings: built-in defaults, then the file (if any), then `CTXGATE__SECTION__KEY`
/// environment variables; then validates and reads secret files.
///
/// `path = None` uses `config/ctxgate.toml` when it exists, else the built-in defaults alone.
pub fn load(path: Option<&Path>) -> Result<Settings, ConfigError> {
    let default_path = Path::new("config/ctxgate.toml");
    let path = match path {
        Some(p) => Some(p),
        None if default_path.exists() => Some(default_path),
        None => None,
    };
    let text = match path {
        Some(p) => std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
            path: p.to_owned(),
            source,
        })?,
        None => String::new(),
    };
    let origin = path.map_or_else(
        || "built-in defaults".to_owned(),
        |p| p.display().to_string(),
    );
    load_with_env(&text, &origin, std::env::vars())
}

/// Like [`load`] for a config given as text, without the environment.
pub fn load_str(text: &str, origin: &str) -> Result<Settings, ConfigError> {
    load_with_env(text, origin, std::iter::empty())
}

pub(crate) fn load_with_env(
    text: &str,
    origin: &str,
    env: impl Iterator<Item = (String, String)>,
) -> Result<Settings, ConfigError> {
    let file: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Syntax {
        origin: origin.to_owned(),
        message: e.to_string(),
    })?;
    let mut merged =
        toml::Table::try_from(Settings::default()).map_err(|e| ConfigError::Syntax {
            origin: "built-in defaults".to_owned(),
            message: e.to_string(),
        })?;
    merge(&mut merged, file);
    // Which keys came from the environment, so errors can name the variable.
    let mut from_env: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in env {
        let Some(rest) = name.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        let path: Vec<String> = rest.split("__").map(|p| p.to_ascii_lowercase()).collect();
        if path.iter().any(String::is_empty) {
            return Err(ConfigError::Syntax {
                origin: format!("environment variable {name}"),
                message: "empty key segment (use CTXGATE__SECTION__KEY)".to_owned(),
            });
        }
        // Secrets are strings even when they look like numbers.
        let secret = path.last().is_some_and(|k| {
            ["secret", "token", "api_key", "read_only_token", "password"].contains(&k.as_str())
        });
        let value = if secret {
            toml::Value::String(value)
        } else {
            parse_env_value(&value)
        };
        set_path(&mut merged, &path, value);
        from_env.insert(path.join("."), name);
    }
    let mut settings: Settings = serde_path_to_error::deserialize(toml::Value::Table(merged))
        .map_err(|e| {
            let key = e.path().to_string();
            let origin = from_env
                .iter()
                .find(|(k, _)| key.starts_with(k.as_str()))
                .map_or_else(
                    || origin.to_owned(),
                    |(_, v)| format!("environment variable {v}"),
                );
            ConfigError::key(origin, key, e.into_inner().to_string())
        })?;
    let origin_of = |key: &str| -> String {
        from_env
            .iter()
            .find(|(k, _)| key.starts_with(k.as_str()))
            .map_or_else(
                || origin.to_owned(),
                |(_, v)| format!("environment variable {v}"),
            )
    };
    settings.validate(&origin_of)?;
    settings.resolve_secrets()?;
    settings.validate_secrets(&origin_of)?;
    Ok(settings)
}

/// Environment values are TOML values when they parse as one (`5`, `true`, `["1m"]`), else strings.
fn parse_env_value(raw: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_owned()))
}

fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

fn set_path(table: &mut toml::Table, path: &[String], value: toml::Value) {
    let (last, parents) = path.split_last().expect("path has at least one segment");
    let mut t = table;
    for p in parents {
        let entry = t
            .entry(p.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        t = entry.as_table_mut().expect("just made a table");
    }
    t.insert(last.clone(), value);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Iterator<Item = (String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn default_toml_equals_built_in_defaults() {
        let text = include_str!("../../config/default.toml");
        let parsed: Settings = toml::from_str(text).expect("config/default.toml parses");
        assert_eq!(parsed, Settings::default());
        // And it documents every key the defaults have (nothing missing, nothing extra).
        let doc: toml::Table = toml::from_str(text).unwrap();
        let built_in = toml::Table::try_from(Settings::default()).unwrap();
        assert_eq!(doc, built_in);
    }

    #[test]
    fn unknown_key_names_file_and_key() {
        let e = load_str("[worker]\ncuont = 3\n", "my.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("my.toml"), "{e}");
        assert!(e.contains("worker"), "{e}");
        assert!(e.contains("cuont"), "{e}");
    }

    #[test]
    fn wrong_type_names_key() {
        let e = load_str("[worker]\ncount = \"many\"\n", "my.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("key `worker.count`"), "{e}");
    }

    #[test]
    fn env_overrides_file_and_errors_name_the_variable() {
        let s = load_with_env(
            "[worker]\ncount = 3\n",
            "f.toml",
            env(&[
                ("CTXGATE__WORKER__COUNT", "7"),
                ("CTXGATE__HTTP__LISTEN", "127.0.0.1:0"),
            ]),
        )
        .unwrap();
        assert_eq!(s.worker.count, 7);
        assert_eq!(s.http.listen.port(), 0);
        let e = load_with_env("", "f.toml", env(&[("CTXGATE__WORKER__COUNT", "lots")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("CTXGATE__WORKER__COUNT"), "{e}");
    }

    #[test]
    fn syntax_error_names_file() {
        let e = load_str("[worker\n", "broken.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("broken.toml:"), "{e}");
    }
}
