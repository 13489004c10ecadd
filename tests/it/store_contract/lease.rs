//! PostgreSQL leases (advisory locks): one holder at a time, freed by release, drop, or the
//! holder's session ending. PostgreSQL only: SQLite deployments are one process.

use std::time::Duration;

use ctxgate::store::postgres::{Lease, PgStore};
use sqlx::{Connection, PgConnection};

use super::PgDatabase;

/// Tries to take `name` until it succeeds, for at most 10 s (a dropped holder's session ends
/// asynchronously on the server).
async fn take_within(store: &PgStore, name: &str) -> Lease {
    for _ in 0..200 {
        if let Some(lease) = store.try_lease(name).await.unwrap() {
            return lease;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("lease {name} was not freed within 10 s");
}

/// Runs `case` with a store on a fresh database, dropping the database afterwards.
async fn with_store<F, Fut>(case: F)
where
    F: FnOnce(PgStore, String) -> Fut,
    Fut: Future<Output = ()>,
{
    use futures_util::FutureExt;
    let db = PgDatabase::create().await;
    let store = db.store().await;
    let outcome = std::panic::AssertUnwindSafe(case(store.clone(), db.url()))
        .catch_unwind()
        .await;
    store.close().await;
    db.drop().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

#[tokio::test]
async fn a_second_holder_cannot_take_a_lease_until_the_first_lets_go() {
    with_store(|store, _| async move {
        let mut first = store.try_lease("scheduler").await.unwrap().expect("free");
        assert_eq!(first.name(), "scheduler");
        assert!(
            store.try_lease("scheduler").await.unwrap().is_none(),
            "held"
        );
        assert!(
            store.try_lease("scheduler").await.unwrap().is_none(),
            "still held"
        );
        let other = store.try_lease("talk:main").await.unwrap();
        assert!(other.is_some(), "another name is another lease");
        assert!(first.is_held().await);

        // Released: the next try succeeds at once.
        first.release().await.unwrap();
        let second = store
            .try_lease("scheduler")
            .await
            .unwrap()
            .expect("released");
        assert!(store.try_lease("scheduler").await.unwrap().is_none());

        // Dropped: its session ends and the lease is free again.
        drop(second);
        let third = take_within(&store, "scheduler").await;
        assert_ne!(third.key(), other.as_ref().unwrap().key());
    })
    .await;
}

#[tokio::test]
async fn a_holder_whose_session_ends_loses_the_lease_to_a_survivor() {
    with_store(|store, url| async move {
        let mut holder = store.try_lease("imap:inbox").await.unwrap().expect("free");
        // The server ends the holder's session (as when its instance dies).
        let mut admin = PgConnection::connect(&url).await.unwrap();
        let ended: i64 = sqlx::query_scalar(
            "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_locks
             WHERE locktype = 'advisory' AND granted
               AND ((classid::bigint << 32) | objid::bigint) = $1",
        )
        .bind(holder.key())
        .fetch_one(&mut admin)
        .await
        .unwrap();
        assert_eq!(ended, 1, "the lease is one session's advisory lock");
        admin.close().await.unwrap();
        let survivor = take_within(&store, "imap:inbox").await;
        assert!(
            !holder.is_held().await,
            "the old holder learns it lost the lease"
        );
        assert!(!holder.is_held().await);
        drop(survivor);
    })
    .await;
}

#[tokio::test]
async fn store_sessions_wait_for_row_locks_only_as_long_as_the_busy_timeout() {
    with_store(|store, url| async move {
        assert!(ctxgate::store::postgres::is_postgres_url(&url));
        assert!(!ctxgate::store::postgres::is_postgres_url(
            "sqlite://data/ctxgate.db"
        ));
        let lock_timeout: String = sqlx::query_scalar("SHOW lock_timeout")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(lock_timeout, "5s", "StoreSettings::busy_timeout");
        let name: String = sqlx::query_scalar("SHOW application_name")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(name, "ctxgate");
    })
    .await;
}
