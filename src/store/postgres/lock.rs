//! Leases: "exactly one instance drives this" (a Talk account's poller, an IMAP mailbox, the
//! scheduler) with a PostgreSQL session advisory lock, no home-made consensus.
//!
//! A lease is `pg_try_advisory_lock` on a connection of its own: PostgreSQL keeps the lock for
//! as long as that session lives, and frees it when the lease is released, dropped, or the
//! holder dies (its socket closes; a holder that vanishes from the network is noticed by the
//! server's TCP keepalives, set here to give up after about 25 s). Whoever wants to take over
//! tries again every few seconds; the holder calls [`Lease::is_held`] between units of work
//! and stops driving when it returns false.

use std::time::Duration;

use sha2::{Digest, Sha256};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};

use crate::store::StoreResult;

/// How long [`Lease::is_held`] waits for the lease's connection to answer.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// The server-side keepalives of a lease's session: a silent holder is dropped (and its lease
/// freed) after idle + interval × count = 25 s.
const KEEPALIVES: [(&str, &str); 3] = [
    ("tcp_keepalives_idle", "10"),
    ("tcp_keepalives_interval", "5"),
    ("tcp_keepalives_count", "3"),
];

/// A held lease; see the module documentation. Dropping it closes its connection, which frees
/// the lock (the server ends the session).
pub struct Lease {
    name: String,
    key: i64,
    /// `None` once released or found lost.
    conn: Option<PgConnection>,
}

impl Lease {
    /// Takes the lease `name` if no session holds it; `None` when one does (in this process or
    /// another instance). Never waits for the holder.
    pub async fn try_acquire(options: &PgConnectOptions, name: &str) -> StoreResult<Option<Self>> {
        let mut conn = options
            .clone()
            .application_name("ctxgate lease")
            .options(KEEPALIVES)
            .connect()
            .await?;
        let key = key_of(name);
        let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(key)
            .fetch_one(&mut conn)
            .await?;
        if !taken {
            conn.close().await?;
            return Ok(None);
        }
        Ok(Some(Self {
            name: name.to_owned(),
            key,
            conn: Some(conn),
        }))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The advisory lock key (visible in `pg_locks` as `classid`/`objid`).
    pub fn key(&self) -> i64 {
        self.key
    }

    /// Whether the lease is still held: its session answers within a few seconds. A session
    /// lock lasts as long as its session, so an answering session still holds it. False for
    /// good once the session is lost (the server may already have given the lease to another).
    pub async fn is_held(&mut self) -> bool {
        let Some(conn) = self.conn.as_mut() else {
            return false;
        };
        let alive = tokio::time::timeout(CHECK_TIMEOUT, conn.ping()).await;
        if !matches!(alive, Ok(Ok(()))) {
            self.conn = None;
            tracing::warn!(lease = %self.name, "lost the lease: its database session is gone");
        }
        self.conn.is_some()
    }

    /// Gives the lease up now, so another instance can take it at its next try.
    pub async fn release(mut self) -> StoreResult<()> {
        if let Some(mut conn) = self.conn.take() {
            sqlx::query("SELECT pg_advisory_unlock($1)")
                .bind(self.key)
                .execute(&mut conn)
                .await?;
            conn.close().await?;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl crate::store::DutyLease for Lease {
    async fn is_held(&mut self) -> bool {
        Lease::is_held(self).await
    }

    async fn release(self: Box<Self>) {
        let name = self.name.clone();
        if let Err(e) = Lease::release(*self).await {
            // Dropping the connection ends the session, which frees the lock anyway.
            tracing::warn!(lease = %name, error = %e, "cannot release the lease cleanly");
        }
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("name", &self.name)
            .field("key", &self.key)
            .field("held", &self.conn.is_some())
            .finish()
    }
}

/// A stable 64-bit key for a lease name (the same in every instance and every build).
fn key_of(name: &str) -> i64 {
    let digest = Sha256::digest(format!("ctxgate lease:{name}").as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_are_stable_and_distinct() {
        assert_eq!(super::key_of("scheduler"), super::key_of("scheduler"));
        assert_ne!(super::key_of("scheduler"), super::key_of("talk:main"));
    }
}
