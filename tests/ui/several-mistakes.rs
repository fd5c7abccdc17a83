// Every mistake is reported in one build, each at its own token: those found while
// parsing the trait's attribute, a method's attributes and a parameter's, and those
// of the rules checked over the whole model afterwards.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(
    timeout(attempt = "3s", total = "2s"),
    retry(max = "3"),
    breaker(failure_rate = 1.5),
    bulkhead(concurency = 8)
)]
pub trait Shop {
    #[get("/orders/{order}")]
    #[timeout(attempt = "3 s")]
    fn order(&self) -> Result<String, ApiError>;

    #[post("/orders")]
    #[hedge(delay = "50ms", max = 1)]
    async fn place(&self, #[body(jsn)] order: &str, note: &str) -> Result<String, ApiError>;

    #[get("orders")]
    #[get("/orders")]
    async fn orders(self) -> Vec<String>;
}

fn main() {}
