//! `ScriptCall`: one call of one of our Lua scripts, sent as `EVALSHA`.
//!
//! It replaces the redis crate's `ScriptInvocation` on every path of ours, because it is
//! cheaper where it matters, the uncontended acquire and unlock: its keys and arguments
//! are packed into one flat buffer (a `Cmd`, sized up front) instead of one vector per
//! value, and
//! [`Commands::eval`](crate::node::Commands::eval) sends it on a single server without the
//! boxed future that the `ConnectionLike` trait returns. A script missing from the server's
//! cache (`NOSCRIPT`, after a restart or `SCRIPT FLUSH`) is loaded and the call sent again,
//! as `ScriptInvocation` does.

use redis::{Arg, Cmd, RedisWrite, Script, ToRedisArgs};
use std::borrow::Cow;
use std::fmt::Display;

/// Keys and arguments for one `EVALSHA` of `script`. Keys and arguments may be added in
/// any order: keys go first on the wire.
pub(crate) struct ScriptCall {
    script: &'static Script,
    /// Keys and arguments in the order they were added, in one buffer sized up front for a
    /// lock's call (the uncontended acquire and unlock then allocate it once, not once per
    /// value that outgrows it).
    parts: Cmd,
    /// Which of the first 64 parts are keys.
    key_mask: u64,
    /// Positions of keys added as the 65th part or later (none in any call of ours).
    late_keys: Vec<usize>,
    /// `parts` is the `EVALSHA` command itself (hash, key count, keys, then arguments):
    /// made by [`keyed`](ScriptCall::keyed), whose keys are known up front, it is sent as it
    /// is, not copied into a second command on every call. Its key bits count from the
    /// first key, after the three words before it.
    ready: bool,
}

/// The words of an `EVALSHA` before its first key: the command, the hash, the key count.
const HEAD: usize = 3;

/// Parts and bytes a lock's script call holds at most, in the common case: up to three
/// keys (the name, its channel, a second key) and three arguments (lease, field, a count).
const PARTS: usize = 8;
const PART_BYTES: usize = 256;

impl ScriptCall {
    /// A call of `script` with no keys or arguments yet.
    pub(crate) fn new(script: &'static Script) -> Self {
        ScriptCall {
            script,
            parts: Cmd::with_capacity(PARTS, PART_BYTES),
            key_mask: 0,
            late_keys: Vec::new(),
            ready: false,
        }
    }

    /// A call of `script` with exactly `keys` (more may still be added, at the cost of a
    /// copy): built as the `EVALSHA` command it sends. The hot paths' calls are made so;
    /// each key is written straight into the command (a derived key needs no `String`).
    pub(crate) fn keyed<const N: usize>(script: &'static Script, keys: [&dyn Display; N]) -> Self {
        const { assert!(HEAD + N <= 64, "a keyed call's keys fit the key mask") };
        let mut parts = Cmd::with_capacity(HEAD + PARTS, 64 + PART_BYTES);
        parts.arg("EVALSHA").arg(script.get_hash()).arg(N);
        for key in keys {
            parts.write_arg_fmt(key);
        }
        let key_mask = (HEAD..HEAD + N).fold(0, |mask, at| mask | 1u64 << at);
        ScriptCall {
            script,
            parts,
            key_mask,
            late_keys: Vec::new(),
            ready: true,
        }
    }

    /// Turns a ready-made command back into parts (a key added after the fact).
    fn unready(&mut self) {
        let mut parts = Cmd::with_capacity(PARTS, PART_BYTES);
        let mut key_mask = 0;
        for (at, value) in self.parts.args_iter().enumerate().skip(HEAD) {
            if let Arg::Simple(bytes) = value {
                parts.arg(bytes);
            }
            if self.is_key(at) {
                key_mask |= mask_bit(at - HEAD).unwrap_or(0);
            }
        }
        self.parts = parts;
        self.key_mask = key_mask;
        self.ready = false;
    }

    /// A call of `script` whose first key is `key`.
    pub(crate) fn with_key<T: ToRedisArgs>(script: &'static Script, key: T) -> Self {
        let mut call = Self::new(script);
        call.key(key);
        call
    }

    /// Adds a key (`KEYS[n]`).
    pub(crate) fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        if self.ready {
            self.unready();
        }
        let before = self.parts.args_iter().len();
        self.parts.arg(key);
        for at in before..self.parts.args_iter().len() {
            match mask_bit(at) {
                Some(bit) => self.key_mask |= bit,
                None => self.late_keys.push(at),
            }
        }
        self
    }

    /// Adds an argument (`ARGV[n]`).
    pub(crate) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.parts.arg(arg);
        self
    }

    fn is_key(&self, at: usize) -> bool {
        match mask_bit(at) {
            Some(bit) => self.key_mask & bit != 0,
            None => self.late_keys.contains(&at),
        }
    }

    /// The parts that are keys (`true`) or arguments (`false`), in the order added.
    fn values(&self, keys: bool) -> impl Iterator<Item = &[u8]> {
        self.parts
            .args_iter()
            .enumerate()
            .filter(move |(at, _)| self.is_key(*at) == keys)
            // `key` and `arg` write only simple values (`Cmd::arg` never makes a cursor).
            .filter_map(|(_, value)| match value {
                Arg::Simple(bytes) => Some(bytes),
                _ => None,
            })
    }

    /// The call's keys, for naming them in an error (not on any hot path).
    pub(crate) fn key_names(&self) -> Vec<String> {
        self.values(true)
            .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
            .collect()
    }

    /// The script this call runs (loaded again on `NOSCRIPT`).
    pub(crate) fn script(&self) -> &'static Script {
        self.script
    }

    /// The `EVALSHA` command: hash, key count, keys, arguments.
    pub(crate) fn evalsha(&self) -> Cow<'_, Cmd> {
        if self.ready {
            return Cow::Borrowed(&self.parts);
        }
        let count = 3 + self.parts.args_iter().len();
        let data: usize = self
            .values(true)
            .chain(self.values(false))
            .map(<[u8]>::len)
            .sum();
        let mut cmd = Cmd::with_capacity(count, 64 + data);
        cmd.arg("EVALSHA")
            .arg(self.script.get_hash())
            .arg(self.key_mask.count_ones() as usize + self.late_keys.len());
        for bytes in self.values(true).chain(self.values(false)) {
            cmd.arg(bytes);
        }
        Cow::Owned(cmd)
    }
}

/// The bit of part `at` in a key mask; `None` past the 64th part.
fn mask_bit(at: usize) -> Option<u64> {
    u32::try_from(at).ok().and_then(|at| 1u64.checked_shl(at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::LazyLock;

    static ECHO: LazyLock<Script> = LazyLock::new(|| Script::new("return {KEYS, ARGV}"));

    fn words(cmd: &Cmd) -> Vec<Vec<u8>> {
        cmd.args_iter()
            .map(|value| match value {
                Arg::Simple(bytes) => bytes.to_vec(),
                _ => b"<cursor>".to_vec(),
            })
            .collect()
    }

    #[test]
    fn keys_go_before_arguments_whatever_the_order_they_were_added_in() {
        let mut call = ScriptCall::with_key(&ECHO, "k1");
        call.arg(30_000u64).key("k2").arg("owner").arg(&b"raw"[..]);
        let expected: Vec<Vec<u8>> = vec![
            b"EVALSHA".to_vec(),
            ECHO.get_hash().as_bytes().to_vec(),
            b"2".to_vec(),
            b"k1".to_vec(),
            b"k2".to_vec(),
            b"30000".to_vec(),
            b"owner".to_vec(),
            b"raw".to_vec(),
        ];
        assert_eq!(words(&call.evalsha()), expected);
    }

    #[test]
    fn keys_past_the_64th_part_still_go_first() {
        let mut call = ScriptCall::new(&ECHO);
        for n in 0..70u32 {
            call.arg(n);
        }
        call.key("late").arg("last");
        let words = words(&call.evalsha());
        assert_eq!(words[2], b"1".to_vec());
        assert_eq!(words[3], b"late".to_vec());
        assert_eq!(words[4], b"0".to_vec());
        assert_eq!(words.last(), Some(&b"last".to_vec()));
        assert_eq!(words.len(), 3 + 72);
        assert_eq!(call.key_names(), vec!["late".to_string()]);
    }

    #[test]
    fn a_keyed_call_is_the_command_it_sends_and_takes_a_late_key_all_the_same() {
        let mut call = ScriptCall::keyed(&ECHO, [&"k1", &"k2"]);
        call.arg(30_000u64).arg("owner");
        assert!(matches!(call.evalsha(), Cow::Borrowed(_)));
        let sent: Vec<Vec<u8>> = [
            &b"EVALSHA"[..],
            ECHO.get_hash().as_bytes(),
            b"2",
            b"k1",
            b"k2",
            b"30000",
            b"owner",
        ]
        .iter()
        .map(|w| w.to_vec())
        .collect();
        assert_eq!(words(&call.evalsha()), sent);
        assert_eq!(call.key_names(), vec!["k1".to_string(), "k2".to_string()]);
        call.key("k3").arg("last");
        let words = words(&call.evalsha());
        assert_eq!(words[2], b"3".to_vec());
        assert_eq!(
            &words[3..6],
            &[b"k1".to_vec(), b"k2".to_vec(), b"k3".to_vec()]
        );
        assert_eq!(
            &words[6..],
            &[b"30000".to_vec(), b"owner".to_vec(), b"last".to_vec()]
        );
        assert_eq!(call.key_names(), vec!["k1", "k2", "k3"]);
    }

    #[test]
    fn a_call_without_keys_says_zero_keys() {
        let mut call = ScriptCall::new(&ECHO);
        call.arg("a");
        let words = words(&call.evalsha());
        assert_eq!(words[2], b"0".to_vec());
        assert_eq!(words[3], b"a".to_vec());
        assert_eq!(words.len(), 4);
    }
}
