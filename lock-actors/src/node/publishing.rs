//! Scripts that publish on a lock's channel, in the node's pub/sub flavour: every kind's
//! unlock and the semaphore's and latch's releases are written once and run with `PUBLISH`
//! or `SPUBLISH` as the node's subscriptions are classic or sharded.

use super::connection::PubSub;
use redis::Script;

/// A script that publishes, in both pub/sub flavours: its first line sets
/// `publish_command` to `publish` (classic) or `spublish` (sharded, Redis 7+), then comes
/// the `publish` function (`publish.lua`) the script's parts publish with.
pub(crate) struct PublishingScript {
    classic: Script,
    sharded: Script,
}

impl PublishingScript {
    /// The script made of `parts`, joined in order, once per flavour.
    pub(crate) fn new(parts: &[&str]) -> Self {
        let body = parts.join("\n");
        let publish = include_str!("publish.lua");
        PublishingScript {
            classic: Script::new(&format!(
                "local publish_command = 'publish'\n{publish}\n{body}"
            )),
            sharded: Script::new(&format!(
                "local publish_command = 'spublish'\n{publish}\n{body}"
            )),
        }
    }

    /// The script made of `parts` after `silent`, a `publish` that tells nobody: the same
    /// script in both flavours.
    pub(crate) fn silent(silent: &str, parts: &[&str]) -> Self {
        let body = format!("{silent}\n{}", parts.join("\n"));
        PublishingScript {
            classic: Script::new(&body),
            sharded: Script::new(&body),
        }
    }

    /// The flavour for a node that uses `pubsub`.
    pub(crate) fn get(&self, pubsub: PubSub) -> &Script {
        match pubsub {
            PubSub::Classic => &self.classic,
            PubSub::Sharded => &self.sharded,
        }
    }

    /// Both flavours.
    pub(crate) fn both(&self) -> [&Script; 2] {
        [&self.classic, &self.sharded]
    }
}
