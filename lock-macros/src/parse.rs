//! What the user wrote: the attribute's templates and options, checked against the fn.

use crate::duration::parse_millis;
use crate::handler;
use crate::kind::{self, KindName};
use proc_macro2::{Span, TokenStream};
use quote::quote_spanned;
use syn::parse::{ParseStream, Parser};
use syn::{Expr, FnArg, Ident, ItemFn, LitInt, LitStr, Pat, Path, Token};

/// The attribute, parsed and checked.
pub(crate) struct Attribute {
    /// One template: one lock. Several: a MultiLock over all of them.
    pub(crate) templates: Vec<Template>,
    pub(crate) wait_ms: Option<u64>,
    pub(crate) lease_ms: Option<u64>,
    pub(crate) client: Option<Expr>,
    pub(crate) on_fail: Option<Path>,
    /// `kind = …` (`reentrant` when not given), and the span to name it with.
    pub(crate) kind: KindName,
    pub(crate) kind_span: Span,
    /// `permits = …` (semaphore kinds only), 1 when not given.
    pub(crate) permits: u32,
    /// Wrap as an actix-web handler: client from `web::Data`, failures as responses.
    pub(crate) handler: bool,
    /// `on_lost = stop`: drop the body when the lock is lost (it runs on by default).
    pub(crate) stop_on_lost: bool,
    /// `retry_after = …`: the `Retry-After` of a handler's 409, in ms.
    pub(crate) retry_after_ms: Option<u64>,
}

/// A lock name template: a `format!` string and the expressions its `{}` stand for.
pub(crate) struct Template {
    pub(crate) format: String,
    pub(crate) args: Vec<TokenStream>,
    pub(crate) literal: LitStr,
}

const OPTIONS: &str = "wait, lease, kind, permits, client, on_fail, on_lost, retry_after";

/// What `on_lost = …` accepts.
const ON_LOST: &str =
    "`stop` (drop the body, answer `LockError::Lost`) or `keep_running` (the default)";

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
        let (kind, kind_span) = match &raw.kind {
            Some(ident) => (kind::lookup(ident)?, ident.span()),
            None => (kind::DEFAULT, Span::call_site()),
        };
        check_combination(&raw, kind, kind_span)?;
        let handler = raw.client.is_none() && handler::is_handler(item);
        if let Some((span, _)) = raw.retry_after {
            check_retry_after(span, handler, &raw)?;
        }
        Ok(Attribute {
            templates: raw.templates,
            wait_ms: raw.wait_ms,
            lease_ms: raw.lease.map(|(_, ms)| ms),
            client: raw.client,
            on_fail: raw.on_fail,
            kind,
            kind_span,
            permits: raw.permits.map_or(1, |(_, permits)| permits),
            handler,
            stop_on_lost: raw.on_lost.is_some_and(|(_, stop)| stop),
            retry_after_ms: raw.retry_after.map(|(_, ms)| ms),
        })
    }
}

/// `retry_after` sets the `Retry-After` of the 409 a handler answers a busy lock with: it
/// has nothing to set on a fn that is no handler, or answers failures with `on_fail`.
fn check_retry_after(span: Span, handler: bool, raw: &RawArgs) -> syn::Result<()> {
    let why = if raw.on_fail.is_some() {
        "this fn answers failures with `on_fail`"
    } else if raw.client.is_some() {
        "with `client = …` the fn is not wrapped as a handler"
    } else if !handler {
        "this fn is not an actix-web handler (no route attribute, `HttpRequest` parameter or \
         `HttpResponse`/`Responder` return type)"
    } else {
        return Ok(());
    };
    Err(syn::Error::new(
        span,
        format!(
            "`retry_after` sets the `Retry-After` header of the 409 an actix-web handler \
             answers when the lock is busy, but {why}"
        ),
    ))
}

/// The options a kind cannot take, refused on the offending option.
fn check_combination(raw: &RawArgs, kind: KindName, kind_span: Span) -> syn::Result<()> {
    let name = kind.name;
    if raw.templates.len() > 1 {
        if name == "fenced" {
            return Err(syn::Error::new(
                kind_span,
                "`kind = fenced` takes one template: each lock of a MultiLock has its own token, but \
                 `fencing_token()` returns one; take a `MultiLock` of fenced locks by hand",
            ));
        }
        if kind.semaphore {
            return Err(syn::Error::new(
                kind_span,
                format!("`kind = {name}` takes one template: a MultiLock is made of locks, not semaphores"),
            ));
        }
    }
    if let (Some((span, true)), "semaphore") = (raw.on_lost, name) {
        return Err(syn::Error::new(
            span,
            "`kind = semaphore` permits are never lost (they have no lease), so `on_lost = stop` \
             would never stop the body; use `kind = expirable_semaphore` for permits that can be lost",
        ));
    }
    if let (Some((span, _)), "semaphore") = (raw.lease, name) {
        return Err(syn::Error::new(
            span,
            "`kind = semaphore` permits have no lease (they are held until released); \
             use `kind = expirable_semaphore` for permits that come back on their own",
        ));
    }
    if let (Some((span, _)), false) = (raw.permits, kind.semaphore) {
        return Err(syn::Error::new(
            span,
            format!(
                "`permits` is for `kind = semaphore` or `kind = expirable_semaphore`; \
                 a `{name}` lock has one holder{}",
                if raw.kind.is_none() {
                    " (no `kind` given: `reentrant`)"
                } else {
                    ""
                }
            ),
        ));
    }
    Ok(())
}

#[derive(Default)]
struct RawArgs {
    templates: Vec<Template>,
    wait_ms: Option<u64>,
    /// The lease in ms, and the span of the `lease` option.
    lease: Option<(Span, u64)>,
    kind: Option<Ident>,
    /// The permits, and the span of the `permits` option.
    permits: Option<(Span, u32)>,
    client: Option<Expr>,
    on_fail: Option<Path>,
    /// `on_lost = stop` (true) or `on_lost = keep_running` (false), and the option's span.
    on_lost: Option<(Span, bool)>,
    /// `retry_after` in ms, and the option's span.
    retry_after: Option<(Span, u64)>,
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
                "wait" => {
                    let (_, ms) = parse_duration(input, &name)?;
                    raw.wait_ms.replace(ms).is_some()
                }
                "lease" => {
                    let (span, ms) = parse_duration(input, &name)?;
                    if ms == 0 {
                        return Err(syn::Error::new(span, "a lease must be at least 1ms"));
                    }
                    raw.lease.replace((key.span(), ms)).is_some()
                }
                "retry_after" => {
                    let (span, ms) = parse_duration(input, &name)?;
                    if ms == 0 {
                        return Err(syn::Error::new(
                            span,
                            "`retry_after` must be at least 1ms (it is sent in whole seconds, \
                             rounded up)",
                        ));
                    }
                    raw.retry_after.replace((key.span(), ms)).is_some()
                }
                "kind" => raw.kind.replace(input.parse()?).is_some(),
                "permits" => {
                    let literal: LitInt = input.parse()?;
                    let permits: u32 = literal.base10_parse()?;
                    if permits == 0 {
                        return Err(syn::Error::new(
                            literal.span(),
                            "`permits` must be at least 1",
                        ));
                    }
                    raw.permits.replace((key.span(), permits)).is_some()
                }
                "client" => raw.client.replace(input.parse()?).is_some(),
                "on_fail" => raw.on_fail.replace(input.parse()?).is_some(),
                "on_lost" => {
                    let stop = parse_on_lost(input)?;
                    raw.on_lost.replace((key.span(), stop)).is_some()
                }
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

/// `stop` or `keep_running`, as an ident (like `kind = …`); true for `stop`.
fn parse_on_lost(input: ParseStream) -> syn::Result<bool> {
    let value: Ident = input
        .parse()
        .map_err(|error| syn::Error::new(error.span(), format!("`on_lost` takes {ON_LOST}")))?;
    match value.to_string().as_str() {
        "stop" => Ok(true),
        "keep_running" => Ok(false),
        other => Err(syn::Error::new(
            value.span(),
            format!("unknown `on_lost = {other}`; `on_lost` takes {ON_LOST}"),
        )),
    }
}

/// A duration option's string (`"5s"`), in ms, with the string's span. A bare number is
/// refused with the string to write instead: its unit would be a guess.
fn parse_duration(input: ParseStream, option: &str) -> syn::Result<(Span, u64)> {
    if input.peek(LitInt) || input.peek(syn::LitFloat) {
        let number: syn::Lit = input.parse()?;
        let digits = match &number {
            syn::Lit::Int(int) => int.base10_digits().to_string(),
            syn::Lit::Float(float) => float.base10_digits().to_string(),
            _ => String::new(),
        };
        return Err(syn::Error::new(
            number.span(),
            format!(
                "`{option}` takes a duration with its unit, as a string: write \
                 `{option} = \"{digits}s\"` (or \"{digits}ms\", \"{digits}m\")"
            ),
        ));
    }
    let literal: LitStr = input.parse().map_err(|error| {
        syn::Error::new(
            error.span(),
            format!("`{option}` takes a duration as a string, e.g. `{option} = \"5s\"`"),
        )
    })?;
    let ms = parse_millis(&literal.value())
        .map_err(|message| syn::Error::new(literal.span(), message))?;
    Ok((literal.span(), ms))
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
            '{' => {
                refuse_braced_parameter(rest, span, params)?;
                format.push_str("{{");
            }
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

/// `{id}` where `id` is a parameter: the braces are literal text (a Redis Cluster hash
/// tag), so the lock would be the text `{id}` for every call, one lock for all of them.
/// `after` is the template after the `{`.
fn refuse_braced_parameter(after: &str, span: Span, params: &[String]) -> syn::Result<()> {
    let Some(end) = after.find('}') else {
        return Ok(());
    };
    let inside = after[..end].trim();
    let root = inside.split('.').next().unwrap_or_default().trim();
    if root.is_empty() || !params.iter().any(|p| p == root) {
        return Ok(());
    }
    Err(syn::Error::new(
        span,
        format!(
            "`{{{inside}}}` is literal text in a lock name (braces are a Redis Cluster hash tag), \
             so every call would take the same lock; write `<{inside}>` for the value of the \
             parameter (`{{<{inside}>}}` to keep it in a hash tag)"
        ),
    ))
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
    // A field rustc does not find is reported on the template, as ours: spanned as part of
    // the expansion, so rustc does not offer to replace the whole template with the field
    // it guesses.
    let field_span = Span::call_site().located_at(span);
    let mut expr = root;
    for segment in segments {
        let segment = segment.trim();
        if let Ok(index) = segment.parse::<u32>() {
            let index = syn::Index {
                index,
                span: field_span,
            };
            expr = quote_spanned!(span=> #expr.#index);
        } else if syn::parse_str::<Ident>(segment).is_ok() {
            let field = Ident::new(segment, field_span);
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
