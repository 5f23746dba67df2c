//! The inspector page: an actix-web [`Scope`] that shows an app's locks in a browser (who
//! holds what, who waits), follows one lock live, and, where the app enables it in code,
//! force-unlocks a lock after the operator typed its name.
//!
//! Mount it in your own app, behind your own authentication: the page itself checks no
//! credentials (anyone who reaches it sees lock names and holders, and, with
//! [`InspectorPage::allow_force_unlock`], can release locks).
//!
//! ```no_run
//! use actix_distributed_lock::{inspect::page::InspectorPage, ClientConfig, LockClient};
//! use actix_web::{web, App, HttpServer};
//!
//! # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
//! let locks = web::Data::new(LockClient::connect(ClientConfig::new("redis://127.0.0.1/")).await?);
//! HttpServer::new(move || {
//!     App::new()
//!         .app_data(locks.clone())
//!         // Read-only: `actix_distributed_lock::inspect::page::scope("/admin/locks")`.
//!         .service(InspectorPage::new().allow_force_unlock(true).scope("/admin/locks"))
//! })
//! .bind(("127.0.0.1", 8080))?
//! .run()
//! .await?;
//! # Ok(()) }
//! ```
//!
//! # What it serves (relative to the scope's path)
//!
//! | route | answers |
//! |---|---|
//! | `GET ` (and `GET /`) | the page: HTML with its CSS and script inline, no outside assets |
//! | `GET /api/locks?pattern=order:*` | [`Inspector::list`]: a JSON array of [`LockInfo`] |
//! | `GET /api/lock?name=N` | [`Inspector::show`]: one [`LockInfo`]; 404 when there is no lock `N`, 422 when its key holds something that is not a lock |
//! | `GET /api/events?name=N` | [`Inspector::watch`] as server-sent events: one [`WatchEvent`] per `data:` line |
//! | `POST /api/force-unlock` | [`Inspector::force_unlock_if`] with the JSON body `{"name": N, "confirm": N, "holders": [F, ...]}` (the holder fields shown): the [`ForceUnlocked`] report; 403 unless enabled; 409 `holder_changed`, with the lock as it is now under `lock`, when others hold it |
//!
//! Names travel in query strings and JSON bodies, never in the path, so a name may hold
//! any character (`/`, `?`, `%`, braces, quotes, markup): the page percent-encodes them
//! and renders them as text only. Errors are JSON objects `{"error": code, "message": ...}`:
//! 400 for a bad name or query, 403 `force_unlock_disabled` (or `denied_by_redis` when the
//! Redis user may not), 404 `no_lock`, 409 `holder_changed` (the lock changed hands since it
//! was shown: nothing was released), 422 `not_a_lock` (or `refused`: a semaphore has no
//! holder to force out), 503 `unavailable` when Redis does not answer.
//! The page reads nothing but lock keys: every answer comes from the [`Inspector`].
//!
//! [`Scope`]: actix_web::Scope
//! [`Inspector`]: crate::inspect::Inspector
//! [`Inspector::list`]: crate::inspect::Inspector::list
//! [`Inspector::show`]: crate::inspect::Inspector::show
//! [`Inspector::watch`]: crate::inspect::Inspector::watch
//! [`Inspector::force_unlock_if`]: crate::inspect::Inspector::force_unlock_if
//! [`LockInfo`]: crate::inspect::LockInfo
//! [`WatchEvent`]: crate::inspect::WatchEvent
//! [`ForceUnlocked`]: crate::inspect::ForceUnlocked

mod api;
mod events;
mod html;

use actix_web::web;

/// The inspector page's settings; [`scope`](InspectorPage::scope) turns them into the
/// actix-web [`Scope`](actix_web::Scope) to mount.
///
/// Force-unlock is off unless enabled here, in code: the page then shows no button, and its
/// endpoint answers 403 Forbidden.
///
/// ```
/// use actix_distributed_lock::inspect::page::InspectorPage;
///
/// let page = InspectorPage::new().allow_force_unlock(true);
/// assert!(page.force_unlock_allowed());
/// let scope: actix_web::Scope = page.scope("/locks");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[must_use = "an InspectorPage does nothing until its scope() is mounted in an App"]
pub struct InspectorPage {
    allow_force_unlock: bool,
}

impl InspectorPage {
    /// A read-only page: lists and details, no force-unlock.
    ///
    /// ```
    /// # use actix_distributed_lock::inspect::page::InspectorPage;
    /// assert!(!InspectorPage::new().force_unlock_allowed());
    /// ```
    pub fn new() -> Self {
        InspectorPage::default()
    }

    /// Whether the page offers force-unlock (off by default). When on, the detail view has
    /// a "Force unlock" button that asks the operator to type the lock's name, and
    /// `POST /api/force-unlock` releases a lock when its body's `confirm` equals its
    /// `name` and the lock is still held by the holders the page showed. Mount such a page
    /// only behind authentication that admits operators.
    ///
    /// ```
    /// # use actix_distributed_lock::inspect::page::InspectorPage;
    /// let on = std::env::var("LOCKS_FORCE_UNLOCK").is_ok_and(|v| v == "1");
    /// let page = InspectorPage::new().allow_force_unlock(on);
    /// ```
    pub fn allow_force_unlock(mut self, allow: bool) -> Self {
        self.allow_force_unlock = allow;
        self
    }

    /// Whether [`allow_force_unlock`](Self::allow_force_unlock) was turned on.
    ///
    /// ```
    /// # use actix_distributed_lock::inspect::page::InspectorPage;
    /// assert!(InspectorPage::new().allow_force_unlock(true).force_unlock_allowed());
    /// ```
    pub fn force_unlock_allowed(&self) -> bool {
        self.allow_force_unlock
    }

    /// The page and its JSON endpoints as an actix-web [`Scope`](actix_web::Scope) at
    /// `path` (e.g. `"/locks"`; nest it in your own scopes as you like). It takes the
    /// client from the app's `web::Data<LockClient>`; without one, every route answers 500
    /// with a body that says which `app_data` to register.
    ///
    /// ```
    /// use actix_distributed_lock::inspect::page::InspectorPage;
    /// use actix_web::{web, App};
    ///
    /// let app = App::new().service(
    ///     web::scope("/admin").service(InspectorPage::new().scope("/locks")),
    /// );
    /// ```
    pub fn scope(self, path: &str) -> actix_web::Scope {
        web::scope(path)
            .app_data(web::Data::new(self))
            .route("", web::get().to(html::page))
            .route("/", web::get().to(html::page))
            .route("/api/locks", web::get().to(api::list))
            .route("/api/lock", web::get().to(api::show))
            .route("/api/events", web::get().to(events::watch))
            .route("/api/force-unlock", web::post().to(api::force_unlock))
    }
}

/// The read-only inspector page at `path`: `InspectorPage::new().scope(path)`.
///
/// ```
/// use actix_web::App;
///
/// let app = App::new().service(actix_distributed_lock::inspect::page::scope("/locks"));
/// ```
pub fn scope(path: &str) -> actix_web::Scope {
    InspectorPage::new().scope(path)
}
