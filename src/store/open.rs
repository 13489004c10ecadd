//! Opens the store `store.url` names: `sqlite:` (the embedded default) or `postgres://` /
//! `postgresql://` (several instances sharing the work).

use std::sync::Arc;

use super::postgres::{self, PgStore};
use super::sqlite::SqliteStore;
use super::{Store, StoreResult};
use crate::config::StoreSettings;

/// The opened store, kept by its kind so it can be migrated and closed.
#[derive(Clone)]
pub enum OpenedStore {
    Sqlite(SqliteStore),
    Postgres(Box<PgStore>),
}

impl OpenedStore {
    pub async fn open(settings: &StoreSettings) -> StoreResult<Self> {
        Ok(if postgres::is_postgres_url(&settings.url) {
            Self::Postgres(Box::new(PgStore::connect(&settings.url, settings).await?))
        } else {
            Self::Sqlite(SqliteStore::connect(settings).await?)
        })
    }

    pub fn shared(&self) -> Arc<dyn Store> {
        match self {
            Self::Sqlite(s) => Arc::new(s.clone()),
            Self::Postgres(p) => Arc::new(PgStore::clone(p)),
        }
    }

    pub async fn migrate(&self) -> StoreResult<usize> {
        match self {
            Self::Sqlite(s) => s.migrate().await,
            Self::Postgres(p) => p.migrate().await,
        }
    }

    pub async fn pending_migrations(&self) -> StoreResult<usize> {
        match self {
            Self::Sqlite(s) => s.pending_migrations().await,
            Self::Postgres(p) => p.pending_migrations().await,
        }
    }

    pub async fn close(&self) {
        match self {
            Self::Sqlite(s) => s.close().await,
            Self::Postgres(p) => p.close().await,
        }
    }
}

/// `store.url` for messages: a PostgreSQL password is replaced by `***`.
pub fn display_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((credentials, host)) if credentials.contains(':') => {
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_hidden() {
        assert_eq!(
            super::display_url("postgres://app:s3cret@db:5432/ctxgate"),
            "postgres://app:***@db:5432/ctxgate"
        );
        assert_eq!(
            super::display_url("sqlite://data/x.db"),
            "sqlite://data/x.db"
        );
    }
}
