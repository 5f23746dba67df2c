//! The supervisor of a node's subscription connection: subscribes channels for the
//! actors that listen on them, routes each message to its listeners, and reconnects.

use crate::config::ClientConfig;
use crate::denied::Refusal;
use crate::error::LockError;
use crate::node::connection::{PubSub, SubscriptionTarget};
use crate::telemetry;
use actix::prelude::*;
use actix::WeakRecipient;
use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use redis::aio::PubSubSink;
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Wake a lock actor: its channel carried an unlock (`all` for a read unlock), or the
/// subscription connection came back and every waiter must try again.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wake {
    pub(crate) all: bool,
}

impl Message for Wake {
    type Result = ();
}

/// How long an actor goes without pub/sub after a failed SUBSCRIBE before trying again.
const SUBSCRIBE_RETRY: Duration = Duration::from_secs(1);

/// Where a waiting actor's subscription to its wake-up channel stands (lock and semaphore
/// actors alike: they subscribe before their head waiter's second try).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Subscription {
    /// Not subscribed; after a failure, not again before `retry_after`.
    None {
        retry_after: Option<Instant>,
    },
    Active,
}

/// The wait queue keeps where the subscription stands; this is how a request ended.
impl From<Subscription> for crate::wait_queue::Subscribed {
    fn from(state: Subscription) -> Self {
        match state {
            Subscription::Active => crate::wait_queue::Subscribed::Yes,
            Subscription::None { retry_after } => crate::wait_queue::Subscribed::No { retry_after },
        }
    }
}

impl Subscription {
    /// Asks the supervisor to route `channel` to `subscriber`; resolves to the state the
    /// request ends in (a failure is logged, and polling at the lease covers for it), or to
    /// [`LockError::Denied`] when the ACL user may not subscribe to the channel: no wake-up
    /// can come then, so the waiter must fail rather than wait for one.
    pub(crate) fn request(
        supervisor: &Addr<NodeSupervisor>,
        channel: String,
        id: u64,
        subscriber: WeakRecipient<Wake>,
    ) -> impl std::future::Future<Output = Result<Subscription, LockError>> + 'static {
        let request = supervisor.send(Subscribe {
            channel: channel.clone(),
            id,
            subscriber,
        });
        async move {
            match request.await {
                Ok(Ok(())) => Ok(Subscription::Active),
                Ok(Err(denied @ LockError::Denied { .. })) => {
                    tracing::warn!(%channel, error = %denied, "subscription refused by the ACL");
                    Err(denied)
                }
                failed => {
                    tracing::warn!(%channel, ?failed,
                        "cannot subscribe to wake-ups; polling until it works");
                    Ok(Subscription::None {
                        retry_after: Some(Instant::now() + SUBSCRIBE_RETRY),
                    })
                }
            }
        }
    }
}

/// Route a channel's messages to a lock actor; replies once Redis confirmed the subscription.
pub(crate) struct Subscribe {
    pub(crate) channel: String,
    pub(crate) id: u64,
    pub(crate) subscriber: WeakRecipient<Wake>,
}

impl Message for Subscribe {
    type Result = Result<(), LockError>;
}

/// Stop routing a channel to lock actor `id`.
pub(crate) struct Unsubscribe {
    pub(crate) channel: String,
    pub(crate) id: u64,
}

impl Message for Unsubscribe {
    type Result = ();
}

/// Owns the subscription connection of one Redis node and routes unlock messages to the
/// lock actors that wait on them.
///
/// When the connection drops, the supervisor restarts (actix [`Supervised`]): it reconnects
/// with backoff, subscribes again to every channel that still has a listener, and then wakes
/// every listener so it retries at once (an unlock published while disconnected is lost).
/// On a Sentinel or replicated deployment each reconnect looks for the primary first, and a
/// switch of the command connection to another primary moves the subscription too. On a
/// Redis Cluster it keeps one RESP3 connection per node (the redis crate follows the
/// topology and re-subscribes each channel on the node that owns its slot); a dropped node
/// connection or a channel moved away with its slot makes it subscribe again and wake the
/// listeners in the same way.
/// You reach it only through [`LockClient`](crate::LockClient); it has no public messages.
///
/// # Example
///
/// Nothing to call: a waiter parked across a Redis restart is woken by the supervisor once
/// the subscription is back, and simply acquires.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
/// // Even if Redis restarts while this waits, the wait ends as soon as Redis is back.
/// let guard = client.lock("job")?.acquire_timeout(Duration::from_secs(60)).await?;
/// # Ok(()) }
/// ```
pub struct NodeSupervisor {
    target: SubscriptionTarget,
    pubsub: PubSub,
    label: Arc<str>,
    connect_timeout: Duration,
    response_timeout: Duration,
    routes: HashMap<String, Vec<(u64, WeakRecipient<Wake>)>>,
    sink: Option<Sink>,
    connected_once: bool,
    /// The waits between tries to connect or subscribe again; reset once one succeeds.
    retry: ExponentialBackoff,
    /// A cluster node connection dropped: subscriptions are being restored.
    resync_pending: bool,
    /// Whether the subscription connection has come up once: a request made before then
    /// waits for it (see the `Subscribe` handler).
    first_up: tokio::sync::watch::Sender<bool>,
}

const FIRST_RETRY: Duration = Duration::from_millis(50);
const LAST_RETRY: Duration = Duration::from_secs(2);

/// Reconnect and re-subscribe waits: from [`FIRST_RETRY`], doubling, with up to as much
/// again of random jitter (so the clients of a restarted server do not all come back in
/// the same millisecond), never over [`LAST_RETRY`].
fn retry_backoff() -> ExponentialBackoff {
    ExponentialBuilder::new()
        .with_min_delay(FIRST_RETRY)
        .with_max_delay(LAST_RETRY / 2)
        .with_jitter()
        .without_max_times()
        .build()
}
/// Channels per SUBSCRIBE command when subscribing again after a reconnect.
const RESUBSCRIBE_CHUNK: usize = 1000;

/// The sending half of a subscription connection.
#[derive(Clone)]
enum Sink {
    /// A classic pub/sub connection to one server.
    Single(PubSubSink),
    /// A cluster's RESP3 connections; messages arrive as [`Pushed`].
    Cluster(ClusterConnection),
}

impl Sink {
    async fn subscribe(&mut self, channels: &[String], pubsub: PubSub) -> redis::RedisResult<()> {
        match (self, pubsub) {
            (Sink::Single(sink), _) => sink.subscribe(channels).await,
            (Sink::Cluster(conn), PubSub::Classic) => conn.subscribe(channels).await,
            // One command per channel: each may live on another shard.
            (Sink::Cluster(conn), PubSub::Sharded) => {
                for channel in channels {
                    conn.ssubscribe(channel).await?;
                }
                Ok(())
            }
        }
    }

    async fn unsubscribe(&mut self, channel: &str, pubsub: PubSub) -> redis::RedisResult<()> {
        match (self, pubsub) {
            (Sink::Single(sink), _) => sink.unsubscribe(channel).await,
            (Sink::Cluster(conn), PubSub::Classic) => conn.unsubscribe(channel).await,
            (Sink::Cluster(conn), PubSub::Sharded) => conn.sunsubscribe(channel).await,
        }
    }
}

/// A push from a cluster's subscription connections (a message, a confirmation, or the
/// library's note that a node connection dropped).
struct Pushed(PushInfo);

impl Message for Pushed {
    type Result = ();
}

impl NodeSupervisor {
    pub(super) fn new(
        target: SubscriptionTarget,
        pubsub: PubSub,
        label: Arc<str>,
        config: &ClientConfig,
    ) -> Self {
        NodeSupervisor {
            target,
            pubsub,
            label,
            connect_timeout: config.connect_timeout,
            response_timeout: config.response_timeout,
            routes: HashMap::new(),
            sink: None,
            connected_once: false,
            retry: retry_backoff(),
            resync_pending: false,
            first_up: tokio::sync::watch::Sender::new(false),
        }
    }

    fn connect(&mut self, ctx: &mut Context<Self>) {
        let target = self.target.clone();
        let limit = self.connect_timeout;
        let supervisor = ctx.address().downgrade();
        let attempt = async move {
            let connecting = async {
                if let SubscriptionTarget::Cluster(seeds) = &target {
                    let forward = move |push: PushInfo| {
                        if let Some(supervisor) = supervisor.upgrade() {
                            supervisor.do_send(Pushed(push));
                        }
                        Ok::<(), std::convert::Infallible>(())
                    };
                    let client = seeds
                        .builder()
                        .use_protocol(redis::ProtocolVersion::RESP3)
                        .push_sender(forward)
                        .build()?;
                    let conn = client.get_async_connection().await?;
                    return Ok((Sink::Cluster(conn), None, None));
                }
                let client = target.single_client().await?;
                // Marked seen with no await after the client was chosen: a later switch
                // of the followed primary moves the subscription.
                let switches = target.switches();
                let (sink, stream) = client.get_async_pubsub().await?.split();
                Ok::<_, redis::RedisError>((Sink::Single(sink), Some(stream), switches))
            };
            tokio::time::timeout(limit, connecting).await
        };
        ctx.spawn(
            attempt
                .into_actor(self)
                .map(|result, act, ctx| match result {
                    Ok(Ok((sink, stream, switches))) => {
                        if let Some(stream) = stream {
                            ctx.add_stream(stream);
                        }
                        if let Some(switches) = switches {
                            act.follow(switches, ctx);
                        }
                        act.sink = Some(sink);
                        act.retry = retry_backoff();
                        tracing::debug!(node = %act.label, "subscription connection up");
                        let reconnected = std::mem::replace(&mut act.connected_once, true);
                        if reconnected {
                            telemetry::reconnected(telemetry::Connection::Subscription);
                        }
                        act.first_up.send_replace(true);
                        act.resubscribe(reconnected, ctx);
                    }
                    failed => {
                        let reason = match failed {
                            Ok(Err(e)) => format!("{:?}", e.kind()),
                            _ => "connect timeout".to_string(),
                        };
                        let retry_in = act.retry.next().unwrap_or(LAST_RETRY);
                        tracing::warn!(node = %act.label, %reason, ?retry_in,
                            "subscription connection failed");
                        ctx.run_later(retry_in, |act, ctx| act.connect(ctx));
                    }
                }),
        );
    }

    /// Once the followed primary moves to another server, moves the subscription there: the
    /// supervisor restarts, connects to the new primary, subscribes again and wakes every
    /// listener (an unlock published on the new primary meanwhile was not heard here).
    fn follow(&mut self, mut switches: tokio::sync::watch::Receiver<u64>, ctx: &mut Context<Self>) {
        let moved = async move { switches.changed().await.is_ok() };
        ctx.spawn(moved.into_actor(self).map(|moved, act, ctx| {
            if moved {
                tracing::info!(node = %act.label,
                    "the primary moved; moving the subscription with it");
                ctx.stop();
            }
        }));
    }

    /// After (re)connecting: subscribe every routed channel, then, when this follows a
    /// lost connection (`wake`), wake every listener. A failed attempt is tried again with
    /// backoff while the connection is up.
    fn resubscribe(&mut self, wake: bool, ctx: &mut Context<Self>) {
        let (Some(sink), false) = (self.sink.clone(), self.routes.is_empty()) else {
            self.resync_pending = false;
            return;
        };
        let channels: Vec<String> = self.routes.keys().cloned().collect();
        let limit = self.response_timeout;
        let pubsub = self.pubsub;
        let mut sink = sink;
        let subscribing = async move {
            for chunk in channels.chunks(RESUBSCRIBE_CHUNK) {
                tokio::time::timeout(limit, sink.subscribe(chunk, pubsub))
                    .await
                    .map_err(|_| "timeout".to_string())?
                    .map_err(|e| format!("{:?}", e.kind()))?;
            }
            Ok::<(), String>(())
        };
        ctx.spawn(subscribing.into_actor(self).map(move |result, act, ctx| {
            match result {
                Err(reason) if matches!(act.sink, Some(Sink::Cluster(_))) => {
                    // A cluster node may be failing over: try again until it is served.
                    let retry_in = act.retry.next().unwrap_or(LAST_RETRY);
                    tracing::warn!(node = %act.label, %reason, ?retry_in,
                        "re-subscribing failed; retrying");
                    ctx.run_later(retry_in, move |act, ctx| act.resubscribe(wake, ctx));
                    return;
                }
                Err(reason) => tracing::warn!(node = %act.label, %reason, "re-subscribing failed"),
                Ok(()) => act.retry = retry_backoff(),
            }
            act.resync_pending = false;
            if wake {
                tracing::info!(node = %act.label, channels = act.routes.len(),
                    "subscriptions restored; waking every waiter");
                act.wake_all();
            }
        }));
    }

    fn wake_all(&self) {
        for subscriber in self.routes.values().flatten() {
            if let Some(recipient) = subscriber.1.upgrade() {
                recipient.do_send(Wake { all: true });
            }
        }
    }

    /// Passes an unlock message on `channel` to its listeners.
    fn deliver(&self, channel: &[u8], payload: &[u8]) {
        let Some(subscribers) = std::str::from_utf8(channel)
            .ok()
            .and_then(|channel| self.routes.get(channel))
        else {
            return;
        };
        let all = payload == crate::keys::READ_UNLOCK_MESSAGE.as_bytes();
        for (_, subscriber) in subscribers {
            if let Some(recipient) = subscriber.upgrade() {
                recipient.do_send(Wake { all });
            }
        }
    }
}

impl Actor for NodeSupervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.connect(ctx);
    }
}

impl Supervised for NodeSupervisor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        self.sink = None;
    }
}

impl StreamHandler<redis::Msg> for NodeSupervisor {
    fn handle(&mut self, msg: redis::Msg, _: &mut Context<Self>) {
        self.deliver(msg.get_channel_name().as_bytes(), msg.get_payload_bytes());
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        tracing::warn!(node = %self.label, "subscription connection lost; reconnecting");
        ctx.stop();
    }
}

impl Handler<Pushed> for NodeSupervisor {
    type Result = ();

    fn handle(&mut self, Pushed(push): Pushed, ctx: &mut Context<Self>) {
        let bytes = |i: usize| match push.data.get(i) {
            Some(redis::Value::BulkString(b)) => Some(b.as_slice()),
            _ => None,
        };
        match push.kind {
            PushKind::Message | PushKind::SMessage => {
                if let (Some(channel), Some(payload)) = (bytes(0), bytes(1)) {
                    self.deliver(channel, payload);
                }
            }
            // The redis crate reconnects that node and re-subscribes its channels; an
            // unlock published meanwhile is lost, so once the channels are confirmed again
            // every listener retries.
            PushKind::Disconnection if !std::mem::replace(&mut self.resync_pending, true) => {
                tracing::warn!(node = %self.label,
                    "a cluster subscription connection dropped; restoring");
                ctx.run_later(FIRST_RETRY, |act, ctx| act.resubscribe(true, ctx));
            }
            PushKind::SUnsubscribe | PushKind::Unsubscribe => {
                // Not asked for while still routed: the channel's slot moved to another
                // node. Subscribe there and let its listeners retry.
                let channel = bytes(0).and_then(|c| std::str::from_utf8(c).ok());
                if let Some(channel) = channel.filter(|c| self.routes.contains_key(*c)) {
                    tracing::info!(node = %self.label, %channel,
                        "a channel moved with its slot; subscribing again");
                    if !std::mem::replace(&mut self.resync_pending, true) {
                        ctx.run_later(FIRST_RETRY, |act, ctx| act.resubscribe(true, ctx));
                    }
                }
            }
            _ => {}
        }
    }
}

impl Handler<Subscribe> for NodeSupervisor {
    type Result = ResponseActFuture<Self, Result<(), LockError>>;

    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) -> Self::Result {
        let subscribers = self.routes.entry(msg.channel.clone()).or_default();
        subscribers.push((msg.id, msg.subscriber));
        if !self.connected_once {
            // A client that just connected: its subscription connection is on the way.
            // Wait for it (within the connect timeout) and subscribe, so that a refusal
            // reaches the listener instead of only the log of the first subscribing.
            let mut up = self.first_up.subscribe();
            let limit = self.connect_timeout;
            let connected = async move {
                let _ = tokio::time::timeout(limit, up.wait_for(|up| *up)).await;
            };
            return Box::pin(
                connected
                    .into_actor(self)
                    .then(move |(), act, _| act.subscribe_now(msg.channel, msg.id)),
            );
        }
        self.subscribe_now(msg.channel, msg.id)
    }
}

impl NodeSupervisor {
    /// Subscribes `channel` for listener `id` (already routed) and answers whether Redis
    /// confirmed it.
    fn subscribe_now(
        &mut self,
        channel: String,
        id: u64,
    ) -> ResponseActFuture<Self, Result<(), LockError>> {
        let Some(mut sink) = self.sink.clone() else {
            // Disconnected: the reconnect subscribes this channel and wakes its listener.
            return Box::pin(fut::ready(Ok(())));
        };
        let limit = self.response_timeout;
        let label = self.label.clone();
        let pubsub = self.pubsub;
        let command = match (&sink, pubsub) {
            (Sink::Cluster(_), PubSub::Sharded) => "SSUBSCRIBE",
            _ => "SUBSCRIBE",
        };
        Box::pin(
            async move {
                let channel = [channel];
                let result =
                    match tokio::time::timeout(limit, sink.subscribe(&channel, pubsub)).await {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(e)) => Err(match Refusal::of(&e) {
                            // Refused for good: the listener is told, and fails its waiter.
                            Some(refusal) => {
                                let target = format!("channel `{}`", channel[0]);
                                refusal.into_error(&e, "", &label, Some(command), Some(target))
                            }
                            None => LockError::Unavailable {
                                node: label.to_string(),
                                reason: format!("{command} failed: {:?}", e.kind()),
                            },
                        }),
                        Err(_) => Err(LockError::Unavailable {
                            node: label.to_string(),
                            reason: format!("{command} got no answer within {limit:?}"),
                        }),
                    };
                let [channel] = channel;
                (result, channel)
            }
            .into_actor(self)
            .map(move |(result, channel), act, _| {
                if matches!(result, Err(LockError::Denied { .. })) {
                    // Not routed, and not subscribed again at the next reconnect.
                    if let Some(subscribers) = act.routes.get_mut(&channel) {
                        subscribers.retain(|(listener, _)| *listener != id);
                        if subscribers.is_empty() {
                            act.routes.remove(&channel);
                        }
                    }
                }
                result
            }),
        )
    }
}

impl Handler<Unsubscribe> for NodeSupervisor {
    type Result = ();

    fn handle(&mut self, msg: Unsubscribe, ctx: &mut Context<Self>) {
        let Some(subscribers) = self.routes.get_mut(&msg.channel) else {
            return;
        };
        subscribers.retain(|(id, _)| *id != msg.id);
        if !subscribers.is_empty() {
            return;
        }
        self.routes.remove(&msg.channel);
        if let Some(mut sink) = self.sink.clone() {
            let limit = self.response_timeout;
            let pubsub = self.pubsub;
            ctx.spawn(
                async move {
                    let _ =
                        tokio::time::timeout(limit, sink.unsubscribe(&msg.channel, pubsub)).await;
                }
                .into_actor(self),
            );
        }
    }
}
