//! ACL refusals: which command, key or channel a Redis user was refused, read from the
//! error Redis answered with. Redis 7.0 names a refused command, but not a refused key or
//! channel; the senders fill in what they know (see `node` and `node::supervisor`).

use crate::error::{LockError, ServerReply};

/// What an ACL refusal was about, as far as the server's error says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The command itself (`NOPERM this user has no permissions to run the 'evalsha'
    /// command`): the lowercase name Redis gave.
    Command(String),
    /// One of the keys the request named.
    Keys,
    /// One of the channels the request named.
    Channels,
    /// A command that a script called (Redis does not say which).
    ScriptCommand,
    /// A script's publish: the command, and the channel when our script named it (its
    /// `publish` helper does; Redis's own text does not).
    Publish {
        command: String,
        channel: Option<String>,
    },
}

/// Separates the fields of the error our scripts raise for a refused publish
/// (`NOPERM <command>\t<channel>\t<server's text>`): a tab is in no lock name.
const FIELD: char = '\t';

impl Refusal {
    /// The refusal `err` reports, if it is one: a `NOPERM`, or the `ERR` a script gets
    /// for a command, key or channel its user may not use.
    pub(crate) fn of(err: &redis::RedisError) -> Option<Refusal> {
        let detail = err.detail().unwrap_or_default();
        let lower = detail.to_ascii_lowercase();
        match err.code() {
            Some("NOPERM") => {
                let mut fields = detail.splitn(3, FIELD);
                if let (Some(command), Some(channel), Some(_)) =
                    (fields.next(), fields.next(), fields.next())
                {
                    return Some(Refusal::Publish {
                        command: command.to_string(),
                        channel: Some(channel.to_string()),
                    });
                }
                if let Some(command) = quoted_command(detail) {
                    Some(Refusal::Command(command))
                } else if lower.contains("channel") {
                    Some(Refusal::Channels)
                } else {
                    Some(Refusal::Keys)
                }
            }
            _ if lower.contains("user executing the script") => {
                if lower.contains("publish to the channel") {
                    Some(Refusal::Publish {
                        command: "publish".into(),
                        channel: None,
                    })
                } else if lower.contains("keys") {
                    Some(Refusal::Keys)
                } else {
                    Some(Refusal::ScriptCommand)
                }
            }
            _ => None,
        }
    }

    /// The [`LockError::Denied`] for this refusal of a request about lock `name` (empty for
    /// none) at `node`: `sent` is the command the sender sent, `target` what the sender
    /// found was refused (a key or channel it pinpointed), if it knows.
    pub(crate) fn into_error(
        self,
        err: &redis::RedisError,
        name: &str,
        node: &str,
        sent: Option<&str>,
        target: Option<String>,
    ) -> LockError {
        let sent = sent.unwrap_or("a command").to_string();
        let (command, fallback) = match self {
            Refusal::Command(command) => (command.to_ascii_uppercase(), String::new()),
            Refusal::Keys => (sent, "one of its keys".to_string()),
            Refusal::Channels => (sent, "one of its channels".to_string()),
            Refusal::ScriptCommand => (format!("a command of the script ({sent})"), String::new()),
            Refusal::Publish { command, channel } => (
                command.to_ascii_uppercase(),
                channel.map_or_else(|| "its channel".to_string(), |c| format!("channel `{c}`")),
            ),
        };
        LockError::Denied {
            node: node.into(),
            name: name.into(),
            command,
            target: target.unwrap_or(fallback),
            source: ServerReply::new(err),
        }
    }
}

/// Maps a Redis error for a request about lock `name` at `node`: an ACL refusal becomes
/// [`LockError::Denied`] (with what the error says of it), anything else
/// [`LockError::from_redis`].
pub(crate) fn from_redis(err: &redis::RedisError, name: &str, node: &str) -> LockError {
    match Refusal::of(err) {
        Some(refusal) => refusal.into_error(err, name, node, None, None),
        None => LockError::from_redis(err, name, node),
    }
}

/// The command named in `... run the 'evalsha' command`, if the text names one.
fn quoted_command(detail: &str) -> Option<String> {
    let rest = &detail[detail.find("run the '")? + "run the '".len()..];
    Some(rest[..rest.find('\'')?].to_string())
}

/// How refused keys are named in an error: `keys` were refused, each of them when
/// `each` (probed one by one), else at least one of them.
pub(crate) fn keys_target(keys: &[String], each: bool) -> String {
    let named: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    match (keys.len(), each) {
        (1, _) => format!("key {}", named.join("")),
        (_, true) => format!("keys {}", named.join(", ")),
        (_, false) => format!("one of the keys {}", named.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(text: &str) -> redis::RedisError {
        let value = redis::parse_redis_value(format!("-{text}\r\n").as_bytes()).unwrap();
        match value.extract_error() {
            Err(err) => err,
            Ok(_) => unreachable!(),
        }
    }

    #[test]
    fn reads_what_redis_7_0_says() {
        let cases = [
            (
                "NOPERM this user has no permissions to run the 'evalsha' command",
                Refusal::Command("evalsha".into()),
            ),
            (
                "NOPERM this user has no permissions to access one of the keys used as arguments",
                Refusal::Keys,
            ),
            (
                "NOPERM this user has no permissions to access one of the channels used as arguments",
                Refusal::Channels,
            ),
            (
                "ERR The user executing the script can't run this command or subcommand script: ab, on @user_script:1.",
                Refusal::ScriptCommand,
            ),
            (
                "ERR The user executing the script can't publish to the channel mentioned in the command script: ab",
                Refusal::Publish { command: "publish".into(), channel: None },
            ),
            (
                "NOPERM spublish\tredisson_lock__channel:{a}\tERR The user executing the script can't run this command",
                Refusal::Publish {
                    command: "spublish".into(),
                    channel: Some("redisson_lock__channel:{a}".into()),
                },
            ),
        ];
        for (text, refusal) in cases {
            assert_eq!(Refusal::of(&server_error(text)), Some(refusal), "{text}");
        }
        assert_eq!(Refusal::of(&server_error("OOM command not allowed")), None);
    }

    #[test]
    fn a_publish_refusal_names_command_and_channel() {
        let err = server_error("NOPERM publish\tredisson_lock__channel:{a}\tERR can't run it");
        let error = Refusal::of(&err)
            .unwrap()
            .into_error(&err, "a", "n", Some("EVALSHA"), None);
        let LockError::Denied {
            command,
            target,
            source,
            ..
        } = &error
        else {
            panic!("{error:?}");
        };
        assert_eq!(command, "PUBLISH");
        assert_eq!(target, "channel `redisson_lock__channel:{a}`");
        assert_eq!(source.to_string(), "NOPERM ERR can't run it");
        assert!(
            error.to_string().contains("refused PUBLISH on channel"),
            "{error}"
        );
    }
}
