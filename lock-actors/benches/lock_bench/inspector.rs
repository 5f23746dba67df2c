//! Inspection of the server: command statistics and connected clients.

use super::*;

/// This program's own connection to the server, named so it can leave itself out of counts.
pub(crate) struct Inspector {
    pub(crate) conn: MultiplexedConnection,
    /// Commands this connection sent, by commandstats name.
    pub(crate) sent: HashMap<String, u64>,
}

/// `INFO commandstats` at one moment, and what the inspector had sent before asking.
pub(crate) struct Snapshot {
    pub(crate) calls: HashMap<String, u64>,
    pub(crate) sent: HashMap<String, u64>,
}

impl Snapshot {
    /// Commands clients sent between `earlier` and this snapshot (the inspector's own left
    /// out), and the raw delta including the commands run inside scripts.
    pub(crate) fn sent_since(&self, earlier: &Snapshot, inner: &HashSet<String>) -> (u64, u64) {
        let mut sent = 0;
        let mut raw = 0;
        for (name, calls) in &self.calls {
            let delta = calls.saturating_sub(*earlier.calls.get(name).unwrap_or(&0));
            let own = self.sent.get(name).unwrap_or(&0) - earlier.sent.get(name).unwrap_or(&0);
            let delta = delta.saturating_sub(own);
            raw += delta;
            if !inner.contains(name) {
                sent += delta;
            }
        }
        (sent, raw)
    }
}

impl Snapshot {
    /// `name=delta` for every command that moved (inspector's own left out), largest first.
    pub(crate) fn breakdown_since(&self, earlier: &Snapshot) -> String {
        let mut moved: Vec<(String, u64)> = self
            .calls
            .iter()
            .map(|(name, calls)| {
                let delta = calls.saturating_sub(*earlier.calls.get(name).unwrap_or(&0));
                let own = self.sent.get(name).unwrap_or(&0) - earlier.sent.get(name).unwrap_or(&0);
                (name.clone(), delta.saturating_sub(own))
            })
            .filter(|(_, delta)| *delta > 0)
            .collect();
        moved.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        moved
            .iter()
            .map(|(name, delta)| format!("{name}={delta}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Inspector {
    pub(crate) async fn connect(url: &str) -> Self {
        let mut conn = plain_connection(url).await;
        let () = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(INSPECTOR_NAME)
            .query_async(&mut conn)
            .await
            .expect("CLIENT SETNAME");
        Inspector {
            conn,
            sent: HashMap::new(),
        }
    }

    pub(crate) fn count(&mut self, name: &str) {
        *self.sent.entry(name.to_string()).or_default() += 1;
    }

    pub(crate) async fn snapshot(&mut self) -> Snapshot {
        let sent = self.sent.clone();
        let calls = self.commandstats().await;
        Snapshot { calls, sent }
    }

    pub(crate) async fn commandstats(&mut self) -> HashMap<String, u64> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut self.conn)
            .await
            .expect("INFO commandstats");
        self.count("info");
        parse_commandstats(&info)
    }

    /// Calls of one command so far.
    pub(crate) async fn calls(&mut self, name: &str) -> u64 {
        *self.commandstats().await.get(name).unwrap_or(&0)
    }

    /// Connected clients, this one left out.
    pub(crate) async fn clients(&mut self) -> usize {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut self.conn)
            .await
            .expect("CLIENT LIST");
        self.count("client|list");
        let own = format!(" name={INSPECTOR_NAME} ");
        list.lines()
            .filter(|line| !line.trim().is_empty() && !line.contains(&own))
            .count()
    }
}

/// `cmdstat_<name>:calls=N,...` lines into name → N.
pub(crate) fn parse_commandstats(info: &str) -> HashMap<String, u64> {
    info.lines()
        .filter_map(|line| {
            let (name, fields) = line.trim().strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = fields
                .split(',')
                .find_map(|f| f.strip_prefix("calls="))?
                .parse()
                .ok()?;
            Some((name.to_ascii_lowercase(), calls))
        })
        .collect()
}

/// The commands the library's scripts run inside Redis (`redis.call('x'` / `redis.pcall`).
pub(crate) fn script_inner_commands() -> HashSet<String> {
    let mut names = inner_commands(&[ACQUIRE_LUA, UNLOCK_LUA]);
    // The watchdog's renew script runs these too; both are already in the acquire script.
    // The unlock publishes through `publish_command`, which is `publish` here.
    names.extend(["hexists", "pexpire", "publish"].map(String::from));
    names
}

/// The commands that `scripts` run inside Redis (`redis.call('x'` / `redis.pcall`).
pub(crate) fn inner_commands(scripts: &[&str]) -> HashSet<String> {
    let mut names = HashSet::new();
    for script in scripts {
        for call in ["redis.call(", "redis.pcall("] {
            for rest in script.split(call).skip(1) {
                let rest = rest.trim_start();
                let Some(quote) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') else {
                    continue;
                };
                if let Some(name) = rest[1..].split(quote).next() {
                    names.insert(name.to_ascii_lowercase());
                }
            }
        }
    }
    names
}
