//! RedLock against real redis-server processes, one per node (quorum with nodes stopped, paused or held elsewhere; a node restarted empty
//! with and without a restart delay; the watchdog with nodes killed mid-hold).

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{
    AcquireOptions, ClientConfig, LockClient, LockError, LockOwner, RedLock, RedLockGuard,
};
use std::time::{Duration, Instant};
use support::{eventually, RedisServer};
use tokio::time::timeout;

const NONE: Vec<String> = Vec::new();

/// N nodes and one client per node.
struct Nodes {
    servers: Vec<RedisServer>,
    clients: Vec<LockClient>,
}

impl Nodes {
    async fn start(n: usize) -> Nodes {
        Self::start_with(n, |config| config).await
    }

    async fn start_with(n: usize, tune: impl Fn(ClientConfig) -> ClientConfig) -> Nodes {
        let servers: Vec<RedisServer> = (0..n).map(|_| RedisServer::start()).collect();
        let clients = connect(&servers, &tune).await;
        Nodes { servers, clients }
    }

    /// Another process's view of the same nodes: one more client per node.
    async fn other_clients(&self) -> Vec<LockClient> {
        connect(&self.servers, &|config| config).await
    }

    async fn keys(&self, node: usize) -> Vec<String> {
        self.servers[node].keys().await
    }
}

/// Waits until `guard` is held on `n` nodes: the acquire returns at a quorum, and the
/// nodes that answer after it join the hold within the node timeout.
/// Waits until no node's answer to the acquire is still awaited: `nodes_held` is final.
async fn settled(guard: &RedLockGuard) {
    eventually(
        "every node has answered the acquire or timed out",
        Duration::from_secs(5),
        || async { guard.nodes_pending() == 0 },
    )
    .await;
}

async fn held_on(guard: &RedLockGuard, n: usize) {
    eventually(
        &format!("the hold is on {n} nodes"),
        Duration::from_secs(5),
        || async { guard.nodes_held() == n },
    )
    .await;
}

/// Takes and releases the lock once with every node answering, so connections and script
/// caches are warm and no node still has a request of this warm-up queued (the acquire
/// returns at the quorum; a node paused before it answered would serve the warm-up's grant
/// first, to another owner, when it wakes).
async fn warm_up(lock: &RedLock) {
    let guard = lock.acquire().await.unwrap();
    held_on(&guard, lock.nodes()).await;
    guard.unlock().await.unwrap();
}

async fn connect(
    servers: &[RedisServer],
    tune: &impl Fn(ClientConfig) -> ClientConfig,
) -> Vec<LockClient> {
    let mut clients = Vec::new();
    for server in servers {
        let url = server.url();
        clients.push(support::clients::connect(tune(ClientConfig::new(url.as_str())), &url).await);
    }
    clients
}

/// Test 1: 3 nodes, all up: acquire, re-enter, release; no key left on any node.
#[tokio::test]
async fn three_nodes_up_acquire_reenter_release_and_leave_no_key() {
    let nodes = Nodes::start(3).await;
    let lock = RedLock::new(&nodes.clients, "rl:all-up").unwrap();
    assert_eq!((lock.nodes(), lock.quorum()), (3, 2));
    let me = LockOwner::new();
    let outer = lock
        .acquire_with(AcquireOptions::new().owner(me).wait(Duration::from_secs(2)))
        .await
        .unwrap();
    held_on(&outer, 3).await;
    let lease = lock.watchdog_lease();
    assert!(outer.validity() > Duration::ZERO);
    assert!(outer.validity() <= lease - RedLock::clock_drift(lease));

    // Another owner, here or in another process, gets nothing.
    assert!(lock.try_acquire().await.unwrap().is_none());
    let theirs = RedLock::new(&nodes.other_clients().await, "rl:all-up").unwrap();
    assert!(theirs.try_acquire().await.unwrap().is_none());

    let inner = outer.reenter(Duration::ZERO).await.unwrap();
    held_on(&inner, 3).await;
    for client in &nodes.clients {
        assert_eq!(
            client
                .lock("rl:all-up")
                .unwrap()
                .hold_count(me)
                .await
                .unwrap(),
            2
        );
    }
    inner.unlock().await.unwrap();
    for client in &nodes.clients {
        assert_eq!(
            client
                .lock("rl:all-up")
                .unwrap()
                .hold_count(me)
                .await
                .unwrap(),
            1
        );
    }
    outer.unlock().await.unwrap();
    for node in 0..3 {
        assert_eq!(nodes.keys(node).await, NONE, "node {node}");
    }
    let after = theirs.try_acquire().await.unwrap().expect("free again");
    after.unlock().await.unwrap();
}

/// Test 2: 3 nodes, 1 stopped: acquire succeeds on the other two.
#[tokio::test]
async fn one_of_three_stopped_acquire_succeeds() {
    let mut nodes = Nodes::start(3).await;
    nodes.servers[2].stop();
    let lock = RedLock::new(&nodes.clients, "rl:one-down").unwrap();
    let guard = lock.acquire_timeout(Duration::from_secs(2)).await.unwrap();
    assert_eq!(guard.nodes_held(), 2);
    assert!(guard.validity() > Duration::ZERO);
    guard.unlock().await.unwrap();
    assert_eq!(nodes.keys(0).await, NONE);
    assert_eq!(nodes.keys(1).await, NONE);
}

/// Test 3: 3 nodes, 2 stopped: acquire fails within the wait bound, and the live node,
/// which granted every attempt, keeps no key.
#[tokio::test]
async fn two_of_three_stopped_acquire_fails_in_time_and_leaves_no_partial_key() {
    let mut nodes = Nodes::start(3).await;
    nodes.servers[1].stop();
    nodes.servers[2].stop();
    nodes.servers[0].reset_stats().await;
    let lock = RedLock::new(&nodes.clients, "rl:two-down").unwrap();
    let wait = Duration::from_millis(600);
    let node_timeout = lock.node_timeout_for(lock.watchdog_lease());
    let started = Instant::now();
    let failed = lock.acquire_timeout(wait).await;
    let elapsed = started.elapsed();
    match &failed {
        Err(LockError::Unavailable { node, reason }) => {
            assert!(
                node.contains(&nodes.servers[1].port().to_string()),
                "{node}"
            );
            assert!(
                node.contains(&nodes.servers[2].port().to_string()),
                "{node}"
            );
            assert!(reason.contains("needs 2 of 3 nodes"), "{reason}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    // The bound: the wait, plus one last attempt and its release.
    assert!(elapsed >= wait, "{elapsed:?}");
    assert!(
        elapsed < wait + 2 * node_timeout + Duration::from_secs(1),
        "{elapsed:?}"
    );
    assert_eq!(nodes.keys(0).await, NONE);
    // It was granted there (and given back) more than once: the retries happened.
    assert!(nodes.servers[0].command_calls("evalsha").await >= 4);
}

/// Test 4: 1 of 3 nodes SIGSTOPped: the acquire returns as soon as the other two granted,
/// well within the per-node timeout; the frozen node's grant, which comes after that
/// timeout, is given back once it wakes.
#[tokio::test]
async fn one_paused_node_does_not_hold_up_the_acquire() {
    let mut nodes = Nodes::start(3).await;
    let lock = RedLock::new(&nodes.clients, "rl:paused").unwrap();
    // Warm every connection and script cache first, so only the pause is measured.
    warm_up(&lock).await;
    let node_timeout = lock.node_timeout_for(lock.watchdog_lease());
    assert_eq!(node_timeout, Duration::from_millis(200)); // 30 s lease / 100, clamped

    nodes.servers[2].pause();
    let started = Instant::now();
    let guard = lock.acquire_timeout(Duration::from_secs(5)).await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(guard.nodes_held(), 2);
    assert!(elapsed < node_timeout, "{elapsed:?}");
    // The frozen node's answer is awaited for the node timeout, then no longer.
    settled(&guard).await;
    assert_eq!(guard.nodes_held(), 2);
    guard.unlock().await.unwrap();
    assert_eq!(nodes.keys(0).await, NONE);
    assert_eq!(nodes.keys(1).await, NONE);

    nodes.servers[2].resume();
    eventually(
        "the grant the frozen node gives on waking is released",
        Duration::from_secs(10),
        || async { nodes.keys(2).await.is_empty() },
    )
    .await;
}

/// A node that answers after the quorum, but within the node timeout, joins the hold: it
/// is renewed with the others and released by the unlock, which leaves no key anywhere.
#[tokio::test]
async fn a_node_answering_after_the_quorum_joins_the_hold_and_is_released_with_it() {
    let lease = Duration::from_secs(3);
    let mut nodes = Nodes::start_with(3, |config| config.watchdog_timeout(lease)).await;
    let lock = RedLock::new(&nodes.clients, "rl:late")
        .unwrap()
        .node_timeout(Duration::from_secs(2));
    warm_up(&lock).await;

    nodes.servers[2].pause();
    let guard = lock.acquire_timeout(Duration::from_secs(5)).await.unwrap();
    assert_eq!(guard.nodes_held(), 2, "returned at the quorum");
    assert_eq!(guard.nodes_pending(), 1, "node 2's answer is awaited");
    nodes.servers[2].resume();
    held_on(&guard, 3).await;
    assert_eq!(guard.nodes_pending(), 0);
    let on_node_2 = nodes.clients[2].lock("rl:late").unwrap();
    assert!(on_node_2.is_locked().await.unwrap());
    // The watchdog renews the joined node too: two renewal intervals (1 s each) later its
    // hold is still there with a fresh lease.
    tokio::time::sleep(lease * 2 / 3 + Duration::from_millis(200)).await;
    let ttl = on_node_2
        .remaining_ttl()
        .await
        .unwrap()
        .expect("still held");
    assert!(ttl > lease / 2, "renewed: {ttl:?}");
    guard.unlock().await.unwrap();
    for node in 0..3 {
        assert_eq!(nodes.keys(node).await, NONE, "node {node}");
    }
}

/// Test 5: 2 of 3 nodes already hold the lock for another owner: our attempt fails and
/// releases what it took; the other owner's holds are untouched.
#[tokio::test]
async fn two_of_three_held_elsewhere_fails_and_releases_what_it_took() {
    let nodes = Nodes::start(3).await;
    let others = nodes.other_clients().await;
    let them = LockOwner::new();
    let mut theirs = Vec::new();
    for client in &others[..2] {
        let lock = client.lock("rl:contended").unwrap();
        theirs.push(
            lock.acquire_with(AcquireOptions::new().owner(them))
                .await
                .unwrap(),
        );
    }
    let lock = RedLock::new(&nodes.clients, "rl:contended")
        .unwrap()
        .retry_delay(Duration::from_millis(20));
    assert!(lock.try_acquire().await.unwrap().is_none());
    let failed = lock.acquire_timeout(Duration::from_millis(300)).await;
    assert!(
        matches!(&failed, Err(LockError::Timeout { name, .. }) if name == "rl:contended"),
        "{failed:?}"
    );
    assert_eq!(
        nodes.keys(2).await,
        NONE,
        "what it took on the free node is released"
    );
    for (node, client) in others[..2].iter().enumerate() {
        assert_eq!(nodes.keys(node).await, ["rl:contended"]);
        let holds = client.lock("rl:contended").unwrap().hold_count(them).await;
        assert_eq!(
            holds.unwrap(),
            1,
            "node {node}: the other owner's hold is untouched"
        );
    }
    for guard in theirs {
        guard.unlock().await.unwrap();
    }
}

/// Three nodes, the clients of two RedLock users (A and B), and a third client on node 2
/// that keeps A off node 2, so A's quorum is exactly nodes 0 and 1.
struct RestartRig {
    nodes: Nodes,
    b_clients: Vec<LockClient>,
    blocker: LockClient,
}

impl RestartRig {
    async fn start() -> RestartRig {
        let nodes = Nodes::start(3).await;
        let b_clients = nodes.other_clients().await;
        let blocker = LockClient::from_url(&nodes.servers[2].url()).await.unwrap();
        RestartRig {
            nodes,
            b_clients,
            blocker,
        }
    }

    /// A takes `name` with a fixed `lease` on nodes 0 and 1 only. The blocker keeps node 2
    /// until node 2 has answered A (busy): the acquire returns at the quorum, and a request
    /// that reached node 2 after the blocker's release would still join A's hold.
    async fn a_holds_on_a_bare_quorum(&self, name: &str, lease: Duration) -> RedLockGuard {
        let blocked = self.blocker.lock(name).unwrap().acquire().await.unwrap();
        let a = RedLock::new(&self.nodes.clients, name).unwrap();
        let options = AcquireOptions::new()
            .lease(lease)
            .wait(Duration::from_secs(2));
        let guard = a.acquire_with(options).await.unwrap();
        settled(&guard).await;
        assert_eq!(guard.nodes_held(), 2);
        blocked.unlock().await.unwrap();
        guard
    }

    fn b(&self, name: &str) -> RedLock {
        RedLock::new(&self.b_clients, name)
            .unwrap()
            .retry_delay(Duration::from_millis(10))
    }
}

/// Test 6, with a restart delay: node 1 (half of A's quorum) is killed and comes back as an
/// empty process only after the restart delay (the longest lease in use: A's). During the
/// delay it refuses connections, and B, trying all along, gets no quorum; B holds the lock
/// only once A's validity is over. Three trials. Restarted at once instead, the same rig
/// makes two holders (the test below), so this one fails if the delay is cut short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_restarted_empty_with_a_restart_delay_never_makes_a_second_holder() {
    let lease = Duration::from_millis(1500);
    let delay = lease; // the restart delay: at least the longest lease in use
    let mut rig = RestartRig::start().await;
    for trial in 0..3 {
        let name = format!("rl:delayed:{trial}");
        let a = rig.a_holds_on_a_bare_quorum(&name, lease).await;
        let a_valid_until = a.valid_until();

        rig.nodes.servers[1].stop(); // SIGKILL: no persistence, it comes back empty
        let back_at = Instant::now() + delay;
        let b = rig.b(&name);
        let b_takes = tokio::spawn(async move {
            let options = AcquireOptions::new()
                .lease(Duration::from_secs(10))
                .wait(Duration::from_secs(10));
            let guard = b.acquire_with(options).await;
            (guard, Instant::now())
        });
        // The node refuses during the delay, and B holds nothing while A's hold lasts.
        let refused = rig.b_clients[1].lock(&name).unwrap().is_locked().await;
        assert!(
            matches!(refused, Err(LockError::Unavailable { .. })),
            "trial {trial}: node 1 answered during its restart delay: {refused:?}"
        );
        assert!(
            Instant::now() >= a_valid_until || !b_takes.is_finished(),
            "trial {trial}: B holds the lock while A's validity lasts"
        );
        tokio::time::sleep_until(back_at.into()).await;
        rig.nodes.servers[1].restart(); // a real, empty process on the same port
        let (b_guard, b_holds_from) = timeout(Duration::from_secs(15), b_takes)
            .await
            .expect("B's acquire ends")
            .unwrap();
        let b_guard = b_guard.expect("B takes the lock once A's has expired");
        assert!(
            b_holds_from >= a_valid_until,
            "trial {trial}: B held the lock {:?} before A's validity ended",
            a_valid_until - b_holds_from
        );
        drop(a);
        b_guard.unlock().await.unwrap();
    }
    for node in 0..3 {
        let nodes = &rig.nodes;
        eventually("no key is left", Duration::from_secs(5), || async {
            nodes.keys(node).await.is_empty()
        })
        .await;
    }
}

/// Test 6, without the delay: the known unsafety. Node 1 restarts empty (a real process
/// restart, no persistence) and serves at once; B wins nodes 1 and 2 while A, which never
/// renews a fixed lease, still has seconds of validity: two holders.
#[tokio::test]
async fn node_restarted_empty_without_a_delay_shows_two_holders() {
    let mut rig = RestartRig::start().await;
    let a = rig
        .a_holds_on_a_bare_quorum("rl:unsafe", Duration::from_secs(10))
        .await;
    rig.nodes.servers[1].restart();
    let b = rig
        .b("rl:unsafe")
        .acquire_with(
            AcquireOptions::new()
                .lease(Duration::from_secs(10))
                .wait(Duration::from_secs(5)),
        )
        .await
        .expect("B wins the restarted node and the free one");
    let b_holds_from = Instant::now();
    assert!(b_holds_from < a.valid_until(), "both hold it at once");
    assert!(a.validity() > Duration::ZERO && b.validity() > Duration::ZERO);
    assert!(!a.is_lost(), "A cannot know: nothing renews a fixed lease");
    b.unlock().await.unwrap();
    drop(a);
}

/// Test 9: the watchdog on a 3-node RedLock. One node killed mid-hold: the lock is kept
/// (renewed on the other two). A second node killed: `lost()` fires within one renewal
/// interval.
#[tokio::test]
async fn watchdog_keeps_the_lock_through_one_dead_node_and_loses_it_with_two() {
    let lease = Duration::from_secs(3);
    let mut nodes = Nodes::start_with(3, |config| config.watchdog_timeout(lease)).await;
    let interval = lease / 3;
    let lock = RedLock::new(&nodes.clients, "rl:watchdog").unwrap();
    let guard = lock.acquire_timeout(Duration::from_secs(2)).await.unwrap();
    held_on(&guard, 3).await;
    let lost = guard.lost();
    tokio::pin!(lost);

    nodes.servers[2].stop();
    // Two full renewal rounds and more: a fixed 3 s lease would be nearly gone by now.
    let kept = timeout(interval * 5 / 2, &mut lost).await;
    assert!(
        kept.is_err(),
        "one dead node of three must not lose the lock"
    );
    assert!(!guard.is_lost());
    assert!(
        guard.validity() > lease - interval - Duration::from_millis(500),
        "validity restarted by the rounds: {:?}",
        guard.validity()
    );
    for node in 0..2 {
        let ttl = nodes.clients[node]
            .lock("rl:watchdog")
            .unwrap()
            .remaining_ttl()
            .await
            .unwrap()
            .expect("still held");
        assert!(
            ttl > lease - interval - Duration::from_millis(500),
            "node {node}: {ttl:?}"
        );
    }

    nodes.servers[1].stop();
    let started = Instant::now();
    timeout(interval + Duration::from_millis(500), &mut lost)
        .await
        .expect("lost() fires within one renewal interval of the second node dying");
    assert!(started.elapsed() <= interval + Duration::from_millis(500));
    assert!(guard.is_lost());
    assert_eq!(guard.validity(), Duration::ZERO);
    // Only one node can confirm the release: not a quorum.
    assert!(guard.unlock().await.is_err());
    assert_eq!(nodes.keys(0).await, NONE);
}

#[tokio::test]
async fn a_fixed_lease_is_lost_when_its_validity_runs_out() {
    let nodes = Nodes::start(3).await;
    let lock = RedLock::new(&nodes.clients, "rl:fixed").unwrap();
    let lease = Duration::from_millis(400);
    let guard = lock
        .acquire_with(AcquireOptions::new().lease(lease))
        .await
        .unwrap();
    let validity = guard.validity();
    assert!(validity > Duration::ZERO && validity <= lease - RedLock::clock_drift(lease));
    let lost_at = Instant::now() + validity;
    timeout(lease + Duration::from_secs(1), guard.lost())
        .await
        .expect("lost once the validity runs out");
    assert!(Instant::now() >= lost_at);
    assert_eq!(guard.validity(), Duration::ZERO);
    // The keys ran out on every node too.
    for node in 0..3 {
        let nodes = &nodes;
        eventually(
            "the lease runs out in Redis",
            Duration::from_secs(2),
            || async { nodes.keys(node).await.is_empty() },
        )
        .await;
    }
}

#[tokio::test]
async fn bad_setups_are_refused_up_front() {
    let nodes = Nodes::start(1).await;
    let twice = [nodes.clients[0].clone(), nodes.clients[0].clone()];
    assert!(matches!(
        RedLock::new(&twice, "x"),
        Err(LockError::InvalidConfig { .. })
    ));
    assert!(matches!(
        RedLock::new(&[], "x"),
        Err(LockError::InvalidConfig { .. })
    ));
    assert!(matches!(
        RedLock::new(&nodes.clients, ""),
        Err(LockError::InvalidName { .. })
    ));
    let lock = RedLock::new(&nodes.clients, "x").unwrap();
    let too_short = lock
        .acquire_with(AcquireOptions::new().lease(Duration::from_millis(10)))
        .await;
    assert!(
        matches!(too_short, Err(LockError::InvalidConfig { .. })),
        "{too_short:?}"
    );
    assert_eq!(nodes.keys(0).await, NONE);
}

/// Two handles to one server count as one node whatever their URLs say: the server's own
/// `run_id` decides. `localhost` and `127.0.0.1`, with and without the trailing slash, or
/// another database of the same server, would otherwise pass as independent nodes, and a
/// quorum could sit on one process.
#[tokio::test]
async fn one_server_under_two_spellings_is_refused() {
    let nodes = Nodes::start(2).await;
    let port = nodes.servers[0].port();
    for other in [
        format!("redis://localhost:{port}/"),
        format!("redis://127.0.0.1:{port}"),
        format!("redis://127.0.0.1:{port}/3"),
    ] {
        let twin = LockClient::from_url(&other).await.unwrap();
        let clients = [
            nodes.clients[0].clone(),
            nodes.clients[1].clone(),
            twin.clone(),
        ];
        let refused = RedLock::new(&clients, "rl:twins");
        let Err(LockError::InvalidConfig { reason }) = &refused else {
            panic!("{other}: expected InvalidConfig, got {refused:?}");
        };
        assert!(
            reason.contains("same Redis server") && reason.contains(&port.to_string()),
            "{other}: says which server: {reason}"
        );
        twin.shutdown();
    }
    // Distinct servers still pass.
    assert!(RedLock::new(&nodes.clients, "rl:twins").is_ok());
}
