//! The `#[resilient_api]` attribute of the `resilient-api` crate.
//!
//! Use it through `resilient-api`, which re-exports it and holds everything the
//! generated code needs. Stages, one module each, as in thiserror and serde_derive:
//! `attr` (attributes into typed structs that keep their spans, with `value` for
//! literals and durations and `symbol` for the keys), `ast` (the model: the trait's
//! endpoints and each one's merged policy), `valid` (every compile-time rule, all
//! reported through `ctxt`), `expand` (tokens from a validated model, with `policy`
//! for the resolved values and the generated docs).

mod ast;
mod attr;
mod ctxt;
mod expand;
mod policy;
mod symbol;
mod template;
#[cfg(test)]
mod template_check;
mod valid;
mod value;

use proc_macro::TokenStream;

/// Turns an annotated trait into a typed HTTP client whose every call is retried,
/// bounded, isolated and cancellable.
///
/// ```ignore
/// use resilient_api::{resilient_api, ApiError};
///
/// #[resilient_api(
///     base_url = "https://payments.example.com",
///     timeout(attempt = "3s", total = "15s"),
///     retry(max = 3, backoff = exponential_jitter(base = "200ms", cap = "10s")),
///     breaker(failures = 5, reset = "30s"),
///     bulkhead(concurrency = 8, queue = 32),
/// )]
/// pub trait Payments {
///     #[get("/users/{id}")]
///     async fn user(&self, id: u64) -> Result<User, ApiError>;
///
///     /// POST is retried only because every attempt carries the same Idempotency-Key.
///     #[post("/charges")]
///     #[idempotency_key]
///     async fn charge(&self, #[body] charge: &NewCharge) -> Result<Charge, ApiError>;
///
///     #[get("/search")]
///     #[hedge(delay = "50ms", max = 2)]
///     async fn search(&self, #[query] q: &str) -> Result<Vec<Hit>, ApiError>;
/// }
///
/// let api = PaymentsClient::builder().build()?;
/// let user = api.user(42).await?; // dropping this future cancels everything it started
/// ```
///
/// The attribute generates a client type (`PaymentsClient`, or the name given with
/// `client = "..."`) implementing the trait. Every policy is data in a `static`, checked
/// at compile time: nothing is parsed at run time.
///
/// # On the trait: `#[resilient_api(...)]`
///
/// Trait-level policy is the default of every method; a method's own attribute
/// overrides it key by key (`retry(max = 3, backoff = ...)` on the trait and
/// `#[retry(max = 0)]` on a method: no retries, the trait's backoff).
///
/// | key | value | default |
/// |---|---|---|
/// | `base_url` | `"https://host[:port][/prefix]"` | set on the builder |
/// | `client` | the client's type name, `"PaymentsClient"` | `{Trait}Client` |
/// | `crate` | the runtime's path, `"::resilient_api"` | `::resilient_api` |
/// | `timeout(attempt, total)` | durations, or `"none"` | no default: see below |
/// | `retry(max, backoff, on, retry_after_cap)` | see below | `max = 2`, exponential with full jitter, statuses 408, 425, 429, 500, 502, 503, 504, `Retry-After` up to 60 s |
/// | `breaker(failures, reset, probes, failure_rate, window, min_calls, slow_call)` | counts, durations, a ratio | the client's breaker (5 consecutive failures, 30 s, 1 probe) |
/// | `bulkhead(concurrency, queue)` | counts | the client's bulkhead |
/// | `rate_limit(per_second, burst)` | a number, a count | none; `burst` defaults to one second's worth |
/// | `headers("Name" = "value", ...)` | strings | none |
///
/// Backoffs: `fixed(delay)`, `exponential(base, factor, cap)`,
/// `exponential_jitter(base, factor, cap)`, `decorrelated_jitter(base, cap)`; `base`
/// defaults to 200 ms, `factor` to 2, `cap` to 30 s. `retry(on = [503, 429])` replaces the
/// retried statuses. `breaker(failure_rate = 0.5)` trips on the share of failures
/// over `window` (default 10 s) once `min_calls` (default 10) were counted, instead of
/// on `failures` in a row.
///
/// Durations are strings of an integer and a unit: `"250ms"`, `"3s"`, `"1m"`, `"1h"`.
///
/// # On a method
///
/// | attribute | meaning |
/// |---|---|
/// | `#[get("/users/{id}")]`, `post`, `put`, `patch`, `delete`, `head`, `options` | verb and path template; exactly one |
/// | `#[timeout(attempt = "...", total = "...")]` | overrides the trait's timeouts; `attempt = "none"` waits without limit on purpose |
/// | `#[retry(...)]` | overrides the trait's retry keys, e.g. `#[retry(max = 0)]` |
/// | `#[idempotent]` | this POST or PATCH is safe to repeat |
/// | `#[idempotency_key]`, `#[idempotency_key("X-Key")]` | one generated key per call, the same on every attempt (header `Idempotency-Key` by default); makes the method retryable |
/// | `#[hedge(delay = "50ms", max = 2)]` | after `delay` without an answer, start another attempt; at most `max` in flight |
/// | `#[coalesce]` | identical concurrent calls share one execution; idempotent methods without `#[idempotency_key]` only |
/// | `#[breaker(...)]`, `#[bulkhead(...)]`, `#[rate_limit(...)]` | a compartment of the method's own (the partition `Trait::method`, never shared with another API on the same engine) |
/// | `#[partition("search")]` | the compartment (breaker, bulkhead, rate limiter) this method uses |
/// | `#[max_body("4MiB")]` | the largest response body this method accepts (B, KB, MB, GB, KiB, MiB, GiB); the client's limit otherwise |
/// | `#[parse(with = check)]` | runs `check(&value)` on the decoded result (a `Response<T>`'s `T`), a `fn(&T) -> Result<(), E>` where `E: Into<Box<dyn Error + Send + Sync>>`; a refusal is an `ErrorKind::Decode` error, never retried, whose `source()` is the check's error. Not on a `()` or `ResponseStream` result |
///
/// Doc comments stay; the generated docs of every method state its effective policy.
///
/// # Parameters and results
///
/// | parameter | role |
/// |---|---|
/// | `id: u64`, named in the path as `{id}` (or marked `#[path]`) | one path segment, percent-encoded (`Display`) |
/// | `#[query] q: &str`, `#[query("q")]`, `#[query("api_key", secret)]` | a query parameter (`Serialize`); `None` is left out, a struct is flattened |
/// | `#[header("X-Name")] v: &str`, `#[header("X-Api-Key", secret)]` | a header (`Display`); an `Option` that is `None` is left out; an empty idempotency key (`Idempotency-Key`, or the method's key header) is refused before any attempt |
/// | `#[body] v: &T` | a JSON body (`Serialize`) |
/// | `#[body(form)]`, `#[body(raw)]`, `#[body(stream)]` | a form, bytes (`AsRef<[u8]>`), or a `BodyStream` (never replayed) |
///
/// Secret values are redacted everywhere and dropped on a cross-origin redirect.
///
/// The return type is `Result<T, ApiError>`, decoded by the syntax of `T`: `()` ignores
/// the body, `String` is text, `Bytes` raw bytes, `ResponseStream` a streamed body,
/// `Response<T>` adds status and headers around the decoded `T`, and any other type is
/// JSON (`DeserializeOwned`). Those four names are read as the library's types through
/// any path but one from `crate::`, `self::` or `super::` (a path through the trait's
/// `crate = "..."` path or a `resilient_api` segment is the library's all the same):
/// a type of one's own that shares a name is JSON when named so (`self::Response<T>`),
/// and named otherwise it is an error at the type that says so. A result cannot
/// borrow: a reference, a lifetime other than `'static` or a `Cow` without one in `T`
/// is an error.
///
/// # Checked at compile time
///
/// Every `{name}` has a parameter and every parameter a role; a path template holds no
/// `.` or `..` segment and no `\`; every method has an attempt timeout (or says
/// `"none"`); `attempt <= total`; caps at least their bases; counts and ratios in
/// range; a breaker's `reset` and a hedge's `delay` longer than zero; `retry(on = ...)` lists error statuses (`400..=599`); on a POST or PATCH that
/// is neither `#[idempotent]` nor keyed, a method-level `retry(on = ...)` or `#[hedge]`
/// is an error (the request may already have run; trait-level retries apply there to
/// never-sent failures only); a caller's `#[header("Idempotency-Key")]` that makes such
/// a method retryable cannot be an `Option`; a `#[body(stream)]` method cannot retry
/// (give it `#[retry(max = 0)]` when the trait retries), hedge or coalesce; the client
/// cannot be named like the trait, nor an endpoint like the client's own methods
/// (`builder`, `with_options`, `circuit_state`, `partition_circuit_state`) or of the
/// traits it has (`clone`, `clone_from`, `fmt`, and the prelude's `to_owned`,
/// `clone_into`, `into`, `try_into`, and `std`'s `borrow`, `borrow_mut`, `type_id`); a
/// supertrait other than `Send`, `Sync`, `Unpin`, `Sized`, `Clone`, `Debug` or `Any`; a
/// policy attribute on a method with a body and no verb (the attribute makes it an
/// endpoint); an attribute on the wrong item (the trait's keys on a method, a role
/// on `self` or on the method, a method's attribute on a parameter or on the trait
/// itself), which says where it belongs; unknown or repeated keys, literals of
/// the wrong kind (a string with a suffix, `"3s"ms`, included), methods that are not
/// `async`, take `self` by value or are generic, `Self` in an endpoint's types (the
/// client), and return types that are not `Result<T, ApiError>`. All mistakes are
/// reported in one build.
///
/// On a mistake the attribute still emits the trait (our attributes taken out) and a
/// client of the same name implementing it with bodies that never run, so the errors
/// are the macro's alone: code that uses the client does not add "no method named" or
/// "trait bound not satisfied" to them.
///
/// # Equivalent code
///
/// For
///
/// ```ignore
/// #[resilient_api(timeout(attempt = "3s"))]
/// pub trait Users {
///     #[get("/users/{id}")]
///     async fn user(&self, id: u64) -> Result<User, ApiError>;
/// }
/// ```
///
/// the attribute writes, in substance (statics are hidden in a `const _: () = { ... }`
/// block and get mangled names):
///
/// ```ignore
/// pub trait Users {
///     /// # Policy (generated)
///     fn user(&self, id: u64)
///         -> impl ::core::future::Future<Output = Result<User, ApiError>> + ::core::marker::Send;
/// }
///
/// /// Client for [`Users`], generated by `#[resilient_api]`.
/// #[derive(Clone, Debug)]
/// pub struct UsersClient { __handle: ::resilient_api::__private::Handle }
///
/// impl UsersClient {
///     pub fn builder() -> ::resilient_api::ClientBuilder<Self> { ::resilient_api::ClientBuilder::new() }
///     pub fn with_options(&self, options: ::resilient_api::CallOptions) -> Self { /* ... */ }
///     pub fn circuit_state(&self) -> ::resilient_api::circuit_breaker::state::CircuitState { /* ... */ }
/// }
///
/// static USER: EndpointSpec = EndpointSpec {
///     index: 0,
///     name: "user",
///     verb: Verb::Get,
///     template: "/users/{id}",
///     path: &[PathPart::Lit("/users/"), PathPart::Param(0)],
///     idempotent: true,
///     idempotency_key: None,
///     secrets: &[],
///     policy: Policy {
///         attempt_timeout: Some(ms(3000)),
///         total_timeout: None,
///         retry: RetryPolicy::DEFAULT,
///         breaker: None,
///         bulkhead: None,
///         rate_limit: None,
///         hedge: None,
///         coalesce: false,
///         partition: None,
///         own_partition: false,
///         max_body: None,
///     },
/// };
/// static API: ApiSpec = ApiSpec { name: "Users", base_url: None, headers: &[], endpoints: &[&USER] };
///
/// impl GeneratedClient for UsersClient {
///     const API: &'static ApiSpec = &API;
///     fn from_handle(handle: Handle) -> Self { Self { __handle: handle } }
/// }
///
/// impl Users for UsersClient {
///     fn user(&self, id: u64)
///         -> impl ::core::future::Future<Output = Result<User, ApiError>> + ::core::marker::Send
///     {
///         let mut req = RequestBuilder::new(&USER);
///         req.path("id", &id);
///         let handle = &self.__handle;
///         async move { handle.call::<Json<User>>(req).await }
///     }
/// }
/// ```
#[proc_macro_attribute]
pub fn resilient_api(args: TokenStream, input: TokenStream) -> TokenStream {
    match syn::parse::<syn::Item>(input) {
        Ok(syn::Item::Trait(item)) => expand::resilient_api(args.into(), item).into(),
        Ok(other) => {
            let err = syn::Error::new(
                proc_macro2::Span::call_site(),
                "`#[resilient_api]` goes on a trait: `#[resilient_api] pub trait Payments { ... }`",
            );
            let mut out = err.to_compile_error();
            quote::ToTokens::to_tokens(&other, &mut out);
            out.into()
        }
        Err(err) => err.to_compile_error().into(),
    }
}
