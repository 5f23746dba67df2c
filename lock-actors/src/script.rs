//! `ScriptCall`: one call of one of our Lua scripts, sent as `EVALSHA`.
//!
//! It replaces the redis crate's `ScriptInvocation` on every path of ours, because it is
//! cheaper where it matters, the uncontended acquire and unlock: its keys and arguments
//! are packed into two flat buffers (`Cmd`s) instead of one vector per value, and
//! [`Commands::eval`](crate::node::Commands::eval) sends it on a single server without the
//! boxed future that the `ConnectionLike` trait returns. A script missing from the server's
//! cache (`NOSCRIPT`, after a restart or `SCRIPT FLUSH`) is loaded and the call sent again,
//! as `ScriptInvocation` does.

use redis::{Arg, Cmd, Script, ToRedisArgs};

/// Keys and arguments for one `EVALSHA` of `script`. Keys and arguments may be added in
/// any order: keys go first on the wire.
pub(crate) struct ScriptCall {
    script: &'static Script,
    keys: Cmd,
    args: Cmd,
}

impl ScriptCall {
    /// A call of `script` with no keys or arguments yet.
    pub(crate) fn new(script: &'static Script) -> Self {
        ScriptCall {
            script,
            keys: Cmd::new(),
            args: Cmd::new(),
        }
    }

    /// A call of `script` whose first key is `key`.
    pub(crate) fn with_key<T: ToRedisArgs>(script: &'static Script, key: T) -> Self {
        let mut call = Self::new(script);
        call.key(key);
        call
    }

    /// Adds a key (`KEYS[n]`).
    pub(crate) fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        self.keys.arg(key);
        self
    }

    /// Adds an argument (`ARGV[n]`).
    pub(crate) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.args.arg(arg);
        self
    }

    /// The call's keys, for naming them in an error (not on any hot path).
    pub(crate) fn key_names(&self) -> Vec<String> {
        self.keys
            .args_iter()
            .filter_map(|value| match value {
                Arg::Simple(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
                _ => None,
            })
            .collect()
    }

    /// The script this call runs (loaded again on `NOSCRIPT`).
    pub(crate) fn script(&self) -> &'static Script {
        self.script
    }

    /// The `EVALSHA` command: hash, key count, keys, arguments.
    pub(crate) fn evalsha(&self) -> Cmd {
        let keys = self.keys.args_iter();
        let args = self.args.args_iter();
        let count = 3 + keys.len() + args.len();
        let mut cmd = Cmd::with_capacity(count, 64 + data_len(&self.keys) + data_len(&self.args));
        cmd.arg("EVALSHA")
            .arg(self.script.get_hash())
            .arg(keys.len());
        // `key` and `arg` write only simple values (`Cmd::arg` never makes a cursor).
        for value in keys.chain(args) {
            if let Arg::Simple(bytes) = value {
                cmd.arg(bytes);
            }
        }
        cmd
    }
}

/// How many bytes the values of `part` hold.
fn data_len(part: &Cmd) -> usize {
    part.args_iter()
        .map(|value| match value {
            Arg::Simple(bytes) => bytes.len(),
            _ => 0,
        })
        .sum()
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
    fn a_call_without_keys_says_zero_keys() {
        let mut call = ScriptCall::new(&ECHO);
        call.arg("a");
        let words = words(&call.evalsha());
        assert_eq!(words[2], b"0".to_vec());
        assert_eq!(words[3], b"a".to_vec());
        assert_eq!(words.len(), 4);
    }
}
