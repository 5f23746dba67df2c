// A handler written without `async`: one error, ours, not a cascade of actix-web's
// `Handler` errors where it is registered.
use actix_distributed_lock::distributed_lock;
use actix_web::{get, web, App, HttpResponse};

#[distributed_lock("order:<id>")]
#[get("/orders/{id}")]
fn show(id: web::Path<u64>) -> HttpResponse {
    HttpResponse::Ok().body(id.to_string())
}

#[distributed_lock("order:<id>")]
fn pay(id: web::Path<u64>) -> HttpResponse {
    HttpResponse::Ok().body(id.to_string())
}

fn main() {
    let _app = App::new()
        .service(show)
        .route("/orders/{id}/pay", web::post().to(pay));
}
