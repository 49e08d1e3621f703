//! The pooled client that reaches the upstream: hyper-util's legacy
//! client over an HTTPS-or-HTTP connector, its pool settings, and the
//! CA roots an `https://` upstream is verified against.

use std::time::Duration;

use http::uri::Scheme;
use hyper_rustls::{FixedServerNameResolver, HttpsConnector};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::RootCertStore;
use rustls_pki_types::ServerName;

use super::body::RequestBody;
use crate::config::Config;

/// The upstream's TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamTlsError {
    /// The CA file cannot be read or holds no certificate.
    #[error("proxy.upstream_ca: {}: {message}", path.display())]
    Ca {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        message: String,
    },
    /// No CA certificate was found on the system.
    #[error("upstream: no CA certificates found on this system for an https:// upstream ({0}); set proxy.upstream_ca")]
    NoSystemRoots(String),
    /// The SNI override is not a server name.
    #[error("proxy.upstream_sni: {0:?} is not a server name")]
    Sni(String),
    /// rustls refused the settings.
    #[error("upstream TLS settings: {0}")]
    Rustls(#[from] rustls::Error),
}

pub(super) type Connector = HttpsConnector<HttpConnector>;

/// How pooled upstream connections are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PoolSettings {
    pub(super) idle_timeout: Duration,
    pub(super) max_idle: usize,
}

impl PoolSettings {
    pub(super) fn client(self, connector: Connector) -> Client<Connector, RequestBody> {
        Client::builder(TokioExecutor::new())
            .pool_idle_timeout(self.idle_timeout)
            .pool_max_idle_per_host(self.max_idle)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(connector)
    }
}

/// The connector to `config`'s upstream: TCP with the connect timeout and
/// no delay; for an `https://` upstream, TLS verified against the roots
/// (the system's or `proxy.upstream_ca`, read here) with the SNI override.
pub(super) fn connector(config: &Config) -> Result<Connector, UpstreamTlsError> {
    let mut http = HttpConnector::new();
    http.set_connect_timeout(Some(config.proxy.connect_timeout));
    http.set_nodelay(true);
    http.enforce_http(false);
    let https = config.upstream.scheme == Scheme::HTTPS;
    let roots = if https {
        upstream_roots(config.upstream.ca_file.as_deref())?
    } else {
        // Never used: an http:// upstream makes no TLS connection.
        RootCertStore::empty()
    };
    let tls = crate::tls::client_config(roots)?;
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    let builder = match &config.upstream.sni {
        Some(name) => {
            let name = ServerName::try_from(name.clone())
                .map_err(|_| UpstreamTlsError::Sni(name.clone()))?;
            builder.with_server_name_resolver(FixedServerNameResolver::new(name))
        }
        None => builder,
    };
    Ok(builder.enable_http1().wrap_connector(http))
}

/// The CA certificates an `https://` upstream is verified against.
fn upstream_roots(ca_file: Option<&std::path::Path>) -> Result<RootCertStore, UpstreamTlsError> {
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(path) => {
            crate::tls::add_pem_roots(&mut roots, path).map_err(|message| {
                UpstreamTlsError::Ca {
                    path: path.to_owned(),
                    message,
                }
            })?;
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found.errors.first().map_or_else(
                    || "none in the usual places".to_owned(),
                    ToString::to_string,
                );
                return Err(UpstreamTlsError::NoSystemRoots(why));
            }
        }
    }
    Ok(roots)
}
