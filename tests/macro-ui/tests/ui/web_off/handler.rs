// An actix-web handler (its parameter is written as actix-web's `web::Path`) in a crate
// that turned the facade's `web` feature off. Built by tests/macro_web_off.rs, not by
// trybuild (which builds with the test crate's features). The `web` module stands in for
// actix-web's: the project that builds this file does not depend on actix-web.
use actix_distributed_lock::distributed_lock;

mod web {
    pub struct Path<T>(pub T);
}

#[distributed_lock("order:<id>")]
async fn pay(id: web::Path<u64>) -> u64 {
    id.0
}

fn main() {
    let _ = pay(web::Path(42));
}
