//! Which deployment a `lock-inspect` URL names: one server, a Redis Cluster, the primary
//! that Sentinel follows, or the primary of a listed group; turned into the
//! [`ClientConfig`] the library takes.

use actix_distributed_lock::{redact_url, ClientConfig};

/// The URL forms, for `--help`.
pub const URL_HELP: &str = "\
URL forms:
  redis://[user:password@]host:port[/db]      one server (rediss:// for TLS, with the `tls` feature)
  redis+cluster://[user:password@]host:port,host:port,...
                                              a Redis Cluster from any of its nodes (rediss+cluster:// for TLS)
  redis+replicated://[user:password@]host:port,host:port,...[/db]
                                              the primary of these servers, found by role (no Sentinel)
  redis+sentinel://[user:password@]host:port,host:port,.../service[/db]
                                              the primary the sentinels name `service` (rediss+sentinel:// for TLS);
                                              user and password apply to the data nodes, not to the sentinels
Passwords may be percent-encoded; they are never printed.";

/// A parsed URL: the client settings, and the secrets that must never be printed.
pub struct Target {
    pub config: ClientConfig,
    /// The password as written in the URL and percent-decoded (empty when none).
    pub secrets: Vec<String>,
}

/// Parses `url` (one of the forms of [`URL_HELP`]). The error names the URL redacted.
pub fn parse(url: &str) -> Result<Target, String> {
    let bad = |why: &str| format!("bad URL `{}`: {why}", redact_url(url));
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(bad("it has no scheme; see --help for the forms"));
    };
    let secrets = secrets_of(rest);
    let config = match scheme {
        "redis" | "rediss" | "unix" | "redis+unix" => {
            if rest.is_empty() {
                return Err(bad("it names no host"));
            }
            ClientConfig::new(url)
        }
        "redis+cluster" | "rediss+cluster" | "redis+replicated" | "rediss+replicated" => {
            let (base, kind) = scheme.split_once('+').unwrap_or((scheme, ""));
            let parts = split(rest).map_err(|why| bad(&why))?;
            let path = match parts.path {
                "" => "/".to_string(),
                path => path.to_string(),
            };
            let nodes = parts
                .hosts
                .iter()
                .map(|host| format!("{base}://{}{host}{path}", parts.userinfo));
            if kind == "cluster" {
                ClientConfig::cluster(nodes)
            } else {
                ClientConfig::replicated(nodes)
            }
        }
        "redis+sentinel" | "rediss+sentinel" => {
            let base = &scheme[..scheme.len() - "+sentinel".len()];
            let parts = split(rest).map_err(|why| bad(&why))?;
            let mut path = parts.path.trim_start_matches('/').splitn(2, '/');
            let service = path.next().unwrap_or_default();
            if service.is_empty() {
                return Err(bad("a sentinel URL ends with the primary's name: \
                     redis+sentinel://host:26379,host:26380/mymaster"));
            }
            let db = path.next().unwrap_or_default();
            if !db.is_empty() && db.parse::<u16>().is_err() {
                return Err(bad("the database after the service name must be a number"));
            }
            let sentinels = parts.hosts.iter().map(|host| format!("{base}://{host}/"));
            let config = ClientConfig::sentinel(sentinels, service);
            if parts.userinfo.is_empty() && db.is_empty() && base == "redis" {
                config
            } else {
                // Credentials and database of the data nodes (the host is not used).
                config.with_node_url(format!("{base}://{}sentinel-primary/{db}", parts.userinfo))
            }
        }
        _ => {
            return Err(bad(
                "the scheme must be redis, rediss, redis+cluster, redis+sentinel or \
                 redis+replicated",
            ))
        }
    };
    Ok(Target { config, secrets })
}

/// The parts of `[userinfo@]host,host,...[/path]`.
struct Parts<'a> {
    /// `user:password@` as written, or empty.
    userinfo: &'a str,
    hosts: Vec<&'a str>,
    /// From the first `/` after the hosts, or empty.
    path: &'a str,
}

fn split(rest: &str) -> Result<Parts<'_>, String> {
    // The user information ends at the last `@`: a password may hold `/` or `@`.
    let (userinfo, after) = match rest.rfind('@') {
        Some(at) => (&rest[..=at], &rest[at + 1..]),
        None => ("", rest),
    };
    let (hosts, path) = match after.find('/') {
        Some(slash) => (&after[..slash], &after[slash..]),
        None => (after, ""),
    };
    let hosts: Vec<&str> = hosts.split(',').map(str::trim).collect();
    if hosts.iter().any(|h| h.is_empty()) {
        return Err("it needs host:port[,host:port...] (no empty host)".to_string());
    }
    Ok(Parts {
        userinfo,
        hosts,
        path,
    })
}

/// The password of `rest`'s user information, raw and percent-decoded.
fn secrets_of(rest: &str) -> Vec<String> {
    let Some(at) = rest.rfind('@') else {
        return Vec::new();
    };
    let Some((_, password)) = rest[..at].split_once(':') else {
        return Vec::new(); // a user name alone
    };
    let mut secrets = vec![password.to_string(), percent_decode(password)];
    secrets.retain(|s| !s.is_empty());
    secrets.dedup();
    secrets
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_distributed_lock::Deployment;

    fn deployment(url: &str) -> (Deployment, String) {
        let target = parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        (
            target.config.deployment().clone(),
            target.config.url().to_string(),
        )
    }

    #[test]
    fn one_server_is_taken_as_written() {
        let (d, url) = deployment("redis://:pw@127.0.0.1:6379/2");
        assert_eq!(d, Deployment::Standalone);
        assert_eq!(url, "redis://:pw@127.0.0.1:6379/2");
        assert_eq!(deployment("rediss://h:6380").1, "rediss://h:6380");
    }

    #[test]
    fn a_cluster_url_lists_its_seed_nodes() {
        let (d, _) = deployment("redis+cluster://u:p@h1:7000,h2:7001");
        assert_eq!(
            d,
            Deployment::Cluster {
                nodes: vec!["redis://u:p@h1:7000/".into(), "redis://u:p@h2:7001/".into()]
            }
        );
        let (d, _) = deployment("rediss+cluster://h1:7000/");
        assert_eq!(
            d,
            Deployment::Cluster {
                nodes: vec!["rediss://h1:7000/".into()]
            }
        );
    }

    #[test]
    fn a_replicated_url_lists_every_node_with_its_database() {
        let (d, url) = deployment("redis+replicated://:pw@h1:6379,h2:6379/2");
        assert_eq!(
            d,
            Deployment::Replicated {
                nodes: vec![
                    "redis://:pw@h1:6379/2".into(),
                    "redis://:pw@h2:6379/2".into()
                ]
            }
        );
        assert_eq!(url, "redis://:pw@h1:6379/2");
    }

    #[test]
    fn a_sentinel_url_names_the_service_and_the_data_nodes_credentials() {
        let (d, url) = deployment("redis+sentinel://h1:26379,h2:26380/mymaster");
        assert_eq!(
            d,
            Deployment::Sentinel {
                sentinels: vec!["redis://h1:26379/".into(), "redis://h2:26380/".into()],
                service: "mymaster".into()
            }
        );
        assert_eq!(url, "");
        let (d, url) = deployment("redis+sentinel://:s%40cret@h1:26379/mymaster/3");
        assert!(matches!(d, Deployment::Sentinel { service, .. } if service == "mymaster"));
        assert_eq!(url, "redis://:s%40cret@sentinel-primary/3");
    }

    #[test]
    fn bad_urls_are_refused_without_their_password() {
        for url in [
            "127.0.0.1:6379",
            "http://:hunter2@h/",
            "redis://",
            "redis+cluster://:hunter2@h1:7000,,h2:7001",
            "redis+sentinel://:hunter2@h1:26379",
            "redis+sentinel://:hunter2@h1:26379/",
            "redis+sentinel://:hunter2@h1:26379/m/x",
        ] {
            let error = parse(url)
                .err()
                .unwrap_or_else(|| panic!("{url} was taken"));
            assert!(error.starts_with("bad URL"), "{error}");
            assert!(!error.contains("hunter2"), "{error}");
        }
    }

    #[test]
    fn the_password_is_kept_as_a_secret_raw_and_decoded() {
        let target = parse("redis://user:a%2Fb@h/").unwrap();
        assert_eq!(target.secrets, vec!["a%2Fb".to_string(), "a/b".to_string()]);
        assert!(parse("redis://h/").unwrap().secrets.is_empty());
    }
}
