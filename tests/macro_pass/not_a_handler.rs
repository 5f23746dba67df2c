// A plain async fn whose parameters are named `Path` but are not actix-web's: the macro
// keeps its signature (no hidden extractor, no `Either` response), so it is called as
// written. It used to be taken for an actix-web handler.
use actix_distributed_lock::{distributed_lock, LockError};
use std::path::Path;

mod store {
    pub struct Path(pub u64);
}

#[distributed_lock("file:<name>")]
async fn checksum(file: &Path, blob: store::Path, name: &str) -> Result<u64, LockError> {
    Ok(file.as_os_str().len() as u64 + blob.0 + name.len() as u64)
}

#[distributed_lock("file:<name>")]
async fn size(file: &std::path::Path, name: &str) -> Result<u64, LockError> {
    Ok(file.as_os_str().len() as u64 + name.len() as u64)
}

pub fn check() {
    // Calling with the written signature is the check; nothing needs to run.
    let _checksum = checksum(Path::new("/tmp"), store::Path(1), "a");
    let _size = size(Path::new("/tmp"), "a");
}
