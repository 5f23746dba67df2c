//! The inspector page's JSON endpoints: list, show and force-unlock, with the errors they
//! answer as JSON.

use super::InspectorPage;
use crate::client::LockClient;
use crate::error::LockError;
use crate::inspect::Inspector;
use crate::web::MissingLockClient;
use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse, ResponseError};
use serde::Deserialize;

/// `?pattern=` of the list (absent or empty: every lock).
#[derive(Debug, Deserialize)]
struct PatternQuery {
    pattern: Option<String>,
}

/// `?name=` of the show and events endpoints.
#[derive(Debug, Deserialize)]
pub(super) struct NameQuery {
    pub(super) name: String,
}

/// The body of a force-unlock: the lock, its name typed again by the operator, and the
/// holders (their fields) the operator was shown: only they are forced out.
#[derive(Debug, Deserialize)]
struct ForceUnlockRequest {
    name: String,
    confirm: String,
    holders: Vec<String>,
}

/// What a force-unlock body looks like, for the errors that ask for it.
const FORCE_BODY: &str = "{\"name\": NAME, \"confirm\": NAME, \"holders\": [FIELD, ...]}";

/// `GET /api/locks?pattern=P`: every lock matching the glob `P`, as a JSON array.
pub(super) async fn list(req: HttpRequest) -> HttpResponse {
    let inspector = match inspector(&req) {
        Ok(inspector) => inspector,
        Err(refused) => return refused.response(),
    };
    let query = match web::Query::<PatternQuery>::from_query(req.query_string()) {
        Ok(query) => query.into_inner(),
        Err(error) => return Refused::BadQuery(error.to_string()).response(),
    };
    let pattern = query.pattern.filter(|p| !p.is_empty());
    match inspector.list(pattern.as_deref()).await {
        Ok(locks) => json(StatusCode::OK, &locks),
        Err(error) => lock_error(&error, None),
    }
}

/// `GET /api/lock?name=N`: lock `N` in detail; 404 when there is none.
pub(super) async fn show(req: HttpRequest) -> HttpResponse {
    let (inspector, name) = match inspector_and_name(&req) {
        Ok(found) => found,
        Err(refused) => return refused.response(),
    };
    match inspector.show(&name).await {
        Ok(Some(lock)) => json(StatusCode::OK, &lock),
        Ok(None) => not_found(&name),
        Err(error) => lock_error(&error, Some(&name)),
    }
}

/// `POST /api/force-unlock` with `{"name": N, "confirm": N, "holders": [F, ...]}`: 403
/// unless the app enabled force-unlock; the body must be JSON (so a form or a link from
/// another site cannot post it), `confirm` must equal `name`, and the lock must still be
/// held by exactly the holders `F` shown (409 with the lock as it is now otherwise).
pub(super) async fn force_unlock(
    req: HttpRequest,
    page: web::Data<InspectorPage>,
    body: web::Bytes,
) -> HttpResponse {
    if !page.force_unlock_allowed() {
        return error(
            StatusCode::FORBIDDEN,
            "force_unlock_disabled",
            "force-unlock is turned off for this page; the app enables it with InspectorPage::allow_force_unlock(true)",
            None,
        );
    }
    if is_cross_site(&req) {
        return error(
            StatusCode::FORBIDDEN,
            "cross_site_request",
            "force-unlock is refused from another site's page",
            None,
        );
    }
    if !is_json(&req) {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "json_body_required",
            &format!("send the body as Content-Type: application/json: {FORCE_BODY}"),
            None,
        );
    }
    let request: ForceUnlockRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_body",
                &format!("the body must be {FORCE_BODY}: {e}"),
                None,
            )
        }
    };
    if request.confirm != request.name {
        return error(
            StatusCode::BAD_REQUEST,
            "confirmation_mismatch",
            "`confirm` must repeat the lock's name exactly; nothing was released",
            Some(&request.name),
        );
    }
    let inspector = match inspector(&req) {
        Ok(inspector) => inspector,
        Err(refused) => return refused.response(),
    };
    let peer = req
        .peer_addr()
        .map(|addr| addr.to_string())
        .unwrap_or_default();
    let name = &request.name;
    match inspector.force_unlock_if(name, &request.holders).await {
        Ok(Some(done)) => {
            tracing::warn!(lock = %name, %peer, removed = ?done.removed_keys,
                "lock force-unlocked from the inspector page");
            json(StatusCode::OK, &done)
        }
        Ok(None) => not_found(name),
        Err(error @ LockError::HolderChanged { .. }) => {
            // The operator confirmed other holders: show them who holds it now.
            let now = inspector.show(name).await.ok().flatten();
            let mut body = serde_json::json!({
                "error": "holder_changed",
                "message": error.to_string(),
                "name": name,
            });
            body["lock"] = serde_json::to_value(&now).unwrap_or_default();
            json(StatusCode::CONFLICT, &body)
        }
        Err(error) => lock_error(&error, Some(name)),
    }
}

/// A request answered without asking Redis.
pub(super) enum Refused {
    /// No `web::Data<LockClient>` in the app: a 500 that says what to register.
    NoClient,
    /// The query string could not be read (a missing `name`, say): a 400.
    BadQuery(String),
}

impl Refused {
    pub(super) fn response(&self) -> HttpResponse {
        match self {
            Refused::NoClient => MissingLockClient.error_response(),
            Refused::BadQuery(reason) => error(
                StatusCode::BAD_REQUEST,
                "bad_query",
                &format!("bad query string: {reason}"),
                None,
            ),
        }
    }
}

/// The inspector of the app's `web::Data<LockClient>`.
pub(super) fn inspector(req: &HttpRequest) -> Result<Inspector, Refused> {
    req.app_data::<web::Data<LockClient>>()
        .map(|client| client.inspector())
        .ok_or(Refused::NoClient)
}

/// The inspector and the `?name=` of the request.
pub(super) fn inspector_and_name(req: &HttpRequest) -> Result<(Inspector, String), Refused> {
    let inspector = inspector(req)?;
    let query = web::Query::<NameQuery>::from_query(req.query_string())
        .map_err(|error| Refused::BadQuery(error.to_string()))?;
    Ok((inspector, query.into_inner().name))
}

/// Whether the browser says the request came from another site's page (`Sec-Fetch-Site`).
fn is_cross_site(req: &HttpRequest) -> bool {
    req.headers()
        .get("sec-fetch-site")
        .is_some_and(|site| site.as_bytes().eq_ignore_ascii_case(b"cross-site"))
}

/// Whether the body is declared as JSON (which a plain HTML form cannot send, and which a
/// script on another site can send only after a CORS preflight this scope never grants).
fn is_json(req: &HttpRequest) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

/// A JSON answer, never cached, never sniffed as HTML (names are arbitrary text).
pub(super) fn json<T: serde::Serialize>(status: StatusCode, body: &T) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .json(body)
}

/// `{"error": code, "message": message, "name": name}` with `status`.
pub(super) fn error(
    status: StatusCode,
    code: &str,
    message: &str,
    name: Option<&str>,
) -> HttpResponse {
    let mut body = serde_json::json!({ "error": code, "message": message });
    if let Some(name) = name {
        body["name"] = serde_json::Value::from(name);
    }
    json(status, &body)
}

fn not_found(name: &str) -> HttpResponse {
    error(
        StatusCode::NOT_FOUND,
        "no_lock",
        "no lock is stored under this name (free, or never taken)",
        Some(name),
    )
}

/// An inspector error as an answer: the name's fault is 4xx, Redis's 503, ours 500.
pub(super) fn lock_error(error: &LockError, name: Option<&str>) -> HttpResponse {
    let (status, code) = status_of(error);
    self::error(status, code, &error.to_string(), name)
}

/// The status and `error` code of an inspector error.
pub(super) fn status_of(error: &LockError) -> (StatusCode, &'static str) {
    match error {
        LockError::WrongType { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "not_a_lock"),
        LockError::InvalidName { .. } => (StatusCode::BAD_REQUEST, "lock_name_invalid"),
        // The inspector refuses what it cannot do to this lock (a semaphore has no holder
        // to force out).
        LockError::InvalidConfig { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "refused"),
        // The Redis user may not (a read-only inspector user asked to force-unlock).
        LockError::Denied { .. } => (StatusCode::FORBIDDEN, "denied_by_redis"),
        LockError::HolderChanged { .. } => (StatusCode::CONFLICT, "holder_changed"),
        LockError::Unavailable { .. } | LockError::Shutdown => {
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
        }
        _ if error.is_transient() => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "lock_error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn a_hostile_name_comes_through_the_query_string_byte_for_byte() {
        let name = "<script>alert(\"x\")</script>&'{order}/42?a=b%20#ü";
        // As the page's encodeURIComponent sends it.
        let sent =
            "%3Cscript%3Ealert(%22x%22)%3C%2Fscript%3E%26'%7Border%7D%2F42%3Fa%3Db%2520%23%C3%BC";
        let req = TestRequest::get()
            .uri(&format!("/api/lock?name={sent}"))
            .to_http_request();
        let parsed = web::Query::<NameQuery>::from_query(req.query_string()).unwrap();
        assert_eq!(parsed.name, name);
    }

    #[test]
    fn errors_are_json_with_the_name_as_data_not_markup() {
        let response = lock_error(
            &LockError::WrongType {
                name: "<b>x</b>".into(),
            },
            Some("<b>x</b>"),
        );
        assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let headers = response.headers();
        assert_eq!(
            headers.get(header::CONTENT_TYPE).unwrap(),
            "application/json"
        );
        assert_eq!(
            headers.get(header::X_CONTENT_TYPE_OPTIONS).unwrap(),
            "nosniff"
        );
    }

    #[test]
    fn only_a_json_body_from_this_site_may_force_unlock() {
        let form = TestRequest::post()
            .insert_header((header::CONTENT_TYPE, "text/plain"))
            .to_http_request();
        assert!(!is_json(&form));
        let json = TestRequest::post()
            .insert_header((header::CONTENT_TYPE, "application/json; charset=utf-8"))
            .to_http_request();
        assert!(is_json(&json));
        let other_site = TestRequest::post()
            .insert_header(("sec-fetch-site", "cross-site"))
            .to_http_request();
        assert!(is_cross_site(&other_site));
        let same = TestRequest::post()
            .insert_header(("sec-fetch-site", "same-origin"))
            .to_http_request();
        assert!(!is_cross_site(&same));
    }
}
