//! The inspector page's live feed: [`Inspector::watch`](crate::inspect::Inspector::watch)
//! as server-sent events.

use super::api;
use crate::error::LockError;
use crate::inspect::{LockWatch, WatchEvent};
use actix_web::http::header;
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse};
use futures_util::{stream, StreamExt};
use std::time::Duration;

/// How often a quiet feed sends a comment line, so proxies keep the connection open and a
/// closed browser tab is noticed: actix-web (which allows half-closed connections by
/// default) ends a streaming answer only when a write fails, the second write after the
/// browser left. The feed, and the watch's subscription, end within two of these.
const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// How long the browser waits before reconnecting a dropped feed (the `retry:` field).
const RECONNECT_MS: u64 = 2_000;

/// `GET /api/events?name=N`: `text/event-stream` of lock `N`'s [`WatchEvent`]s, one JSON
/// object per `data:` line (the first is the lock as found); a failed read is a `failure`
/// event and the feed goes on. Ends when the client shuts down or the browser leaves.
pub(super) async fn watch(req: HttpRequest) -> HttpResponse {
    let (inspector, name) = match api::inspector_and_name(&req) {
        Ok(found) => found,
        Err(refused) => return refused.response(),
    };
    let watch = match inspector.watch(&name) {
        Ok(watch) => watch,
        Err(error) => return api::lock_error(&error, Some(&name)),
    };
    let start = format!("retry: {RECONNECT_MS}\n\n");
    let feed = stream::once(async move { Ok(Bytes::from(start)) }).chain(feed(watch));
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "text/event-stream"))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        // A compressing middleware leaves an encoded body alone; a compressed feed would
        // sit in its buffer.
        .insert_header((header::CONTENT_ENCODING, "identity"))
        .insert_header(("x-accel-buffering", "no"))
        .streaming(feed)
}

/// The watch as server-sent event frames, with a keep-alive comment every [`KEEP_ALIVE`]
/// of quiet; ends when the watch does.
fn feed(
    watch: LockWatch,
) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> {
    let start = tokio::time::Instant::now() + KEEP_ALIVE;
    let mut beat = tokio::time::interval_at(start, KEEP_ALIVE);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    stream::unfold((watch, beat), |(mut watch, mut beat)| async move {
        let frame = tokio::select! {
            event = watch.next() => match event {
                Some(event) => {
                    beat.reset();
                    frame(&event)
                }
                None => return None,
            },
            _ = beat.tick() => ": keep-alive\n\n".to_string(),
        };
        Some((Ok(Bytes::from(frame)), (watch, beat)))
    })
}

/// One event as a server-sent event frame: `data: <json>` for a change, `event: failure`
/// with `{"error", "message"}` for a failed read.
fn frame(event: &Result<WatchEvent, LockError>) -> String {
    match event {
        Ok(event) => match serde_json::to_string(event) {
            Ok(json) => format!("data: {json}\n\n"),
            Err(e) => error_frame("lock_error", &e.to_string()),
        },
        Err(error) => error_frame(api::status_of(error).1, &error.to_string()),
    }
}

fn error_frame(code: &str, message: &str) -> String {
    let body = serde_json::json!({ "error": code, "message": message });
    format!("event: failure\ndata: {body}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_one_data_line_whatever_the_name_holds() {
        let lock = "line one\nline two\r\n<script>\u{2028}";
        let event = WatchEvent {
            at_ms: 1,
            changes: vec![],
            lock: None,
        };
        let error = LockError::WrongType { name: lock.into() };
        for text in [frame(&Ok(event)), frame(&Err(error))] {
            let body = text
                .strip_suffix("\n\n")
                .expect("a frame ends in a blank line");
            let data: Vec<&str> = body.lines().filter(|l| l.starts_with("data: ")).collect();
            assert_eq!(data.len(), 1, "{text:?}");
            assert!(!body.contains('\r'), "{text:?}");
            let json: serde_json::Value = serde_json::from_str(&data[0][6..]).unwrap();
            assert!(json.is_object());
        }
    }
}
