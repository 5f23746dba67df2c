//! actix-web glue: the lock client as an extractor, and lock failures as HTTP responses.

use crate::client::LockClient;
use crate::error::LockError;
use crate::macro_support::{lock_of, Kind};
use actix_web::dev::Payload;
use actix_web::http::{header, StatusCode};
use actix_web::{FromRequest, HttpRequest, HttpResponse, ResponseError};
use std::future::{ready, Ready};
use std::time::Duration;

mod retry_hint;

#[doc(hidden)]
pub use actix_web as __actix_web;
use retry_hint::RetryHint;
#[doc(hidden)]
pub use retry_hint::{HoldTimes as __HoldTimes, RetryHint as __RetryHint};

/// The [`LockClient`] registered with `App::app_data(web::Data::new(client))`, as an
/// extractor. `#[distributed_lock]` adds one to every handler it wraps.
///
/// A missing client is a 500 whose body says which `app_data` to register, not a panic.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::web::LockClientData;
/// use actix_web::{get, HttpResponse};
///
/// #[get("/locks/{name}")]
/// async fn is_locked(client: LockClientData, name: actix_web::web::Path<String>) -> HttpResponse {
///     match client.lock(&name) {
///         Ok(lock) => HttpResponse::Ok().json(lock.is_locked().await.unwrap_or(false)),
///         Err(e) => HttpResponse::BadRequest().body(e.to_string()),
///     }
/// }
/// ```
#[derive(Clone, Debug)]
pub struct LockClientData(pub LockClient);

impl std::ops::Deref for LockClientData {
    type Target = LockClient;

    fn deref(&self) -> &LockClient {
        &self.0
    }
}

impl crate::macro_support::AsLockClient for LockClientData {
    fn as_lock_client(&self) -> &LockClient {
        &self.0
    }
}

impl crate::macro_support::AsLockClient for actix_web::web::Data<LockClient> {
    fn as_lock_client(&self) -> &LockClient {
        self.get_ref()
    }
}

impl FromRequest for LockClientData {
    type Error = MissingLockClient;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            req.app_data::<actix_web::web::Data<LockClient>>()
                .map(|data| LockClientData(data.get_ref().clone()))
                .ok_or(MissingLockClient),
        )
    }
}

/// No `web::Data<LockClient>` was registered with the app.
///
/// ```
/// use actix_distributed_lock::web::MissingLockClient;
/// assert!(MissingLockClient.to_string().contains("app_data"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissingLockClient;

impl std::fmt::Display for MissingLockClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "no lock client: register one with App::new().app_data(web::Data::new(lock_client))",
        )
    }
}

impl std::error::Error for MissingLockClient {}

impl ResponseError for MissingLockClient {
    fn status_code(&self) -> StatusCode {
        StatusCode::INTERNAL_SERVER_ERROR
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::InternalServerError().json(serde_json::json!({
            "error": "lock_client_missing",
            "message": self.to_string(),
        }))
    }
}

/// A lock the handler could not take, as an HTTP response.
///
/// | error | status | body `error` |
/// |---|---|---|
/// | `Timeout` | 409 Conflict, `Retry-After` (see below) | `lock_timeout` (with `lock`, `waited_ms`) |
/// | `Lost` (the body ran under `on_lost = stop` and the lock was lost) | 503 Service Unavailable | `lock_lost` (with `lock`, `message`) |
/// | `Unavailable`, `Shutdown`, a transient `Server` error (`BUSY`, `LOADING`, ...) | 503 Service Unavailable | `lock_unavailable` (with `lock`, `message`) |
/// | `InvalidName` | 400 Bad Request (the name came from the request) | `lock_name_invalid` |
/// | anything else | 500 | `lock_error` |
///
/// `Retry-After` on a 409 is the holder's remaining lease in whole seconds, rounded up, at
/// least 1: `#[distributed_lock]` reads the lock's TTL once after the wait ran out (see
/// [`with_retry_after`](LockRejection::with_retry_after)). Where there is no TTL to read
/// (semaphores, a lock freed meanwhile, Redis not answering) it is 1.
///
/// # Example
///
/// ```
/// use actix_distributed_lock::{web::LockRejection, LockError};
/// use actix_web::ResponseError;
/// use std::time::Duration;
///
/// let busy = LockRejection::new("order:42", LockError::timeout("order:42", Duration::from_millis(1500)));
/// assert_eq!(busy.status_code(), actix_web::http::StatusCode::CONFLICT);
/// ```
#[derive(Debug, Clone)]
pub struct LockRejection {
    lock: String,
    error: LockError,
    /// `Retry-After` of a 409, in whole seconds (at least 1).
    retry_after: u64,
}

impl LockRejection {
    /// The response for failing to take lock `lock` with `error`.
    ///
    /// ```
    /// # use actix_distributed_lock::{web::LockRejection, LockError};
    /// let r = LockRejection::new("a", LockError::Shutdown);
    /// assert_eq!(r.error(), &LockError::Shutdown);
    /// ```
    pub fn new(lock: impl Into<String>, error: LockError) -> Self {
        LockRejection {
            lock: lock.into(),
            error,
            retry_after: 1,
        }
    }

    /// The error behind the response.
    ///
    /// ```
    /// # use actix_distributed_lock::{web::LockRejection, LockError};
    /// assert!(LockRejection::new("a", LockError::Shutdown).error().to_string().contains("shut down"));
    /// ```
    pub fn error(&self) -> &LockError {
        &self.error
    }
}

impl LockRejection {
    /// Sets the `Retry-After` of a 409 to `wait` in whole seconds, rounded up, at least 1
    /// (`Retry-After` takes no fractions, and 0 would invite an immediate retry).
    ///
    /// ```
    /// use actix_distributed_lock::{web::LockRejection, LockError};
    /// use actix_web::ResponseError;
    /// use std::time::Duration;
    ///
    /// let busy = LockRejection::new("order:42", LockError::timeout("order:42", Duration::from_secs(5)))
    ///     .with_retry_after(Duration::from_millis(2_100));
    /// assert_eq!(busy.error_response().headers().get("retry-after").unwrap(), "3");
    /// ```
    pub fn with_retry_after(mut self, wait: Duration) -> Self {
        let whole = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        self.retry_after = whole.max(1);
        self
    }

    /// The response `#[distributed_lock]` gives for failing to take (or losing) lock `lock`
    /// of `kind` with `error`; for a timeout, with the `Retry-After` that `hint` gives from
    /// the lock's remaining TTL, read once (1 s when neither gives one, or the read fails).
    #[doc(hidden)]
    pub async fn for_lock(
        client: &LockClient,
        kind: Kind,
        lock: String,
        error: LockError,
        hint: RetryHint,
    ) -> Self {
        let ttl = match &error {
            LockError::Timeout { .. } if hint.reads_ttl() => {
                remaining_ttl(client, kind, &lock).await
            }
            _ => None,
        };
        let rejection = LockRejection::new(lock, error);
        match hint.wait(ttl) {
            Some(wait) => rejection.with_retry_after(wait),
            None => rejection,
        }
    }

    /// Redis cannot serve the lock now (no answer, a transient refusal such as `BUSY`, too
    /// few replicas, a stopped client): 503, try again later.
    fn unavailable(&self) -> bool {
        self.error.is_transient()
            || matches!(
                self.error,
                LockError::NotReplicated { .. } | LockError::Shutdown
            )
    }
}

impl std::fmt::Display for LockRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl ResponseError for LockRejection {
    fn status_code(&self) -> StatusCode {
        match self.error {
            LockError::Timeout { .. } => StatusCode::CONFLICT,
            LockError::Lost { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ if self.unavailable() => StatusCode::SERVICE_UNAVAILABLE,
            LockError::InvalidName { .. } => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status_code());
        let body = match &self.error {
            LockError::Timeout { waited, .. } => {
                response.insert_header((header::RETRY_AFTER, self.retry_after.to_string()));
                serde_json::json!({
                    "error": "lock_timeout",
                    "lock": self.lock,
                    "waited_ms": waited.as_millis() as u64,
                })
            }
            LockError::Lost { .. } => serde_json::json!({
                "error": "lock_lost",
                "lock": self.lock,
                "message": self.error.to_string(),
            }),
            _ if self.unavailable() => serde_json::json!({
                "error": "lock_unavailable",
                "lock": self.lock,
                "message": self.error.to_string(),
            }),
            LockError::InvalidName { .. } => serde_json::json!({
                "error": "lock_name_invalid",
                "message": self.error.to_string(),
            }),
            other => serde_json::json!({
                "error": "lock_error",
                "lock": self.lock,
                "message": other.to_string(),
            }),
        };
        response.json(body)
    }
}

impl actix_web::Responder for LockRejection {
    type Body = actix_web::body::BoxBody;

    fn respond_to(self, _: &HttpRequest) -> HttpResponse {
        self.error_response()
    }
}

/// The remaining lease of lock `name` of `kind` (one TTL read): `None` for the semaphore
/// kinds, a lock that is free by now, or a read that failed.
async fn remaining_ttl(client: &LockClient, kind: Kind, name: &str) -> Option<Duration> {
    if kind.is_semaphore() {
        return None;
    }
    let read = match lock_of(client, name, kind) {
        Ok(lock) => lock.remaining_ttl().await,
        Err(error) => Err(error),
    };
    read.unwrap_or_else(|error| {
        tracing::debug!(lock = %name, %error, "no TTL for Retry-After; sending 1");
        None
    })
}
