//! One count-down latch as the model's Redis holds it, and the latch scripts as pure
//! functions over it: the Rust mirrors of `latch/*.lua` (with `count_of` from
//! `common.lua`), as they are ([`Scripts::Current`]) or with one broken on purpose
//! ([`Scripts::Broken`], the negative control). `super::mirror` runs each Lua script and
//! its mirror on a real Redis over generated inputs, the messages they publish included,
//! so the model cannot drift from the scripts.

/// What the latch's key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Value {
    /// No key: the latch is open.
    Missing,
    /// A string of digits: the count.
    Count(i64),
    /// A string that is no number (someone else's data).
    Text,
    /// A key of another type (someone else's data).
    Hash,
}

/// A message a script publishes on the latch's channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Message {
    /// `1`: a count was set.
    NewCount,
    /// `0`: the count reached zero, or the latch was deleted.
    Zero,
}

impl Message {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Message::NewCount => "1",
            Message::Zero => "0",
        }
    }
}

/// A script refused the key: it holds something other than a count (`WRONGTYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct WrongType;

/// What one script call answers, and what it published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Outcome {
    pub(crate) reply: Result<i64, WrongType>,
    pub(crate) published: Option<Message>,
}

/// Which scripts the model's Redis runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scripts {
    /// The scripts of this crate as they are.
    Current,
    /// The current scripts with one broken on purpose.
    Broken(Defect),
}

/// A deliberately broken script, which the checker must catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Defect {
    /// `count_down.lua` taking the count to zero (and the key away) without publishing.
    SilentCountDown,
}

/// The latch's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Store {
    pub(crate) value: Value,
}

fn quiet(reply: Result<i64, WrongType>) -> Outcome {
    Outcome {
        reply,
        published: None,
    }
}

impl Store {
    /// A latch whose count is `count` (open for 0).
    pub(crate) fn with_count(count: i64) -> Self {
        let value = if count == 0 {
            Value::Missing
        } else {
            Value::Count(count)
        };
        Store { value }
    }

    /// `count_of`: the stored count (`None` without the key), or WRONGTYPE.
    fn count_of(&self) -> Result<Option<i64>, WrongType> {
        match self.value {
            Value::Missing => Ok(None),
            Value::Count(count) => Ok(Some(count)),
            Value::Text | Value::Hash => Err(WrongType),
        }
    }

    /// Whether a waiter reading the count now may go: no key, or a count not above zero.
    pub(crate) fn open(&self) -> bool {
        matches!(self.value, Value::Missing) || matches!(self.value, Value::Count(n) if n <= 0)
    }

    /// `try_set.lua`: sets `count` unless a count is set; 1 and `1` published if it did.
    pub(crate) fn try_set(&mut self, count: i64) -> Outcome {
        match self.count_of() {
            Err(wrong) => quiet(Err(wrong)),
            Ok(Some(_)) => quiet(Ok(0)),
            Ok(None) => {
                self.value = Value::Count(count);
                Outcome {
                    reply: Ok(1),
                    published: Some(Message::NewCount),
                }
            }
        }
    }

    /// `count_down.lua`: one down; at zero the key goes and `0` is published. Answers the
    /// count after, 0 at or below zero.
    pub(crate) fn count_down(&mut self, scripts: Scripts) -> Outcome {
        let before = match self.count_of() {
            Err(wrong) => return quiet(Err(wrong)),
            Ok(count) => count.unwrap_or(0),
        };
        let after = before - 1;
        self.value = if after <= 0 {
            Value::Missing
        } else {
            Value::Count(after)
        };
        let silent = scripts == Scripts::Broken(Defect::SilentCountDown);
        Outcome {
            reply: Ok(after.max(0)),
            published: (after == 0 && !silent).then_some(Message::Zero),
        }
    }

    /// `delete.lua`: 1 and `0` published if a count was set.
    pub(crate) fn delete(&mut self) -> Outcome {
        match self.count_of() {
            Err(wrong) => quiet(Err(wrong)),
            Ok(None) => quiet(Ok(0)),
            Ok(Some(_)) => {
                self.value = Value::Missing;
                Outcome {
                    reply: Ok(1),
                    published: Some(Message::Zero),
                }
            }
        }
    }

    /// `count.lua`: the stored count, 0 without the key.
    pub(crate) fn count(&self) -> Result<i64, WrongType> {
        self.count_of().map(|count| count.unwrap_or(0))
    }
}
