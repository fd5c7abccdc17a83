//! `#[parse(with = check)]`: the user's check of a decoded result (DESIGN §2.3). A
//! value the check refuses ends the call with a decode error, never retried, whose
//! message names the check and never the body, and whose source is the check's own
//! error. A `Response<T>`'s value is checked, not the wrapper; each coalesced caller's
//! value is checked on its own.

use std::error::Error as _;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, Bytes, ErrorKind, Response, resilient_api};
use serde::Deserialize;
use tests::{assert_nothing_leaked, ms, scripted};

/// A user.
#[derive(Debug, Deserialize, PartialEq)]
pub struct User {
    /// Its id.
    pub id: u64,
    /// Its e-mail address.
    pub email: String,
}

/// Why a user was refused.
#[derive(Debug, PartialEq)]
pub struct BadUser(&'static str);

impl fmt::Display for BadUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad user: {}", self.0)
    }
}

impl std::error::Error for BadUser {}

fn check_user(user: &User) -> Result<(), BadUser> {
    if user.email.contains('@') {
        Ok(())
    } else {
        Err(BadUser("no @ in the e-mail address"))
    }
}

/// Checks made by `counted`, which one test alone calls.
static COUNTED: AtomicUsize = AtomicUsize::new(0);
/// Checks made by `shared`, which one test alone calls.
static SHARED: AtomicUsize = AtomicUsize::new(0);

fn count_counted(user: &User) -> Result<(), BadUser> {
    COUNTED.fetch_add(1, Ordering::SeqCst);
    check_user(user)
}

fn count_shared(user: &User) -> Result<(), BadUser> {
    SHARED.fetch_add(1, Ordering::SeqCst);
    check_user(user)
}

mod checks {
    /// Any error type that converts into a boxed error will do: here a `String`.
    pub fn non_empty<T: AsRef<[u8]>>(value: &T) -> Result<(), String> {
        if value.as_ref().is_empty() {
            Err("empty".to_owned())
        } else {
            Ok(())
        }
    }

    pub fn few(ids: &Option<Vec<u64>>) -> Result<(), &'static str> {
        match ids {
            Some(ids) if ids.len() > 3 => Err("more than three"),
            _ => Ok(()),
        }
    }
}

/// Retries on every status and a breaker that opens on the first failure: a refused
/// value touches neither.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 3, on = [500, 502, 503, 504]),
    breaker(failures = 1, reset = "30s")
)]
pub trait Users {
    #[get("/users/{id}")]
    #[parse(with = check_user)]
    async fn user(&self, id: u64) -> Result<User, ApiError>;

    #[get("/users/{id}")]
    #[parse(with = check_user)]
    async fn user_with_headers(&self, id: u64) -> Result<Response<User>, ApiError>;

    #[get("/users/{id}")]
    #[parse(with = count_counted)]
    async fn counted(&self, id: u64) -> Result<User, ApiError>;

    #[get("/users/{id}")]
    #[parse(with = count_shared)]
    #[coalesce]
    async fn shared(&self, id: u64) -> Result<User, ApiError>;

    #[get("/motd")]
    #[parse(with = checks::non_empty)]
    async fn motd(&self) -> Result<String, ApiError>;

    #[get("/avatar")]
    #[parse(with = checks::non_empty::<Bytes>)]
    async fn avatar(&self) -> Result<Bytes, ApiError>;

    #[get("/ids")]
    #[parse(with = checks::few)]
    async fn ids(&self) -> Result<Option<Vec<u64>>, ApiError>;
}

fn json(body: &'static str) -> Step {
    Step::status(200)
        .header("content-type", "application/json")
        .body(body)
}

const GOOD: &str = r#"{"id":7,"email":"ada@example.com"}"#;
const BAD: &str = r#"{"id":7,"email":"secret-token-in-the-body"}"#;

#[tokio::test(start_paused = true)]
async fn an_accepted_value_is_the_result() {
    let t = ScriptedTransport::new([json(GOOD)]);
    let api = scripted::<UsersClient>(&t);
    let user = api.counted(7).await.expect("accepted");
    assert_eq!(
        user,
        User {
            id: 7,
            email: "ada@example.com".to_owned()
        }
    );
    assert_eq!(COUNTED.load(Ordering::SeqCst), 1, "checked once");
    assert_eq!(t.attempts(), 1);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn a_refused_value_is_a_decode_error_never_retried_and_no_breaker_failure() {
    let t = ScriptedTransport::new([json(BAD), json(BAD), json(GOOD)]);
    let api = scripted::<UsersClient>(&t);

    let e = api.user(7).await.expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Decode);
    assert_eq!(e.status(), Some(200));
    assert_eq!(e.attempts(), 1);
    assert_eq!(e.endpoint(), "user");
    // One request: the server answered, and would answer the same.
    assert_eq!(t.attempts(), 1);
    assert_eq!(t.dispatch_times(), [ms(0)]);

    // The message names the check, the content type and the length; never the
    // body, nor the check's text, which may quote it.
    let shown = e.to_string();
    assert_eq!(
        shown,
        "decode failed 200 in `user`: refused by `check_user` (content type application/json, 43 bytes)"
    );
    assert_eq!(BAD.len(), 43);
    assert!(!format!("{e:?}").contains("secret-token"));
    // The check's own error is the source, as its own type.
    let source = e.source().expect("the check's error");
    assert_eq!(
        source.downcast_ref::<BadUser>(),
        Some(&BadUser("no @ in the e-mail address"))
    );

    // A refused value is an answer, as a body that cannot be decoded is: the breaker
    // (which opens on one failure) stays closed, and the next call goes out.
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    let e = api.user_with_headers(7).await.expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Decode);
    assert_eq!(api.user(7).await.expect("accepted").id, 7);
    assert_eq!(t.attempts(), 3);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn a_response_wrapper_has_its_value_checked() {
    let t = ScriptedTransport::new([json(GOOD).header("etag", "\"v1\""), json(BAD)]);
    let api = scripted::<UsersClient>(&t);
    let ok = api.user_with_headers(7).await.expect("accepted");
    assert_eq!(ok.status().as_u16(), 200);
    assert_eq!(ok.headers()["etag"], "\"v1\"");
    assert_eq!(ok.value().email, "ada@example.com");
    let e = api.user_with_headers(7).await.expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Decode);
    assert!(e.to_string().contains("refused by `check_user`"), "{e}");
    assert_eq!(t.attempts(), 2);
}

#[tokio::test(start_paused = true)]
async fn each_coalesced_caller_has_the_shared_answer_checked() {
    let t = ScriptedTransport::new([json(BAD).delay(ms(50))]);
    let api = scripted::<UsersClient>(&t);
    let (a, b) = tokio::join!(api.shared(7), api.shared(7));
    assert_eq!(t.attempts(), 1, "one shared execution");
    assert_eq!(
        SHARED.load(Ordering::SeqCst),
        2,
        "each caller's value checked"
    );
    for e in [a.expect_err("refused"), b.expect_err("refused")] {
        assert_eq!(e.kind(), ErrorKind::Decode);
        let source = e.source().and_then(|s| s.downcast_ref::<BadUser>());
        assert_eq!(source, Some(&BadUser("no @ in the e-mail address")));
    }
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn text_bytes_and_option_results_are_checked_as_declared() {
    let t = ScriptedTransport::new([
        Step::status(200).body("hello"),
        Step::status(200).body(""),
        Step::status(200).body("\u{89}PNG"),
        Step::status(200),
        json("[1,2,3]"),
        Step::status(204),
        json("[1,2,3,4]"),
    ]);
    let api = scripted::<UsersClient>(&t);
    assert_eq!(api.motd().await.expect("accepted"), "hello");
    let e = api.motd().await.expect_err("empty");
    assert_eq!(e.kind(), ErrorKind::Decode);
    assert_eq!(e.source().map(|s| s.to_string()).as_deref(), Some("empty"));
    assert_eq!(api.avatar().await.expect("accepted").len(), 5);
    let e = api.avatar().await.expect_err("empty");
    assert!(
        e.to_string()
            .contains("refused by `checks::non_empty::<Bytes>`"),
        "{e}"
    );
    assert_eq!(api.ids().await.expect("accepted"), Some(vec![1, 2, 3]));
    assert_eq!(api.ids().await.expect("an empty body is None"), None);
    let e = api.ids().await.expect_err("too many");
    assert_eq!(
        e.source().map(|s| s.to_string()).as_deref(),
        Some("more than three")
    );
    assert_eq!(t.attempts(), 7);
}

/// A check that is a function of the trait's own.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait SelfChecked {
    #[get("/name")]
    #[parse(with = Self::not_empty)]
    async fn name(&self) -> Result<String, ApiError>;

    /// Refuses an empty name.
    fn not_empty(name: &str) -> Result<(), &'static str> {
        if name.is_empty() {
            Err("empty")
        } else {
            Ok(())
        }
    }
}

/// Regression: `with = Self::not_empty` named the macro's own local type inside its
/// `impl` (E0599) instead of the trait's function. It is the trait's, through the
/// client: it runs, and its refusal is the call's decode error.
#[tokio::test(start_paused = true)]
async fn a_check_named_from_self_is_the_traits_function() {
    let t = ScriptedTransport::new([Step::status(200).body("ann"), Step::status(200).body("")]);
    let api = scripted::<SelfCheckedClient>(&t);
    assert_eq!(api.name().await.expect("accepted"), "ann");
    let e = api.name().await.expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Decode);
    assert!(
        e.to_string().contains("refused by `Self::not_empty`"),
        "{e}"
    );
    assert_nothing_leaked(&t);
}
