//! What we generate: the user's signature token for token (plus, for handlers, a hidden
//! client extractor and a response for lock failures), and the body moved inside
//! acquire / release.

use crate::parse::Attribute;
use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{parse_quote, ItemFn, ReturnType, Signature, Type};

pub(crate) fn expand(attribute: Attribute, item: ItemFn) -> TokenStream {
    // A handler's expansion needs the facade's `web` feature; without it, the fn as written.
    let written = quote!(#item);
    let ItemFn {
        attrs,
        vis,
        mut sig,
        block,
    } = item;
    let krate = quote!(::actix_distributed_lock);
    let private = quote!(#krate::__private);
    let original_output: Type = match &sig.output {
        ReturnType::Default => parse_quote!(()),
        ReturnType::Type(_, ty) => (**ty).clone(),
    };
    let span = attribute.templates[0].literal.span();

    let wait = millis_option(attribute.wait_ms, &private);
    let lease = millis_option(attribute.lease_ms, &private);
    let names: Vec<TokenStream> = attribute
        .templates
        .iter()
        .map(|template| {
            let (format, args) = (&template.format, &template.args);
            quote!(::std::format!(#format #(, #args)*))
        })
        .collect();

    let kind = {
        let variant = attribute.kind.variant(attribute.kind_span);
        quote!(#private::Kind::#variant)
    };

    // How to answer when the lock cannot be taken (or is lost under `on_lost = stop`), and
    // how to hand back the body's result. An `Err` goes through `fail`, spanned on the
    // return type: a fn that does not return a `Result` is told so there.
    let respond = attribute.handler && attribute.on_fail.is_none();
    // A handler's 409 tells when to retry: the attribute's `retry_after`, or what its own
    // holds in this process typically last (the watchdog keeps a busy lock's TTL near its
    // whole lease, whatever the holds last).
    let observe = respond && attribute.retry_after_ms.is_none();
    let hint = match attribute.retry_after_ms {
        Some(ms) => quote!(#krate::web::__RetryHint::Fixed(#private::millis(#ms))),
        None => quote!(#krate::web::__RetryHint::Observed(&__ADL_HOLDS)),
    };
    let holds = if observe {
        quote!(static __ADL_HOLDS: #krate::web::__HoldTimes = #krate::web::__HoldTimes::new();)
    } else {
        quote!()
    };
    let (held_since, held) = if observe {
        (
            quote!(let __adl_held_since = ::std::time::Instant::now();),
            quote!(__ADL_HOLDS.record(__adl_held_since.elapsed());),
        )
    } else {
        (quote!(), quote!())
    };
    let fail = match (&attribute.on_fail, respond) {
        (Some(on_fail), _) => {
            over_output(&sig, quote!(#private::fail), quote!(#on_fail(__adl_error)))
        }
        (None, true) => quote! {
            #krate::web::__actix_web::Either::Left(
                #krate::web::LockRejection::for_lock(
                    &__adl_client, #kind, __adl_name.clone(), __adl_error, #hint,
                ).await)
        },
        (None, false) => over_output(&sig, quote!(#private::fail_from), quote!(__adl_error)),
    };
    let succeed = if respond {
        quote!(#krate::web::__actix_web::Either::Right(__adl_out))
    } else {
        quote!(__adl_out)
    };

    let client = match (&attribute.client, attribute.handler) {
        (Some(expr), _) => quote_spanned! {expr.span()=>
            ::core::clone::Clone::clone(#private::AsLockClient::as_lock_client(&(#expr)))
        },
        (None, true) => quote!(::core::clone::Clone::clone(&__adl_client_data.0)),
        (None, false) => quote! {
            match #private::require_default_client() {
                ::core::result::Result::Ok(__adl_client) => __adl_client,
                ::core::result::Result::Err(__adl_error) => return #fail,
            }
        },
    };

    if attribute.handler {
        sig.inputs.insert(
            0,
            parse_quote!(__adl_client_data: #krate::web::LockClientData),
        );
    }
    if respond {
        sig.output = parse_quote! {
            -> #krate::web::__actix_web::Either<#krate::web::LockRejection, #original_output>
        };
    }

    // `?` in the moved body needs its output type; an `impl Trait` type cannot be named.
    let body = if mentions_impl(&original_output) {
        quote!(async move #block)
    } else {
        quote!(#private::typed::<#original_output, _>(async move #block))
    };

    // The body runs with its hold as `current()`; under `on_lost = stop` it is raced against
    // the loss, and its result is a `Result` whose `Err` is answered after the release.
    let run = if attribute.stop_on_lost {
        quote!(#private::run_until_lost)
    } else {
        quote!(#private::run_as_current)
    };
    let permits = attribute.permits;
    let request = quote! {
        #private::Request { kind: #kind, lease: #lease, permits: #permits }
    };
    let locked = if names.len() == 1 {
        let name = &names[0];
        let acquire = quote_spanned! {span=>
            #private::acquire(
                &__adl_client,
                &__adl_name,
                __adl_turn.owner(),
                __adl_turn.wait_left(),
                #request,
            )
        };
        let stopped = stopped(attribute.stop_on_lost, quote!(return #fail));
        quote! {
            let __adl_name: ::std::string::String = #name;
            let __adl_client: #krate::LockClient = #client;
            let __adl_turn = match #private::Turn::take(
                &__adl_client,
                ::core::slice::from_ref(&__adl_name),
                #kind,
                #wait,
            )
            .await
            {
                ::core::result::Result::Ok(__adl_turn) => __adl_turn,
                ::core::result::Result::Err(__adl_error) => return #fail,
            };
            let __adl_guard = match #acquire.await {
                ::core::result::Result::Ok(__adl_guard) => __adl_guard,
                ::core::result::Result::Err(__adl_error) => return #fail,
            };
            #held_since
            // A panic or a dropped future unwinds through here: the guard's drop releases.
            let __adl_out = __adl_turn
                .run(::std::boxed::Box::pin(#run(__adl_guard.current(), #body)))
                .await;
            #private::release(__adl_guard).await;
            #held
            // The turn goes to a sibling only now, after the unlock.
            ::core::mem::drop(__adl_turn);
            #stopped
        }
    } else {
        // Several templates: one MultiLock over all of them. A rejection names the member
        // that failed; the list of names exists only where a rejection can show it.
        let acquire = quote_spanned! {span=>
            #private::acquire_many(
                &__adl_client,
                &__adl_names,
                __adl_turn.owner(),
                __adl_turn.wait_left(),
                #request,
            )
        };
        let (joined, on_error) = if respond {
            (
                quote!(let __adl_name: ::std::string::String = __adl_names.join(", ");),
                quote! {{
                    let __adl_name = #private::failed_lock_name(&__adl_error, __adl_name);
                    return #fail;
                }},
            )
        } else {
            (quote!(), quote!(return #fail))
        };
        let stopped = stopped(attribute.stop_on_lost, on_error.clone());
        quote! {
            let __adl_names: ::std::vec::Vec<::std::string::String> = ::std::vec![#(#names),*];
            #joined
            let __adl_client: #krate::LockClient = #client;
            let __adl_turn =
                match #private::Turn::take(&__adl_client, &__adl_names, #kind, #wait).await {
                    ::core::result::Result::Ok(__adl_turn) => __adl_turn,
                    ::core::result::Result::Err(__adl_error) => #on_error,
                };
            let __adl_guard = match #acquire.await {
                ::core::result::Result::Ok(__adl_guard) => __adl_guard,
                ::core::result::Result::Err(__adl_error) => #on_error,
            };
            #held_since
            // A panic or a dropped future unwinds through here: the guard's drop releases.
            let __adl_out = __adl_turn
                .run(::std::boxed::Box::pin(#run(
                    #private::current_of_many(&__adl_guard),
                    #body,
                )))
                .await;
            #private::release_many(__adl_guard).await;
            #held
            // The turn goes to a sibling only now, after the unlock.
            ::core::mem::drop(__adl_turn);
            #stopped
        }
    };
    let wrapped = quote! {
        #(#attrs)*
        #vis #sig {
            #holds
            #locked
            #succeed
        }
    };
    if attribute.handler {
        quote!(#krate::__web_handler! { { #wrapped } { #written } })
    } else {
        wrapped
    }
}

/// `callee(error)`, which makes an `Err` of the fn's return type, spanned over that type
/// (over `fn name(…)` when there is none): a fn that does not return a `Result` (or whose
/// error type cannot be made from a `LockError`) is told so there.
fn over_output(sig: &Signature, callee: TokenStream, error: TokenStream) -> TokenStream {
    let (start, end) = output_spans(sig);
    let callee = spanned(callee, start, end);
    let mut arguments = Group::new(Delimiter::Parenthesis, error);
    arguments.set_span(end);
    quote!(#callee #arguments)
}

/// The first and the last token of the fn's return type, or `fn` and the `)` of its
/// parameters when it has none.
fn output_spans(sig: &Signature) -> (Span, Span) {
    match &sig.output {
        ReturnType::Type(_, ty) => {
            let tokens: Vec<TokenTree> = ty.to_token_stream().into_iter().collect();
            let first = tokens.first().map_or_else(|| ty.span(), TokenTree::span);
            let last = tokens.last().map_or_else(|| ty.span(), TokenTree::span);
            (first, last)
        }
        ReturnType::Default => (sig.fn_token.span, sig.paren_token.span.close()),
    }
}

/// `tokens` (an expression) with its first token spanned at `start` and every other one,
/// nested ones included, at `end`: rustc's span of the expression runs from one to the
/// other.
fn spanned(tokens: TokenStream, start: Span, end: Span) -> TokenStream {
    let mut tokens = respan(tokens, end).into_iter();
    let first = tokens.next().map(|mut token| {
        token.set_span(start);
        token
    });
    first.into_iter().chain(tokens).collect()
}

/// `tokens` with every span, nested ones included, set to `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|token| match token {
            TokenTree::Group(group) => {
                let mut group = Group::new(group.delimiter(), respan(group.stream(), span));
                group.set_span(span);
                TokenTree::Group(group)
            }
            mut token => {
                token.set_span(span);
                token
            }
        })
        .collect()
}

/// Under `on_lost = stop`, unwraps the body's result or answers the loss with `on_error`.
fn stopped(stop_on_lost: bool, on_error: TokenStream) -> TokenStream {
    if !stop_on_lost {
        return TokenStream::new();
    }
    quote! {
        let __adl_out = match __adl_out {
            ::core::result::Result::Ok(__adl_out) => __adl_out,
            ::core::result::Result::Err(__adl_error) => #on_error,
        };
    }
}

fn millis_option(ms: Option<u64>, private: &TokenStream) -> TokenStream {
    match ms {
        Some(ms) => quote!(::core::option::Option::Some(#private::millis(#ms))),
        None => quote!(::core::option::Option::None),
    }
}

fn mentions_impl(ty: &Type) -> bool {
    quote!(#ty)
        .to_string()
        .split_whitespace()
        .any(|word| word == "impl")
}
