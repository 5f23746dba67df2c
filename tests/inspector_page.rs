//! The inspector page (`inspect::page`), mounted as the order service example mounts it,
//! against a real Redis: its JSON endpoints in-process, and the page itself in headless
//! Chromium (Debian's `chromium`, driven by `playwright-core` from
//! `tests/browser/inspector_page.mjs`). `scripts/test` installs both; this test runs
//! `npm ci` itself when `tests/browser/node_modules` is missing.
#![cfg(feature = "inspector")]
// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

#[allow(dead_code)]
#[path = "../examples/order_service.rs"]
mod order_service;

use actix_distributed_lock::{AcquireOptions, LockClient, LockName, LockOwner};
use actix_web::{http::StatusCode, test, web, App, HttpServer};
use redis::AsyncCommands;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use support::RedisServer;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// A name that is markup, quotes, an entity, hash-tag braces, a slash, a query and unicode.
const HOSTILE: &str = "<img src=x onerror=alert(1)>&amp;\"q'{tag}/a?b=c%20#ü✓";

/// How long one step of the browser script may take (CI is loaded; Chromium starts slowly).
const STEP_BOUND: Duration = Duration::from_secs(60);

/// How long the waiter may take to get the lock, and the holder to learn it lost it.
const GRANT_BOUND: Duration = Duration::from_secs(20);

/// How long the page's live feeds may outlive the browser: two keep-alive writes (5 s
/// apart; the second one fails) and a margin for a loaded machine.
const FEED_END_BOUND: Duration = Duration::from_secs(30);

/// A holder's client: a 3 s watchdog lease, so a renewal notices a forced release within
/// about a second even if nothing else tells it.
async fn holder_client(server: &RedisServer) -> LockClient {
    support::client_with(server, |c| c.watchdog_timeout(Duration::from_secs(3))).await
}

macro_rules! page_app {
    ($locks:expr, $force:expr) => {
        test::init_service(
            App::new()
                .app_data(web::Data::new($locks.clone()))
                .service(order_service::inspector_page($force)),
        )
        .await
    };
}

fn query(name: &str) -> String {
    // encodeURIComponent's set, as the page sends names.
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z'
            | b'a'..=b'z'
            | b'0'..=b'9'
            | b'-'
            | b'_'
            | b'.'
            | b'!'
            | b'~'
            | b'*'
            | b'\''
            | b'('
            | b')' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[actix_web::test]
async fn the_json_endpoints_answer_for_any_name_and_refuse_what_they_must() {
    let server = RedisServer::start();
    let locks = holder_client(&server).await;
    let held = locks.lock(HOSTILE).unwrap().acquire().await.unwrap();
    let mut redis = server.conn().await;
    redis
        .set::<_, _, ()>("plain:string", "hello")
        .await
        .unwrap();

    let app = page_app!(locks, false);
    let list: serde_json::Value = test::call_and_read_body_json(
        &app,
        test::TestRequest::get()
            .uri("/locks/api/locks")
            .to_request(),
    )
    .await;
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, [HOSTILE], "only the lock is listed, not the string");

    let uri = format!("/locks/api/lock?name={}", query(HOSTILE));
    let shown: serde_json::Value =
        test::call_and_read_body_json(&app, test::TestRequest::get().uri(&uri).to_request()).await;
    assert_eq!(shown["name"], HOSTILE);
    assert_eq!(shown["kind"], "reentrant");
    assert_eq!(shown["holders"][0]["owner"], held.owner().id());
    assert_eq!(shown["holders"][0]["client_id"], locks.id());

    // The live feed: server-sent events, the first one the lock as found.
    let uri = format!("/locks/api/events?name={}", query(HOSTILE));
    let feed = test::call_service(&app, test::TestRequest::get().uri(&uri).to_request()).await;
    assert_eq!(feed.status(), StatusCode::OK);
    assert_eq!(
        feed.headers().get("content-type").unwrap(),
        "text/event-stream"
    );
    let first = first_event(feed.into_body()).await;
    assert_eq!(first["lock"]["name"], HOSTILE);
    assert_eq!(first["changes"][0]["event"], "granted");
    assert_eq!(first["changes"][0]["holder"]["owner"], held.owner().id());

    for (uri, status) in [
        (
            "/locks/api/lock?name=no%3Asuch".to_string(),
            StatusCode::NOT_FOUND,
        ),
        (
            "/locks/api/lock?name=plain%3Astring".to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        ("/locks/api/lock".to_string(), StatusCode::BAD_REQUEST),
    ] {
        let response =
            test::call_service(&app, test::TestRequest::get().uri(&uri).to_request()).await;
        assert_eq!(response.status(), status, "{uri}");
    }

    // Off unless enabled in code: 403 whatever the body.
    let body = serde_json::json!({ "name": HOSTILE, "confirm": HOSTILE });
    let refused = test::call_service(&app, force_unlock_request(&body)).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);

    let app = page_app!(locks, true);
    let pool = locks.semaphore("pool:db").unwrap();
    pool.set_permits(3).await.unwrap();
    let shown = [format!("{}:{}", locks.id(), held.owner().id())];
    let body = serde_json::json!({ "name": HOSTILE, "confirm": HOSTILE, "holders": shown });
    let wrong = serde_json::json!({ "name": HOSTILE, "confirm": "order:42", "holders": shown });
    let unnamed = serde_json::json!({ "name": HOSTILE, "confirm": HOSTILE });
    let semaphore = serde_json::json!({ "name": "pool:db", "confirm": "pool:db", "holders": [] });
    let cases = [
        (
            test::TestRequest::post().set_json(&wrong),
            StatusCode::BAD_REQUEST,
        ),
        // The holders the operator saw are part of the confirmation.
        (
            test::TestRequest::post().set_json(&unnamed),
            StatusCode::BAD_REQUEST,
        ),
        // A form (or a bare POST) cannot carry the confirmation.
        (
            test::TestRequest::post()
                .insert_header(("content-type", "text/plain"))
                .set_payload(body.to_string()),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            test::TestRequest::post(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            test::TestRequest::post()
                .insert_header(("sec-fetch-site", "cross-site"))
                .set_json(&body),
            StatusCode::FORBIDDEN,
        ),
        // A semaphore has no holder to force out.
        (
            test::TestRequest::post().set_json(&semaphore),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ];
    for (request, status) in cases {
        let response =
            test::call_service(&app, request.uri("/locks/api/force-unlock").to_request()).await;
        assert_eq!(response.status(), status);
    }
    assert_eq!(pool.available_permits().await.unwrap(), 3);
    assert!(!held.is_lost(), "a refused force-unlock released the lock");
    assert!(redis.exists::<_, bool>(HOSTILE).await.unwrap());
    held.unlock().await.unwrap();

    // No `web::Data<LockClient>`: a 500 that says what to register.
    let bare = test::init_service(App::new().service(order_service::inspector_page(false))).await;
    let response = test::call_service(
        &bare,
        test::TestRequest::get()
            .uri("/locks/api/locks")
            .to_request(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let body = test::read_body(response).await;
    assert!(String::from_utf8_lossy(&body).contains("app_data"));
}

/// The first `data:` event of a server-sent event stream, as JSON.
async fn first_event(body: actix_web::body::BoxBody) -> serde_json::Value {
    use actix_web::body::MessageBody;
    let mut body = std::pin::pin!(body);
    let mut text = String::new();
    let read = async {
        loop {
            // Whole frames only: each ends in a blank line.
            let whole = text.rsplit_once("\n\n").map_or("", |(frames, _)| frames);
            if let Some(data) = whole.lines().find_map(|l| l.strip_prefix("data: ")) {
                return serde_json::from_str(data).unwrap();
            }
            let chunk = std::future::poll_fn(|cx| body.as_mut().poll_next(cx))
                .await
                .expect("the feed ended")
                .unwrap();
            text.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    };
    tokio::time::timeout(STEP_BOUND, read)
        .await
        .expect("no event on the feed")
}

/// The browser script, with its stdin and stdout as a line protocol: it prints a step's
/// name when the page shows it; the test answers with what it did meanwhile.
struct Browser {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Browser {
    async fn start(args: &[&str]) -> Browser {
        let dir = browser_dir();
        ensure_node_modules(&dir).await;
        let mut child = tokio::process::Command::new("node")
            .arg(dir.join("inspector_page.mjs"))
            .args(args)
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("run node (scripts/test installs it): tests/browser/inspector_page.mjs");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Browser {
            child,
            stdin,
            stdout,
        }
    }

    /// Waits for the script to print `step` (its other lines are echoed); panics if it
    /// prints `fail`, ends, or takes longer than [`STEP_BOUND`].
    async fn expect(&mut self, step: &str) -> Vec<String> {
        let mut notes = Vec::new();
        loop {
            let line = tokio::time::timeout(STEP_BOUND, self.stdout.next_line())
                .await
                .unwrap_or_else(|_| panic!("the page did not reach `{step}` in {STEP_BOUND:?}"))
                .expect("read the browser script's output");
            let Some(line) = line else {
                let status = self.child.wait().await;
                panic!(
                    "the browser script ended before `{step}`: {status:?} (its stderr is above)"
                );
            };
            println!("browser: {line}");
            if line == step {
                return notes;
            }
            assert!(
                !line.starts_with("fail"),
                "the browser script failed: {line}"
            );
            notes.push(line);
        }
    }

    async fn say(&mut self, line: &str) {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write to the browser script");
        self.stdin.flush().await.unwrap();
    }
}

fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser")
}

/// `npm ci` in `tests/browser` when `playwright-core` is not installed there yet.
async fn ensure_node_modules(dir: &Path) {
    if dir
        .join("node_modules/playwright-core/package.json")
        .exists()
    {
        return;
    }
    let status = tokio::process::Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .status()
        .await
        .expect("run npm (scripts/test installs node and npm)");
    assert!(status.success(), "npm ci in tests/browser failed: {status}");
}

/// Waits until `field` is queued in fair lock `name`'s queue in Redis.
async fn queued(redis: &redis::aio::MultiplexedConnection, name: &str, field: &str) {
    let queue = LockName::new(name, 1024).unwrap().fair_queue_key();
    let what = format!("{field} queued in {queue}");
    support::eventually(&what, GRANT_BOUND, || {
        let (mut redis, queue) = (redis.clone(), queue.clone());
        async move {
            let waiting: Vec<String> = redis.lrange(&queue, 0, -1).await.unwrap();
            waiting.iter().any(|w| w == field)
        }
    })
    .await;
}

#[actix_web::test]
async fn an_operator_sees_a_holder_and_a_waiter_live_and_force_unlocks_in_the_browser() {
    let server = RedisServer::start();
    let holders = holder_client(&server).await;
    let waiters = support::client(&server).await;
    let name = "order:{42}";
    let held = holders.fair_lock(name).unwrap().acquire().await.unwrap();
    let hostile = holders.lock(HOSTILE).unwrap().acquire().await.unwrap();
    // Locks of the other kinds, so the list shows each (and the screenshot has them).
    let scenery = [
        ("cache:warm", "fast"),
        ("invoice:{7}", "fenced"),
        ("pool:db", "semaphore"),
        ("report:daily", "read_write"),
    ];
    let fast = waiters
        .fast_lock("cache:warm")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let fenced = waiters
        .fenced_lock("invoice:{7}")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let pool = waiters.semaphore("pool:db").unwrap();
    pool.set_permits(5).await.unwrap();
    let permits = pool.acquire(2).await.unwrap();
    let report = waiters.read_write_lock("report:daily").unwrap();
    let readers = [
        report.read().acquire().await.unwrap(),
        report.read().acquire().await.unwrap(),
    ];
    let held_lost = held.lost();
    let hostile_lost = hostile.lost();

    let data = web::Data::new(holders.clone());
    let http = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .service(order_service::inspector_page(true))
    })
    .workers(1)
    .bind(("127.0.0.1", 0))
    .unwrap();
    let base = format!("http://{}", http.addrs()[0]);
    let running = http.run();
    let handle = running.handle();
    actix_web::rt::spawn(running);

    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("inspector-page");
    std::fs::create_dir_all(&shots).unwrap();
    let holder = format!("{}:{}", holders.id(), held.owner().id());
    let mut browser = Browser::start(&[
        &format!("{base}/locks"),
        name,
        HOSTILE,
        &holder,
        shots.to_str().unwrap(),
        &serde_json::json!(scenery
            .into_iter()
            .collect::<std::collections::BTreeMap<_, _>>())
        .to_string(),
    ])
    .await;

    browser.expect("listed").await;
    browser.expect("detail").await;

    // A fair-lock waiter joins while the page is open.
    let owner = LockOwner::new();
    let waiter_field = format!("{}:{}", waiters.id(), owner.id());
    let lock = waiters.fair_lock(name).unwrap();
    let waiting = actix_web::rt::spawn(async move {
        let options = AcquireOptions::new()
            .owner(owner)
            .wait(Duration::from_secs(120));
        lock.acquire_with(options).await
    });
    let mut redis = server.conn().await;
    queued(&redis, name, &waiter_field).await;
    browser.say(&format!("waiter {waiter_field}")).await;
    let notes = browser.expect("waiter-seen").await;
    for note in notes.iter().filter_map(|n| n.strip_prefix("screenshot ")) {
        // Straight to stderr, past the test harness's capture: the path is in every log.
        let line = format!("inspector page screenshot: {note}\n");
        std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes()).unwrap();
    }

    // The operator force-unlocked it: the waiter gets it, the holder learns it lost it.
    browser.expect("forced").await;
    let granted = tokio::time::timeout(GRANT_BOUND, waiting)
        .await
        .expect("the waiter did not get the lock after the force-unlock")
        .unwrap()
        .expect("the waiter's acquire failed");
    tokio::time::timeout(GRANT_BOUND, held_lost)
        .await
        .expect("the holder's lost() did not fire after the force-unlock");
    assert!(held.is_lost());
    browser.say("granted").await;
    browser.expect("granted-seen").await;
    granted.unlock().await.unwrap();
    browser.say("released").await;
    browser.expect("gone").await;

    // The hostile name: rendered as text, its detail and force-unlock work.
    browser.expect("hostile-gone").await;
    tokio::time::timeout(GRANT_BOUND, hostile_lost)
        .await
        .expect("the hostile-named holder's lost() did not fire");
    browser.expect("done").await;
    let status = browser.child.wait().await.unwrap();
    assert!(status.success(), "the browser script exited with {status}");

    for lock in [name, HOSTILE] {
        let lock = LockName::new(lock, 1024).unwrap();
        for key in [
            lock.as_str().to_string(),
            lock.fair_queue_key(),
            lock.fair_timeout_key(),
        ] {
            assert!(
                !redis.exists::<_, bool>(&key).await.unwrap(),
                "{key} left behind"
            );
        }
    }
    drop((fast, fenced, permits, readers));
    // The browser left: its live feeds end and their watches unsubscribe.
    support::eventually(
        "no channel subscribed after the browser left",
        FEED_END_BOUND,
        || {
            let mut redis = redis.clone();
            async move {
                // A reply that times out on a loaded machine is asked again.
                let channels: redis::RedisResult<Vec<String>> = redis::cmd("PUBSUB")
                    .arg("CHANNELS")
                    .query_async(&mut redis)
                    .await;
                channels.is_ok_and(|channels| channels.is_empty())
            }
        },
    )
    .await;
    drop((held, hostile));
    handle.stop(true).await;
}

/// The page's force-unlock request with JSON `body`.
fn force_unlock_request(body: &serde_json::Value) -> actix_http::Request {
    test::TestRequest::post()
        .uri("/locks/api/force-unlock")
        .set_json(body)
        .to_request()
}

#[actix_web::test]
async fn a_force_unlock_confirmed_for_holders_who_left_is_refused_with_the_lock_as_it_is_now() {
    let server = RedisServer::start();
    let locks = holder_client(&server).await;
    let name = "order:{9}";
    let app = page_app!(locks, true);
    let uri = format!("/locks/api/lock?name={}", query(name));

    // The operator looks: A holds it.
    let first = locks.lock(name).unwrap().acquire().await.unwrap();
    let shown: serde_json::Value =
        test::call_and_read_body_json(&app, test::TestRequest::get().uri(&uri).to_request()).await;
    let seen: Vec<serde_json::Value> = shown["holders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["field"].clone())
        .collect();
    assert_eq!(seen.len(), 1);

    // Meanwhile A lets go and B takes the lock.
    first.unlock().await.unwrap();
    let second = locks.lock(name).unwrap().acquire().await.unwrap();
    let now_field = format!("{}:{}", locks.id(), second.owner().id());

    // The operator confirms what they saw: refused, B keeps the lock.
    let body = serde_json::json!({ "name": name, "confirm": name, "holders": seen });
    let refused = test::call_service(&app, force_unlock_request(&body)).await;
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    let answer: serde_json::Value = test::read_body_json(refused).await;
    assert_eq!(answer["error"], "holder_changed", "{answer}");
    assert_eq!(answer["name"], name);
    assert_eq!(answer["lock"]["holders"][0]["field"], now_field, "{answer}");
    assert!(
        !second.is_lost(),
        "the new holder was told it lost the lock"
    );
    assert_eq!(
        locks
            .lock(name)
            .unwrap()
            .hold_count(second.owner())
            .await
            .unwrap(),
        1,
        "the new holder was forced out"
    );

    // Confirmed for the holder there now, it goes.
    let body = serde_json::json!({ "name": name, "confirm": name, "holders": [now_field] });
    let done = test::call_service(&app, force_unlock_request(&body)).await;
    assert_eq!(done.status(), StatusCode::OK);
    tokio::time::timeout(GRANT_BOUND, second.lost())
        .await
        .expect("the forced-out holder heard it lost the lock");
    assert_eq!(server.keys().await, Vec::<String>::new());
}
