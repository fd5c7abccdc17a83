//! A regression guard for the hot path: every call's future is moved a few times on
//! its way to the executor, so its size is CPU time. Rare paths (hedging,
//! coalescing) are boxed so they do not grow it. The bound has headroom for other
//! compiler versions; it fails on a real regression (it was 7.8 KB before the
//! pipeline stored its work once).

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, resilient_api};

/// A plain GET with a path parameter.
#[resilient_api(timeout(attempt = "1s", total = "5s"))]
pub trait Small {
    #[get("/a/{id}")]
    async fn a(&self, id: u64) -> Result<String, ApiError>;
}

#[tokio::test]
async fn a_call_future_stays_small() {
    let t = ScriptedTransport::new([Step::status(200).body("ok")]);
    let api: SmallClient = tests::scripted(&t);
    let call = api.a(1);
    let size = std::mem::size_of_val(&call);
    assert!(size <= 5 * 1024, "a call's future is {size} bytes");
    assert_eq!(call.await.expect("ok"), "ok");
}
