//! Quick start: a typed client for a small users API, against a local server this
//! program starts itself. Run it with `cargo run --example quickstart`.
//!
//! It shows typed calls succeeding, and failing with typed errors you can `match`
//! on: a 404 with its JSON error body, a flaky endpoint that succeeds after retries,
//! a slow one that hits its attempt timeout, and a path value refused before sending.
#![allow(clippy::print_stdout)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode, body::Incoming, service::service_fn};
use hyper_util::rt::TokioIo;
use resilient_api::{ApiError, ErrorKind, resilient_api};
use serde::Deserialize;

/// A user, as the service returns it.
#[derive(Debug, Deserialize)]
pub struct User {
    /// Its id.
    pub id: u64,
    /// Its name.
    pub name: String,
}

/// The service's error body.
#[derive(Debug, Deserialize)]
pub struct Problem {
    /// What went wrong.
    pub error: String,
}

/// What the users service offers, and how each call must behave.
#[resilient_api(
    timeout(attempt = "300ms", total = "3s"),
    retry(max = 3, backoff = exponential_jitter(base = "50ms", cap = "1s")),
    breaker(failures = 5, reset = "10s"),
    bulkhead(concurrency = 8, queue = 32),
    headers("User-Agent" = "resilient-api-quickstart"),
)]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<User, ApiError>;

    /// Answers 503 twice, then succeeds: retried with jittered backoff.
    #[get("/flaky")]
    async fn flaky(&self) -> Result<String, ApiError>;

    /// Takes a second to answer: each attempt times out after 300 ms.
    #[get("/slow")]
    #[retry(max = 0)]
    async fn slow(&self) -> Result<String, ApiError>;

    #[get("/files/{name}")]
    async fn file(&self, name: &str) -> Result<String, ApiError>;
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = start_server().await?;
    let api = UsersClient::builder()
        .base_url(format!("http://{addr}"))
        .build()?;

    // 1. A typed success.
    let user = api.user(42).await?;
    println!("user(42)        -> ok: {user:?}");

    // 2. A typed failure: the status, the attempt count and the decoded error body.
    match api.user(0).await {
        Err(e) if e.kind() == ErrorKind::Status => {
            let problem = e.decode_body::<Problem>().and_then(Result::ok);
            println!(
                "user(0)         -> {} (status {:?}, {} attempt, body {:?})",
                e,
                e.status(),
                e.attempts(),
                problem.map(|p| p.error)
            );
        }
        other => println!("user(0)         -> unexpected: {other:?}"),
    }

    // 3. Retries: two 503s, then success.
    let text = api.flaky().await?;
    println!("flaky()         -> ok after retries: {text:?}");

    // 4. An attempt timeout, reported as such.
    match api.slow().await {
        Err(e) => println!("slow()          -> {e} (timeout: {:?})", e.timeout()),
        Ok(v) => println!("slow()          -> unexpected success {v:?}"),
    }

    // 5. A path value that would change the URL's shape is refused before sending.
    match api.file("..").await {
        Err(e) => println!("file(\"..\")      -> {e} (kind {:?})", e.kind()),
        Ok(v) => println!("file(\"..\")      -> unexpected success {v:?}"),
    }

    println!("breaker         -> {:?}", api.circuit_state().phase);
    Ok(())
}

/// A tiny users service on an ephemeral loopback port.
async fn start_server() -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let flaky = Arc::new(AtomicU32::new(0));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let flaky = flaky.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| answer(req, flaky.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(addr)
}

async fn answer(
    req: Request<Incoming>,
    flaky: Arc<AtomicU32>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let json = |status: StatusCode, body: &str| {
        let mut r = Response::new(Full::new(Bytes::from(body.to_owned())));
        *r.status_mut() = status;
        r.headers_mut().insert(
            "content-type",
            "application/json".parse().expect("static header"),
        );
        r
    };
    Ok(match req.uri().path() {
        "/users/42" => json(StatusCode::OK, r#"{"id":42,"name":"Ada"}"#),
        "/users/0" => json(StatusCode::NOT_FOUND, r#"{"error":"no user 0"}"#),
        "/flaky" => {
            if flaky.fetch_add(1, Ordering::SeqCst) < 2 {
                json(StatusCode::SERVICE_UNAVAILABLE, r#"{"error":"busy"}"#)
            } else {
                Response::new(Full::new(Bytes::from_static(b"ready")))
            }
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Response::new(Full::new(Bytes::from_static(b"too late")))
        }
        _ => json(StatusCode::NOT_FOUND, r#"{"error":"no such path"}"#),
    })
}
