//! The web scenario: what a user pays for `#[distributed_lock]` on an actix-web handler.
//!
//! One actix-web server (one worker, on a thread of its own) serves the same empty handler
//! twice: bare, and under `#[distributed_lock("bench:web:order:<id>")]`. `WEB_USERS` users
//! (one client thread, concurrent requests on keep-alive connections) each send requests on
//! orders of their own, the two routes in turn; the added p50 per request (locked − bare) is
//! set against the p50 of one bare acquire + unlock pair of the same client, measured by as
//! many concurrent tasks between the HTTP rounds.

use super::*;
use actix_distributed_lock::distributed_lock;
use actix_web::{web, App, HttpResponse, HttpServer};

/// Concurrent users sending requests (and tasks measuring the bare pair).
const WEB_USERS: usize = 16;
/// Requests per route per user in one round.
const WEB_REQUESTS: usize = 100;

#[derive(Clone, Copy)]
pub(crate) struct Web {
    pub(crate) bare_us: f64,
    pub(crate) locked_us: f64,
    pub(crate) pair_us: f64,
    /// Added p50 / pair p50, round by round.
    pub(crate) ratio: Spread,
}

impl Web {
    /// What the attribute adds to a request's p50.
    pub(crate) fn added_us(&self) -> f64 {
        self.locked_us - self.bare_us
    }
}

#[distributed_lock("bench:web:order:<id>", wait = "5s")]
async fn locked(id: web::Path<u64>) -> HttpResponse {
    let _ = id;
    HttpResponse::NoContent().finish()
}

async fn bare(id: web::Path<u64>) -> HttpResponse {
    let _ = id;
    HttpResponse::NoContent().finish()
}

pub(crate) async fn web_row(url: &str, rows: &mut Vec<Row>) -> Web {
    eprintln!("[web] {ROUNDS} rounds: {WEB_USERS} users x {WEB_REQUESTS} requests per route (bare and locked in turn), then {WEB_USERS} tasks x {WEB_REQUESTS} bare acquire + unlock pairs");
    let client = connect(ClientConfig::new(url)).await;
    let (addr, server) = serve(client.clone());
    let base = format!("http://{addr}");
    let (mut bare_p50s, mut locked_p50s, mut pair_p50s) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..=ROUNDS {
        let (mut bare, mut locked) = requests(&base, r).await;
        let mut pairs = pairs(&client, r).await;
        if r == 0 {
            continue; // warm-up: connections, actors, scripts
        }
        let (b, l, p) = (
            percentile(&mut bare, 50.0),
            percentile(&mut locked, 50.0),
            percentile(&mut pairs, 50.0),
        );
        eprintln!(
            "[web] round {r}: bare p50 {b:.1} us, locked p50 {l:.1} us (added {:.1}), pair p50 {p:.1} us ({:.3})",
            l - b,
            (l - b) / p
        );
        bare_p50s.push(b);
        locked_p50s.push(l);
        pair_p50s.push(p);
    }
    server.stop(true).await;
    client.shutdown();
    let added: Vec<f64> = locked_p50s
        .iter()
        .zip(&bare_p50s)
        .map(|(l, b)| l - b)
        .collect();
    let ratio = Spread::ratios(&added, &pair_p50s);
    let result = Web {
        bare_us: median(&mut bare_p50s),
        locked_us: median(&mut locked_p50s),
        pair_us: median(&mut pair_p50s),
        ratio,
    };
    rows.push(Row::new(
        "web",
        "request p50 us, bare handler",
        Some(result.bare_us),
    ));
    rows.push(Row::new(
        "web",
        "request p50 us, #[distributed_lock]",
        Some(result.locked_us),
    ));
    rows.push(Row::new("web", "added p50 us", Some(result.added_us())));
    rows.push(Row::new(
        "web",
        "acquire + unlock pair p50 us",
        Some(result.pair_us),
    ));
    rows.push(
        Row::new(
            "web",
            &format!("added / pair ({})", ratio.label()),
            Some(ratio.median),
        )
        .target("<= 1.1", Some(ratio.median <= 1.1)),
    );
    result
}

/// Starts the server on a thread of its own; its address and its handle.
fn serve(client: LockClient) -> (std::net::SocketAddr, actix_web::dev::ServerHandle) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            let data = web::Data::new(client);
            let server = HttpServer::new(move || {
                App::new()
                    .app_data(data.clone())
                    .route("/bare/{id}", web::post().to(bare))
                    .route("/locked/{id}", web::post().to(locked))
            })
            .workers(1)
            .bind(("127.0.0.1", 0))
            .expect("bind the web scenario's server");
            let addr = server.addrs()[0];
            let running = server.run();
            tx.send((addr, running.handle())).expect("the bench waits");
            running.await.expect("the web scenario's server");
        });
    });
    rx.recv().expect("the web scenario's server starts")
}

/// One round of requests: every user sends `WEB_REQUESTS` requests to each route, the two
/// routes in turn, each on an order of its own; the latencies of each route, in µs.
async fn requests(base: &str, round: usize) -> (Vec<f64>, Vec<f64>) {
    let base = base.to_string();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let result = actix_web::rt::System::new().block_on(async move {
            let http = awc::Client::builder()
                .timeout(Duration::from_secs(30))
                .finish();
            let users = (0..WEB_USERS).map(|user| {
                let http = http.clone();
                let base = base.clone();
                async move {
                    let (mut bare, mut locked) = (Vec::new(), Vec::new());
                    for i in 0..WEB_REQUESTS {
                        let order = (round * WEB_USERS + user) * WEB_REQUESTS + i;
                        for k in 0..2 {
                            let route = if (i + k) % 2 == 0 { "bare" } else { "locked" };
                            let t0 = Instant::now();
                            let response = http
                                .post(format!("{base}/{route}/{order}"))
                                .send()
                                .await
                                .expect("a request of the web scenario");
                            let us = micros(t0.elapsed());
                            assert!(
                                response.status().is_success(),
                                "{route}: {}",
                                response.status()
                            );
                            if route == "bare" {
                                bare.push(us);
                            } else {
                                locked.push(us);
                            }
                        }
                    }
                    (bare, locked)
                }
            });
            let mut all = (Vec::new(), Vec::new());
            for (bare, locked) in futures_util::future::join_all(users).await {
                all.0.extend(bare);
                all.1.extend(locked);
            }
            all
        });
        let _ = tx.send(result);
    });
    rx.await.expect("the web scenario's requests")
}

/// `WEB_USERS` tasks each take and release `WEB_REQUESTS` locks of their own: the pairs'
/// latencies, in µs.
async fn pairs(client: &LockClient, round: usize) -> Vec<f64> {
    let tasks: Vec<_> = (0..WEB_USERS)
        .map(|user| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(WEB_REQUESTS);
                for i in 0..WEB_REQUESTS {
                    let name = format!("bench:web:pair:{round}:{user}:{i}");
                    let lock = client.lock(&name).expect("valid name");
                    let t0 = Instant::now();
                    let guard = lock.acquire().await.expect("pair acquire");
                    guard.unlock().await.expect("pair unlock");
                    samples.push(micros(t0.elapsed()));
                }
                samples
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("a pair task"));
    }
    all
}
