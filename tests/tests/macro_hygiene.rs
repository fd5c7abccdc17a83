//! The generated code against user code of every shape it must take as written: a
//! module shadowing every name the expansion could pick up (and holding `mod core`,
//! `mod std`, `mod resilient_api`), `#![no_implicit_prelude]`, every visibility, a
//! trait inside a function body, two traits in one module, lifetimes and query shapes,
//! raw identifiers, parameters named like the generated locals, doc and lint
//! attributes, results by full path, `Send` futures that can be spawned, provided
//! methods awaiting endpoints, and `impl Trait` parameters. Each compiles and answers.
// The traits here are shapes of user code, not APIs: docs would say nothing, and some
// exist only to be compiled.
#![allow(missing_docs, dead_code)]
// Shapes a user may write, which clippy would have them write otherwise.
#![allow(
    non_snake_case,
    clippy::ptr_arg,
    clippy::needless_lifetimes,
    clippy::too_many_arguments,
    clippy::wrong_self_convention
)]

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, resilient_api};
use tests::scripted;

fn oks(n: usize) -> ScriptedTransport {
    ScriptedTransport::new((0..n).map(|_| Step::status(200).body("\"ok\"")))
}

fn urls(t: &ScriptedTransport) -> Vec<String> {
    t.requests().into_iter().map(|r| r.url).collect()
}

fn assert_send<T: Send>(_: &T) {}
fn assert_client<T: Clone + Send + Sync + std::fmt::Debug + Unpin + 'static>() {}

// ---------------------------------------------------------------- shadowed names
#[allow(dead_code, non_camel_case_types)]
mod shadows {
    struct Result;
    struct Option;
    struct Some;
    struct None;
    struct Ok;
    struct Err;
    struct Box;
    struct Vec;
    struct String;
    trait Into {}
    trait From {}
    struct Default;
    trait Clone {}
    trait Send {}
    trait Sync {}
    struct Future;
    struct Pin;
    struct ApiError;
    struct Duration;
    struct Self_;
    trait Debug {}
    trait Sized {}
    trait Copy {}
    trait Unpin {}
    trait Iterator {}
    trait Fn {}
    trait Drop {}
    trait AsRef {}
    trait ToString {}
    fn drop() {}
    struct Handle;
    struct RequestBuilder;
    struct EndpointSpec;
    struct ApiSpec;
    struct Policy;
    struct Json;
    struct Unit;
    struct Text;
    struct Check;
    struct Checked;
    mod resilient_api {}
    mod core {}
    mod std {}
    mod __private {}

    #[::resilient_api::resilient_api(timeout(attempt = "1s"), retry(max = 1))]
    pub trait Shadowed {
        #[get("/a/{id}")]
        async fn a(
            &self,
            id: u64,
            #[query] q: ::core::option::Option<&str>,
            #[header("X-H")] h: ::core::option::Option<::std::string::String>,
            #[body] b: &::std::vec::Vec<u32>,
        ) -> ::core::result::Result<::std::string::String, ::resilient_api::ApiError>;

        #[get("/c")]
        #[parse(with = check)]
        async fn c(
            &self,
        ) -> ::core::result::Result<::resilient_api::Response<u32>, ::resilient_api::ApiError>;

        #[put("/d")]
        async fn d(
            &self,
            #[body(raw)] b: ::std::vec::Vec<u8>,
        ) -> ::core::result::Result<(), ::resilient_api::ApiError>;
    }

    fn check(_: &u32) -> ::core::result::Result<(), &'static str> {
        ::core::result::Result::Ok(())
    }
}

// ---------------------------------------------------------------- no_implicit_prelude
mod no_prelude {
    #![no_implicit_prelude]

    #[::resilient_api::resilient_api(timeout(attempt = "1s"), retry(max = 1))]
    pub trait NoPrelude {
        #[get("/a/{id}")]
        async fn a(
            &self,
            id: u64,
            #[query] q: ::core::option::Option<&str>,
            #[header("X-H")] h: ::core::option::Option<::std::string::String>,
        ) -> ::core::result::Result<::std::string::String, ::resilient_api::ApiError>;

        #[get("/b")]
        #[parse(with = check)]
        async fn b(&self) -> ::core::result::Result<u32, ::resilient_api::ApiError>;

        #[post("/c")]
        #[idempotency_key]
        #[hedge(delay = "10ms")]
        #[breaker(failures = 2)]
        #[bulkhead(concurrency = 2)]
        #[rate_limit(per_second = 5)]
        async fn c(
            &self,
            #[body(form)] f: &[(&str, &str)],
        ) -> ::core::result::Result<::resilient_api::Bytes, ::resilient_api::ApiError>;
    }

    fn check(_: &u32) -> ::core::result::Result<(), &'static str> {
        ::core::result::Result::Ok(())
    }
}

// ---------------------------------------------------------------- visibility
mod vis {
    pub(crate) mod inner {
        use resilient_api::{ApiError, resilient_api};

        #[resilient_api(timeout(attempt = "1s"))]
        pub(crate) trait CrateVis {
            #[get("/a")]
            async fn a(&self) -> Result<String, ApiError>;
        }

        #[resilient_api(timeout(attempt = "1s"))]
        trait Private {
            #[get("/b")]
            async fn b(&self) -> Result<String, ApiError>;
        }

        #[resilient_api(timeout(attempt = "1s"))]
        pub(super) trait SuperVis {
            #[get("/c")]
            async fn c(&self) -> Result<String, ApiError>;
        }

        #[resilient_api(timeout(attempt = "1s"))]
        pub(in crate::vis) trait InVis {
            #[get("/d")]
            async fn d(&self) -> Result<String, ApiError>;
        }

        pub(crate) fn private_client() -> impl std::fmt::Debug {
            PrivateClient::builder()
                .base_url("http://h.test")
                .build()
                .expect("builds")
        }
    }

    pub(crate) fn clients() {
        let _ = inner::CrateVisClient::builder();
        let _ = inner::SuperVisClient::builder();
        let _ = inner::InVisClient::builder();
        let _ = inner::private_client();
    }
}

#[test]
fn visibility_variants_compile() {
    vis::clients();
}

#[tokio::test(start_paused = true)]
async fn trait_inside_a_function_body() {
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Local {
        n: u32,
    }
    #[resilient_api(timeout(attempt = "1s"))]
    trait InFn {
        #[get("/n/{id}")]
        async fn n(&self, id: u32) -> Result<Local, ApiError>;
    }
    let t = ScriptedTransport::new([Step::status(200).body(r#"{"n":3}"#)]);
    let api = scripted::<InFnClient>(&t);
    assert_eq!(api.n(3).await.unwrap(), Local { n: 3 });
}

// two traits in one module
#[resilient_api(timeout(attempt = "1s"))]
pub trait TwoA {
    #[get("/a")]
    async fn user(&self) -> Result<String, ApiError>;
}
#[resilient_api(timeout(attempt = "1s"))]
pub trait TwoB {
    #[get("/b")]
    async fn user(&self) -> Result<String, ApiError>;
}
// names that uppercase the same
#[allow(non_camel_case_types)]
#[resilient_api(timeout(attempt = "1s"))]
pub trait TWOA {
    #[get("/c")]
    async fn user(&self) -> Result<String, ApiError>;
    #[get("/d")]
    #[allow(non_snake_case)]
    async fn USER(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn two_traits_in_one_module() {
    let t = oks(4);
    let a = scripted::<TwoAClient>(&t);
    let b = scripted::<TwoBClient>(&t);
    let c = scripted::<TWOAClient>(&t);
    a.user().await.unwrap();
    b.user().await.unwrap();
    c.user().await.unwrap();
    c.USER().await.unwrap();
    assert_eq!(
        urls(&t),
        [
            "https://example.test/a",
            "https://example.test/b",
            "https://example.test/c",
            "https://example.test/d"
        ]
    );
}

// ---------------------------------------------------------------- lifetimes, params
#[derive(serde::Serialize)]
pub struct Page<'a> {
    pub cursor: &'a str,
}

#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Lifetimes {
    #[get("/a/{id}")]
    async fn a<'a>(&'a self, id: &'a str) -> Result<String, ApiError>;

    #[get("/b/{id}")]
    async fn b<'a, 'b>(
        &'a self,
        id: &'b str,
        #[query] q: Option<&'b str>,
    ) -> Result<String, ApiError>;

    #[get("/c")]
    async fn c<'x>(
        &self,
        #[query] page: &Page<'x>,
        #[header("X-A")] h: &'x str,
    ) -> Result<String, ApiError>;

    #[get("/d")]
    async fn d(&self, #[query] q: std::borrow::Cow<'_, str>) -> Result<String, ApiError>;

    #[get("/e")]
    async fn e(
        &self,
        #[query] tags: Vec<&str>,
        #[query] ids: &[u32],
        #[query("o")] o: Option<&str>,
    ) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn lifetimes_and_query_shapes() {
    let t = oks(5);
    let api = scripted::<LifetimesClient>(&t);
    let s = String::from("x");
    api.a(&s).await.unwrap();
    api.b(&s, Some("y")).await.unwrap();
    api.c(&Page { cursor: "z" }, "h").await.unwrap();
    api.d("w".into()).await.unwrap();
    api.e(vec!["p", "q"], &[1, 2], None).await.unwrap();
    assert_eq!(
        urls(&t),
        [
            "https://example.test/a/x",
            "https://example.test/b/x?q=y",
            "https://example.test/c?cursor=z",
            "https://example.test/d?q=w",
            "https://example.test/e?tags=p&tags=q&ids=1&ids=2",
        ]
    );
}

// ---------------------------------------------------------------- raw identifiers
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Raw {
    #[get("/t/{type}")]
    async fn r#type(&self, r#type: &str, #[query] r#match: u32) -> Result<String, ApiError>;

    #[get("/g/{gen}")]
    async fn r#gen(&self, r#gen: u32, #[query] r#async: u32) -> Result<String, ApiError>;

    #[get("/y")]
    async fn r#try(&self, #[header("X-Dyn")] r#dyn: &str) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn raw_identifiers() {
    let t = oks(3);
    let api = scripted::<RawClient>(&t);
    api.r#type("k", 1).await.unwrap();
    api.r#gen(2, 3).await.unwrap();
    api.r#try("d").await.unwrap();
    let sent = t.requests();
    assert_eq!(sent[0].url, "https://example.test/t/k?match=1");
    assert_eq!(sent[1].url, "https://example.test/g/2?async=3");
    assert_eq!(sent[2].headers["x-dyn"], "d");
}

// ---------------------------------------------------------------- params named like locals
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Locals {
    #[get("/l/{request}/{builder}")]
    async fn l(
        &self,
        request: u32,
        builder: u32,
        #[query] client: u32,
        #[query] spec: u32,
        #[query] self_: u32,
        #[query] __anything: u32,
        #[query] handle: u32,
        #[query] __check: u32,
        #[query] __Check: u32,
        #[query] options: u32,
        #[query] value: u32,
    ) -> Result<String, ApiError>;

    #[put("/m/{__req}")]
    async fn m(
        &self,
        __req: u32,
        #[body] __handle: &u32,
        #[header("X-V")] __value: Option<u32>,
    ) -> Result<String, ApiError>;

    #[get("/from_handle")]
    async fn from_handle(&self) -> Result<String, ApiError>;

    #[get("/call")]
    async fn call(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn params_named_like_generated_locals() {
    let t = oks(4);
    let api = scripted::<LocalsClient>(&t);
    api.l(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11).await.unwrap();
    api.m(1, &2, Some(3)).await.unwrap();
    api.from_handle().await.unwrap();
    api.call().await.unwrap();
    let sent = t.requests();
    assert_eq!(
        sent[0].url,
        "https://example.test/l/1/2?client=3&spec=4&self_=5&__anything=6&handle=7&__check=8&__Check=9&options=10&value=11"
    );
    assert_eq!(sent[1].url, "https://example.test/m/1");
    assert_eq!(sent[1].body.as_ref(), b"2");
    assert_eq!(sent[1].headers["x-v"], "3");
}

// ---------------------------------------------------------------- attributes
#[resilient_api(timeout(attempt = "1s"))]
/// Documented trait.
#[must_use = "a trait"]
pub trait Attrs {
    /// Documented method.
    #[doc = "More docs."]
    #[must_use]
    #[get("/a")]
    async fn a(&self) -> Result<String, ApiError>;

    #[deprecated = "use b2"]
    #[get("/b")]
    async fn b(&self) -> Result<String, ApiError>;

    #[get("/c")]
    #[allow(clippy::too_many_arguments)]
    async fn c(&self) -> Result<String, ApiError>;
}

#[resilient_api(timeout(attempt = "1s"))]
pub trait DocHidden {
    #[doc(hidden)]
    #[get("/a")]
    async fn a(&self) -> Result<String, ApiError>;
}

#[resilient_api(timeout(attempt = "1s"))]
pub trait DocAlias {
    #[doc(alias = "fetch")]
    #[get("/a")]
    async fn a(&self) -> Result<String, ApiError>;
}

// ---------------------------------------------------------------- results
pub type Alias = Vec<u32>;

#[resilient_api(timeout(attempt = "1s"))]
pub trait Results {
    #[get("/a")]
    async fn a(&self) -> std::result::Result<Alias, resilient_api::ApiError>;

    #[get("/b")]
    async fn b(&self) -> core::result::Result<Option<u32>, ::resilient_api::ApiError>;

    #[get("/c")]
    async fn c(&self) -> Result<resilient_api::Response<String>, ApiError>;
}

// ---------------------------------------------------------------- not Sync body; Send futures
pub struct NotSync {
    pub n: std::cell::Cell<u32>,
}
impl serde::Serialize for NotSync {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.n.get())
    }
}

#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Kinds {
    #[post("/j/{id}")]
    async fn json(&self, id: &str, #[body] b: &NotSync) -> Result<String, ApiError>;
    #[post("/f")]
    async fn form(&self, #[body(form)] b: &[(&str, &str)]) -> Result<String, ApiError>;
    #[post("/r")]
    async fn raw(&self, #[body(raw)] b: Vec<u8>) -> Result<String, ApiError>;
    #[post("/rb")]
    async fn raw_borrowed(&self, #[body(raw)] b: &[u8]) -> Result<String, ApiError>;
    #[post("/s")]
    async fn stream(
        &self,
        #[body(stream)] b: resilient_api::BodyStream,
    ) -> Result<String, ApiError>;
    #[get("/q")]
    async fn query(
        &self,
        #[query] q: &NotSync,
        #[query] o: Option<String>,
        #[header("X-H")] h: Option<&str>,
        #[header("X-N")] n: std::rc::Rc<str>,
    ) -> Result<String, ApiError>;
    #[get("/p/{id}")]
    async fn path_rc(&self, id: std::rc::Rc<str>) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn futures_are_send_and_spawnable() {
    assert_client::<KindsClient>();
    let t = oks(8);
    let api = scripted::<KindsClient>(&t);
    let ns = NotSync {
        n: std::cell::Cell::new(4),
    };
    let id = String::from("i");
    let f = api.json(&id, &ns);
    assert_send(&f);
    f.await.unwrap();
    let f = api.query(&ns, None, Some("h"), "n".into());
    assert_send(&f);
    f.await.unwrap();
    let f = api.path_rc("r".into());
    assert_send(&f);
    f.await.unwrap();
    // A 'static client: each future is 'static with owned arguments.
    let api: &'static KindsClient = Box::leak(Box::new(api));
    tokio::spawn(api.raw(vec![1])).await.unwrap().unwrap();
    tokio::spawn(api.form(&[("a", "b")]))
        .await
        .unwrap()
        .unwrap();
    tokio::spawn(api.raw_borrowed(b"x")).await.unwrap().unwrap();
    let body =
        resilient_api::BodyStream::new(futures_util::stream::iter(vec![Ok::<_, std::io::Error>(
            resilient_api::Bytes::from_static(b"x"),
        )]));
    tokio::spawn(api.stream(body)).await.unwrap().unwrap();
    // A cloned client moved into the task, borrowed arguments.
    let c = api.clone();
    tokio::spawn(async move {
        let s = String::from("x");
        c.json(
            &s,
            &NotSync {
                n: std::cell::Cell::new(1),
            },
        )
        .await
    });
}

// ---------------------------------------------------------------- provided methods
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Provided: Sync {
    #[get("/a/{id}")]
    async fn a(&self, id: u32) -> Result<String, ApiError>;

    /// Both, one after the other.
    fn both(&self) -> impl Future<Output = Result<(String, String), ApiError>> + Send {
        async move { Ok((self.a(1).await?, self.a(2).await?)) }
    }
}

#[tokio::test(start_paused = true)]
async fn provided_methods_call_endpoints() {
    let t = oks(2);
    let api = scripted::<ProvidedClient>(&t);
    let (a, b) = api.both().await.unwrap();
    assert_eq!((a.as_str(), b.as_str()), ("\"ok\"", "\"ok\""));
}

// ---------------------------------------------------------------- impl Trait params
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait ImplParams {
    #[get("/a/{id}")]
    async fn a(&self, id: impl std::fmt::Display + Send) -> Result<String, ApiError>;
}
