//! The RedLock curve: acquire p50 against the number of nodes (redis-servers of our own),
//! beside the plain-redis floor of the same nodes: the acquire script sent with plain
//! redis to all of them at once, timed until a quorum answered, and one node alone.

use super::*;

pub(crate) struct Point {
    pub(crate) nodes: usize,
    pub(crate) redlock_p50_us: f64,
    pub(crate) floor_p50_us: f64,
    pub(crate) one_node_p50_us: f64,
    pub(crate) commands_per_pair: f64,
}

pub(crate) async fn curve(sizes: &Sizes, progress: &mut Progress) -> Vec<Point> {
    let most = sizes.nodes.iter().copied().max().unwrap_or(1);
    progress.note(&format!("redlock: starting {most} redis-servers"));
    let servers: Vec<RedisProcess> = (0..most).map(|_| RedisProcess::start()).collect();
    let mut clients = Vec::new();
    let mut inspectors = Vec::new();
    for server in &servers {
        clients.push(connect(ClientConfig::new(server.url())).await);
        inspectors.push(Inspector::connect(&server.url()).await);
    }
    let inner = script_inner_commands();
    let mut plain = PlainFanOut::connect(&servers).await;
    let mut points = Vec::new();
    for &nodes in &sizes.nodes {
        let quorum = nodes / 2 + 1;
        let red = RedLock::new(&clients[..nodes], &format!("bench:curve:redlock:{nodes}"))
            .expect("a RedLock over our nodes");
        // Warm-up: actors started, scripts cached, connections hot.
        for _ in 0..30 {
            plain.acquire_timed(nodes, quorum).await;
            pair(&red).await;
        }
        let (mut red_p50s, mut floor_p50s, mut one_p50s) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..sizes.redlock_rounds {
            let (mut red_us, mut floor_us, mut one_us) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..sizes.redlock_samples {
                floor_us.push(plain.acquire_timed(nodes, quorum).await);
                one_us.push(plain.acquire_timed(1, 1).await);
                let t0 = Instant::now();
                let guard = red.acquire().await.expect("redlock acquire");
                red_us.push(micros(t0.elapsed()));
                guard.unlock().await.expect("redlock unlock");
            }
            red_p50s.push(percentile(&mut red_us, 50.0));
            floor_p50s.push(percentile(&mut floor_us, 50.0));
            one_p50s.push(percentile(&mut one_us, 50.0));
        }
        // The commands of RedLock pairs alone, summed over its nodes.
        let pairs = 100;
        let mut before = Vec::new();
        for inspector in &mut inspectors[..nodes] {
            before.push(inspector.snapshot().await);
        }
        for _ in 0..pairs {
            pair(&red).await;
        }
        // A RedLock's unlock returns once a quorum released; let the others land.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut sent = 0;
        for (inspector, before) in inspectors[..nodes].iter_mut().zip(&before) {
            sent += inspector.snapshot().await.sent_since(before, &inner).0;
        }
        let point = Point {
            nodes,
            redlock_p50_us: median(&mut red_p50s),
            floor_p50_us: median(&mut floor_p50s),
            one_node_p50_us: median(&mut one_p50s),
            commands_per_pair: sent as f64 / f64::from(pairs),
        };
        progress.step(&format!(
            "redlock: {nodes} nodes: RedLock p50 {:.0} us, plain quorum ({quorum}) answered {:.0} us, \
             one node {:.0} us; {:.1} commands per pair",
            point.redlock_p50_us, point.floor_p50_us, point.one_node_p50_us, point.commands_per_pair
        ));
        points.push(point);
    }
    for client in &clients {
        client.shutdown();
    }
    drop(plain);
    drop(servers);
    points
}

/// One RedLock acquire + unlock.
async fn pair(red: &RedLock) {
    red.acquire()
        .await
        .expect("redlock acquire")
        .unlock()
        .await
        .expect("redlock unlock");
}

pub(crate) fn write(points: &[Point], out: &Output) {
    let rows: Vec<String> = points
        .iter()
        .map(|p| {
            format!(
                "{},{:.1},{:.1},{:.1},{:.3},{:.3}",
                p.nodes,
                p.redlock_p50_us,
                p.floor_p50_us,
                p.one_node_p50_us,
                p.redlock_p50_us / p.floor_p50_us,
                p.commands_per_pair
            )
        })
        .collect();
    out.csv(
        "redlock",
        "nodes,redlock_p50_us,plain_quorum_p50_us,plain_one_node_p50_us,ratio_to_floor,commands_per_pair",
        &rows,
    );
    let line = |name: &str, dashed: bool, f: fn(&Point) -> f64| plot::Series {
        name: name.to_string(),
        points: points.iter().map(|p| (p.nodes as f64, f(p))).collect(),
        dashed,
        color: None,
    };
    plot::single(
        &out.svg("redlock"),
        plot::Panel {
            title: "RedLock acquire p50 against nodes (all nodes on this 2-core machine)".into(),
            x_label: "nodes".into(),
            y_label: "microseconds".into(),
            x_log: false,
            y_log: false,
            y_max: None,
            series: vec![
                line("RedLock acquire", false, |p| p.redlock_p50_us),
                line(
                    "floor: plain redis to all nodes at once, quorum answered",
                    true,
                    |p| p.floor_p50_us,
                ),
                line("plain redis, one node", true, |p| p.one_node_p50_us),
            ],
        },
    );
}
