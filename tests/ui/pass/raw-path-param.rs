//! A path parameter with a raw name is written `{type}` or `{r#type}` in the template.

use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Catalog {
    #[get("/types/{type}")]
    async fn by_type(&self, r#type: &str) -> Result<String, ApiError>;

    #[get("/kinds/{r#type}/items/{r#match}")]
    async fn by_kind(&self, r#type: &str, r#match: u32) -> Result<String, ApiError>;
}

fn main() {}
