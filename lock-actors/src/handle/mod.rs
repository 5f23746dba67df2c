//! What users take locks and semaphores through: cheap handles naming one lock or semaphore
//! of a client ([`Lock`], [`Semaphore`], [`PermitExpirableSemaphore`]) and the options of a
//! take. A handle talks to its actor through the client's registry; it holds nothing itself.

mod latch;
mod lock;
mod semaphore;
mod spin;

pub use latch::CountDownLatch;
pub use lock::{AcquireOptions, Lock};
pub use semaphore::{PermitExpirableSemaphore, PermitOptions, Semaphore};
