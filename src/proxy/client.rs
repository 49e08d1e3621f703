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
    /// The upstream's host is not a name a certificate can show.
    #[error("upstream: {0:?} is not a server name a certificate can show; set proxy.upstream_sni")]
    Host(String),
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

/// An `https://` upstream's TLS settings: the client's, verified against
/// the roots (the system's or `proxy.upstream_ca`, read here), no ALPN
/// protocol set yet (each client offers its own); and the SNI override,
/// if any.
pub(super) struct UpstreamTls {
    pub(super) config: rustls::ClientConfig,
    pub(super) sni: Option<ServerName<'static>>,
}

impl UpstreamTls {
    /// `config`'s, or `None` for an `http://` upstream.
    pub(super) fn of(config: &Config) -> Result<Option<Self>, UpstreamTlsError> {
        if config.upstream.scheme != Scheme::HTTPS {
            return Ok(None);
        }
        let roots = upstream_roots(config.upstream.ca_file.as_deref())?;
        let tls = crate::tls::client_config(roots)?;
        let sni = match &config.upstream.sni {
            Some(name) => Some(
                ServerName::try_from(name.clone())
                    .map_err(|_| UpstreamTlsError::Sni(name.clone()))?,
            ),
            None => None,
        };
        Ok(Some(Self { config: tls, sni }))
    }

    /// The name the upstream's certificate must show: the SNI override,
    /// else `host` (a name or an address, brackets removed).
    pub(super) fn server_name(&self, host: &str) -> Result<ServerName<'static>, UpstreamTlsError> {
        match &self.sni {
            Some(name) => Ok(name.clone()),
            None => ServerName::try_from(host.to_owned())
                .map_err(|_| UpstreamTlsError::Host(host.to_owned())),
        }
    }
}

/// The connector to `config`'s upstream: TCP with the connect timeout and
/// no delay; for an `https://` upstream, TLS with `tls`'s settings.
pub(super) fn connector(
    config: &Config,
    tls: Option<&UpstreamTls>,
) -> Result<Connector, UpstreamTlsError> {
    let mut http = HttpConnector::new();
    http.set_connect_timeout(Some(config.proxy.connect_timeout));
    http.set_nodelay(true);
    http.enforce_http(false);
    let settings = match tls {
        Some(tls) => tls.config.clone(),
        // Never used: an http:// upstream makes no TLS connection.
        None => crate::tls::client_config(RootCertStore::empty())?,
    };
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(settings)
        .https_or_http();
    let builder = match tls.and_then(|tls| tls.sni.clone()) {
        Some(name) => builder.with_server_name_resolver(FixedServerNameResolver::new(name)),
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
