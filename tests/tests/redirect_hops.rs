//! Each redirect hop is a request of its own: the middleware signs it, a failure to
//! reach it does not make an executed POST look unsent, and a redirect that cannot be
//! followed is an error, not the resource.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{assert_nothing_leaked, scripted, scripted_builder};

/// Retries on, so that a wrong classification would show as a second POST.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 2, backoff = fixed(delay = "5ms"), on = [503])
)]
pub trait Shop {
    #[post("/charges")]
    async fn charge(&self, #[body(raw)] payload: &[u8]) -> Result<String, ApiError>;

    #[get("/receipt")]
    async fn receipt(&self) -> Result<String, ApiError>;

    #[delete("/cart")]
    async fn clear(&self) -> Result<(), ApiError>;
}

/// Regression: the POST ran (its 303 points at the result), then fetching the result
/// failed to connect; that failure was "never sent" and the POST was sent again.
#[tokio::test(start_paused = true)]
async fn a_post_whose_redirect_target_refuses_is_not_sent_again() {
    let t = ScriptedTransport::new([
        Step::status(303).header("location", "/receipts/1"),
        Step::connect_error(),
    ]);
    let api = scripted::<ShopClient>(&t);
    let e = api.charge(b"once").await.unwrap_err();
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::Transport, 1));
    assert!(!e.is_connect(), "the POST reached the server");
    assert_eq!(t.attempts(), 2, "the POST and the hop, nothing more");
    assert_nothing_leaked(&t);
}

/// The same failure on a GET is retried, as the GET may run again.
#[tokio::test(start_paused = true)]
async fn a_get_whose_redirect_target_refuses_is_retried() {
    let t = ScriptedTransport::new([
        Step::status(302).header("location", "/receipts/1"),
        Step::connect_error(),
        Step::status(200).body("receipt"),
    ]);
    let api = scripted::<ShopClient>(&t);
    assert_eq!(api.receipt().await.unwrap(), "receipt");
    assert_eq!(t.attempts(), 3);
}

/// Regression: a redirected request was built without the middleware, so a fresh
/// token or a signature never reached the target, even on the same origin. Across
/// origins the middleware's credentials are still dropped.
#[tokio::test(start_paused = true)]
async fn the_middleware_signs_every_hop_and_credentials_stay_home() {
    let t = ScriptedTransport::new([
        Step::status(307).header("location", "/landing"),
        Step::status(307).header("location", "https://elsewhere.test/landing"),
        Step::status(200).body("landed"),
    ]);
    let api: ShopClient = scripted_builder(&t)
        .middleware(|req| {
            let signature = format!("sig {}", req.url.path());
            req.headers.insert("x-signature", signature.parse()?);
            req.headers.insert("authorization", "Bearer fresh".parse()?);
            Ok(())
        })
        .build()
        .unwrap();
    assert_eq!(api.receipt().await.unwrap(), "landed");
    let requests = t.requests();
    let header = |i: usize, name: &str| {
        requests[i]
            .headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    assert_eq!(header(1, "x-signature").as_deref(), Some("sig /landing"));
    assert_eq!(header(1, "authorization").as_deref(), Some("Bearer fresh"));
    assert_eq!(header(2, "x-signature").as_deref(), Some("sig /landing"));
    assert_eq!(header(2, "authorization"), None, "another origin");
}

/// Regression: a 302 with no `Location`, or one that does not parse, was handed over
/// as the answer: its body as the resource, `Ok(())` to a DELETE.
#[tokio::test(start_paused = true)]
async fn a_redirect_without_a_usable_location_is_an_error() {
    for location in [None, Some("http://[::1")] {
        let step = || {
            let step = Step::status(302).body("moved");
            match location {
                Some(l) => step.header("location", l),
                None => step,
            }
        };
        let t = ScriptedTransport::new([step(), step()]);
        let api = scripted::<ShopClient>(&t);
        let got = api.receipt().await.map_err(|e| e.kind());
        let cleared = api.clear().await.map_err(|e| e.kind());
        assert_eq!(got, Err(ErrorKind::Redirect), "{location:?}");
        assert_eq!(cleared, Err(ErrorKind::Redirect), "{location:?}");
        assert_eq!(t.attempts(), 2, "not retried");
    }
}
