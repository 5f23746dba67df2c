//! Whether the annotated fn is an actix-web handler, decided from what it is, not from type
//! names another crate may also use: an actix-web route attribute on it, or a parameter (or
//! the response) whose type is written as actix-web's.

use syn::visit::Visit;
use syn::{Attribute, FnArg, ItemFn, ReturnType};

/// actix-web's route attributes (`#[get("/")]`, `#[actix_web::post("/")]`, …).
const ROUTE_ATTRIBUTES: &[&str] = &[
    "get", "post", "put", "delete", "patch", "head", "options", "trace", "connect", "route",
    "routes",
];

/// A free fn with an actix-web route attribute, an actix-web parameter type (`HttpRequest`,
/// `web::Path<_>`, `actix_web::web::Json<_>`, …) or an actix-web response type
/// (`HttpResponse`, `impl Responder`, `actix_web::…`). A method is never one.
///
/// The route attribute is seen only when `#[distributed_lock]` is written above it: one
/// written below it (as in the docs) has already expanded and gone, so then the types
/// decide.
pub(crate) fn is_handler(item: &ItemFn) -> bool {
    if item.sig.receiver().is_some() {
        return false;
    }
    let parameters = item.sig.inputs.iter().any(|input| match input {
        FnArg::Typed(typed) => names_actix_web(&typed.ty, &["HttpRequest"]),
        FnArg::Receiver(_) => false,
    });
    let response = match &item.sig.output {
        ReturnType::Default => false,
        ReturnType::Type(_, ty) => names_actix_web(ty, &["HttpResponse", "Responder"]),
    };
    item.attrs.iter().any(is_route_attribute) || parameters || response
}

fn is_route_attribute(attribute: &Attribute) -> bool {
    let segments: Vec<String> = attribute
        .path()
        .segments
        .iter()
        .map(|segment| segment.ident.to_string())
        .collect();
    match segments.as_slice() {
        [name] => ROUTE_ATTRIBUTES.contains(&name.as_str()),
        [krate, name] => krate == "actix_web" && ROUTE_ATTRIBUTES.contains(&name.as_str()),
        _ => false,
    }
}

/// Whether some path in `ty` is actix-web's: it starts with `actix_web::` or `web::` (the
/// usual `use actix_web::web;`), or is one of `own_names` written bare.
fn names_actix_web(ty: &syn::Type, own_names: &[&str]) -> bool {
    struct Finder<'a> {
        own_names: &'a [&'a str],
        found: bool,
    }
    impl<'ast> Visit<'ast> for Finder<'_> {
        fn visit_path(&mut self, path: &'ast syn::Path) {
            let mut segments = path.segments.iter().map(|s| s.ident.to_string());
            let first = segments.next().unwrap_or_default();
            let bare = path.leading_colon.is_none() && path.segments.len() == 1;
            let from_actix_web =
                path.segments.len() > 1 && (first == "actix_web" || first == "web");
            if from_actix_web || (bare && self.own_names.contains(&first.as_str())) {
                self.found = true;
            }
            syn::visit::visit_path(self, path);
        }
    }
    let mut finder = Finder {
        own_names,
        found: false,
    };
    finder.visit_type(ty);
    finder.found
}

#[cfg(test)]
mod tests {
    use super::is_handler;

    fn handler(source: &str) -> bool {
        is_handler(&syn::parse_str(source).expect("a fn"))
    }

    #[test]
    fn actix_web_types_and_route_attributes_make_a_handler() {
        assert!(handler("async fn f(id: web::Path<u64>) {}"));
        assert!(handler("async fn f(body: actix_web::web::Json<Order>) {}"));
        assert!(handler("async fn f(request: HttpRequest) {}"));
        assert!(handler("async fn f(request: &HttpRequest) {}"));
        assert!(handler("async fn f(query: Option<web::Query<Q>>) {}"));
        assert!(handler("async fn f() -> HttpResponse { todo!() }"));
        assert!(handler("async fn f() -> impl Responder { todo!() }"));
        assert!(handler(
            "async fn f() -> Result<HttpResponse, E> { todo!() }"
        ));
        assert!(handler("#[get(\"/\")] async fn f(id: u64) {}"));
        assert!(handler("#[actix_web::post(\"/\")] async fn f(id: u64) {}"));
    }

    #[test]
    fn other_types_named_alike_do_not() {
        assert!(!handler("async fn f(file: &std::path::Path) {}"));
        assert!(!handler("async fn f(file: &Path) {}"));
        assert!(!handler(
            "async fn f(file: fs::Path, body: serde_json::Json) {}"
        ));
        assert!(!handler("async fn f(data: my::web::Data) {}"));
        assert!(!handler(
            "async fn f(data: Data<u8>) -> Result<Bytes, E> { todo!() }"
        ));
        assert!(!handler("#[tracing::instrument] async fn f(id: u64) {}"));
        assert!(!handler("#[other::get] async fn f(id: u64) {}"));
        assert!(!handler("async fn f(&self, id: web::Path<u64>) {}"));
    }
}
