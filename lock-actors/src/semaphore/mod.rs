//! Semaphores: Redisson's `RSemaphore` and `RPermitExpirableSemaphore` layouts.

/// The live semaphore actors of one node (filled in by the semaphore module).
#[derive(Default)]
pub(crate) struct Registry {}
