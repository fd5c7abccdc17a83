// `#[cfg_attr]` on an endpoint's parameter is refused: it may add a `#[cfg]`.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users")]
    async fn users(
        &self,
        #[query("pageNo")]
        #[cfg_attr(all(), allow(non_snake_case))]
        pageNo: u32,
    ) -> Result<String, ApiError>;
}

fn main() {}
