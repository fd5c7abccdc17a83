//! The loopback server: a hyper 1 HTTP/1.1 server in its own process, answering every
//! request with a small JSON body, and the parent's handle on it.
//!
//! The bench binary re-executes itself with `--server <port-file>`. When `taskset`
//! is available and there are at least two cores, the server runs pinned to core 1
//! and the client (this process) pins itself to core 0 while the loopback sections
//! run, so the client's CPU time is its own and the two never share a core.

use std::convert::Infallible;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::BoxError;

/// The body every request gets.
pub const BODY: &[u8] = br#"{"id":42,"name":"resilient"}"#;

/// [`BODY`], decoded.
#[derive(Debug, serde::Deserialize)]
pub struct Item {
    /// `42`.
    pub id: u64,
    /// `"resilient"`.
    pub name: String,
}

/// The server process's entry point: serve on an ephemeral loopback port, write the
/// port to `port_file`, and exit when the parent closes our stdin.
pub fn run(port_file: &Path) -> Result<(), BoxError> {
    // The parent holds our stdin open; when it exits or drops us, we go too.
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        std::process::exit(0);
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        // Written then renamed, so the parent never reads half a number.
        let partial = port_file.with_extension("partial");
        std::fs::write(&partial, port.to_string())?;
        std::fs::rename(&partial, port_file)?;
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            tokio::spawn(async move {
                let service = service_fn(answer);
                // Keep-alive is hyper's default; a closed connection is not an error here.
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

async fn answer(_request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut response = Response::new(Full::new(Bytes::from_static(BODY)));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// The server process, seen from the parent. Dropping it stops the server.
pub struct Server {
    child: Child,
    port: u16,
    port_file: PathBuf,
    pinning: Pinning,
}

/// How the client and the server were placed on cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pinning {
    /// Server on core 1, client on core 0 (during the loopback sections).
    Pinned,
    /// `taskset` is missing or there is a single core: both float.
    Unpinned(&'static str),
}

impl Server {
    /// Start the server process (pinned to core 1 when possible) and wait for its port.
    pub fn start() -> Result<Server, BoxError> {
        let exe = std::env::current_exe()?;
        let port_file =
            std::env::temp_dir().join(format!("resilient-api-bench-{}.port", std::process::id()));
        let _ = std::fs::remove_file(&port_file);
        let pinning = pinning();
        let mut command = match pinning {
            Pinning::Pinned => {
                let mut c = Command::new("taskset");
                c.args(["-c", "1"]).arg(&exe);
                c
            }
            Pinning::Unpinned(_) => Command::new(&exe),
        };
        let child = command
            .arg("--server")
            .arg(&port_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut server = Server {
            child,
            port: 0,
            port_file,
            pinning,
        };
        let started = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(&server.port_file) {
                server.port = text.trim().parse()?;
                break;
            }
            if let Some(status) = server.child.try_wait()? {
                return Err(format!("the server process exited early ({status})").into());
            }
            if started.elapsed() > Duration::from_secs(20) {
                return Err("the server process did not report its port within 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(server)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Where the processes run.
    pub fn pinning(&self) -> Pinning {
        self.pinning
    }

    /// Pin every thread of this process to core 0 until the guard is dropped (no-op
    /// when unpinned). Threads started meanwhile inherit it.
    pub fn pin_client(&self) -> ClientPin {
        match self.pinning {
            Pinning::Pinned => {
                let all = format!("0-{}", cores() - 1);
                ClientPin {
                    restore: taskset_self("0").then_some(all),
                }
            }
            Pinning::Unpinned(_) => ClientPin { restore: None },
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Closing stdin asks it to exit; kill it (our own child, by handle) to be sure.
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.port_file);
    }
}

/// Undoes [`Server::pin_client`] when dropped.
pub struct ClientPin {
    restore: Option<String>,
}

impl Drop for ClientPin {
    fn drop(&mut self) {
        if let Some(cpus) = &self.restore {
            taskset_self(cpus);
        }
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn pinning() -> Pinning {
    if cores() < 2 {
        return Pinning::Unpinned("a single core");
    }
    let available = Command::new("taskset")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if available {
        Pinning::Pinned
    } else {
        Pinning::Unpinned("no `taskset`")
    }
}

/// `taskset -a -p -c <cpus> <our pid>`: every thread of this process.
fn taskset_self(cpus: &str) -> bool {
    Command::new("taskset")
        .args(["-a", "-p", "-c", cpus])
        .arg(std::process::id().to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
