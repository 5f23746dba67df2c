//! Whether a built peer jar is newer than every source it was built from (`pom.xml` and
//! `src/`). Shared by the tests' support (`tests/support/java_peer.rs`) and the benchmark
//! (`lock-actors/benches/lock_bench/redisson.rs`), each including it with `#[path]`: both
//! rebuild the jar with Maven only when this says it is stale.

use std::fs;
use std::path::Path;
use std::time::SystemTime;

/// The newest modification time of the peer's sources below `dir`.
fn newest_source_change(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    let mut stack = vec![dir.join("pom.xml"), dir.join("src")];
    while let Some(path) = stack.pop() {
        let Ok(meta) = fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(entries) = fs::read_dir(&path) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
        } else if let Ok(modified) = meta.modified() {
            newest = newest.max(modified);
        }
    }
    newest
}

/// True when `jar` exists and was written after the last change to the sources in `dir`.
pub fn is_fresh(jar: &Path, dir: &Path) -> bool {
    fs::metadata(jar)
        .and_then(|m| m.modified())
        .is_ok_and(|built| built > newest_source_change(dir))
}
