//! `#[distributed_lock("order:<id>")]`: wraps an async fn (an actix-web handler, a free fn or
//! a method) in acquire / release of a distributed lock. Use it through the facade crate
//! `actix-distributed-lock`, whose docs describe every option.
//!
//! Parsing (what the user wrote) lives in `parse`, expansion (what we generate) in `expand`.

mod duration;
mod expand;
mod handler;
mod kind;
mod parse;

use proc_macro::TokenStream;

// No doc comment here: the facade re-exports the attribute with its documentation (every
// option, with examples), and rustdoc would add this crate's text to that page.
#[proc_macro_attribute]
pub fn distributed_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    let item_fn = syn::parse_macro_input!(item as syn::ItemFn);
    let parsed = parse::Attribute::parse(args.into(), &item_fn);
    match parsed {
        Ok(attribute) => expand::expand(attribute, item_fn).into(),
        Err(error) => {
            // Keep the user's fn so the only errors shown are ours, not knock-on ones: a
            // handler written without `async` is kept as an `async fn`, as actix-web needs.
            let mut item_fn = item_fn;
            // The body never runs, and the parameters it does not use were the lock's (the
            // template we refused): no `unused variable` warnings on top of our error.
            item_fn
                .attrs
                .push(syn::parse_quote!(#[allow(unused_variables, unused_mut)]));
            if item_fn.sig.asyncness.is_none() && handler::is_handler(&item_fn) {
                item_fn.sig.asyncness = Some(syn::Token![async](item_fn.sig.fn_token.span));
            }
            let mut tokens = error.to_compile_error();
            tokens.extend(quote::quote!(#item_fn));
            tokens.into()
        }
    }
}
