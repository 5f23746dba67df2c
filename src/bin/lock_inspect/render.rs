//! How `lock-inspect` shows the inspector's reports as text: a table for `list`, a detail
//! view for `show`, one line per change for `watch`, and what `force-unlock` removed.
//! (`--json` prints the reports as they serialize instead.)

use actix_distributed_lock::inspect::{Change, ForceUnlocked, Holder, LockInfo, WatchEvent};
use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

/// `text` with control characters escaped: names come from the server, and a name holding
/// terminal escape sequences must not drive the operator's terminal.
pub fn clean(text: &str) -> Cow<'_, str> {
    if text.chars().any(char::is_control) {
        Cow::Owned(text.chars().flat_map(char::escape_default).collect())
    } else {
        Cow::Borrowed(text)
    }
}

/// A remaining time in milliseconds, short: `850ms`, `29.9s`, `4m05s`, `2h03m`; `-` for none.
pub fn ttl(ms: Option<u64>) -> String {
    match ms {
        None => "-".to_string(),
        Some(ms) if ms < 1000 => format!("{ms}ms"),
        Some(ms) if ms < 60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        Some(ms) if ms < 3_600_000 => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        Some(ms) => format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// A signed deadline in milliseconds (`-1.2s` when past).
fn deadline(ms: Option<i64>) -> String {
    match ms {
        None => "-".to_string(),
        Some(ms) if ms < 0 => format!("-{} (past)", ttl(Some(ms.unsigned_abs()))),
        Some(ms) => ttl(Some(ms as u64)),
    }
}

/// One holder, short: `<field> x2`, `<field> (write)`, `<permit id> 12.0s`.
fn holder(h: &Holder) -> String {
    let mut text = clean(&h.field).into_owned();
    if h.count != 1 {
        let _ = write!(text, " x{}", h.count);
    }
    if let Some(ms) = h.ttl_ms {
        let _ = write!(text, " {}", ttl(Some(ms)));
    }
    text
}

/// Every holder of `lock`, short, or `none` when it has none.
fn holders(lock: &LockInfo, none: &str) -> String {
    if lock.holders.is_empty() {
        return none.to_string();
    }
    let all: Vec<String> = lock.holders.iter().map(holder).collect();
    all.join(", ")
}

/// The kind-specific facts of a lock: `mode=read permits=3 token=7`.
fn detail(lock: &LockInfo) -> String {
    let mut parts = Vec::new();
    if let Some(mode) = &lock.mode {
        parts.push(format!("mode={}", clean(mode)));
    }
    if let Some(permits) = lock.permits {
        parts.push(format!("permits={permits}"));
    }
    if let Some(count) = lock.count {
        parts.push(format!("count={count}"));
    }
    if let Some(token) = lock.fencing_token {
        parts.push(format!("token={token}"));
    }
    parts.join(" ")
}

/// The `list` table: one row per lock, columns padded to their widest cell, and a count.
pub fn table(locks: &[LockInfo]) -> String {
    if locks.is_empty() {
        return "no locks found\n".to_string();
    }
    let header = ["NAME", "KIND", "TTL", "WAITERS", "HOLDERS", "DETAIL"];
    let rows: Vec<[String; 6]> = locks
        .iter()
        .map(|lock| {
            let holders = holders(lock, "-");
            [
                clean(&lock.name).into_owned(),
                lock.kind.to_string(),
                ttl(lock.ttl_ms),
                lock.waiters.len().to_string(),
                holders,
                detail(lock),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let mut text = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                let _ = write!(text, "{cell:<width$}  ");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&header);
    for row in &rows {
        line(&row.each_ref().map(String::as_str));
    }
    let noun = if locks.len() == 1 { "lock" } else { "locks" };
    let _ = writeln!(out, "{} {noun}", locks.len());
    out
}

/// The `show` view of one lock.
pub fn detail_view(lock: &LockInfo) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "name:     {}", clean(&lock.name));
    if lock.key != lock.name {
        let _ = writeln!(out, "key:      {}", clean(&lock.key));
    }
    let _ = writeln!(out, "kind:     {}", lock.kind);
    if let Some(mode) = &lock.mode {
        let _ = writeln!(out, "mode:     {}", clean(mode));
    }
    let _ = writeln!(out, "ttl:      {}", ttl(lock.ttl_ms));
    if let Some(permits) = lock.permits {
        let _ = writeln!(out, "permits:  {permits} available");
    }
    if let Some(count) = lock.count {
        let _ = writeln!(out, "count:    {count} to go (count-down latch)");
    }
    if let Some(token) = lock.fencing_token {
        let _ = writeln!(out, "token:    {token} (last issued fencing token)");
    }
    let _ = writeln!(out, "holders:  {}", lock.holders.len());
    for h in &lock.holders {
        let mut facts = vec![format!("count {}", h.count)];
        if h.write {
            facts.push("write".to_string());
        }
        if let Some(ms) = h.ttl_ms {
            facts.push(format!("ttl {}", ttl(Some(ms))));
        }
        let _ = writeln!(out, "  {}  {}", clean(&h.field), facts.join(", "));
    }
    if !lock.waiters.is_empty() || lock.kind == actix_distributed_lock::inspect::InspectedKind::Fair
    {
        let _ = writeln!(out, "waiters:  {} (in queue order)", lock.waiters.len());
        for w in &lock.waiters {
            let _ = writeln!(
                out,
                "  {}. {}  deadline in {}",
                w.position,
                clean(&w.field),
                deadline(w.deadline_ms)
            );
        }
    }
    out
}

/// What `force-unlock` did.
pub fn forced(done: &ForceUnlocked) -> String {
    let lock = &done.before;
    let mut out = String::new();
    let _ = writeln!(out, "force-unlocked {} ({})", clean(&lock.name), lock.kind);
    for h in &lock.holders {
        let _ = writeln!(out, "  was held by {}", holder(h));
    }
    for key in &done.removed_keys {
        let _ = writeln!(out, "  removed key {}", clean(key));
    }
    if let Some((channel, message)) = &done.published {
        let _ = writeln!(out, "  published {} on {}", clean(message), clean(channel));
    }
    if !lock.waiters.is_empty() {
        let _ = writeln!(out, "  {} waiter(s) stay queued", lock.waiters.len());
    }
    out
}

/// The question `force-unlock` asks before it acts.
pub fn confirmation(lock: &LockInfo) -> String {
    let holders = holders(lock, "nobody");
    format!(
        "{} lock `{}` is held by {holders}; {} waiting.\nType the lock's name to force-unlock it: ",
        lock.kind,
        clean(&lock.name),
        lock.waiters.len()
    )
}

/// The lines of one `watch` event: one per change, each stamped with the event's time.
pub fn watch_lines(name: &str, event: &WatchEvent, first: bool) -> String {
    let at = humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(event.at_ms));
    let mut out = String::new();
    if first && event.changes.is_empty() {
        let state = if event.lock.is_some() {
            "free"
        } else {
            "no lock"
        };
        let _ = writeln!(out, "{at}  {}  {state}", clean(name));
    }
    for change in &event.changes {
        let what = match change {
            // The first event shows the lock as it is: holds taken before the watch began
            // are held, not granted now (nor waiters queued now).
            Change::Granted { holder: h } if first => format!("held      {}", holder(h)),
            Change::Queued { waiter } if first => {
                format!(
                    "waiting   {} (position {})",
                    clean(&waiter.field),
                    waiter.position
                )
            }
            Change::Granted { holder: h } => format!("granted   {}", holder(h)),
            Change::Released { holder: h } => format!("released  {}", clean(&h.field)),
            Change::Queued { waiter } => {
                format!(
                    "queued    {} (position {})",
                    clean(&waiter.field),
                    waiter.position
                )
            }
            Change::Dequeued { waiter } => format!("dequeued  {}", clean(&waiter.field)),
            Change::Message { channel } => format!("message   on {}", clean(channel)),
            Change::Counted { count } => format!("counted   {count} to go"),
        };
        let _ = writeln!(out, "{at}  {}  {what}", clean(name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_short() {
        assert_eq!(ttl(None), "-");
        assert_eq!(ttl(Some(850)), "850ms");
        assert_eq!(ttl(Some(29_949)), "29.9s");
        assert_eq!(ttl(Some(245_000)), "4m05s");
        assert_eq!(ttl(Some(7_380_000)), "2h03m");
        assert_eq!(deadline(Some(-1500)), "-1.5s (past)");
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(clean("order:42"), "order:42");
        assert_eq!(clean("a\u{1b}[2Jb\n"), "a\\u{1b}[2Jb\\n");
    }
}
