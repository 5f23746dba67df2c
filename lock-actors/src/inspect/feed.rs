//! Following one lock live: the lock is read again on every message on its channels (an
//! unlock, a permit release) and every [`WATCH_POLL`] (taking a free lock publishes
//! nothing), and each difference from the previous reading is reported.

use super::model::{Change, Holder, LockInfo, Waiter, WatchEvent};
use super::{Inspector, WATCH_POLL};
use crate::error::LockError;
use crate::keys::LockName;
use crate::node::{Node, Subscription, Unsubscribe, Wake};
use crate::semaphore::{Kind, SemaphoreKeys};
use actix::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// Subscriber ids of watches: apart from lock actors' (from 1), semaphore actors' (from
/// 1 << 62) and latch actors' (from 1 << 60), so a channel never has two subscribers with
/// one id.
const WATCH_IDS: u64 = 1 << 61;
static NEXT_WATCH: AtomicU64 = AtomicU64::new(1);

/// Events a watch may have queued before its reader takes them; a slow reader makes the
/// watch wait, never grow.
const BACKLOG: usize = 64;

/// Hands the messages of one channel to the watch's task.
struct Relay {
    channel: String,
    heard: mpsc::UnboundedSender<String>,
}

impl Actor for Relay {
    type Context = Context<Self>;
}

impl Handler<Wake> for Relay {
    type Result = ();

    fn handle(&mut self, _: Wake, ctx: &mut Context<Self>) {
        if self.heard.send(self.channel.clone()).is_err() {
            ctx.stop();
        }
    }
}

/// Starts watching `name` (already checked) on `node`: the task runs in the client's
/// scope and ends when the receiver is dropped or the client shuts down.
pub(super) fn start(
    inspector: Inspector,
    shown_as: String,
    name: LockName,
    node: Arc<Node>,
) -> Result<mpsc::Receiver<Result<WatchEvent, LockError>>, LockError> {
    let (events, receiver) = mpsc::channel(BACKLOG);
    let (heard, hear) = mpsc::unbounded_channel();
    let channels = [
        name.unlock_channel(),
        name.rwlock_channel(),
        SemaphoreKeys::new(&name, Kind::Plain).channel,
        name.latch_channel(),
    ];
    let mut relays = Vec::new();
    for channel in channels {
        let id = WATCH_IDS | NEXT_WATCH.fetch_add(1, Ordering::Relaxed);
        let relay_channel = channel.clone();
        let heard = heard.clone();
        let relay = node.arbiter.start(move |_| Relay {
            channel: relay_channel,
            heard,
        });
        relays.push((channel, id, relay));
    }
    let task = follow(inspector, shown_as, node.clone(), relays, hear, events);
    if node.arbiter.spawn(task) {
        Ok(receiver)
    } else {
        Err(LockError::Shutdown)
    }
}

async fn follow(
    inspector: Inspector,
    name: String,
    node: Arc<Node>,
    relays: Vec<(String, u64, Addr<Relay>)>,
    mut hear: mpsc::UnboundedReceiver<String>,
    events: mpsc::Sender<Result<WatchEvent, LockError>>,
) {
    for (channel, id, relay) in &relays {
        let subscribed = Subscription::request(
            &node.supervisor,
            channel.clone(),
            *id,
            relay.clone().recipient::<Wake>().downgrade(),
        )
        .await;
        if let Err(refused) = subscribed {
            // Without the channel, the re-reads still see every change, only later.
            tracing::debug!(%channel, error = %refused, "watch goes without this channel");
        }
    }
    let mut previous: Option<Option<LockInfo>> = None;
    let mut last_error: Option<LockError> = None;
    let mut messages = Vec::new();
    loop {
        match inspector.show(&name).await {
            Ok(now) => {
                last_error = None;
                let mut changes = std::mem::take(&mut messages);
                changes.extend(diff(
                    previous.as_ref().and_then(Option::as_ref),
                    now.as_ref(),
                ));
                if previous.is_none() || !changes.is_empty() {
                    let event = WatchEvent {
                        at_ms: now_ms(),
                        changes,
                        lock: now.clone(),
                    };
                    if events.send(Ok(event)).await.is_err() {
                        break;
                    }
                }
                previous = Some(now);
            }
            Err(error) => {
                if last_error.as_ref() != Some(&error) {
                    last_error = Some(error.clone());
                    if events.send(Err(error)).await.is_err() {
                        break;
                    }
                }
            }
        }
        tokio::select! {
            channel = hear.recv() => {
                let Some(channel) = channel else { break };
                messages.push(Change::Message { channel });
                // A release often comes with a grant right after: take what else came.
                while let Ok(channel) = hear.try_recv() {
                    messages.push(Change::Message { channel });
                }
            }
            _ = tokio::time::sleep(WATCH_POLL) => {}
            _ = events.closed() => break,
        }
    }
    for (channel, id, relay) in relays {
        node.supervisor.do_send(Unsubscribe { channel, id });
        drop(relay);
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What changed from `before` to `after`: holders by field (a changed hold count is a new
/// grant), waiters by field. A TTL that moved (a renewal) is no change.
pub(super) fn diff(before: Option<&LockInfo>, after: Option<&LockInfo>) -> Vec<Change> {
    let none_h: &[Holder] = &[];
    let none_w: &[Waiter] = &[];
    let (old_h, old_w) = before.map_or((none_h, none_w), |l| (&l.holders[..], &l.waiters[..]));
    let (new_h, new_w) = after.map_or((none_h, none_w), |l| (&l.holders[..], &l.waiters[..]));
    let mut changes = Vec::new();
    for gone in old_h
        .iter()
        .filter(|h| !new_h.iter().any(|n| n.field == h.field))
    {
        changes.push(Change::Released {
            holder: gone.clone(),
        });
    }
    for left in old_w
        .iter()
        .filter(|w| !new_w.iter().any(|n| n.field == w.field))
    {
        changes.push(Change::Dequeued {
            waiter: left.clone(),
        });
    }
    for held in new_h {
        let same = old_h
            .iter()
            .any(|o| o.field == held.field && o.count == held.count);
        if !same {
            changes.push(Change::Granted {
                holder: held.clone(),
            });
        }
    }
    for queued in new_w
        .iter()
        .filter(|w| !old_w.iter().any(|o| o.field == w.field))
    {
        changes.push(Change::Queued {
            waiter: queued.clone(),
        });
    }
    let count = after.and_then(|l| l.count);
    if let Some(count) = count.filter(|_| before.and_then(|l| l.count) != count) {
        changes.push(Change::Counted { count });
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::InspectedKind;

    fn lock(holders: &[(&str, u64)], waiters: &[&str]) -> LockInfo {
        LockInfo {
            name: "a".into(),
            key: "a".into(),
            kind: InspectedKind::Fair,
            mode: None,
            holders: holders
                .iter()
                .map(|(f, c)| Holder::from_field(f, *c, None))
                .collect(),
            ttl_ms: Some(100),
            waiters: waiters
                .iter()
                .enumerate()
                .map(|(i, f)| Waiter {
                    position: i + 1,
                    field: f.to_string(),
                    client_id: None,
                    owner: None,
                    deadline_ms: None,
                })
                .collect(),
            permits: None,
            fencing_token: None,
            count: None,
        }
    }

    fn labels(changes: &[Change]) -> Vec<String> {
        changes
            .iter()
            .map(|c| match c {
                Change::Granted { holder } => format!("+{}x{}", holder.field, holder.count),
                Change::Released { holder } => format!("-{}", holder.field),
                Change::Queued { waiter } => format!("q{}", waiter.field),
                Change::Dequeued { waiter } => format!("d{}", waiter.field),
                Change::Message { channel } => format!("m{channel}"),
                Change::Counted { count } => format!("#{count}"),
            })
            .collect()
    }

    #[test]
    fn a_hand_off_is_a_release_a_dequeue_and_a_grant() {
        let before = lock(&[("c:1", 1)], &["c:2", "c:3"]);
        let after = lock(&[("c:2", 1)], &["c:3"]);
        assert_eq!(
            labels(&diff(Some(&before), Some(&after))),
            ["-c:1", "dc:2", "+c:2x1"]
        );
    }

    #[test]
    fn a_latch_counted_down_is_a_count_change() {
        let mut three = lock(&[], &[]);
        three.count = Some(3);
        let mut two = three.clone();
        two.count = Some(2);
        assert!(diff(Some(&three), Some(&three)).is_empty());
        assert_eq!(labels(&diff(Some(&three), Some(&two))), ["#2"]);
        assert_eq!(labels(&diff(None, Some(&two))), ["#2"]);
        assert!(diff(Some(&two), None).is_empty(), "opened: no lock left");
    }

    #[test]
    fn re_entry_is_a_grant_and_a_renewal_is_nothing() {
        let before = lock(&[("c:1", 1)], &[]);
        let mut renewed = before.clone();
        renewed.ttl_ms = Some(90);
        assert!(diff(Some(&before), Some(&renewed)).is_empty());
        let again = lock(&[("c:1", 2)], &[]);
        assert_eq!(labels(&diff(Some(&before), Some(&again))), ["+c:1x2"]);
        assert_eq!(labels(&diff(Some(&again), None)), ["-c:1"]);
        assert_eq!(labels(&diff(None, Some(&again))), ["+c:1x2"]);
    }
}
