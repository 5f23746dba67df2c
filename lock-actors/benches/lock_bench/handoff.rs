//! The handoff scenario: from the holder's unlock call to a waiter in another client
//! returning, against the limit (PUBLISH delivery + one EVALSHA) and rslock.

use super::*;

#[derive(Clone, Copy)]
pub(crate) struct Handoff {
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) limit_us: f64,
    pub(crate) rslock_p50_us: f64,
}

pub(crate) async fn handoff(
    url: &str,
    inspector: &mut Inspector,
    trace: bool,
    redisson: Option<&mut redisson::Redisson>,
    rows: &mut Vec<Row>,
) -> Handoff {
    eprintln!("[handoff] {HANDOFFS} hand-offs between two clients");
    let holder = connect(ClientConfig::new(url)).await;
    let waiter = connect(ClientConfig::new(url)).await;
    let mut samples = Vec::with_capacity(HANDOFFS);
    let mut stages = Stages::default();
    for i in 0..HANDOFFS {
        let name = format!("bench:handoff:{i}");
        let guard = holder
            .lock(&name)
            .expect("valid name")
            .acquire()
            .await
            .expect("holder acquire");
        let pttl_before = inspector.calls("pttl").await;
        let waiting = spawn_waiter(waiter.lock(&name).expect("valid name"));
        // Parked: subscribed and refused twice (each refusal runs PTTL in the script).
        let deadline = Instant::now() + Duration::from_secs(10);
        while inspector.calls("pttl").await < pttl_before + 2 {
            assert!(Instant::now() < deadline, "handoff waiter never parked");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        tokio::time::sleep(IDLE_BEFORE_UNLOCK).await;
        let t0 = Instant::now();
        guard.unlock().await.expect("holder unlock");
        let acquired = waiting.await.expect("waiter task");
        samples.push(micros(acquired.duration_since(t0)));
        if trace {
            stages.add(&name, t0, acquired);
        }
        if (i + 1) % 500 == 0 {
            eprintln!(
                "[handoff] {} done, p50 so far {:.1} us",
                i + 1,
                percentile(&mut samples.clone(), 50.0)
            );
        }
    }
    holder.shutdown();
    waiter.shutdown();
    if trace {
        stages.print();
    }
    let p50 = percentile(&mut samples, 50.0);
    let p99 = percentile(&mut samples, 99.0);

    eprintln!(
        "[handoff] limit: {HANDOFFS} PUBLISH-to-delivery times and EVALSHA round trips, \
         from idle and back to back"
    );
    let (publish_us, rtt_us) = handoff_limit(url, IDLE_BEFORE_UNLOCK).await;
    let limit = publish_us + rtt_us;
    let (hot_publish_us, hot_rtt_us) = handoff_limit(url, Duration::ZERO).await;
    let hot_limit = hot_publish_us + hot_rtt_us;
    eprintln!(
        "[handoff] limit from idle = {publish_us:.1} us delivery + {rtt_us:.1} us EVALSHA \
         = {limit:.1} us; back to back = {hot_publish_us:.1} + {hot_rtt_us:.1} = {hot_limit:.1} us"
    );

    eprintln!("[handoff] rslock: {RSLOCK_HANDOFFS} hand-offs (its waiter polls with random 0-200 ms delays)");
    let rslock_p50 = rslock_handoff(url).await;

    let ratio = p50 / limit;
    let to_rslock = p50 / rslock_p50;
    rows.push(
        Row::new("handoff", "p50 us", Some(p50))
            .target("<= rslock p50 / 20", Some(to_rslock <= 1.0 / 20.0)),
    );
    rows.push(Row::new("handoff", "p99 us", Some(p99)));
    rows.push(Row::new(
        "handoff",
        "limit us (delivery + EVALSHA, from idle)",
        Some(limit),
    ));
    rows.push(Row::new(
        "handoff",
        "limit us, back to back (not used)",
        Some(hot_limit),
    ));
    rows.push(
        Row::new("handoff", "ratio_to_limit", Some(ratio)).target("<= 1.0", Some(ratio <= 1.0)),
    );
    rows.push(Row::new("handoff", "rslock p50 us", Some(rslock_p50)));
    if let Some(r) = redisson {
        r.handoff(inspector, (p50, p99), rows).await;
    }
    Handoff {
        p50_us: p50,
        p99_us: p99,
        limit_us: limit,
        rslock_p50_us: rslock_p50,
    }
}

/// A waiter for `lock`, spawned: when it got the lock (it unlocks at once).
pub(crate) fn spawn_waiter(
    lock: actix_distributed_lock_actors::Lock,
) -> tokio::task::JoinHandle<Instant> {
    tokio::spawn(async move {
        let guard = lock
            .acquire_timeout(Duration::from_secs(10))
            .await
            .expect("waiter acquire");
        let acquired = Instant::now();
        guard.unlock().await.expect("waiter unlock");
        acquired
    })
}

/// Where hand-offs spend their time, from the library's own events (`LOCK_BENCH_TRACE=1`).
#[derive(Default)]
pub(crate) struct Stages {
    /// unlock call → the holder's actor has the unlock reply (`released`)
    pub(crate) released: Vec<f64>,
    /// unlock call → the waiter's actor has the unlock message (`woken`)
    pub(crate) woken: Vec<f64>,
    /// `woken` → the waiter's actor has the acquire reply (`acquired`)
    pub(crate) attempt: Vec<f64>,
    /// `acquired` → the waiting task runs again
    pub(crate) reply: Vec<f64>,
}

impl Stages {
    pub(crate) fn add(&mut self, name: &str, t0: Instant, resumed: Instant) {
        let events = TIMELINE.with_events(|events| events.remove(name));
        let Some(events) = events else { return };
        let times = |what: &str| -> Vec<Instant> {
            events
                .iter()
                .filter(|(_, message)| message == what)
                .map(|(at, _)| *at)
                .collect()
        };
        // The holder's release comes first (the waiter releases too, later); the waiter's
        // grant comes last (the holder's own grant came first).
        let released = times("released").first().copied();
        let woken = times("woken").first().copied();
        let acquired = times("acquired").last().copied();
        if let (Some(released), Some(woken), Some(acquired)) = (released, woken, acquired) {
            let since =
                |later: Instant, earlier: Instant| micros(later.saturating_duration_since(earlier));
            self.released.push(since(released, t0));
            self.woken.push(since(woken, t0));
            self.attempt.push(since(acquired, woken));
            self.reply.push(since(resumed, acquired));
        }
    }

    pub(crate) fn print(&mut self) {
        if self.woken.is_empty() {
            eprintln!("[handoff] trace: no events recorded");
            return;
        }
        eprintln!(
            "[handoff] trace over {} hand-offs (p50s): unlock call -> holder has unlock reply {:.1} us; \
             unlock call -> waiter actor woken {:.1} us; woken -> acquire reply in waiter actor {:.1} us; \
             -> waiting task resumed {:.1} us",
            self.woken.len(),
            percentile(&mut self.released, 50.0),
            percentile(&mut self.woken, 50.0),
            percentile(&mut self.attempt, 50.0),
            percentile(&mut self.reply, 50.0),
        );
    }
}

/// The events of the library the hand-off trace needs, by lock name.
pub(crate) static TIMELINE: TimelineEvents = TimelineEvents(std::sync::Mutex::new(None));

/// Event times and messages, by lock name.
pub(crate) type EventsByLock = HashMap<String, Vec<(Instant, String)>>;

pub(crate) struct TimelineEvents(std::sync::Mutex<Option<EventsByLock>>);

impl TimelineEvents {
    pub(crate) fn with_events<T>(&self, f: impl FnOnce(&mut EventsByLock) -> T) -> T {
        let mut events = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(events.get_or_insert_with(HashMap::new))
    }
}

/// A minimal `tracing` subscriber that timestamps the lock events of the hand-off trace.
pub(crate) struct Timeline;

#[derive(Default)]
pub(crate) struct EventFields {
    pub(crate) message: String,
    pub(crate) lock: String,
}

impl tracing::field::Visit for EventFields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "lock" => self.lock = format!("{value:?}"),
            _ => {}
        }
    }
}

impl tracing::Subscriber for Timeline {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata
            .target()
            .starts_with("actix_distributed_lock_actors")
            && metadata.is_event()
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let at = Instant::now();
        let mut fields = EventFields::default();
        event.record(&mut fields);
        if matches!(fields.message.as_str(), "released" | "woken" | "acquired") {
            TIMELINE.with_events(|events| {
                events
                    .entry(fields.lock)
                    .or_default()
                    .push((at, fields.message));
            });
        }
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

/// The p50 of PUBLISH-to-delivery on another connection and of one EVALSHA round trip sent
/// right after the delivery, as a woken waiter sends it. With `idle` > 0 every sample starts
/// after that long without traffic, as the library's hand-offs do (the waiter had to park
/// first), so both sides pay the same wake-ups of parked threads.
pub(crate) async fn handoff_limit(url: &str, idle: Duration) -> (f64, f64) {
    let client = redis::Client::open(url).expect("valid url");
    let channel = "redisson_lock__channel:{bench:limit}";
    let pubsub = client.get_async_pubsub().await.expect("pub/sub connection");
    let (mut sink, mut stream) = pubsub.split();
    sink.subscribe(channel).await.expect("SUBSCRIBE");
    let mut conn = plain_connection(url).await;
    // Its own name: its unlock publishes, and not on the channel measured above.
    let plain = PlainLock::new("bench:limit:rtt");
    let mut delivery = Vec::with_capacity(HANDOFFS);
    let mut rtt = Vec::with_capacity(HANDOFFS);
    for i in 0..HANDOFFS + 100 {
        let mut publisher = conn.clone();
        if !idle.is_zero() {
            tokio::time::sleep(idle).await;
        }
        let t0 = Instant::now();
        let publish = async move {
            let _: i64 = redis::cmd("PUBLISH")
                .arg(channel)
                .arg("0")
                .query_async(&mut publisher)
                .await
                .expect("PUBLISH");
        };
        let receive = async {
            stream.next().await.expect("pub/sub message");
            Instant::now()
        };
        let ((), arrived) = join(publish, receive).await;
        let e = plain.acquire_timed(&mut conn).await;
        plain.unlock(&mut conn).await;
        if i >= 100 {
            delivery.push(micros(arrived.duration_since(t0)));
            rtt.push(e);
        }
    }
    (percentile(&mut delivery, 50.0), percentile(&mut rtt, 50.0))
}

pub(crate) async fn rslock_handoff(url: &str) -> f64 {
    let holder = rslock::LockManager::new(vec![url.to_string()]);
    let waiter = rslock::LockManager::new(vec![url.to_string()]);
    let lease = Duration::from_millis(LEASE_MS);
    let mut samples = Vec::with_capacity(RSLOCK_HANDOFFS);
    for i in 0..RSLOCK_HANDOFFS {
        let name = format!("bench:rslock:handoff:{i}");
        let lock = holder
            .lock(name.as_bytes(), lease)
            .await
            .expect("rslock lock");
        let waiting = {
            let waiter = waiter.clone();
            let name = name.clone();
            tokio::spawn(async move {
                let guard = waiter
                    .acquire(name.as_bytes(), lease)
                    .await
                    .expect("rslock acquire");
                let acquired = Instant::now();
                guard.release().await;
                acquired
            })
        };
        // Unlock at a random point of the waiter's retry cycle.
        let pause = 20 + rand::random::<u64>() % 200;
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let t0 = Instant::now();
        holder.unlock(&lock).await;
        let acquired = waiting.await.expect("rslock waiter task");
        samples.push(micros(acquired.duration_since(t0)));
    }
    let p50 = percentile(&mut samples, 50.0);
    eprintln!("[handoff] rslock p50 {p50:.0} us");
    p50
}
