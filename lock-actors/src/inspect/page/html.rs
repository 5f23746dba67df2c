//! The inspector page itself: one HTML document with its style and script inline, under a
//! content security policy that lets only those run.

use super::InspectorPage;
use actix_web::http::header;
use actix_web::{web, HttpResponse};

/// The page; `{{NONCE}}` and `{{FORCE_UNLOCK}}` are filled in per answer.
const PAGE: &str = include_str!("page.html");

/// `GET` (the scope's root): the page. Names never enter this document on the server: the
/// script fetches them and renders them as text.
pub(super) async fn page(settings: web::Data<InspectorPage>) -> HttpResponse {
    let nonce = nonce();
    let body = render(&nonce, settings.force_unlock_allowed());
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CONTENT_SECURITY_POLICY, policy(&nonce)))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .body(body)
}

/// The page with its nonce and force-unlock switch filled in.
fn render(nonce: &str, force_unlock: bool) -> String {
    PAGE.replace("{{NONCE}}", nonce).replace(
        "{{FORCE_UNLOCK}}",
        if force_unlock { "true" } else { "false" },
    )
}

/// Only the page's own inline style and script run (a name that got into markup by
/// mistake could not run a script); requests go to this origin only; no frames, no forms
/// posted elsewhere.
fn policy(nonce: &str) -> String {
    format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
         connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; \
         frame-ancestors 'none'"
    )
}

/// 128 random bits in hex, new for every answer.
fn nonce() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_fills_every_placeholder_and_runs_only_its_own_script() {
        let page = render("abc123", true);
        assert!(!page.contains("{{"), "a placeholder is left");
        assert_eq!(page.matches("nonce=\"abc123\"").count(), 2);
        assert!(page.contains("data-force-unlock=\"true\""));
        assert!(render("n", false).contains("data-force-unlock=\"false\""));
        assert!(policy("abc123").contains("script-src 'nonce-abc123';"));
        assert_ne!(nonce(), nonce());
    }

    #[test]
    fn the_script_never_turns_text_into_markup() {
        // Names are arbitrary strings: the page may only put them in as text.
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "setAttribute('style'",
            "srcdoc",
        ] {
            assert!(!PAGE.contains(sink), "the page uses {sink}");
        }
        // Every name in a URL is percent-encoded.
        assert!(PAGE.contains("'events?name=' + enc(name)"));
        assert!(PAGE.contains("'lock?name=' + enc(name)"));
        assert!(PAGE.contains("'lock=' + enc(lock)"));
    }
}
