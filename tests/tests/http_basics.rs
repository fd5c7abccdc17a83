//! Wiremock tier: the default reqwest transport over real sockets on loopback, on the
//! real clock. Request building (JSON, form, raw bodies; path, query and header
//! encoding), response decoding (result types, error statuses, decode errors, content
//! types, size limits) and redirects (credentials dropped across origins, bounded hops).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use resilient_api::{ApiError, Bytes, ErrorKind, Response, resilient_api};
use serde::{Deserialize, Serialize};
use tests::received;
use tokio::io::AsyncWriteExt;
use wiremock::matchers::{any, header, method, path, query_param};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct User {
    id: u64,
    name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Item {
    name: String,
    price_cents: u32,
    tags: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Login {
    user: String,
    pass: String,
}

#[derive(Debug, Serialize)]
struct Filter {
    tag: String,
    limit: u32,
}

#[resilient_api(timeout(attempt = "5s"), retry(max = 0))]
trait Basics {
    #[get("/users/{id}")]
    async fn user(
        &self,
        id: u64,
        #[query] verbose: bool,
        #[header("X-Trace")] trace: &str,
    ) -> Result<User, ApiError>;

    #[post("/items")]
    async fn create_json(&self, #[body] item: &Item) -> Result<Item, ApiError>;

    #[post("/login")]
    async fn login(&self, #[body(form)] form: &Login) -> Result<(), ApiError>;

    #[post("/upload")]
    async fn upload(&self, #[body(raw)] data: &[u8]) -> Result<(), ApiError>;

    #[get("/files/{name}")]
    async fn file(&self, name: &str) -> Result<String, ApiError>;

    #[get("/echo")]
    async fn traced(&self, #[header("X-Trace")] trace: &str) -> Result<String, ApiError>;

    #[get("/search")]
    async fn search(
        &self,
        #[query] q: &str,
        #[query] page: Option<u32>,
    ) -> Result<String, ApiError>;

    #[get("/list")]
    async fn list(&self, #[query] filter: &Filter) -> Result<String, ApiError>;

    #[get("/many")]
    async fn many(
        &self,
        #[query] ids: &[u32],
        #[query] tags: Vec<&str>,
    ) -> Result<String, ApiError>;

    #[get("/user")]
    async fn json_user(&self) -> Result<User, ApiError>;

    #[get("/meta")]
    async fn meta(&self) -> Result<Response<User>, ApiError>;

    #[delete("/things/{id}")]
    async fn remove(&self, id: u64) -> Result<(), ApiError>;

    /// A path value, a repeated key, an empty value and a key of reserved characters.
    #[get("/shapes/{seg}")]
    async fn shapes(
        &self,
        seg: &str,
        #[query] ids: Vec<u32>,
        #[query("e")] empty: &str,
        #[query("k&=+ ?#/%")] odd: &str,
    ) -> Result<String, ApiError>;

    #[get("/text")]
    async fn text(&self) -> Result<String, ApiError>;

    #[get("/bytes")]
    async fn bytes(&self) -> Result<Bytes, ApiError>;

    #[get("/redirect")]
    async fn redirected(
        &self,
        #[header("X-Api-Key", secret)] key: &str,
        #[header("X-Trace")] trace: &str,
    ) -> Result<String, ApiError>;
}

fn client(base: &str) -> BasicsClient {
    BasicsClient::builder()
        .base_url(base)
        .build()
        .expect("client builds")
}

fn header_str<'a>(r: &'a Request, name: &str) -> Option<&'a str> {
    r.headers
        .get(name)
        .map(|v| v.to_str().expect("header is text"))
}

// ---------------------------------------------------------------------------------
// JSON round trips and request bodies
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn get_with_path_query_and_header_decodes_json() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/users/42"))
        .and(query_param("verbose", "true"))
        .and(header("x-trace", "trace-1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(User {
            id: 42,
            name: "Ada".into(),
        }))
        .mount(&server)
        .await;
    let api = client(&server.uri());

    let user = api.user(42, true, "trace-1").await.unwrap();
    assert_eq!(
        user,
        User {
            id: 42,
            name: "Ada".into()
        }
    );

    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].method.as_str(), "GET");
    assert_eq!(reqs[0].url.path(), "/users/42");
    assert_eq!(reqs[0].url.query(), Some("verbose=true"));
    assert_eq!(header_str(&reqs[0], "x-trace"), Some("trace-1"));
    assert!(reqs[0].body.is_empty());
}

#[tokio::test]
async fn post_json_body_arrives_byte_for_byte() {
    let server = MockServer::start().await;
    let item = Item {
        name: "café / 123".into(),
        price_cents: 499,
        tags: vec!["a".into(), "b c".into()],
    };
    Mock::given(method("POST"))
        .and(path("/items"))
        .respond_with(ResponseTemplate::new(201).set_body_json(&item))
        .mount(&server)
        .await;
    let api = client(&server.uri());

    let echoed = api.create_json(&item).await.unwrap();
    assert_eq!(echoed, item);

    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].method.as_str(), "POST");
    assert_eq!(reqs[0].body, serde_json::to_vec(&item).unwrap());
    assert_eq!(
        header_str(&reqs[0], "content-type"),
        Some("application/json")
    );
    assert_eq!(
        header_str(&reqs[0], "content-length"),
        Some(
            serde_json::to_vec(&item)
                .unwrap()
                .len()
                .to_string()
                .as_str()
        )
    );
}

#[tokio::test]
async fn post_form_body_arrives_byte_for_byte() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/login"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&server)
        .await;
    let api = client(&server.uri());

    let form = Login {
        user: "al ice".into(),
        pass: "p&w=1/é".into(),
    };
    api.login(&form).await.unwrap();

    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        String::from_utf8(reqs[0].body.clone()).unwrap(),
        "user=al+ice&pass=p%26w%3D1%2F%C3%A9"
    );
    assert_eq!(
        header_str(&reqs[0], "content-type"),
        Some("application/x-www-form-urlencoded")
    );
}

#[tokio::test]
async fn post_raw_body_arrives_byte_for_byte() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/upload"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&server)
        .await;
    let api = client(&server.uri());

    let data: Vec<u8> = vec![0x00, 0xff, 0x0d, 0x0a, b'x', 0x80, 0x7f];
    api.upload(&data).await.unwrap();

    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].body, data);
    assert_eq!(
        header_str(&reqs[0], "content-type"),
        Some("application/octet-stream")
    );
}

// ---------------------------------------------------------------------------------
// Path, query and header encoding
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn path_parameter_is_one_encoded_segment() {
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
        .mount(&server)
        .await;
    let api = client(&server.uri());

    assert_eq!(api.file("a/b?x=1#y%2e").await.unwrap(), "ok");

    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].url.path(), "/files/a%2Fb%3Fx=1%23y%252e");
    assert_eq!(reqs[0].url.query(), None);
    assert_eq!(reqs[0].url.fragment(), None);
}

#[tokio::test]
async fn dot_dot_path_value_is_refused_before_sending() {
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
        .mount(&server)
        .await;
    let api = client(&server.uri());

    let err = api.file("..").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidRequest);
    let shown = err.to_string();
    assert!(shown.contains("`name`"), "names the parameter: {shown}");
    assert!(!shown.contains("\"..\""), "{shown}");

    // Another refused value, distinctive enough to prove the value is never shown.
    let err = api.file("value-marker-31\r\n").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidRequest);
    let shown = err.to_string();
    assert!(shown.contains("`name`"), "names the parameter: {shown}");
    assert!(!shown.contains("value-marker-31"), "{shown}");
    assert!(!format!("{err:?}").contains("value-marker-31"));

    for refused in [".", ""] {
        let err = api.file(refused).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidRequest, "{refused:?}");
    }

    assert_eq!(received(&server).await.len(), 0, "nothing was sent");
    // The client still works.
    assert_eq!(api.file("fine").await.unwrap(), "ok");
    assert_eq!(received(&server).await.len(), 1);
}

#[tokio::test]
async fn header_value_with_crlf_is_refused_before_sending() {
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
        .mount(&server)
        .await;
    let api = client(&server.uri());

    for bad in [
        "abc\r\nX-Injected: header-marker-77",
        "abc\nheader-marker-77",
        "abc\rheader-marker-77",
    ] {
        let err = api.traced(bad).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidRequest, "{bad:?}");
        let shown = err.to_string();
        assert!(
            shown.contains("X-Trace") || shown.contains("`trace`"),
            "names the parameter: {shown}"
        );
        assert!(!shown.contains("header-marker-77"), "{shown}");
        assert!(!format!("{err:?}").contains("header-marker-77"));
    }
    assert_eq!(received(&server).await.len(), 0, "nothing was sent");

    assert_eq!(api.traced("fine").await.unwrap(), "ok");
    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 1);
    assert_eq!(header_str(&reqs[0], "x-trace"), Some("fine"));
}

#[tokio::test]
async fn none_query_parameter_is_left_out() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/search"))
        .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
        .mount(&server)
        .await;
    let api = client(&server.uri());

    api.search("rust lang", None).await.unwrap();
    api.search("rust lang", Some(2)).await.unwrap();

    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].url.query(), Some("q=rust+lang"));
    assert_eq!(reqs[1].url.query(), Some("q=rust+lang&page=2"));
}

#[tokio::test]
async fn sequence_query_parameter_repeats_its_name() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/many"))
        .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
        .mount(&server)
        .await;
    let api = client(&server.uri());

    api.many(&[1, 2, 3], vec!["a b", "&"]).await.unwrap();
    api.many(&[], vec![]).await.unwrap();

    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[0].url.query(),
        Some("ids=1&ids=2&ids=3&tags=a+b&tags=%26")
    );
    assert_eq!(reqs[1].url.query(), None, "an empty sequence adds nothing");
}

/// The request target on the wire is the path and query the client built, byte for
/// byte (the same as the scripted transport records, `request_building.rs`): nothing
/// between the URL and the socket re-encodes, decodes or reorders it. Read from a raw
/// server, which sees the request line as sent.
#[tokio::test]
async fn the_request_target_on_the_wire_is_the_path_and_query_built() {
    let lines = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = lines.clone();
    let server = tests::raw(move |mut conn| {
        let seen = seen.clone();
        async move {
            while let Ok(request) = tests::read_request(&mut conn.sock).await {
                let Some(line) = String::from_utf8_lossy(&request)
                    .lines()
                    .next()
                    .map(str::to_owned)
                else {
                    return;
                };
                seen.lock().expect("not poisoned").push(line);
                if !conn
                    .write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .await
                {
                    return;
                }
            }
        }
    })
    .await;
    let api = client(&server.base);
    let odd = "v&=+ ?#/%\u{e9}";
    assert_eq!(
        api.shapes("a b/?#%", vec![1, 2, 1], "", odd).await.unwrap(),
        "ok"
    );
    assert_eq!(api.shapes("x", vec![], "", "").await.unwrap(), "ok");
    assert_eq!(api.shapes("\u{e9}", vec![0], "=", "&").await.unwrap(), "ok");
    api.remove(7).await.unwrap();
    assert_eq!(
        *lines.lock().expect("not poisoned"),
        [
            "GET /shapes/a%20b%2F%3F%23%25?ids=1&ids=2&ids=1&e=&k%26%3D%2B+%3F%23%2F%25=v%26%3D%2B+%3F%23%2F%25%C3%A9 HTTP/1.1",
            "GET /shapes/x?e=&k%26%3D%2B+%3F%23%2F%25= HTTP/1.1",
            "GET /shapes/%C3%A9?ids=0&e=%3D&k%26%3D%2B+%3F%23%2F%25=%26 HTTP/1.1",
            "DELETE /things/7 HTTP/1.1",
        ]
    );
}

#[tokio::test]
async fn struct_query_parameter_is_flattened() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/list"))
        .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
        .mount(&server)
        .await;
    let api = client(&server.uri());

    let filter = Filter {
        tag: "a b&c".into(),
        limit: 5,
    };
    api.list(&filter).await.unwrap();

    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].url.query(), Some("tag=a+b%26c&limit=5"));
}

// ---------------------------------------------------------------------------------
// Error statuses and decoding
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn not_found_is_a_status_error_with_its_body() {
    let server = MockServer::start().await;
    let body = serde_json::json!({"error": "no such user", "code": 17});
    Mock::given(method("GET"))
        .and(path("/user"))
        .respond_with(ResponseTemplate::new(404).set_body_json(&body))
        .mount(&server)
        .await;
    let api = client(&server.uri());

    let err = api.json_user().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Status);
    assert_eq!(err.status(), Some(404));
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.endpoint(), "json_user");
    assert_eq!(err.body_text().unwrap(), body.to_string());
    let decoded = err.decode_body::<serde_json::Value>().unwrap().unwrap();
    assert_eq!(decoded, body);
    assert_eq!(received(&server).await.len(), 1);
}

#[tokio::test]
async fn invalid_json_is_a_decode_error_without_the_body() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/user"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            "{\"id\": 7,\n \"name\": \"body-marker-q9\" oops}",
            "application/json",
        ))
        .mount(&server)
        .await;
    let api = client(&server.uri());

    let err = api.json_user().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Decode);
    let shown = err.to_string();
    assert!(shown.contains("line 2"), "{shown}");
    assert!(shown.contains("column"), "{shown}");
    assert!(!shown.contains("body-marker-q9"), "{shown}");
    assert!(!format!("{err:?}").contains("body-marker-q9"));
    assert_eq!(
        received(&server).await.len(),
        1,
        "a decode error is not retried"
    );
}

/// A `String` result is read in the charset the server names: a legacy API's Latin-1
/// `é` (one byte, 0xE9) is `é`, not a decode error; the same byte with no charset is
/// not UTF-8, and a charset no one knows is named in the error.
#[tokio::test]
async fn text_is_read_in_the_charset_the_server_names() {
    let server = MockServer::start().await;
    for (name, content_type) in [
        ("latin1", "text/plain; charset=ISO-8859-1"),
        ("bare", "text/plain"),
        ("klingon", "text/plain; charset=klingon"),
    ] {
        Mock::given(path(format!("/files/{name}")))
            .respond_with(ResponseTemplate::new(200).set_body_raw(&b"caf\xe9"[..], content_type))
            .mount(&server)
            .await;
    }
    let api = client(&server.uri());

    assert_eq!(api.file("latin1").await.unwrap(), "café");
    let bare = api.file("bare").await.unwrap_err();
    assert_eq!(bare.kind(), ErrorKind::Decode);
    assert!(bare.to_string().contains("not UTF-8 at byte 3"), "{bare}");
    let unknown = api.file("klingon").await.unwrap_err();
    assert_eq!(unknown.kind(), ErrorKind::Decode);
    assert!(
        unknown
            .to_string()
            .contains("an unknown charset \"klingon\""),
        "{unknown}"
    );
    assert_eq!(
        received(&server).await.len(),
        3,
        "a decode error is not retried"
    );
}

#[tokio::test]
async fn html_on_a_json_endpoint_is_unexpected_content_type() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/user"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            "<html><body>maintenance</body></html>",
            "text/html; charset=utf-8",
        ))
        .mount(&server)
        .await;
    let api = client(&server.uri());

    let err = api.json_user().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnexpectedContentType);
    assert!(!err.to_string().contains("maintenance"), "{err}");
}

#[tokio::test]
async fn body_over_the_limit_with_content_length_is_too_large() {
    let server = MockServer::start().await;
    let big = User {
        id: 1,
        name: "x".repeat(2048),
    };
    Mock::given(method("GET"))
        .and(path("/user"))
        .respond_with(ResponseTemplate::new(200).set_body_json(&big))
        .mount(&server)
        .await;
    let small = User {
        id: 2,
        name: "y".repeat(900),
    };
    Mock::given(method("GET"))
        .and(path("/meta"))
        .respond_with(ResponseTemplate::new(200).set_body_json(&small))
        .mount(&server)
        .await;
    let api = BasicsClient::builder()
        .base_url(server.uri())
        .max_body_size(1024)
        .build()
        .unwrap();

    let err = api.json_user().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BodyTooLarge);
    // Under the limit is fine: the limit is the configured one, not something smaller.
    assert_eq!(api.meta().await.unwrap().into_value(), small);
}

/// A tiny HTTP/1.1 server that answers every request with a chunked body of
/// `chunks` chunks of `chunk_len` bytes (no `content-length`), then closes the
/// connection. Returns its base URL and a count of its connections, one per request.
async fn chunked_server(chunks: usize, chunk_len: usize) -> (String, Arc<AtomicUsize>) {
    tests::raw_server(move |mut sock, _| async move {
        if tests::read_request(&mut sock).await.is_err() {
            return;
        }
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\
                    transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
        if sock.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for _ in 0..chunks {
            let mut chunk = format!("{chunk_len:x}\r\n").into_bytes();
            chunk.extend(std::iter::repeat_n(b'z', chunk_len));
            chunk.extend_from_slice(b"\r\n");
            if sock.write_all(&chunk).await.is_err() {
                return;
            }
            let _ = sock.flush().await;
        }
        let _ = sock.write_all(b"0\r\n\r\n").await;
        let _ = sock.shutdown().await;
    })
    .await
}

#[tokio::test]
async fn chunked_body_over_the_limit_is_too_large() {
    let (base, count) = chunked_server(4, 512).await;
    let api = BasicsClient::builder()
        .base_url(&base)
        .max_body_size(1024)
        .build()
        .unwrap();

    let err = api.text().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BodyTooLarge);
    assert_eq!(count.load(Ordering::SeqCst), 1);

    // The same chunked answer under the limit is read whole.
    let (base, _) = chunked_server(3, 300).await;
    let api = BasicsClient::builder()
        .base_url(&base)
        .max_body_size(1024)
        .build()
        .unwrap();
    assert_eq!(api.text().await.unwrap(), "z".repeat(900));
}

#[tokio::test]
async fn a_body_read_to_its_content_length_keeps_the_connection() {
    // The read stops once every declared byte is in, without polling for the end:
    // the connection must still go back to the pool.
    let (base, accepted) = keep_alive_server(&["kept"], Duration::ZERO, false).await;
    let api = BasicsClient::builder().base_url(&base).build().unwrap();
    for _ in 0..5 {
        assert_eq!(api.text().await.unwrap(), "kept");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

/// A keep-alive HTTP/1.1 server that answers every request on a connection with
/// `pieces` joined, each written after a pause of `pause` (with a pause, the client
/// waits in the middle of the body). With `chunked`, the pieces go as chunks;
/// otherwise under one `content-length`. Returns its base URL and how many
/// connections it accepted.
async fn keep_alive_server(
    pieces: &'static [&'static str],
    pause: Duration,
    chunked: bool,
) -> (String, Arc<AtomicUsize>) {
    tests::raw_server(move |mut sock, _| async move {
        loop {
            match tests::read_request(&mut sock).await {
                Ok(request) if !request.is_empty() => {}
                _ => return,
            }
            let framing = if chunked {
                "transfer-encoding: chunked".to_owned()
            } else {
                format!("content-length: {}", pieces.concat().len())
            };
            let head = format!("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n{framing}\r\n\r\n");
            if sock.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for piece in pieces {
                tokio::time::sleep(pause).await;
                let bytes = if chunked {
                    format!("{:x}\r\n{piece}\r\n", piece.len())
                } else {
                    (*piece).to_owned()
                };
                if sock.write_all(bytes.as_bytes()).await.is_err() {
                    return;
                }
                let _ = sock.flush().await;
            }
            if chunked && sock.write_all(b"0\r\n\r\n").await.is_err() {
                return;
            }
        }
    })
    .await
}

#[tokio::test]
async fn a_body_that_arrives_in_pieces_is_read_whole() {
    // The read waits between the pieces: nothing read before a wait may be lost, and
    // a body read to its content-length still gives its connection back.
    const PIECES: &[&str] = &["first-", "second-", "third"];
    for chunked in [false, true] {
        let (base, accepted) = keep_alive_server(PIECES, Duration::from_millis(20), chunked).await;
        let api = client(&base);
        for _ in 0..3 {
            assert_eq!(
                api.text().await.unwrap(),
                "first-second-third",
                "chunked: {chunked}"
            );
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "chunked: {chunked}");
    }
}

// ---------------------------------------------------------------------------------
// Result types
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn response_wrapper_gives_status_and_headers() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/meta"))
        .respond_with(
            ResponseTemplate::new(203)
                .insert_header("x-request-id", "req-9")
                .insert_header("etag", "\"v1\"")
                .set_body_json(User {
                    id: 5,
                    name: "Bo".into(),
                }),
        )
        .mount(&server)
        .await;
    let api = client(&server.uri());

    let resp = api.meta().await.unwrap();
    assert_eq!(resp.status().as_u16(), 203);
    assert_eq!(resp.headers().get("x-request-id").unwrap(), "req-9");
    assert_eq!(resp.headers().get("etag").unwrap(), "\"v1\"");
    assert_eq!(
        resp.headers().get("content-type").unwrap(),
        "application/json"
    );
    assert_eq!(
        resp.value(),
        &User {
            id: 5,
            name: "Bo".into()
        }
    );
}

#[tokio::test]
async fn unit_result_accepts_an_empty_answer() {
    let server = MockServer::start().await;
    Mock::given(method("DELETE"))
        .and(path("/things/9"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&server)
        .await;
    let api = client(&server.uri());

    api.remove(9).await.unwrap();
    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].method.as_str(), "DELETE");
}

#[tokio::test]
async fn string_and_bytes_results() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/text"))
        .respond_with(ResponseTemplate::new(200).set_body_string("héllo, wörld"))
        .mount(&server)
        .await;
    let raw: Vec<u8> = vec![0x00, 0xff, 0xfe, 0x10, 0x80];
    Mock::given(method("GET"))
        .and(path("/bytes"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(raw.clone(), "application/octet-stream"),
        )
        .mount(&server)
        .await;
    let api = client(&server.uri());

    assert_eq!(api.text().await.unwrap(), "héllo, wörld");
    assert_eq!(api.bytes().await.unwrap(), Bytes::from(raw));
}

// ---------------------------------------------------------------------------------
// Redirects
// ---------------------------------------------------------------------------------

const TOKEN: &str = "tok-123";
const KEY: &str = "key-456";

fn authed(base: &str) -> BasicsClient {
    BasicsClient::builder()
        .base_url(base)
        .bearer_auth(TOKEN)
        .build()
        .expect("client builds")
}

#[tokio::test]
async fn cross_origin_redirect_drops_credentials() {
    for status in [307u16, 302] {
        let origin = MockServer::start().await;
        let other = MockServer::start().await;
        assert_ne!(origin.address().port(), other.address().port());
        Mock::given(method("GET"))
            .and(path("/redirect"))
            .respond_with(
                ResponseTemplate::new(status)
                    .insert_header("location", format!("{}/landing", other.uri()).as_str()),
            )
            .mount(&origin)
            .await;
        Mock::given(method("GET"))
            .and(path("/landing"))
            .respond_with(ResponseTemplate::new(200).set_body_string("landed"))
            .mount(&other)
            .await;
        let api = authed(&origin.uri());

        assert_eq!(
            api.redirected(KEY, "t-1").await.unwrap(),
            "landed",
            "{status}"
        );

        let first = received(&origin).await;
        assert_eq!(first.len(), 1, "{status}");
        let bearer = format!("Bearer {TOKEN}");
        assert_eq!(
            header_str(&first[0], "authorization"),
            Some(bearer.as_str())
        );
        assert_eq!(header_str(&first[0], "x-api-key"), Some(KEY));

        let landed = received(&other).await;
        assert_eq!(landed.len(), 1, "{status}");
        assert_eq!(landed[0].method.as_str(), "GET");
        assert_eq!(header_str(&landed[0], "authorization"), None, "{status}");
        assert_eq!(header_str(&landed[0], "x-api-key"), None, "{status}");
        // Headers that are not credentials still go along.
        assert_eq!(header_str(&landed[0], "x-trace"), Some("t-1"), "{status}");
    }
}

#[tokio::test]
async fn same_origin_redirect_keeps_credentials() {
    for status in [307u16, 302] {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/redirect"))
            .respond_with(ResponseTemplate::new(status).insert_header("location", "/landing"))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path("/landing"))
            .respond_with(ResponseTemplate::new(200).set_body_string("landed"))
            .mount(&server)
            .await;
        let api = authed(&server.uri());

        assert_eq!(
            api.redirected(KEY, "t-2").await.unwrap(),
            "landed",
            "{status}"
        );

        let reqs = received(&server).await;
        assert_eq!(reqs.len(), 2, "{status}");
        assert_eq!(reqs[1].url.path(), "/landing");
        let bearer = format!("Bearer {TOKEN}");
        for r in &reqs {
            assert_eq!(
                header_str(r, "authorization"),
                Some(bearer.as_str()),
                "{status}"
            );
            assert_eq!(header_str(r, "x-api-key"), Some(KEY), "{status}");
            assert_eq!(header_str(r, "x-trace"), Some("t-2"), "{status}");
        }
    }
}

#[tokio::test]
async fn more_than_ten_redirects_is_a_redirect_error() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/redirect"))
        .respond_with(ResponseTemplate::new(302).insert_header("location", "/redirect"))
        .mount(&server)
        .await;
    let api = authed(&server.uri());

    let err = api.redirected(KEY, "t-3").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Redirect);
    // The first request and ten followed redirects; the eleventh is refused.
    assert_eq!(received(&server).await.len(), 11);
}
