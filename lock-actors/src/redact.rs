//! What logs and errors may show of a Redis URL: where it points, never its password.

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};

/// Returns `url` with any password replaced by `***`, for logs and errors.
///
/// The user information ends at the last `@`, so a password that holds `/`, `@`, `+` or
/// `=` (raw, or percent-encoded) is hidden whole. A string with an `@` but no scheme is
/// redacted up to its last `@` too: when in doubt, more is hidden, never less.
///
/// ```
/// # use actix_distributed_lock::redact_url;
/// assert_eq!(redact_url("redis://user:secret@host:6379/0"), "redis://user:***@host:6379/0");
/// assert_eq!(redact_url("redis://:secret@host/"), "redis://:***@host/");
/// assert_eq!(redact_url("rediss://:ab/cd+ef=@host"), "rediss://:***@host");
/// assert_eq!(redact_url("redis://host:6379/"), "redis://host:6379/");
/// ```
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(end) => (&url[..end + 3], &url[end + 3..]),
        None => ("", url),
    };
    let Some(at) = rest.rfind('@') else {
        return url.to_string();
    };
    let userinfo = &rest[..at];
    let shown_user = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        None => "***".to_string(),
    };
    format!("{scheme}{shown_user}@{}", &rest[at + 1..])
}

/// What logs and errors call the node at `url`: scheme, user, address and database as the
/// redis crate parses them (`redis://app:***@10.0.0.1:6379/2`), so the password is never
/// part of it. A URL the crate cannot parse is shown through [`redact_url`]. The unit
/// tests below list examples.
pub(crate) fn node_label(url: &str) -> String {
    match url.into_connection_info() {
        Ok(info) => label_of(url, &info),
        Err(_) => redact_url(url),
    }
}

fn label_of(url: &str, info: &ConnectionInfo) -> String {
    // The scheme is the one part taken from the text: it holds no secret.
    let scheme = url.split_once("://").map_or("redis", |(scheme, _)| scheme);
    let settings = info.redis_settings();
    let user = match (settings.username(), settings.password()) {
        (Some(user), Some(_)) => format!("{user}:***@"),
        (Some(user), None) => format!("{user}@"),
        (None, Some(_)) => ":***@".to_string(),
        (None, None) => String::new(),
    };
    let db = match settings.db() {
        0 => String::new(),
        db => format!("/{db}"),
    };
    match info.addr() {
        ConnectionAddr::Unix(path) => format!("{scheme}://{user}{}{db}", path.display()),
        addr => format!("{scheme}://{user}{addr}{db}"),
    }
}

/// Redis error texts can echo the URL they failed on; keep passwords out of them.
pub(crate) fn redact_text(text: &str) -> String {
    text.split(' ')
        .map(|word| {
            if word.contains("://") {
                redact_url(word)
            } else {
                word.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_come_from_the_parsed_url() {
        for (url, label) in [
            ("redis://127.0.0.1:7000/", "redis://127.0.0.1:7000"),
            (
                "redis://:ab%2Fcd%2Bef%3D@127.0.0.1:7000/",
                "redis://:***@127.0.0.1:7000",
            ),
            ("redis://app:ab%2Fcd@h:7000/2", "redis://app:***@h:7000/2"),
            ("redis://app@h:7000/", "redis://app@h:7000"),
            ("redis://localhost", "redis://localhost:6379"),
            ("redis+unix:///tmp/r.sock", "redis+unix:///tmp/r.sock"),
            // Not parseable (the raw `/` ends the authority): redacted as text.
            ("redis://:ab/cd+ef=@h:7000/", "redis://:***@h:7000/"),
            ("rediss://:ab/cd+ef=@h", "rediss://:***@h"),
        ] {
            assert_eq!(node_label(url), label, "{url}");
        }
    }

    #[test]
    fn texts_lose_every_password() {
        assert_eq!(
            redact_text("failed on redis://:ab/cd@h:1/ at @user_script:10."),
            "failed on redis://:***@h:1/ at @user_script:10."
        );
    }
}
