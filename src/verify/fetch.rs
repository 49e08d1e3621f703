//! The HTTP(S) client that fetches range lists and key directories: the
//! system's roots plus `verify.ca_file`, HTTP/1.1, redirects followed
//! only where asked (never from https to http), a time and a size limit.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// The longest a fetch may take, head and body.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest list accepted (Google's biggest is ~100 KiB).
const MAX_LIST_BYTES: usize = 8 << 20;
/// Redirects followed (never from https to http).
const MAX_REDIRECTS: usize = 3;
/// The HTTP(S) client that fetches range lists and key directories: the
/// system's root certificates (plus `verify.ca_file`), HTTP/1.1, a
/// timeout, a size limit.
#[derive(Clone)]
pub struct Fetcher {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Empty<Bytes>>,
    tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fetcher")
    }
}

/// The fetcher's TLS settings cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum FetcherError {
    /// `verify.ca_file` cannot be read or holds no certificate.
    #[error("verify.ca_file: {path}: {message}")]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the settings (a bug).
    #[error("verify: TLS client: {0}")]
    Tls(#[from] rustls::Error),
}

impl Fetcher {
    /// A client trusting the system's root certificates and those of
    /// `extra_roots` (PEM). Without any root, only `http://` sources work,
    /// and `https://` ones say why.
    pub fn new(extra_roots: Option<&Path>) -> Result<Self, FetcherError> {
        let mut roots = rustls::RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(found.certs);
        if let Some(path) = extra_roots {
            crate::tls::add_pem_roots(&mut roots, path).map_err(|message| {
                FetcherError::CaFile {
                    path: path.to_owned(),
                    message,
                }
            })?;
        }
        Ok(Self::with_tls(Arc::new(crate::tls::client_config(roots)?)))
    }

    fn with_tls(tls: Arc<rustls::ClientConfig>) -> Self {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(Duration::from_secs(10)));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config((*tls).clone())
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Self { client, tls }
    }

    /// A copy with a connection pool of its own (each worker's event loop
    /// keeps its own connections).
    pub fn for_worker(&self) -> Self {
        Self::with_tls(Arc::clone(&self.tls))
    }

    /// The body of `url`, after at most 3 redirects, on a 200 only,
    /// within 30 s and 8 MiB.
    pub async fn get(&self, url: &str) -> Result<Vec<u8>, String> {
        tokio::time::timeout(
            FETCH_TIMEOUT,
            self.fetch(url, MAX_REDIRECTS, MAX_LIST_BYTES),
        )
        .await
        .map_err(|_| format!("no complete answer in {}s", FETCH_TIMEOUT.as_secs()))?
    }

    /// The body of the `https://` `url` itself: no redirect followed, a
    /// 200 only, within 30 s and `max_bytes` (key directories).
    pub async fn get_exact(&self, url: &str, max_bytes: usize) -> Result<Vec<u8>, String> {
        if !url.starts_with("https://") {
            return Err(format!("{url}: not https"));
        }
        tokio::time::timeout(FETCH_TIMEOUT, self.fetch(url, 0, max_bytes))
            .await
            .map_err(|_| format!("no complete answer in {}s", FETCH_TIMEOUT.as_secs()))?
    }

    async fn fetch(
        &self,
        url: &str,
        redirects: usize,
        max_bytes: usize,
    ) -> Result<Vec<u8>, String> {
        let mut uri: Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
        for _ in 0..=redirects {
            let req = Request::get(uri.clone())
                .header(
                    header::USER_AGENT,
                    concat!(
                        "crawlgate/",
                        env!("CARGO_PKG_VERSION"),
                        " (crawler verification)"
                    ),
                )
                .header(header::ACCEPT, "application/json")
                .body(Empty::new())
                .map_err(|e| e.to_string())?;
            let res = self.client.request(req).await.map_err(|e| {
                let mut text = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    text.push_str(": ");
                    text.push_str(&s.to_string());
                    source = s.source();
                }
                text
            })?;
            let status = res.status();
            if status.is_redirection() && redirects > 0 {
                let location = res
                    .headers()
                    .get(header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| format!("{status} without a Location"))?;
                let next =
                    join(&uri, location).ok_or_else(|| format!("{status} to {location:?}"))?;
                if uri.scheme_str() == Some("https") && next.scheme_str() != Some("https") {
                    return Err(format!("{status} from https to {next}: refused"));
                }
                uri = next;
                continue;
            }
            if status != StatusCode::OK {
                return Err(format!("answered {status}"));
            }
            let body = Limited::new(res.into_body(), max_bytes)
                .collect()
                .await
                .map_err(|e| format!("body: {e}"))?;
            return Ok(body.to_bytes().to_vec());
        }
        Err(format!("more than {redirects} redirects"))
    }
}

/// `location` resolved against `base` (absolute, or an absolute path).
fn join(base: &Uri, location: &str) -> Option<Uri> {
    if location.starts_with("http://") || location.starts_with("https://") {
        return location.parse().ok();
    }
    if !location.starts_with('/') || location.starts_with("//") {
        return None;
    }
    Uri::builder()
        .scheme(base.scheme()?.clone())
        .authority(base.authority()?.clone())
        .path_and_query(location)
        .build()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_targets() {
        let base: Uri = "https://a.example/static/x.json".parse().expect("uri");
        let joined = |l: &str| join(&base, l).map(|u| u.to_string());
        assert_eq!(
            joined("/y.json").as_deref(),
            Some("https://a.example/y.json")
        );
        assert_eq!(
            joined("https://b.example/z.json").as_deref(),
            Some("https://b.example/z.json")
        );
        assert_eq!(joined("//evil.example/z"), None);
        assert_eq!(joined("z.json"), None);
    }
}
