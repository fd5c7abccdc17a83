// A check of the wrong shape fails at the path the user wrote: here it takes the
// value by value (a check borrows it), and another returns a `bool`, not a `Result`.
use resilient_api::{ApiError, resilient_api};

fn by_value(_: String) -> Result<(), String> {
    Ok(())
}

fn says_bool(_: &String) -> bool {
    true
}

#[resilient_api(timeout(attempt = "3s"))]
pub trait Docs {
    #[get("/a")]
    #[parse(with = by_value)]
    async fn a(&self) -> Result<String, ApiError>;

    #[get("/b")]
    #[parse(with = says_bool)]
    async fn b(&self) -> Result<String, ApiError>;
}

fn main() {}
