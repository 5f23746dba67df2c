//! `#[distributed_lock]` on an actix-web handler expands through `__web_handler!`, which
//! keeps the wrapped handler when the `web` feature is on and, when it is off, says to turn
//! it on (and keeps the user's fn as written, so no other error follows ours).

/// Not a public API: the expansion of `#[distributed_lock]` on an actix-web handler.
#[cfg(feature = "web")]
#[doc(hidden)]
#[macro_export]
macro_rules! __web_handler {
    ({ $($wrapped:tt)* } { $($written:tt)* }) => {
        $($wrapped)*
    };
}

/// Not a public API: the expansion of `#[distributed_lock]` on an actix-web handler.
#[cfg(not(feature = "web"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __web_handler {
    ({ $($wrapped:tt)* } { $($written:tt)* }) => {
        ::core::compile_error!(
            "#[distributed_lock] on an actix-web handler needs the `web` feature of \
             actix-distributed-lock: enable it (it is on by default; `default-features = false` \
             turns it off)"
        );
        $($written)*
    };
}
