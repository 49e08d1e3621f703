//! `[redirect]` and `[block]`: canonical redirects and action parameters.

use serde::Deserialize;

use super::{invalid, is_hostname, ConfigError};
use crate::query::MAX_NAME_LEN;

/// `[block]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBlock {
    /// Parameter names that make a URL an action.
    pub params: Option<Vec<String>>,
}

/// `[redirect]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRedirect {
    /// `apex`, `www` or `off`.
    pub www: Option<String>,
    /// Remove a leading `/www` path segment.
    pub strip_www_path: Option<bool>,
    /// Only redirect to these hosts (empty: any).
    pub hosts: Option<Vec<String>>,
}

/// Canonical redirect settings.
#[derive(Clone, Debug)]
pub struct RedirectConfig {
    /// Send plain-HTTP requests to HTTPS (in the same hop as the other
    /// fixes).
    pub https: Option<HttpsRedirect>,
    /// Which host form is canonical.
    pub www: WwwMode,
    /// Remove a leading `/www` segment.
    pub strip_www_path: bool,
    /// Canonical hosts allowed as redirect targets, lowercase, without a
    /// trailing dot; empty = any.
    pub hosts: Vec<Box<str>>,
}

/// Which host form is canonical.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WwwMode {
    /// `www.example.com` → `example.com` (the default).
    Apex,
    /// `example.com` → `www.example.com`.
    Www,
    /// Hosts are left alone.
    Off,
}

/// Plain-HTTP requests are redirected to HTTPS, in the same hop as the
/// host and path fixes. ACME HTTP-01 challenges
/// (`/.well-known/acme-challenge/…`) stay on plain HTTP so that a
/// certificate can be issued before HTTPS works.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpsRedirect {
    /// The port written in the Location; `None` for 443.
    pub port: Option<u16>,
}

/// `[block]`, validated: the parameter names (each 1 to
/// [`MAX_NAME_LEN`] bytes, none a query delimiter).
pub(super) fn blocked_params(raw: RawBlock) -> Result<Vec<Box<str>>, ConfigError> {
    let RawBlock { params } = raw;
    let params = params.unwrap_or_else(|| vec!["do".to_owned(), "_fid".to_owned()]);
    for p in &params {
        if p.is_empty() || p.len() > MAX_NAME_LEN {
            return Err(invalid(
                "block.params",
                format!("{p:?}: a name must be 1 to {MAX_NAME_LEN} bytes"),
            ));
        }
        if p.bytes()
            .any(|b| matches!(b, b'&' | b'=' | b'[' | b'#') || b <= b' ')
        {
            return Err(invalid(
                "block.params",
                format!(
                    "{p:?}: a name cannot contain '&', '=', '[', '#', spaces or control characters"
                ),
            ));
        }
    }
    Ok(params.into_iter().map(String::into_boxed_str).collect())
}

/// `[redirect]`, validated, with the redirect to HTTPS that `[tls]` asks
/// for.
pub(super) fn redirect_config(
    raw: RawRedirect,
    https: Option<HttpsRedirect>,
) -> Result<RedirectConfig, ConfigError> {
    let RawRedirect {
        www,
        strip_www_path,
        hosts,
    } = raw;
    let www = match www.as_deref().unwrap_or("apex") {
        "apex" => WwwMode::Apex,
        "www" => WwwMode::Www,
        "off" => WwwMode::Off,
        other => {
            return Err(invalid(
                "redirect.www",
                format!("{other:?} is not one of \"apex\", \"www\", \"off\""),
            ))
        }
    };
    let mut allowed = Vec::new();
    for host in hosts.unwrap_or_default() {
        let h = host.trim_end_matches('.').to_ascii_lowercase();
        if !is_hostname(h.as_bytes()) {
            return Err(invalid(
                "redirect.hosts",
                format!("{host:?} is not a host name (no scheme, port or path)"),
            ));
        }
        allowed.push(h.into_boxed_str());
    }
    Ok(RedirectConfig {
        https,
        www,
        strip_www_path: strip_www_path.unwrap_or(true),
        hosts: allowed,
    })
}
