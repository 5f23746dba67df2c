//! The redlock scenario: 5 nodes of our own, RedLock against one node and the plain fan-out.

use super::*;

pub(crate) const REDLOCK_SAMPLES: usize = 300;
pub(crate) const REDLOCK_PAUSED_SAMPLES: usize = 100;

pub(crate) struct Redlock {
    pub(crate) p50_us: f64,
    pub(crate) single_p50_us: f64,
    pub(crate) paused_p50_us: f64,
    /// The plain-redis floor: p50 until 3 of the 5 nodes answered the acquire script.
    pub(crate) quorum_floor_us: f64,
}

/// The floor of a fan-out on this machine: the acquire script sent with plain redis to all
/// nodes at once (one multiplexed connection each, on the caller's runtime), against one
/// node. No client can do a parallel acquire for less.
pub(crate) struct PlainFanOut {
    pub(crate) conns: Vec<MultiplexedConnection>,
    pub(crate) locks: Vec<PlainLock>,
}

impl PlainFanOut {
    pub(crate) async fn connect(nodes: &[RedisProcess]) -> Self {
        let mut conns = Vec::new();
        for node in nodes {
            conns.push(plain_connection(&node.url()).await);
        }
        let locks = nodes
            .iter()
            .map(|_| PlainLock::new("bench:redlock:plain"))
            .collect();
        PlainFanOut { conns, locks }
    }

    /// One acquire on the first `nodes` nodes at once, then their unlocks; returns the
    /// acquire's time in µs until `enough` nodes had answered (the rest are awaited before
    /// the unlocks, untimed).
    pub(crate) async fn acquire_timed(&mut self, nodes: usize, enough: usize) -> f64 {
        let t0 = Instant::now();
        let mut answers: FuturesUnordered<_> = self
            .conns
            .iter_mut()
            .zip(&self.locks)
            .take(nodes)
            .map(|(conn, lock)| lock.acquire_timed(conn))
            .collect();
        for _ in 0..enough {
            answers.next().await;
        }
        let us = micros(t0.elapsed());
        while answers.next().await.is_some() {}
        drop(answers);
        let unlocks: FuturesUnordered<_> = self
            .conns
            .iter_mut()
            .zip(&self.locks)
            .take(nodes)
            .map(|(conn, lock)| lock.unlock(conn))
            .collect();
        unlocks.collect::<Vec<()>>().await;
        us
    }
}

pub(crate) async fn redlock(rows: &mut Vec<Row>) -> Redlock {
    eprintln!("[redlock] starting {REDLOCK_NODES} redis-servers");
    let nodes: Vec<RedisProcess> = (0..REDLOCK_NODES).map(|_| RedisProcess::start()).collect();
    let mut clients = Vec::new();
    for node in &nodes {
        clients.push(connect(ClientConfig::new(node.url())).await);
    }
    let red = RedLock::new(&clients, "bench:redlock").expect("a RedLock over five nodes");
    let single = clients[0].lock("bench:redlock:single").expect("valid name");
    let mut plain = PlainFanOut::connect(&nodes).await;
    // Warm-up: actors started, scripts cached, connections hot.
    for _ in 0..50 {
        plain.acquire_timed(REDLOCK_NODES, REDLOCK_NODES).await;
        plain.acquire_timed(1, 1).await;
        red.acquire()
            .await
            .expect("redlock acquire")
            .unlock()
            .await
            .expect("redlock unlock");
        single
            .acquire()
            .await
            .expect("acquire")
            .unlock()
            .await
            .expect("unlock");
    }
    eprintln!("[redlock] {ROUNDS} rounds of {REDLOCK_SAMPLES} RedLock and single-node acquires");
    let (mut red_p50s, mut single_p50s) = (Vec::new(), Vec::new());
    let (mut fan_p50s, mut quorum_p50s, mut one_p50s) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        let (mut red_us, mut single_us) = (Vec::new(), Vec::new());
        let (mut fan_us, mut quorum_us, mut one_us) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..REDLOCK_SAMPLES {
            fan_us.push(plain.acquire_timed(REDLOCK_NODES, REDLOCK_NODES).await);
            quorum_us.push(plain.acquire_timed(REDLOCK_NODES, REDLOCK_QUORUM).await);
            one_us.push(plain.acquire_timed(1, 1).await);
            let t0 = Instant::now();
            let guard = red.acquire().await.expect("redlock acquire");
            red_us.push(micros(t0.elapsed()));
            guard.unlock().await.expect("redlock unlock");
            let t0 = Instant::now();
            let guard = single.acquire().await.expect("acquire");
            single_us.push(micros(t0.elapsed()));
            guard.unlock().await.expect("unlock");
        }
        let (a, b) = (
            percentile(&mut red_us, 50.0),
            percentile(&mut single_us, 50.0),
        );
        let (f, q, o) = (
            percentile(&mut fan_us, 50.0),
            percentile(&mut quorum_us, 50.0),
            percentile(&mut one_us, 50.0),
        );
        eprintln!(
            "[redlock] round {}: RedLock p50 {a:.1} us, single node p50 {b:.1} us ({:.2}); \
             plain redis to {REDLOCK_NODES} nodes at once: all answered {f:.1} us, \
             {REDLOCK_QUORUM} answered {q:.1} us; one node {o:.1} us",
            r + 1,
            a / b,
        );
        red_p50s.push(a);
        single_p50s.push(b);
        fan_p50s.push(f);
        quorum_p50s.push(q);
        one_p50s.push(o);
    }
    let node_timeout = red.node_timeout_for(red.watchdog_lease());
    eprintln!("[redlock] one node SIGSTOPped: {REDLOCK_PAUSED_SAMPLES} acquires (node timeout {node_timeout:?})");
    let paused = nodes[REDLOCK_NODES - 1].child.id() as libc::pid_t;
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(paused, libc::SIGSTOP) };
    let mut paused_us = Vec::new();
    for _ in 0..REDLOCK_PAUSED_SAMPLES {
        let t0 = Instant::now();
        let guard = red
            .acquire()
            .await
            .expect("redlock acquire with one node paused");
        paused_us.push(micros(t0.elapsed()));
        guard.unlock().await.expect("redlock unlock");
    }
    // SAFETY: as above.
    unsafe { libc::kill(paused, libc::SIGCONT) };
    for client in &clients {
        client.shutdown();
    }
    let result = Redlock {
        p50_us: median(&mut red_p50s),
        single_p50_us: median(&mut single_p50s),
        paused_p50_us: percentile(&mut paused_us, 50.0),
        quorum_floor_us: median(&mut quorum_p50s.clone()),
    };
    let ratio = result.p50_us / result.single_p50_us;
    let paused_limit = micros(node_timeout * 2);
    rows.push(Row::new("redlock", "p50 us, 5 nodes", Some(result.p50_us)));
    rows.push(Row::new(
        "redlock",
        "p50 us, single node",
        Some(result.single_p50_us),
    ));
    rows.push(Row::new("redlock", "ratio", Some(ratio)).target("<= 1.5", Some(ratio <= 1.5)));
    // The machine's floor, measured in the same rounds (in the JSON only as the ratio to
    // the quorum's time): the acquire script sent with plain redis to all five nodes at
    // once, timed to the last answer and to the quorum's (the third), against one node.
    let (fan, quorum, one) = (
        median(&mut fan_p50s),
        median(&mut quorum_p50s),
        median(&mut one_p50s),
    );
    rows.push(Row::new(
        "redlock",
        "plain redis p50 us, one node",
        Some(one),
    ));
    rows.push(Row::new(
        "redlock",
        "plain redis p50 us, 5 nodes, all answered",
        Some(fan),
    ));
    rows.push(Row::new(
        "redlock",
        "plain redis p50 us, 5 nodes, 3 answered",
        Some(quorum),
    ));
    rows.push(Row::new(
        "redlock",
        "plain redis ratio, all answered / one node",
        Some(fan / one),
    ));
    rows.push(Row::new(
        "redlock",
        "plain redis ratio, 3 answered / one node",
        Some(quorum / one),
    ));
    let to_floor = result.p50_us / quorum;
    rows.push(
        Row::new(
            "redlock",
            "ratio_to_floor (RedLock p50 / plain 3-answered p50)",
            Some(to_floor),
        )
        .target("<= 1.15", Some(to_floor <= 1.15)),
    );
    rows.push(
        Row::new(
            "redlock",
            "p50 us, one node paused",
            Some(result.paused_p50_us),
        )
        .target(
            "< 2x node timeout",
            Some(result.paused_p50_us < paused_limit),
        ),
    );
    result
}
