// A name written more than once in a path template is one error, at the template,
// and the method's other mistakes are reported with it: the template still names
// what it names, so a parameter that fills none of its names has no role.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    // Three times: one error; `note` fills no name, and `fn` is not `async`.
    #[get("/users/{id}/x/{id}/{id}")]
    fn user(&self, id: u64, note: &str) -> Result<String, ApiError>;

    // Two names, each twice: one error each; `c` fills no name.
    #[get("/{a}/{b}/{a}/{b}")]
    async fn pair(&self, a: u64, b: u64, #[path] c: u64) -> Result<String, ApiError>;

    // `{r#id}` names `id` too; `extra` fills no name.
    #[get("/users/{id}/{r#id}")]
    async fn raw(&self, id: u64, extra: u64) -> Result<String, ApiError>;
}

fn main() {}
