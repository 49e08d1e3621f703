//! `[tls]`: the HTTPS listener, its certificates and its headers.

use std::net::SocketAddr;
use std::path::PathBuf;

use http::header::HeaderValue;
use serde::Deserialize;

use super::HttpsRedirect;
use super::{invalid, is_hostname, ConfigError};

/// `[tls]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    /// HTTPS listen address; none = no TLS listener.
    pub listen: Option<String>,
    /// Certificate folder.
    pub certs: Option<PathBuf>,
    /// Host whose certificate answers clients without SNI.
    pub default_name: Option<String>,
    /// Offer HTTP/2 by ALPN.
    pub http2: Option<bool>,
    /// Redirect plain-HTTP requests to HTTPS.
    pub redirect_http: Option<bool>,
    /// Strict-Transport-Security value for HTTPS responses.
    pub hsts: Option<String>,
    /// Refuse to start (or reload) when any certificate pair is unusable,
    /// instead of skipping it.
    pub strict: Option<bool>,
}

/// The HTTPS listener's certificates and headers, validated (the
/// certificates are loaded by [`crate::tls::CertStore::load`]; the address
/// and ALPN are in [`super::Restart`]).
#[derive(Clone, Debug)]
pub struct TlsConfig {
    /// Certificate folder.
    pub certs_dir: PathBuf,
    /// Host whose certificate answers clients without SNI.
    pub default_name: Option<String>,
    /// `Strict-Transport-Security` added to HTTPS responses that lack one.
    pub hsts: Option<HeaderValue>,
    /// Fail on any unusable certificate pair instead of skipping it.
    pub strict: bool,
}

/// The TLS listener as (address, HTTP/2 by ALPN, the rest), and the
/// redirect to it.
pub(super) type TlsListener = (SocketAddr, bool, TlsConfig);

pub(super) fn tls_config(
    raw: RawTls,
) -> Result<(Option<TlsListener>, Option<HttpsRedirect>), ConfigError> {
    let RawTls {
        listen,
        certs,
        default_name,
        http2,
        redirect_http,
        hsts,
        strict,
    } = raw;
    let hsts = match hsts.filter(|h| !h.is_empty()) {
        None => None,
        Some(h) => {
            let ok = h
                .get(..8)
                .is_some_and(|p| p.eq_ignore_ascii_case("max-age="));
            match HeaderValue::from_str(&h) {
                Ok(value) if ok => Some(value),
                _ => {
                    return Err(invalid(
                        "tls.hsts",
                        format!(
                        "{h:?} is not a Strict-Transport-Security value like \"max-age=31536000\""
                    ),
                    ))
                }
            }
        }
    };
    let Some(listen) = listen else {
        if redirect_http == Some(true) {
            return Err(invalid("tls.redirect_http", "needs tls.listen"));
        }
        if hsts.is_some() {
            return Err(invalid("tls.hsts", "needs tls.listen"));
        }
        return Ok((None, None));
    };
    let listen: SocketAddr = listen.parse().map_err(|_| {
        invalid(
            "tls.listen",
            format!("{listen:?} is not an address like 0.0.0.0:443"),
        )
    })?;
    if let Some(name) = &default_name {
        let host = name.trim_end_matches('.');
        if !is_hostname(host.as_bytes()) {
            return Err(invalid(
                "tls.default_name",
                format!("{name:?} is not a host name"),
            ));
        }
    }
    let https = redirect_http.unwrap_or(false).then(|| HttpsRedirect {
        port: (listen.port() != 443).then_some(listen.port()),
    });
    let tls = TlsConfig {
        certs_dir: certs.unwrap_or_else(|| PathBuf::from("certs")),
        default_name: default_name.map(|n| n.trim_end_matches('.').to_ascii_lowercase()),
        hsts,
        strict: strict.unwrap_or(false),
    };
    Ok((Some((listen, http2.unwrap_or(true), tls)), https))
}
