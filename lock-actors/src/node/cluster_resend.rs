//! When a request to a Redis Cluster is sent again: only when the server's answer proves
//! that it did not run.
//!
//! The redis crate's cluster client can resend a request itself, and does so after a
//! broken connection or a response timeout too, when the request may well have run and
//! only its reply was lost. Our lock scripts are not idempotent (an unlock decrements a
//! hold count, a permit release adds to a count): run twice, an unlock of a lock held twice
//! frees it while its owner still holds it. So the command connection is built with the
//! crate's retries off, and [`send`] resends only after an answer that a request never runs
//! under: a redirect (`MOVED`, `ASK`), a cluster that cannot serve the slot yet
//! (`TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`, `LOADING`), a demoted primary (`READONLY`), or
//! no connection to send on. Anything else goes back to the caller, whose reconcile path
//! settles a reply that may have been lost (as on a single server).

use redis::aio::ConnectionLike as _;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisResult, ServerErrorKind, Value};
use std::time::Duration;

/// How many times one request may be sent again after answers that prove it did not run.
const RESENDS: u32 = 5;
/// The pause before the first resend that is not a redirect; doubled for each next one.
const FIRST_PAUSE: Duration = Duration::from_millis(25);
/// The longest pause between two sends.
const MAX_PAUSE: Duration = Duration::from_millis(400);

/// What to do after a request failed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// The request may have run: hand the error to the caller.
    GiveUp,
    /// Send it to the node the server named: `MOVED`, or `ASK` (a slot being migrated,
    /// sent after `ASKING`).
    Node {
        host: String,
        port: u16,
        asking: bool,
    },
    /// Send it again by slot after a pause (the crate refreshes its slot map meanwhile).
    Later,
}

/// What `err` proves about the request that got it.
pub(crate) fn next(err: &RedisError) -> Next {
    let redirect = || {
        let (addr, _slot) = err.redirect_node()?;
        let (host, port) = addr.rsplit_once(':')?;
        Some((host.to_string(), port.parse().ok()?))
    };
    match err.kind() {
        ErrorKind::Server(kind @ (ServerErrorKind::Moved | ServerErrorKind::Ask)) => {
            match redirect() {
                Some((host, port)) => Next::Node {
                    host,
                    port,
                    asking: kind == ServerErrorKind::Ask,
                },
                None => Next::Later,
            }
        }
        // Refused before running: the slot is not served yet, or by a node that was
        // demoted (a script on a replica fails at its first write, having written nothing).
        ErrorKind::Server(
            ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::ReadOnly,
        )
        | ErrorKind::ClusterConnectionNotFound => Next::Later,
        // Nothing was sent: the connection could not be made.
        _ if err.is_connection_refusal() => Next::Later,
        _ => Next::GiveUp,
    }
}

/// Where the next send goes.
enum Target {
    /// To the primary of the first key's slot, as the crate's slot map says.
    Slot,
    /// To the node the server named; after `ASKING` when `asking`.
    Node {
        host: String,
        port: u16,
        asking: bool,
    },
}

/// A request: one command, or `count` replies of a pipeline from `offset` on.
#[derive(Clone, Copy)]
enum Request<'a> {
    One(&'a Cmd),
    Many(&'a Pipeline, usize, usize),
}

/// Sends `cmd` on `conn` (routed by its first key), again only as [`next`] allows.
pub(crate) async fn send(conn: &mut ClusterConnection, cmd: &Cmd) -> RedisResult<Value> {
    let mut replies = with_resends(conn, Request::One(cmd)).await?;
    replies.pop().ok_or_else(no_reply)
}

/// Sends a pipeline on `conn` (routed by its first key), again only as [`next`] allows.
/// A slot being migrated (`ASK`) is waited out rather than followed.
pub(crate) async fn send_pipeline(
    conn: &mut ClusterConnection,
    pipeline: &Pipeline,
    offset: usize,
    count: usize,
) -> RedisResult<Vec<Value>> {
    with_resends(conn, Request::Many(pipeline, offset, count)).await
}

/// Sends `request` to `target` once; one command's reply comes back as a vector of one.
async fn send_to(
    conn: &mut ClusterConnection,
    request: Request<'_>,
    target: Target,
) -> RedisResult<Vec<Value>> {
    match (request, target) {
        (Request::One(cmd), Target::Slot) => Ok(vec![conn.req_packed_command(cmd).await?]),
        (Request::Many(pipeline, offset, count), Target::Slot) => {
            conn.req_packed_commands(pipeline, offset, count).await
        }
        (Request::One(cmd), Target::Node { host, port, asking }) => {
            let to = SingleNodeRoutingInfo::ByAddress { host, port };
            if asking {
                let mut pipe = redis::pipe();
                pipe.cmd("ASKING").add_command(cmd.clone());
                conn.route_pipeline(pipe, 1, 1, to).await
            } else {
                let reply = conn
                    .route_command(cmd.clone(), RoutingInfo::SingleNode(to))
                    .await?;
                Ok(vec![reply])
            }
        }
        (Request::Many(pipeline, offset, count), Target::Node { host, port, .. }) => {
            let to = SingleNodeRoutingInfo::ByAddress { host, port };
            conn.route_pipeline(pipeline.clone(), offset, count, to)
                .await
        }
    }
}

/// Sends once to the slot's primary, then again as long as the answer proves the request
/// did not run, at most [`RESENDS`] times.
async fn with_resends(
    conn: &mut ClusterConnection,
    request: Request<'_>,
) -> RedisResult<Vec<Value>> {
    let mut reply = send_to(conn, request, Target::Slot).await;
    let mut pause = FIRST_PAUSE;
    for _ in 0..RESENDS {
        let Err(err) = &reply else {
            return reply;
        };
        let target = match next(err) {
            Next::GiveUp => return reply,
            // A pipeline is not split around `ASKING`: it waits for the migration to end.
            Next::Node { host, port, asking }
                if !(asking && matches!(request, Request::Many(..))) =>
            {
                tracing::debug!(%host, port, asking, "resending a request the cluster redirected");
                Target::Node { host, port, asking }
            }
            _ => {
                tracing::debug!(error = ?err.kind(), ?pause,
                    "the cluster refused a request before running it; sending it again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
                Target::Slot
            }
        };
        reply = send_to(conn, request, target).await;
    }
    reply
}

fn no_reply() -> RedisError {
    RedisError::from((ErrorKind::Client, "no reply to a redirected request"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(text: &str) -> RedisError {
        let reply = redis::parse_redis_value(format!("-{text}\r\n").as_bytes()).unwrap();
        reply.extract_error().unwrap_err()
    }

    #[test]
    fn a_redirect_names_where_to_send_again() {
        assert_eq!(
            next(&server_error("MOVED 3999 127.0.0.1:6381")),
            Next::Node {
                host: "127.0.0.1".into(),
                port: 6381,
                asking: false
            }
        );
        assert_eq!(
            next(&server_error("ASK 3999 127.0.0.1:6382")),
            Next::Node {
                host: "127.0.0.1".into(),
                port: 6382,
                asking: true
            }
        );
    }

    #[test]
    fn refusals_before_running_are_sent_again_later() {
        for text in [
            "TRYAGAIN Multiple keys request during rehashing of slot",
            "CLUSTERDOWN The cluster is down",
            "MASTERDOWN Link with MASTER is down",
            "LOADING Redis is loading the dataset in memory",
            "READONLY You can't write against a read only replica.",
        ] {
            assert_eq!(next(&server_error(text)), Next::Later, "{text}");
        }
        let refused = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(next(&refused), Next::Later);
    }

    #[test]
    fn a_request_that_may_have_run_is_never_sent_again() {
        for kind in [
            std::io::ErrorKind::ConnectionReset,
            std::io::ErrorKind::BrokenPipe,
            std::io::ErrorKind::TimedOut,
            std::io::ErrorKind::UnexpectedEof,
        ] {
            let err = RedisError::from(std::io::Error::from(kind));
            assert_eq!(next(&err), Next::GiveUp, "{kind:?}");
        }
        assert_eq!(next(&server_error("ERR something")), Next::GiveUp);
        assert_eq!(next(&server_error("WRONGTYPE Operation")), Next::GiveUp);
    }
}
