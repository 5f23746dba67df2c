//! A primary that can move between servers, followed: the one the sentinels name, or the
//! one of a listed group whose role is `master`. Its connection, found again after a
//! failover, and the signal that tells the subscription to move with it.

use super::manager::{manager, Failure};
use super::roles::{RoleScan, SCAN_EVERY};
use crate::config::ClientConfig;
use redis::aio::ConnectionManager;
use redis::sentinel::SentinelClient;
use redis::RedisResult;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How a followed primary is found.
pub(crate) enum Finder {
    /// Asked of the sentinels.
    Sentinel(SentinelClient),
    /// Read off the listed nodes' roles.
    Roles(RoleScan),
}

impl Finder {
    /// The primary as its finder sees it now; `current` is the address followed so far.
    async fn primary(&mut self, current: Option<&str>) -> Result<redis::Client, Failure> {
        match self {
            Finder::Sentinel(sentinels) => Ok(sentinels.async_get_client().await?),
            Finder::Roles(scan) => scan.primary(current).await,
        }
    }
}

/// A connection to the followed primary. A request that fails in a way a failover explains
/// (no connection, no answer, `READONLY` from a demoted primary) makes the next one look for
/// the primary again; requests are never retried here, since a lock script that may have
/// run must be reconciled by its caller, not sent twice.
///
/// The connection is replaced only when the finder names another server. A request that
/// got no answer may still be on its way to the server it was sent to; the caller's
/// reconcile must not overtake it there. On the same connection it cannot (one connection's
/// commands run in order); on a second connection to the same server it could, and would
/// then settle against a state the late request changes afterwards. On another server the
/// late request can only touch the demoted primary's data, which the new primary does not
/// share.
pub(crate) struct FollowedPrimary {
    finder: tokio::sync::Mutex<Finder>,
    current: Mutex<Current>,
    config: ClientConfig,
    label: String,
    /// When the finder was last asked again: at most once per interval.
    last_asked: Mutex<Option<Instant>>,
    /// The generation of the primary followed now: the subscription moves when it changes.
    switched: tokio::sync::watch::Sender<u64>,
}

/// The primary followed now.
struct Current {
    /// Bumped at each switch.
    generation: u64,
    address: String,
    client: redis::Client,
    conn: ConnectionManager,
}

/// How often a failing followed connection may look for the primary again.
const REDISCOVER_EVERY: Duration = Duration::from_millis(100);

impl FollowedPrimary {
    pub(super) async fn open(
        config: &ClientConfig,
        label: &str,
        mut finder: Finder,
    ) -> Result<Self, Failure> {
        let client = finder.primary(None).await?;
        let address = client.get_connection_info().addr().to_string();
        let conn = manager(client.clone(), config, Some(config.response_timeout)).await?;
        Ok(FollowedPrimary {
            finder: tokio::sync::Mutex::new(finder),
            current: Mutex::new(Current {
                generation: 0,
                address,
                client,
                conn,
            }),
            config: config.clone(),
            label: label.to_string(),
            last_asked: Mutex::new(None),
            switched: tokio::sync::watch::Sender::new(0),
        })
    }

    fn now(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The generation and connection of the primary followed now.
    pub(super) fn current(&self) -> (u64, ConnectionManager) {
        let current = self.now();
        (current.generation, current.conn.clone())
    }

    /// A client for the primary followed now (where the subscription connects).
    pub(crate) fn current_client(&self) -> redis::Client {
        self.now().client.clone()
    }

    /// Changes each time the client moves to another primary.
    pub(crate) fn switches(&self) -> tokio::sync::watch::Receiver<u64> {
        self.switched.subscribe()
    }

    /// Looks for the primary now (the subscription does, before it connects again).
    pub(crate) async fn look_again(&self) {
        let seen = self.current().0;
        self.rediscover(seen).await;
    }

    /// Passes `reply` on; when it is a failure a failover explains, first looks for the
    /// primary and switches to it (once, however many requests failed). A `READONLY` counts
    /// whether it came as an error or, as a script's does, as an error value in the reply.
    pub(super) async fn check<T: Replied>(
        &self,
        generation: u64,
        reply: RedisResult<T>,
    ) -> RedisResult<T> {
        let failover_sign = match &reply {
            Ok(value) => value.demoted(),
            Err(err) => {
                err.is_io_error()
                    || err.is_connection_refusal()
                    || err.is_connection_dropped()
                    || err.is_timeout()
                    || says_demoted(err)
            }
        };
        if failover_sign {
            self.rediscover(generation).await;
        }
        reply
    }

    /// Looks for the primary now (at most once per [`REDISCOVER_EVERY`]), unless the
    /// primary followed has changed since `seen` (a generation) or someone is already
    /// looking.
    async fn rediscover(&self, seen: u64) {
        // Someone else is already asking: their answer serves this request too.
        let Ok(mut finder) = self.finder.try_lock() else {
            return;
        };
        if self.current().0 != seen {
            return;
        }
        {
            let mut last = self.last_asked.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| at.elapsed() < REDISCOVER_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        let followed = self.now().address.clone();
        let found = async {
            let client = finder.primary(Some(&followed)).await?;
            let address = client.get_connection_info().addr().to_string();
            if address == followed {
                // Still the same server: keep the connection (see the type's doc); it
                // reconnects by itself if the server closed it.
                return Ok(None);
            }
            let timeout = Some(self.config.response_timeout);
            let conn = manager(client.clone(), &self.config, timeout).await?;
            Ok::<_, Failure>(Some((address, client, conn)))
        };
        match tokio::time::timeout(self.config.connect_timeout, found).await {
            Ok(Ok(None)) => {
                tracing::trace!(node = %self.label, "the primary is where it was; its connection stays")
            }
            Ok(Ok(Some((address, client, conn)))) => {
                tracing::info!(node = %self.label, primary = %address,
                    "connected to the new primary");
                crate::telemetry::reconnected(crate::telemetry::Connection::Primary);
                let generation = {
                    let mut current = self.now();
                    *current = Current {
                        generation: current.generation + 1,
                        address,
                        client,
                        conn,
                    };
                    current.generation
                };
                self.switched.send_replace(generation);
            }
            Ok(Err(failure)) => {
                tracing::warn!(node = %self.label, error = %failure.describe(),
                    "no reachable primary found yet")
            }
            Err(_) => tracing::warn!(node = %self.label, "looking for the primary timed out"),
        }
    }
}

/// Looks for the primary of a listed group every [`SCAN_EVERY`] while `primary` is in use
/// (a promotion is seen within about a second even when no request fails). Runs on the
/// client's thread and ends with it.
pub(super) fn keep_scanning(primary: &std::sync::Arc<FollowedPrimary>) {
    let primary = std::sync::Arc::downgrade(primary);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SCAN_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await; // the first tick is at once: the primary was just found
        loop {
            tick.tick().await;
            let Some(primary) = primary.upgrade() else {
                return;
            };
            primary.look_again().await;
        }
    });
}

/// Whether `err` is a server's word that it is a replica now: `READONLY` to a write,
/// `UNBLOCKED` to a `WAIT` it was blocked in when it was demoted, or its refusal of a `WAIT`
/// sent to it as a replica.
pub(crate) fn says_demoted(err: &redis::RedisError) -> bool {
    err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
        || err.code() == Some("UNBLOCKED")
        || (err.code() == Some("ERR")
            && err
                .detail()
                .is_some_and(|d| d.contains("WAIT cannot be used with replica")))
}

/// A reply that may carry a server's error as a value (a script's error, a pipeline's).
pub(super) trait Replied {
    /// Whether it says the server is a replica now (`READONLY`).
    fn demoted(&self) -> bool;
}

impl Replied for redis::Value {
    fn demoted(&self) -> bool {
        matches!(self, redis::Value::ServerError(e)
            if e.kind() == Some(redis::ServerErrorKind::ReadOnly))
    }
}

impl Replied for Vec<redis::Value> {
    fn demoted(&self) -> bool {
        self.iter().any(Replied::demoted)
    }
}

#[cfg(test)]
mod tests {
    use super::Replied;

    /// A script run on a demoted primary answers `READONLY` inside its reply, not as an
    /// error of the call: the followed connection must take both as a failover's sign.
    #[test]
    fn a_readonly_carried_as_a_value_is_a_sign_of_demotion() {
        let parse = |wire: &[u8]| redis::parse_redis_value(wire).unwrap();
        let readonly = parse(b"-READONLY You can't write against a read only replica.\r\n");
        assert!(readonly.demoted());
        assert!(vec![parse(b"+OK\r\n"), readonly].demoted());
        assert!(!parse(b"-NOSCRIPT No matching script.\r\n").demoted());
        assert!(!parse(b":1\r\n").demoted());
    }

    /// What a demoted primary answers a `WAIT`: blocked in it when demoted, or sent to it
    /// after. Other errors are not taken for a demotion.
    #[test]
    fn a_waits_refusal_by_a_replica_is_a_sign_of_demotion() {
        let error = |wire: &[u8]| {
            redis::parse_redis_value(wire)
                .unwrap()
                .extract_error()
                .unwrap_err()
        };
        assert!(super::says_demoted(&error(
            b"-UNBLOCKED force unblock from blocking operation, instance state changed \
              (master -> replica?)\r\n"
        )));
        assert!(super::says_demoted(&error(
            b"-ERR WAIT cannot be used with replica instances.\r\n"
        )));
        assert!(super::says_demoted(&error(
            b"-READONLY You can't write.\r\n"
        )));
        assert!(!super::says_demoted(&error(
            b"-ERR unknown command 'WAIT'\r\n"
        )));
        assert!(!super::says_demoted(&error(b"-NOPERM no permissions\r\n")));
    }
}
