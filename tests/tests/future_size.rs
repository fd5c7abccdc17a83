//! A regression guard for the hot path: every call's future is moved a few times on
//! its way to the executor, so its size is CPU time. Rare paths (hedging,
//! coalescing) are boxed so they do not grow it. The bound (1,664 bytes) has about a
//! tenth of headroom over today's 1,480 to 1,504 bytes (they move a little with the
//! build's paths); it fails on a real regression (the future was 7.8 KB before the
//! pipeline stored its work once, 3.3 KB before the call got one timer and stopped
//! storing arguments twice, and 1,752 bytes before an attempt's exchange became one
//! future; it grew from 1,352 when a plain call's first attempt got a path of its
//! own, whose state the future holds in the same room as the retry loop's, with a
//! little more alongside).

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
    assert!(size <= 1664, "a call's future is {size} bytes");
    assert_eq!(call.await.expect("ok"), "ok");
}
