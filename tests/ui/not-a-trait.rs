use resilient_api::resilient_api;

#[resilient_api(timeout(attempt = "3s"))]
pub struct Users;

fn main() {}
