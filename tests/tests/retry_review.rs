//! Review: retries, idempotency keys, user hooks and request bodies.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use resilient_api::client::RetryEvent;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::transport::HttpRequest;
use resilient_api::{ApiError, BodyStream, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, scripted, scripted_builder};

#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 2, backoff = fixed(delay = "20ms"))
)]
pub trait Rv {
    #[post("/keyed")]
    #[idempotency_key("X-Key")]
    async fn keyed_x(&self, #[body] v: &serde_json::Value) -> Result<String, ApiError>;

    #[post("/keyed2")]
    #[idempotency_key("X-Key")]
    async fn keyed_x_caller(
        &self,
        #[header("X-Key")] key: Option<&str>,
        #[body(form)] f: &[(&str, &str)],
    ) -> Result<String, ApiError>;

    #[post("/keyed3")]
    #[idempotency_key]
    async fn keyed(&self, #[body(raw)] b: &[u8]) -> Result<String, ApiError>;

    #[post("/caller")]
    async fn caller_key(
        &self,
        #[header("Idempotency-Key")] key: &str,
        #[body(raw)] b: &[u8],
    ) -> Result<String, ApiError>;

    #[post("/plain")]
    async fn plain(&self, #[body(raw)] b: &[u8]) -> Result<String, ApiError>;

    #[post("/idem")]
    #[idempotent]
    async fn idem(&self, #[body(raw)] b: &[u8]) -> Result<String, ApiError>;

    #[patch("/patch")]
    async fn patch(&self, #[body] v: &serde_json::Value) -> Result<String, ApiError>;

    #[put("/put")]
    async fn put(&self, #[body(raw)] b: &[u8]) -> Result<String, ApiError>;

    #[delete("/del")]
    async fn del(&self) -> Result<String, ApiError>;

    #[get("/get")]
    async fn get(&self) -> Result<String, ApiError>;

    #[get("/get500")]
    #[retry(on = [500])]
    async fn get500(&self) -> Result<String, ApiError>;

    #[get("/hedged")]
    #[hedge(delay = "10ms", max = 2)]
    async fn hedged(&self) -> Result<String, ApiError>;

    #[post("/keyed_hedged")]
    #[idempotency_key]
    #[hedge(delay = "10ms", max = 2)]
    async fn keyed_hedged(&self, #[body(raw)] b: &[u8]) -> Result<String, ApiError>;

    #[get("/co")]
    #[coalesce]
    async fn co(&self) -> Result<String, ApiError>;

    #[put("/up")]
    #[retry(max = 0)]
    async fn up(&self, #[body(stream)] s: BodyStream) -> Result<String, ApiError>;
}

fn outcome(k: usize) -> Step {
    match k {
        0 => Step::connect_error(),
        1 => Step::reset(),
        2 => Step::hang(),
        3 => Step::status(200).chunks([(ms(1), "par")]).cut_after(ms(5)),
        4 => Step::status(503),
        5 => Step::status(500),
        6 => Step::status(404),
        _ => unreachable!(),
    }
}

#[tokio::test(start_paused = true)]
async fn explore_matrix() {
    let names = ["connect", "reset", "timeout", "cut", "503", "500", "404"];
    let mut out = String::new();
    for m in 0..11 {
        let mut row = String::new();
        for k in 0..7 {
            let t = ScriptedTransport::new([outcome(k), Step::status(200).body("ok")]);
            let api: RvClient = scripted(&t);
            let v = serde_json::json!({"a": 1});
            let r = match m {
                0 => api.keyed_x(&v).await,
                1 => api.keyed_x_caller(Some("k"), &[("a", "b")]).await,
                2 => api.keyed(b"x").await,
                3 => api.caller_key("k", b"x").await,
                4 => api.plain(b"x").await,
                5 => api.idem(b"x").await,
                6 => api.patch(&v).await,
                7 => api.put(b"x").await,
                8 => api.del().await,
                9 => api.get().await,
                10 => api.get500().await,
                _ => unreachable!(),
            };
            let _ = r;
            row.push_str(&format!("{}={} ", names[k], t.attempts()));
        }
        out.push_str(&format!("m{m}: {row}\n"));
    }
    println!("{out}");
}

fn hv(r: &resilient_api::testing::RecordedRequest, name: &str) -> Vec<String> {
    r.headers
        .get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn explore_keys() {
    let t = ScriptedTransport::new([
        Step::status(503),
        Step::reset(),
        Step::status(200).body("ok"),
        Step::status(503),
        Step::status(200).body("ok"),
        Step::status(503),
        Step::status(200).body("ok"),
        Step::status(503),
        Step::status(200).body("ok"),
    ]);
    let api: RvClient = scripted(&t);
    let v = serde_json::json!({"a": "é", "b": [1,2]});
    api.keyed_x(&v).await.unwrap();
    api.keyed_x_caller(Some("mine"), &[("a", "b c"), ("é", "&")])
        .await
        .unwrap();
    api.keyed_x_caller(None, &[("a", "b c")]).await.unwrap();
    api.keyed(b"").await.unwrap();
    for r in t.requests() {
        println!(
            "{} {} x-key={:?} idem={:?} ct={:?} body={:?}",
            r.method,
            r.url,
            hv(&r, "x-key"),
            hv(&r, "idempotency-key"),
            hv(&r, "content-type"),
            r.body
        );
    }
}

#[tokio::test(start_paused = true)]
async fn explore_hedge_keys() {
    let t = ScriptedTransport::new([
        Step::status(200).body("slow").delay(ms(50)),
        Step::status(200).body("fast").delay(ms(5)),
    ]);
    let api: RvClient = scripted(&t);
    let r = api.keyed_hedged(b"abc").await;
    println!("{r:?}");
    for r in t.requests() {
        println!(
            "{:?} {} {} idem={:?} ct={:?} body={:?}",
            r.at,
            r.method,
            r.url,
            hv(&r, "idempotency-key"),
            hv(&r, "content-type"),
            r.body
        );
    }
}

#[tokio::test(start_paused = true)]
async fn explore_redirects() {
    for status in [301u16, 302, 303, 307, 308] {
        let t = ScriptedTransport::new([
            Step::status(status).header("location", "/next"),
            Step::status(503),
            Step::status(status).header("location", "/next"),
            Step::status(200).body("ok"),
        ]);
        let api: RvClient = scripted(&t);
        let r = api.keyed(b"abc").await;
        println!("{status}: {r:?}");
        for r in t.requests() {
            println!(
                "  {:?} {} {} idem={:?} ct={:?} body={:?}",
                r.at,
                r.method,
                r.url,
                hv(&r, "idempotency-key"),
                hv(&r, "content-type"),
                r.body
            );
        }
    }
}

fn fail_on(
    n: usize,
    panic: bool,
) -> impl Fn(&mut HttpRequest) -> Result<(), resilient_api::error::BoxError> + Send + Sync + 'static
{
    let uses = Arc::new(AtomicUsize::new(0));
    move |_r: &mut HttpRequest| {
        let i = uses.fetch_add(1, Ordering::SeqCst) + 1;
        if i == n {
            if panic {
                panic!("mw panicked");
            }
            return Err("mw failed".into());
        }
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn explore_hedge_mw() {
    for panic in [false, true] {
        let t = ScriptedTransport::new([Step::status(200).body("slow").delay(ms(50))]);
        let api = scripted_builder::<RvClient>(&t)
            .middleware(fail_on(2, panic))
            .build()
            .unwrap();
        let clock = Clock::start();
        let a = api.clone();
        let r =
            tokio::spawn(async move { a.hedged().await.map_err(|e| (e.kind(), e.to_string())) })
                .await;
        println!(
            "panic={panic}: {:?} at {} attempts={} inflight={}",
            r.as_ref().map_err(|e| e.is_panic()),
            clock.now_ms(),
            t.attempts(),
            t.in_flight()
        );
        t.push([Step::status(200).body("ok")]);
        println!("  follow: {:?}", api.hedged().await);
    }
}

#[tokio::test(start_paused = true)]
async fn explore_coalesce_hooks() {
    for which in 0..4 {
        let t = ScriptedTransport::new([Step::status(503).delay(ms(5))]);
        let b = scripted_builder::<RvClient>(&t);
        let b = match which {
            0 => b.middleware(fail_on(2, false)),
            1 => b.retry_predicate(|_| Err("pred failed".into())),
            2 => b.on_retry(|_| Err("on_retry failed".into())),
            _ => b.retry_predicate(|_| Ok(false)),
        };
        let api = b.build().unwrap();
        let clock = Clock::start();
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let a = api.clone();
                tokio::spawn(async move {
                    let r = a.co().await.map_err(|e| {
                        (
                            e.kind(),
                            e.to_string(),
                            e.attempts(),
                            std::error::Error::source(&e).map(|s| s.to_string()),
                        )
                    });
                    (r, Clock::start())
                })
            })
            .collect();
        for h in hs {
            let (r, _) = h.await.unwrap();
            println!("which={which}: {r:?} at {}", clock.now_ms());
        }
        println!("  attempts={}", t.attempts());
        t.push([Step::status(200).body("ok")]);
        println!("  follow: {:?}", api.co().await);
    }
}

#[tokio::test(start_paused = true)]
async fn explore_on_retry_hedged() {
    let t = ScriptedTransport::new([
        Step::status(503).delay(ms(15)),
        Step::status(503).delay(ms(10)),
        Step::status(503).delay(ms(5)),
        Step::status(502).delay(ms(30)),
        Step::status(200).body("ok"),
    ]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let api = scripted_builder::<RvClient>(&t)
        .on_retry(move |ev: &RetryEvent<'_>| {
            s.lock().unwrap().push((
                ev.attempt,
                ev.wait,
                ev.error.kind(),
                ev.error.status(),
                ev.error.attempts(),
            ));
            Ok(())
        })
        .build()
        .unwrap();
    let clock = Clock::start();
    let r = api.hedged().await;
    println!("{r:?} at {} times={:?}", clock.now_ms(), t.dispatch_times());
    println!("{:?}", seen.lock().unwrap());
}

#[tokio::test(start_paused = true)]
async fn explore_redirect_mw() {
    for panic in [false, true] {
        let t = ScriptedTransport::new([
            Step::status(307).header("location", "/next"),
            Step::status(200).body("ok"),
        ]);
        let api = scripted_builder::<RvClient>(&t)
            .middleware(fail_on(2, panic))
            .build()
            .unwrap();
        let a = api.clone();
        let r =
            tokio::spawn(async move { a.get().await.map_err(|e| (e.kind(), e.to_string())) }).await;
        println!(
            "panic={panic}: {:?} attempts={} inflight={}",
            r.as_ref().map_err(|e| e.is_panic()),
            t.attempts(),
            t.in_flight()
        );
        t.push([Step::status(200).body("ok")]);
        println!("  follow: {:?}", api.get().await);
    }
}

#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 1, reset = "100ms"),
)]
pub trait Probe {
    #[get("/p")]
    async fn p(&self) -> Result<String, ApiError>;
    #[get("/h")]
    #[hedge(delay = "10ms", max = 2)]
    async fn h(&self) -> Result<String, ApiError>;
}

#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    rate_limit(per_second = 1, burst = 1),
)]
pub trait Limited {
    #[get("/l")]
    async fn l(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn explore_budget_mw() {
    use resilient_api::retry::budget::BudgetConfig;
    for (which, panic) in [(0, false), (0, true), (1, false), (1, true)] {
        let t = ScriptedTransport::new([Step::status(503).delay(ms(1))]);
        let api = scripted_builder::<RvClient>(&t)
            .retry_budget(Some(BudgetConfig {
                ttl: std::time::Duration::from_secs(10),
                min_per_sec: 0,
                retry_ratio: 1.0,
            }))
            .middleware(fail_on(2, panic))
            .build()
            .unwrap();
        let a = api.clone();
        let r = tokio::spawn(async move {
            if which == 0 {
                a.get().await
            } else {
                a.hedged().await
            }
            .map_err(|e| e.kind())
        })
        .await;
        println!(
            "which={which} panic={panic}: {:?} attempts={}",
            r.as_ref().map_err(|e| e.is_panic()),
            t.attempts()
        );
        t.push([
            Step::status(503),
            Step::status(503),
            Step::status(200).body("ok"),
        ]);
        let before = t.attempts();
        println!(
            "  follow: {:?} +{}",
            api.get().await.map_err(|e| e.kind()),
            t.attempts() - before
        );
    }
}

#[tokio::test(start_paused = true)]
async fn explore_probe_mw() {
    for panic in [false, true] {
        let t = ScriptedTransport::new([Step::status(500)]);
        let api = scripted_builder::<ProbeClient>(&t)
            .middleware(fail_on(2, panic))
            .build()
            .unwrap();
        println!("first {:?}", api.p().await.map_err(|e| e.kind()));
        tokio::time::sleep(ms(100)).await;
        let a = api.clone();
        let r = tokio::spawn(async move { a.p().await.map_err(|e| e.kind()) }).await;
        println!(
            "panic={panic}: probe {:?} state={:?}",
            r.as_ref().map_err(|e| e.is_panic()),
            api.circuit_state()
        );
        t.push([Step::status(200).body("ok")]);
        println!("  follow: {:?}", api.p().await.map_err(|e| e.kind()));
    }
}

#[tokio::test(start_paused = true)]
async fn explore_token_mw() {
    for panic in [false, true] {
        let t = ScriptedTransport::new([]);
        let api = scripted_builder::<LimitedClient>(&t)
            .middleware(fail_on(1, panic))
            .build()
            .unwrap();
        let a = api.clone();
        let r = tokio::spawn(async move { a.l().await.map_err(|e| e.kind()) }).await;
        println!("panic={panic}: {:?}", r.as_ref().map_err(|e| e.is_panic()));
        t.push([Step::status(200).body("ok")]);
        let clock = Clock::start();
        println!(
            "  follow: {:?} at {}",
            api.l().await.map_err(|e| e.kind()),
            clock.now_ms()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn explore_301_put_delete() {
    for status in [301u16, 302, 303] {
        let t = ScriptedTransport::new([
            Step::status(status).header("location", "/moved"),
            Step::status(200).body("old doc"),
            Step::status(status).header("location", "/moved"),
            Step::status(200).body("old doc"),
            Step::status(status).header("location", "/moved"),
            Step::status(200).body("{\"a\":0}"),
        ]);
        let api: RvClient = scripted(&t);
        let r1 = api.put(b"new doc").await;
        let r2 = api.del().await;
        let r3 = api.patch(&serde_json::json!({"a": 1})).await;
        println!("{status}: put={r1:?} del={r2:?} patch={r3:?}");
        for r in t.requests() {
            println!(
                "  {} {} ct={:?} body={:?}",
                r.method,
                r.url,
                hv(&r, "content-type"),
                r.body
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn explore_last_use() {
    for which in 0..3 {
        let t = ScriptedTransport::new([Step::status(503), Step::status(503), Step::status(503)]);
        let uses = Arc::new(AtomicUsize::new(0));
        let u = uses.clone();
        let b = scripted_builder::<RvClient>(&t);
        let b = match which {
            0 => b.middleware(fail_on(3, true)),
            1 => b.on_retry(move |_| {
                if u.fetch_add(1, Ordering::SeqCst) == 1 {
                    panic!("last on_retry")
                }
                Ok(())
            }),
            _ => b.retry_predicate(move |_| {
                if u.fetch_add(1, Ordering::SeqCst) == 1 {
                    return Err("last pred".into());
                }
                Ok(true)
            }),
        };
        let api = b.build().unwrap();
        let clock = Clock::start();
        let a = api.clone();
        let r = tokio::spawn(async move {
            a.get()
                .await
                .map_err(|e| (e.kind(), e.attempts(), e.to_string()))
        })
        .await;
        println!(
            "which={which}: {:?} at {} attempts={}",
            r.as_ref().map_err(|e| e.is_panic()),
            clock.now_ms(),
            t.attempts()
        );
        t.push([Step::status(200).body("ok")]);
        println!("  follow: {:?}", api.get().await.map_err(|e| e.kind()));
        assert_nothing_leaked(&t);
    }
}

#[tokio::test(start_paused = true)]
async fn explore_on_retry_hedged_retry_after() {
    let t = ScriptedTransport::new([
        Step::status(429).header("retry-after", "1").delay(ms(20)),
        Step::status(503).delay(ms(40)),
        Step::status(200).body("ok"),
    ]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let api = scripted_builder::<RvClient>(&t)
        .on_retry(move |ev: &RetryEvent<'_>| {
            s.lock().unwrap().push((
                ev.attempt,
                ev.wait,
                ev.error.kind(),
                ev.error.status(),
                ev.error.retry_after(),
            ));
            Ok(())
        })
        .build()
        .unwrap();
    let clock = Clock::start();
    let r = api.hedged().await;
    println!("{r:?} at {} times={:?}", clock.now_ms(), t.dispatch_times());
    println!("{:?}", seen.lock().unwrap());
}

#[tokio::test(start_paused = true)]
async fn explore_predicate_hedge() {
    let t = ScriptedTransport::new([
        Step::status(503).body("down for maintenance").delay(ms(3)),
        Step::status(200).body("ok"),
    ]);
    let asked = Arc::new(AtomicUsize::new(0));
    let a = asked.clone();
    let api = scripted_builder::<RvClient>(&t)
        .retry_predicate(move |_| {
            a.fetch_add(1, Ordering::SeqCst);
            Ok(false)
        })
        .build()
        .unwrap();
    let clock = Clock::start();
    let r = api.hedged().await;
    println!(
        "{r:?} at {} times={:?} asked={}",
        clock.now_ms(),
        t.dispatch_times(),
        asked.load(Ordering::SeqCst)
    );
}

#[resilient_api(timeout(attempt = "1s"), retry(max = 1, backoff = fixed(delay = "20ms")))]
pub trait CoHedge {
    #[get("/ch")]
    #[coalesce]
    #[hedge(delay = "10ms", max = 2)]
    async fn ch(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn explore_coalesce_hedge_panic() {
    for panic in [false, true] {
        let t = ScriptedTransport::new([Step::status(200).body("slow").delay(ms(50))]);
        let api = scripted_builder::<CoHedgeClient>(&t)
            .middleware(fail_on(2, panic))
            .build()
            .unwrap();
        let clock = Clock::start();
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let a = api.clone();
                tokio::spawn(async move { a.ch().await.map_err(|e| (e.kind(), e.to_string())) })
            })
            .collect();
        for h in hs {
            let r = h.await;
            println!(
                "panic={panic}: {:?} at {}",
                r.map_err(|e| e.into_panic().downcast_ref::<&str>().copied()),
                clock.now_ms()
            );
        }
        println!("  attempts={} inflight={}", t.attempts(), t.in_flight());
        t.push([Step::status(200).body("ok")]);
        println!("  follow: {:?}", api.ch().await);
    }
}
