//! The uncontended curve: lock/unlock pairs/s against concurrent tasks, each task on its
//! own name, for five lines on the same redis-server, rounds interleaved line by line.

use super::*;

/// The lines, in the order of the CSV's columns.
pub(crate) const LINES: [&str; 5] = [
    "ours (reentrant)",
    "ours (fast lock)",
    "plain-redis ceiling",
    "rslock",
    "Redisson (async)",
];
const REDISSON: usize = 4;

/// One point: the tasks, and per line the median pairs/s and the commands sent per pair.
pub(crate) struct Point {
    pub(crate) tasks: usize,
    pub(crate) pairs_per_s: [f64; 5],
    pub(crate) commands_per_pair: [f64; 5],
    /// The same with the commands run inside scripts: all the work Redis does per pair.
    pub(crate) calls_per_pair: [f64; 5],
}

pub(crate) struct Curve {
    pub(crate) points: Vec<Point>,
    pub(crate) redisson_version: String,
}

/// Commands run inside the scripts of the four Rust lines (the library's reentrant
/// scripts, its fast-lock unlock script, rslock's unlock script): not sent by a client.
/// `set` is not among them: the fast lock and rslock send `SET NX PX` themselves.
fn inner_rust() -> HashSet<String> {
    let mut names = script_inner_commands();
    names.extend(["get", "del", "publish", "spublish"].map(String::from));
    names
}

/// Commands run inside Redisson's lock and unlock scripts (read from its source: the
/// lock script `exists`/`hexists`/`hincrby`/`pexpire`/`pttl`, the unlock script `get` and
/// `set` of its unlock latch, `hexists`, `hincrby`, `pexpire`, `del`, `publish`).
fn inner_redisson() -> HashSet<String> {
    let mut names = inner_rust();
    names.extend(["set", "hset", "hdel", "hget"].map(String::from));
    names
}

pub(crate) async fn curve(
    url: &str,
    sizes: &Sizes,
    inspector: &mut Inspector,
    progress: &mut Progress,
) -> Curve {
    progress.note("uncontended: starting the Redisson JVM and warming up its JIT");
    let jar = redisson::jar().unwrap_or_else(|e| panic!("Redisson peer: {e}"));
    let mut java = redisson::Jvm::start(&jar, url, "bench-curves-redisson", None).await;
    let warm_ms = if sizes.quick { 1000 } else { 2500 };
    for tasks in [64, 1024, 64] {
        let pairs = java
            .number(
                &format!("uncontended async {tasks} {warm_ms}"),
                "pairs_per_s",
            )
            .await;
        progress.note(&format!(
            "uncontended: Redisson warm-up, {tasks} chains: {pairs:.0} pairs/s"
        ));
    }
    let client = connect(ClientConfig::new(url)).await;
    let conn = plain_connection(url).await;
    let scripts = Arc::new((Script::new(ACQUIRE_LUA), Script::new(UNLOCK_LUA)));
    let manager = rslock::LockManager::new(vec![url.to_string()]);
    let (rust, java_inner) = (inner_rust(), inner_redisson());
    let round = sizes.round;
    let mut points = Vec::new();
    for &tasks in &sizes.tasks {
        let mut rates: [Vec<f64>; 5] = Default::default();
        let (mut sent, mut raw, mut pairs) = ([0u64; 5], [0u64; 5], [0u64; 5]);
        for r in 0..sizes.rounds {
            // Each round starts with another line, so a drift of the machine hits all alike.
            for k in 0..LINES.len() {
                let line = (k + r) % LINES.len();
                let before = inspector.snapshot().await;
                let (rate, made) = match line {
                    0 => library_pairs(&client, tasks, round).await,
                    1 => fast_lock_pairs(&client, tasks, round).await,
                    2 => ceiling_pairs(conn.clone(), scripts.clone(), tasks, round).await,
                    3 => rslock_pairs(&manager, tasks, round).await,
                    _ => {
                        let command = format!("uncontended async {tasks} {}", round.as_millis());
                        (java.number(&command, "pairs_per_s").await, 0)
                    }
                };
                let after = inspector.snapshot().await;
                let inner = if line == REDISSON { &java_inner } else { &rust };
                let (s, all) = after.sent_since(&before, inner);
                // Redisson's pairs, warm-up included: the unlock that frees a lock runs one
                // PUBLISH inside its script (nothing else publishes meanwhile).
                let made = if line == REDISSON {
                    after.calls.get("publish").copied().unwrap_or(0)
                        - before.calls.get("publish").copied().unwrap_or(0)
                } else {
                    made
                };
                if tasks == sizes.tasks[0] && r == 0 {
                    progress.note(&format!(
                        "uncontended: {}: by command {}",
                        LINES[line],
                        after.breakdown_since(&before)
                    ));
                }
                rates[line].push(rate);
                sent[line] += s;
                raw[line] += all;
                pairs[line] += made;
            }
            progress.step(&format!(
                "uncontended: {tasks} tasks, round {}/{}: {}",
                r + 1,
                sizes.rounds,
                LINES
                    .iter()
                    .zip(&rates)
                    .map(|(name, rates)| format!("{name} {:.0}", rates[r]))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let mut point = Point {
            tasks,
            pairs_per_s: [0.0; 5],
            commands_per_pair: [0.0; 5],
            calls_per_pair: [0.0; 5],
        };
        for line in 0..LINES.len() {
            point.pairs_per_s[line] = median(&mut rates[line]);
            point.commands_per_pair[line] = sent[line] as f64 / pairs[line].max(1) as f64;
            point.calls_per_pair[line] = raw[line] as f64 / pairs[line].max(1) as f64;
        }
        points.push(point);
    }
    client.shutdown();
    let redisson_version = java.version.clone();
    java.exit().await;
    Curve {
        points,
        redisson_version,
    }
}

pub(crate) fn write(curve: &Curve, out: &Output) {
    let mut header = String::from("tasks");
    for what in [
        "pairs_per_s",
        "commands_per_pair",
        "calls_incl_scripts_per_pair",
    ] {
        for line in LINES {
            header.push_str(&format!(",{what} {line}"));
        }
    }
    let rows: Vec<String> = curve
        .points
        .iter()
        .map(|p| {
            let mut row = p.tasks.to_string();
            for v in p.pairs_per_s {
                row.push_str(&format!(",{v:.0}"));
            }
            for v in p.commands_per_pair.iter().chain(&p.calls_per_pair) {
                row.push_str(&format!(",{v:.3}"));
            }
            row
        })
        .collect();
    out.csv("uncontended", &header, &rows);
    let series: Vec<plot::Series> = LINES
        .iter()
        .enumerate()
        .map(|(line, name)| plot::Series {
            name: if line == REDISSON {
                format!("Redisson {} (async)", curve.redisson_version)
            } else {
                (*name).to_string()
            },
            points: curve
                .points
                .iter()
                .map(|p| (p.tasks as f64, p.pairs_per_s[line]))
                .collect(),
            dashed: line == 2,
            color: None,
        })
        .collect();
    plot::single(
        &out.svg("uncontended"),
        plot::Panel {
            title: "Uncontended lock + unlock pairs/s (one redis-server, each task its own lock)"
                .into(),
            x_label: "concurrent tasks".into(),
            y_label: "pairs/s".into(),
            x_log: true,
            y_log: true,
            y_max: None,
            series,
        },
    );
}
