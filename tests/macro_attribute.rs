//! `#[distributed_lock]` outside actix-web: free fns, methods, `?`, panics, re-entry.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{distributed_lock, LockClient, LockError, LockOwner};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::RedisServer;

#[derive(Debug)]
enum JobError {
    Lock(LockError),
    Failed,
}

impl From<LockError> for JobError {
    fn from(error: LockError) -> Self {
        JobError::Lock(error)
    }
}

struct Order {
    id: u64,
    sku: String,
}

#[distributed_lock("job:<name>", client = client, wait = "2s")]
async fn run_job(client: &LockClient, name: &str) -> Result<u32, JobError> {
    let lock = client
        .lock(&format!("job:{name}"))
        .map_err(JobError::Lock)?;
    let holds = lock
        .hold_count(LockOwner::current().expect("task owner"))
        .await?;
    Ok(holds)
}

#[distributed_lock("job:<name>", client = client)]
async fn failing_job(client: &LockClient, name: &str) -> Result<(), JobError> {
    let _ = client;
    Err(JobError::Failed)?;
    Ok(())
}

#[distributed_lock("job:<name>", client = client)]
async fn panicking_job(client: &LockClient, name: &str) -> Result<(), JobError> {
    let _ = (client, name);
    panic!("the job blew up");
}

#[distributed_lock("outer:<id>", client = client)]
async fn outer(client: &LockClient, id: u64) -> Result<u32, JobError> {
    inner(client, id).await
}

#[distributed_lock("outer:<id>", client = client)]
async fn inner(client: &LockClient, id: u64) -> Result<u32, JobError> {
    let owner = LockOwner::current().expect("task owner");
    Ok(client
        .lock(&format!("outer:{id}"))?
        .hold_count(owner)
        .await?)
}

#[distributed_lock("order:{<order.id>}:sku:<order.sku>", client = client, lease = "10s")]
async fn field_paths(client: &LockClient, order: &Order) -> Result<Option<Duration>, JobError> {
    let name = format!("order:{{{}}}:sku:{}", order.id, order.sku);
    Ok(client.lock(&name)?.remaining_ttl().await?)
}

fn to_job_error(error: LockError) -> JobError {
    JobError::Lock(error)
}

struct Worker {
    client: LockClient,
    name: String,
    runs: AtomicUsize,
}

impl Worker {
    #[distributed_lock("worker:<self.name>", client = self.client, wait = "0s", on_fail = to_job_error)]
    async fn run(&self, hold: Duration) -> Result<usize, JobError> {
        tokio::time::sleep(hold).await; // the protected work
        Ok(self.runs.fetch_add(1, Ordering::SeqCst) + 1)
    }
}

#[tokio::test]
async fn a_free_fn_runs_under_the_lock_and_releases_it() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let holds = run_job(&client, "nightly").await.unwrap();
    assert_eq!(holds, 1, "the body ran while holding the lock");
    assert!(!client
        .lock("job:nightly")
        .unwrap()
        .is_locked()
        .await
        .unwrap());
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test]
async fn question_mark_and_panic_both_release() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    assert!(matches!(
        failing_job(&client, "a").await,
        Err(JobError::Failed)
    ));
    assert!(!client.lock("job:a").unwrap().is_locked().await.unwrap());

    let task_client = client.clone();
    let panicked = tokio::spawn(async move { panicking_job(&task_client, "b").await }).await;
    assert!(panicked.unwrap_err().is_panic());
    support::eventually(
        "the panicked holder's lock is released",
        Duration::from_secs(5),
        || async { !client.lock("job:b").unwrap().is_locked().await.unwrap() },
    )
    .await;
}

#[tokio::test]
async fn nested_annotated_calls_in_one_task_reenter() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let holds = tokio::time::timeout(Duration::from_secs(5), outer(&client, 7))
        .await
        .expect("a nested call deadlocked instead of re-entering")
        .unwrap();
    assert_eq!(holds, 2);
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test]
async fn placeholders_follow_field_paths_and_keep_braces() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let order = Order {
        id: 42,
        sku: "A-1".into(),
    };
    let ttl = field_paths(&client, &order)
        .await
        .unwrap()
        .expect("held with a lease");
    assert!(
        ttl <= Duration::from_secs(10) && ttl > Duration::from_secs(8),
        "{ttl:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn methods_lock_on_self_fields_and_map_failures_with_on_fail() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let worker = Arc::new(Worker {
        client,
        name: "w".into(),
        runs: AtomicUsize::new(0),
    });
    let busy = {
        let worker = worker.clone();
        tokio::spawn(async move { worker.run(Duration::from_millis(500)).await })
    };
    let lock = worker.client.lock("worker:w").unwrap();
    support::eventually(
        "the first run holds the lock",
        Duration::from_secs(5),
        || async { lock.is_locked().await.unwrap() },
    )
    .await;
    // Wait "0s": the second run is refused at once, through on_fail.
    let refused = worker.run(Duration::ZERO).await;
    assert!(
        matches!(refused, Err(JobError::Lock(LockError::Timeout { .. }))),
        "{refused:?}"
    );
    assert_eq!(busy.await.unwrap().unwrap(), 1);
    assert_eq!(worker.run(Duration::ZERO).await.unwrap(), 2);
}

#[distributed_lock("default:<key>")]
async fn with_the_default_client(key: u32) -> Result<u32, LockError> {
    Ok(key)
}

/// Types named like actix-web's extractors that are not actix-web's.
mod store {
    /// A path in some store: not `web::Path`.
    pub struct Path(pub &'static str);
    /// A JSON document: not `web::Json`.
    pub struct Json(pub &'static str);
}

/// A plain async fn taking `Path`s that are not actix-web's: not a handler, so its signature
/// is kept as written (no hidden extractor, no `Either` response) and the default client is
/// used. The macro used to take any type named `Path` for `web::Path`.
#[distributed_lock("file:<name>")]
async fn file_name_len(
    file: &std::path::Path,
    blob: store::Path,
    doc: &store::Json,
    name: &str,
) -> Result<usize, LockError> {
    Ok(file.as_os_str().len() + blob.0.len() + doc.0.len() + name.len())
}

#[tokio::test]
async fn without_a_client_option_the_process_default_is_used_or_the_error_says_how() {
    let server = RedisServer::start();
    let missing = with_the_default_client(1).await.unwrap_err();
    assert!(
        matches!(&missing, LockError::InvalidConfig { reason } if reason.contains("set_default_client")),
        "{missing}"
    );
    let client = support::client(&server).await;
    assert!(actix_distributed_lock::set_default_client(client).is_none());
    assert_eq!(with_the_default_client(2).await.unwrap(), 2);
    let file = std::path::Path::new("/tmp");
    let len = file_name_len(file, store::Path("ab"), &store::Json("c"), "d");
    assert_eq!(len.await.unwrap(), 4 + 2 + 1 + 1);
    assert_eq!(server.keys().await, Vec::<String>::new());
}

/// Readers record how many are inside at once; the writer records that it was alone.
#[distributed_lock("doc:<id>", client = client, kind = read, wait = "5s")]
async fn read_doc(
    client: &LockClient,
    id: u64,
    inside: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    gate: Arc<tokio::sync::Barrier>,
) -> Result<(), LockError> {
    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
    peak.fetch_max(now, Ordering::SeqCst);
    gate.wait().await; // both readers are inside together, or this never returns
    inside.fetch_sub(1, Ordering::SeqCst);
    Ok(())
}

#[distributed_lock("doc:<id>", client = client, kind = write, wait = "5s")]
async fn write_doc(client: &LockClient, id: u64) -> Result<u32, LockError> {
    // The body runs holding the write side, as the task's owner.
    let owner = LockOwner::current().expect("task owner");
    let doc = client.read_write_lock(&format!("doc:{id}"))?;
    doc.write().hold_count(owner).await
}

#[distributed_lock("counter:<id>", client = client, kind = fast, wait = "1s")]
async fn fast_outer(client: &LockClient, id: u64) -> Result<(), LockError> {
    fast_inner(client, id).await
}

#[distributed_lock("counter:<id>", client = client, kind = fast, wait = "1s")]
async fn fast_inner(client: &LockClient, id: u64) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("turn:<id>", client = client, kind = fair, wait = "5s")]
async fn take_turn(client: &LockClient, id: u64) -> Result<bool, LockError> {
    client.fair_lock(&format!("turn:{id}"))?.is_locked().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_is_reachable_through_the_attribute() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let inside = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(tokio::sync::Barrier::new(2));
    let readers = futures_util::future::join(
        read_doc(&client, 1, inside.clone(), peak.clone(), gate.clone()),
        read_doc(&client, 1, inside.clone(), peak.clone(), gate.clone()),
    );
    let (a, b) = tokio::time::timeout(Duration::from_secs(10), readers)
        .await
        .expect("two readers share the lock");
    a.unwrap();
    b.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 2);
    assert_eq!(write_doc(&client, 1).await.unwrap(), 1);

    // The fast lock is not reentrant: a nested call is refused, not deadlocked.
    let nested = tokio::time::timeout(Duration::from_secs(5), fast_outer(&client, 3))
        .await
        .expect("refused at once");
    assert!(
        matches!(nested, Err(LockError::AlreadyHeld { .. })),
        "{nested:?}"
    );

    assert!(take_turn(&client, 9).await.unwrap());
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[distributed_lock("plain:<id>", client = client, kind = reentrant)]
async fn plain_job(client: &LockClient, id: u64) -> Result<bool, LockError> {
    client.lock(&format!("plain:{id}"))?.is_locked().await
}

#[distributed_lock("fenced:<id>", client = client, kind = fenced)]
async fn fenced_job(client: &LockClient, id: u64) -> Result<bool, LockError> {
    client
        .fenced_lock(&format!("fenced:{id}"))?
        .is_locked()
        .await
}

#[distributed_lock("spun:<id>", client = client, kind = spin, wait = "5s")]
async fn spin_job(client: &LockClient, id: u64) -> Result<u32, LockError> {
    // The body runs holding the spin lock, as the task's owner.
    let owner = LockOwner::current().expect("task owner");
    client
        .spin_lock(&format!("spun:{id}"))?
        .hold_count(owner)
        .await
}

/// The kinds this file uses the attribute with, by the name `kind = …` spells (the fns
/// above and below): the runtime's list of attribute kinds must be exactly these, so a kind
/// added to the runtime's list without being reachable by its name fails here (a name the
/// attribute accepts without a runtime variant fails to compile).
const KINDS_USED_HERE: [&str; 9] = [
    "reentrant",
    "fenced",
    "fair",
    "read",
    "write",
    "fast",
    "spin",
    "semaphore",
    "expirable_semaphore",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attribute_reaches_every_kind_the_runtime_lists_by_its_name() {
    use actix_distributed_lock::__private::Kind;
    let names: Vec<&str> = Kind::ALL
        .iter()
        .filter(|kind| kind.in_attribute())
        .map(|kind| kind.name())
        .collect();
    assert_eq!(names, KINDS_USED_HERE);
    let server = RedisServer::start();
    let client = support::client(&server).await;
    assert!(plain_job(&client, 1).await.unwrap());
    assert!(fenced_job(&client, 1).await.unwrap());
    assert_eq!(spin_job(&client, 1).await.unwrap(), 1);
    assert_eq!(server.keys().await, vec!["redisson_lock_token:{fenced:1}"]);
}

/// Counts how many bodies run at once under a two-permit semaphore.
#[distributed_lock("pool:<id>", client = client, kind = semaphore, wait = "10s")]
async fn use_pool(
    client: &LockClient,
    id: u64,
    inside: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
) -> Result<(), LockError> {
    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
    peak.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(20)).await; // the work under the permit
    inside.fetch_sub(1, Ordering::SeqCst);
    Ok(())
}

#[distributed_lock("leased:<id>", client = client, kind = expirable_semaphore, lease = "5s")]
async fn use_leased(client: &LockClient, id: u64) -> Result<i64, LockError> {
    client
        .expirable_semaphore(&format!("leased:{id}"))?
        .available_permits()
        .await
}

#[distributed_lock("pool:<id>", client = client, kind = semaphore, permits = 2, wait = "0s")]
async fn use_two(client: &LockClient, id: u64) -> Result<i64, LockError> {
    client
        .semaphore(&format!("pool:{id}"))?
        .available_permits()
        .await
}

#[distributed_lock("leased:<id>", client = client, kind = expirable_semaphore, permits = 3)]
async fn use_three_leased(client: &LockClient, id: u64) -> Result<i64, LockError> {
    client
        .expirable_semaphore(&format!("leased:{id}"))?
        .available_permits()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_kinds_take_one_permit_for_the_body() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    assert!(client
        .semaphore("pool:1")
        .unwrap()
        .try_set_permits(2)
        .await
        .unwrap());
    let inside = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let (client, inside, peak) = (client.clone(), inside.clone(), peak.clone());
        tasks.push(tokio::spawn(async move {
            use_pool(&client, 1, inside, peak).await
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(
        peak.load(Ordering::SeqCst),
        2,
        "two permits, two bodies at a time"
    );
    let pool = client.semaphore("pool:1").unwrap();
    assert_eq!(
        pool.available_permits().await.unwrap(),
        2,
        "every permit came back"
    );

    let leased = client.expirable_semaphore("leased:1").unwrap();
    assert!(leased.try_set_permits(3).await.unwrap());
    assert_eq!(
        use_leased(&client, 1).await.unwrap(),
        2,
        "one permit taken inside"
    );
    assert_eq!(leased.available_permits().await.unwrap(), 3);

    // `permits = N` takes N for the body, and gives all N back.
    assert_eq!(use_two(&client, 1).await.unwrap(), 0, "both permits inside");
    assert_eq!(pool.available_permits().await.unwrap(), 2);
    assert_eq!(use_three_leased(&client, 1).await.unwrap(), 0);
    assert_eq!(leased.available_permits().await.unwrap(), 3);
}

/// How many `pay` bodies run at once (`inside`), the most ever seen (`peak`).
#[derive(Clone, Default)]
struct Overlap {
    inside: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

/// Pays under `pay:<id>`; returns the hold count its owner has while inside.
#[distributed_lock("pay:<id>", client = client, wait = "5s")]
async fn pay(client: &LockClient, id: u64, overlap: Overlap) -> Result<u32, LockError> {
    let now = overlap.inside.fetch_add(1, Ordering::SeqCst) + 1;
    overlap.peak.fetch_max(now, Ordering::SeqCst);
    let owner = LockOwner::current().expect("the body's owner");
    let holds = client.lock(&format!("pay:{id}"))?.hold_count(owner).await?;
    tokio::time::sleep(Duration::from_millis(50)).await; // the protected work
    overlap.inside.fetch_sub(1, Ordering::SeqCst);
    Ok(holds)
}

/// Two payments side by side, under another lock.
#[distributed_lock("checkout:<id>", client = client, wait = "5s")]
async fn checkout(client: &LockClient, id: u64, overlap: Overlap) -> Result<[u32; 2], LockError> {
    let (a, b) = tokio::join!(
        pay(client, id, overlap.clone()),
        pay(client, id, overlap.clone())
    );
    Ok([a?, b?])
}

/// Two payments side by side, under the same lock.
#[distributed_lock("pay:<id>", client = client, wait = "5s")]
async fn pay_both(client: &LockClient, id: u64, overlap: Overlap) -> Result<[u32; 2], LockError> {
    let (a, b) = tokio::join!(
        pay(client, id, overlap.clone()),
        pay(client, id, overlap.clone())
    );
    Ok([a?, b?])
}

#[tokio::test]
async fn sibling_calls_inside_one_body_take_turns_instead_of_sharing_the_lock() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let limit = Duration::from_secs(10);

    // Under another lock: each branch is its own owner, so they exclude each other.
    let overlap = Overlap::default();
    let holds = tokio::time::timeout(limit, checkout(&client, 1, overlap.clone()))
        .await
        .expect("the branches took turns, no deadlock")
        .unwrap();
    assert_eq!(
        overlap.peak.load(Ordering::SeqCst),
        1,
        "two branches held pay:1 at once"
    );
    assert_eq!(holds, [1, 1]);

    // Under the same lock: each branch re-enters the body's hold, one branch at a time.
    let overlap = Overlap::default();
    let holds = tokio::time::timeout(limit, pay_both(&client, 2, overlap.clone()))
        .await
        .expect("the branches re-entered in turn, no deadlock")
        .unwrap();
    assert_eq!(
        overlap.peak.load(Ordering::SeqCst),
        1,
        "two branches re-entered pay:2 at once"
    );
    assert_eq!(holds, [2, 2]);

    // Under an owner the caller set: the branches take turns as that owner.
    let overlap = Overlap::default();
    let me = LockOwner::new();
    let (a, b) = tokio::time::timeout(
        limit,
        me.scope(async {
            tokio::join!(
                pay(&client, 3, overlap.clone()),
                pay(&client, 3, overlap.clone())
            )
        }),
    )
    .await
    .expect("the branches took turns as the caller's owner");
    assert_eq!(
        overlap.peak.load(Ordering::SeqCst),
        1,
        "two branches held pay:3 at once"
    );
    assert_eq!([a.unwrap(), b.unwrap()], [1, 1]);
    assert_eq!(server.keys().await, Vec::<String>::new());
}

/// Pays under `pay:<id>`, waiting at most 300 ms.
#[distributed_lock("pay:<id>", client = client, wait = "300ms")]
async fn pay_quickly(client: &LockClient, id: u64) -> Result<u32, LockError> {
    let owner = LockOwner::current().expect("the body's owner");
    client.lock(&format!("pay:{id}"))?.hold_count(owner).await
}

/// Holds `pay:<id>` and hands work to spawned tasks: one on its own, one given the owner.
#[distributed_lock("pay:<id>", client = client, wait = "5s")]
async fn pay_from_tasks(
    client: &LockClient,
    id: u64,
) -> Result<(Result<u32, LockError>, u32), LockError> {
    let task_client = client.clone();
    let alone = tokio::spawn(async move { pay_quickly(&task_client, id).await });
    let alone = alone.await.expect("the task ran");
    let me = LockOwner::current().expect("the body's owner");
    let task_client = client.clone();
    let shared = tokio::spawn(me.scope(async move { pay_quickly(&task_client, id).await }));
    Ok((alone, shared.await.expect("the task ran")?))
}

#[tokio::test]
async fn a_spawned_task_is_another_owner_unless_given_the_owner() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let (alone, shared) = pay_from_tasks(&client, 4).await.unwrap();
    // The task's own owner waits for the lock its parent holds: its wait runs out.
    assert!(matches!(alone, Err(LockError::Timeout { .. })), "{alone:?}");
    // Given the parent's owner explicitly, it re-enters the parent's hold.
    assert_eq!(shared, 2);
    assert_eq!(server.keys().await, Vec::<String>::new());
}
