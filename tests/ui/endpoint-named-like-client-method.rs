use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Status {
    #[get("/circuit")]
    async fn circuit_state(&self) -> Result<String, ApiError>;

    #[post("/options")]
    #[idempotent]
    async fn with_options(&self, #[body] options: &str) -> Result<(), ApiError>;

    #[get("/partition")]
    async fn partition_circuit_state(&self) -> Result<String, ApiError>;
}

// The call resolves to the stub of the endpoint: no second error here.
async fn check(client: StatusClient) -> Result<String, ApiError> {
    client.circuit_state().await
}

fn main() {}
