//! Range lists and key directories served from loopback: a file server the
//! test fills and changes as it goes (over HTTP or HTTPS), and the
//! `[verify.ranges.*]` config that points crawlgate at it, at local files,
//! or at a closed port, so that nothing leaves the machine.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// A Google range list of one prefix, 66.249.66.0/24, as a local file holds it.
pub const GOOGLE_LIST: &str =
    r#"{"creationTime": "2026-12-01T10:00:00", "prefixes": [{"ipv4Prefix": "66.249.66.0/24"}]}"#;

/// Serves files by path (range lists, key directories), over HTTP or
/// HTTPS; the test changes them as it goes. A path it has no file for
/// answers 404; a 3xx "file" is a redirect to its body. It counts the
/// requests for each path.
#[derive(Clone)]
pub struct ListServer {
    pub addr: SocketAddr,
    pub files: Files,
    scheme: &'static str,
    asked: Arc<Mutex<HashMap<String, usize>>>,
}

/// Path → (status, body).
pub type Files = Arc<Mutex<HashMap<String, (u16, Vec<u8>)>>>;

impl ListServer {
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    pub async fn start_with(tls: Option<tokio_rustls::TlsAcceptor>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let files: Files = Arc::default();
        let served = Arc::clone(&files);
        let asked: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let counted = Arc::clone(&asked);
        let scheme = if tls.is_some() { "https" } else { "http" };
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let files = Arc::clone(&served);
                let counted = Arc::clone(&counted);
                let tls = tls.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let path = req.uri().path();
                        *counted
                            .lock()
                            .expect("counts")
                            .entry(path.to_owned())
                            .or_default() += 1;
                        let file = files.lock().expect("files").get(path).cloned();
                        async move {
                            let (status, body) = file.unwrap_or((404, Vec::new()));
                            let mut res =
                                hyper::Response::new(Full::new(Bytes::from(body.clone())));
                            *res.status_mut() = http::StatusCode::from_u16(status).expect("status");
                            if (300..400).contains(&status) {
                                res.headers_mut().insert(
                                    http::header::LOCATION,
                                    http::HeaderValue::from_bytes(&body).expect("location"),
                                );
                            }
                            Ok::<_, Infallible>(res)
                        }
                    });
                    match tls {
                        Some(tls) => {
                            let Ok(stream) = tls.accept(stream).await else {
                                return;
                            };
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        }
                        None => {
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        }
                    }
                });
            }
        });
        Self {
            addr,
            files,
            scheme,
            asked,
        }
    }

    /// How many requests for `path` reached the server.
    pub fn asked(&self, path: &str) -> usize {
        self.asked
            .lock()
            .expect("counts")
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    pub fn set(&self, path: &str, body: &[u8]) {
        self.set_status(path, 200, body);
    }

    pub fn set_status(&self, path: &str, status: u16, body: &[u8]) {
        self.files
            .lock()
            .expect("files")
            .insert(path.to_owned(), (status, body.to_vec()));
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme, self.addr)
    }
}

/// `[verify.ranges.*]` pointing every shipped list at `server` (a list it
/// has no file for answers 404 and stays unloaded), except those in
/// `files` (list name → local path).
pub fn ranges_toml(server: &ListServer, files: &[(&str, &Path)]) -> String {
    super::ranges_toml(|name| match files.iter().find(|(n, _)| *n == name) {
        Some((_, path)) => path.display().to_string(),
        None => server.url(&format!("/{name}.json")),
    })
}

/// `[verify.ranges.*]` for every shipped list: the local files of `files`
/// (list name → path), the others a closed port on loopback, so that
/// nothing leaves the machine.
pub fn lists_toml(files: &[(&str, &Path)]) -> String {
    super::ranges_toml(|name| match files.iter().find(|(n, _)| *n == name) {
        Some((_, path)) => path.display().to_string(),
        None => format!("http://127.0.0.1:1/{name}.json"),
    })
}
