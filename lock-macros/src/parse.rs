//! What the user wrote: the attribute's templates and options, checked against the fn.

use crate::duration::parse_millis;
use proc_macro2::{Span, TokenStream};
use quote::quote_spanned;
use syn::parse::{ParseStream, Parser};
use syn::{Expr, FnArg, Ident, ItemFn, LitStr, Pat, Path, Token};

/// The attribute, parsed and checked.
pub(crate) struct Attribute {
    /// One template: one lock. Several: a MultiLock over all of them.
    pub(crate) templates: Vec<Template>,
    pub(crate) wait_ms: Option<u64>,
    pub(crate) lease_ms: Option<u64>,
    pub(crate) client: Option<Expr>,
    pub(crate) on_fail: Option<Path>,
    /// `kind = …`, as written (`reentrant` when not given).
    pub(crate) kind: String,
    /// Wrap as an actix-web handler: client from `web::Data`, failures as responses.
    pub(crate) handler: bool,
}

/// A lock name template: a `format!` string and the expressions its `{}` stand for.
pub(crate) struct Template {
    pub(crate) format: String,
    pub(crate) args: Vec<TokenStream>,
    pub(crate) literal: LitStr,
}

const KINDS: &[&str] = &[
    "reentrant",
    "fair",
    "read",
    "write",
    "fenced",
    "fast",
    "semaphore",
    "expirable_semaphore",
];
const OPTIONS: &str = "wait, lease, kind, client, on_fail";

/// Extractor and response types that mark an actix-web handler.
const HANDLER_PARAM_TYPES: &[&str] = &[
    "Path",
    "Json",
    "Query",
    "Form",
    "Data",
    "HttpRequest",
    "Payload",
    "Bytes",
    "ReqData",
    "Header",
];
const HANDLER_RETURN_TYPES: &[&str] = &["HttpResponse", "Responder"];

impl Attribute {
    pub(crate) fn parse(args: TokenStream, item: &ItemFn) -> syn::Result<Attribute> {
        if item.sig.asyncness.is_none() {
            return Err(syn::Error::new_spanned(
                item.sig.fn_token,
                "#[distributed_lock] wraps an `async fn`: make this function async",
            ));
        }
        let params = parameter_names(item);
        let parser = |input: ParseStream| parse_args(input, &params);
        let raw = parser.parse2(args)?;
        if raw.templates.is_empty() {
            return Err(syn::Error::new(
                Span::call_site(),
                "#[distributed_lock] needs a lock name template, e.g. #[distributed_lock(\"order:<id>\")]",
            ));
        }
        if let (Some(kind), true) = (&raw.kind, raw.templates.len() > 1) {
            if kind == "fenced" {
                return Err(syn::Error::new(
                    kind.span(),
                    "`kind = fenced` takes one template: each lock of a MultiLock has its own token, but \
                     `fencing_token()` returns one; take a `MultiLock` of fenced locks by hand",
                ));
            }
            if kind.to_string().ends_with("semaphore") {
                return Err(syn::Error::new(
                    kind.span(),
                    format!("`kind = {kind}` takes one template: a MultiLock is made of locks, not semaphores"),
                ));
            }
        }
        let handler = raw.client.is_none() && looks_like_handler(item);
        Ok(Attribute {
            templates: raw.templates,
            wait_ms: raw.wait_ms,
            lease_ms: raw.lease_ms,
            client: raw.client,
            on_fail: raw.on_fail,
            kind: raw
                .kind
                .map_or_else(|| "reentrant".to_string(), |kind| kind.to_string()),
            handler,
        })
    }
}

#[derive(Default)]
struct RawArgs {
    templates: Vec<Template>,
    wait_ms: Option<u64>,
    lease_ms: Option<u64>,
    kind: Option<Ident>,
    client: Option<Expr>,
    on_fail: Option<Path>,
}

fn parse_args(input: ParseStream, params: &[String]) -> syn::Result<RawArgs> {
    let mut raw = RawArgs::default();
    while !input.is_empty() {
        if input.peek(LitStr) {
            let literal: LitStr = input.parse()?;
            raw.templates.push(parse_template(literal, params)?);
        } else {
            let key: Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            let name = key.to_string();
            let duplicate = match name.as_str() {
                "wait" => raw.wait_ms.replace(parse_duration(input)?).is_some(),
                "lease" => {
                    let (literal, ms) = (input.fork().parse::<LitStr>()?, parse_duration(input)?);
                    if ms == 0 {
                        return Err(syn::Error::new(
                            literal.span(),
                            "a lease must be at least 1ms",
                        ));
                    }
                    raw.lease_ms.replace(ms).is_some()
                }
                "kind" => {
                    let kind: Ident = input.parse()?;
                    check_kind(&kind)?;
                    raw.kind.replace(kind).is_some()
                }
                "client" => raw.client.replace(input.parse()?).is_some(),
                "on_fail" => raw.on_fail.replace(input.parse()?).is_some(),
                _ => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!("unknown option `{name}`; the options are: {OPTIONS}"),
                    ))
                }
            };
            if duplicate {
                return Err(syn::Error::new(
                    key.span(),
                    format!("option `{name}` is given twice"),
                ));
            }
        }
        if !input.is_empty() {
            input.parse::<Token![,]>()?;
        }
    }
    Ok(raw)
}

fn parse_duration(input: ParseStream) -> syn::Result<u64> {
    let literal: LitStr = input.parse()?;
    parse_millis(&literal.value()).map_err(|message| syn::Error::new(literal.span(), message))
}

fn check_kind(kind: &Ident) -> syn::Result<()> {
    let name = kind.to_string();
    if KINDS.contains(&name.as_str()) {
        Ok(())
    } else {
        Err(syn::Error::new(
            kind.span(),
            format!(
                "unknown lock kind `{name}`; the kinds are: {}",
                KINDS.join(", ")
            ),
        ))
    }
}

/// Splits `"order:<id>"` into `"order:{}"` and the expression `id`. Braces stay literal.
fn parse_template(literal: LitStr, params: &[String]) -> syn::Result<Template> {
    let text = literal.value();
    let span = literal.span();
    if text.is_empty() {
        return Err(syn::Error::new(span, "the lock name template is empty"));
    }
    let mut format = String::new();
    let mut args = Vec::new();
    let mut rest = text.as_str();
    while let Some(c) = rest.chars().next() {
        rest = &rest[c.len_utf8()..];
        match c {
            '{' => format.push_str("{{"),
            '}' => format.push_str("}}"),
            '<' => {
                let Some(end) = rest.find('>') else {
                    return Err(syn::Error::new(
                        span,
                        "a `<` placeholder is never closed with `>`",
                    ));
                };
                args.push(placeholder(&rest[..end], span, params)?);
                format.push_str("{}");
                rest = &rest[end + 1..];
            }
            other => format.push(other),
        }
    }
    Ok(Template {
        format,
        args,
        literal,
    })
}

/// `param` or `param.field.sub` (or `self.field` in a method), as an expression.
fn placeholder(path: &str, span: Span, params: &[String]) -> syn::Result<TokenStream> {
    let mut segments = path.split('.');
    let root = segments.next().unwrap_or_default().trim();
    if root.is_empty() {
        return Err(syn::Error::new(
            span,
            "an empty `<>` placeholder; name a parameter, e.g. `<id>`",
        ));
    }
    if !params.iter().any(|p| p == root) {
        let known = if params.is_empty() {
            "the function has no parameters".to_string()
        } else {
            format!("the parameters are: {}", params.join(", "))
        };
        return Err(syn::Error::new(
            span,
            format!("unknown placeholder `<{path}>`: no parameter `{root}`; {known}"),
        ));
    }
    let root = if root == "self" {
        quote_spanned!(span=> self)
    } else {
        let ident = Ident::new(root, span);
        quote_spanned!(span=> #ident)
    };
    let mut expr = root;
    for segment in segments {
        let segment = segment.trim();
        if let Ok(index) = segment.parse::<u32>() {
            let index = syn::Index { index, span };
            expr = quote_spanned!(span=> #expr.#index);
        } else if syn::parse_str::<Ident>(segment).is_ok() {
            let field = Ident::new(segment, span);
            expr = quote_spanned!(span=> #expr.#field);
        } else {
            return Err(syn::Error::new(
                span,
                format!("`{segment}` in `<{path}>` is not a field name"),
            ));
        }
    }
    Ok(expr)
}

/// The names a template may use: every binding in the parameters, and `self`.
fn parameter_names(item: &ItemFn) -> Vec<String> {
    let mut names = Vec::new();
    for input in &item.sig.inputs {
        match input {
            FnArg::Receiver(_) => names.push("self".to_string()),
            FnArg::Typed(typed) => collect_bindings(&typed.pat, &mut names),
        }
    }
    names
}

fn collect_bindings(pat: &Pat, names: &mut Vec<String>) {
    match pat {
        Pat::Ident(binding) => {
            names.push(binding.ident.to_string());
            if let Some((_, sub)) = &binding.subpat {
                collect_bindings(sub, names);
            }
        }
        Pat::Tuple(tuple) => tuple.elems.iter().for_each(|p| collect_bindings(p, names)),
        Pat::TupleStruct(tuple) => tuple.elems.iter().for_each(|p| collect_bindings(p, names)),
        Pat::Struct(strukt) => strukt
            .fields
            .iter()
            .for_each(|field| collect_bindings(&field.pat, names)),
        Pat::Reference(reference) => collect_bindings(&reference.pat, names),
        Pat::Slice(slice) => slice.elems.iter().for_each(|p| collect_bindings(p, names)),
        Pat::Paren(paren) => collect_bindings(&paren.pat, names),
        Pat::Type(typed) => collect_bindings(&typed.pat, names),
        _ => {}
    }
}

/// A free fn that takes an actix-web extractor or returns an actix-web response.
fn looks_like_handler(item: &ItemFn) -> bool {
    let mut has_receiver = false;
    let mut extractor = false;
    for input in &item.sig.inputs {
        match input {
            FnArg::Receiver(_) => has_receiver = true,
            FnArg::Typed(typed) => {
                extractor |= mentions(&typed.ty, HANDLER_PARAM_TYPES);
            }
        }
    }
    let responds = match &item.sig.output {
        syn::ReturnType::Default => false,
        syn::ReturnType::Type(_, ty) => mentions(ty, HANDLER_RETURN_TYPES),
    };
    !has_receiver && (extractor || responds)
}

/// Whether any path segment or trait bound in `ty` is one of `names`.
fn mentions(ty: &syn::Type, names: &[&str]) -> bool {
    let tokens = quote::quote!(#ty).to_string();
    tokens
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|word| names.contains(&word))
}
