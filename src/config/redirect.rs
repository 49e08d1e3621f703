//! `[redirect]` and `[block]`: canonical redirects and action parameters.

use serde::Deserialize;

use crate::canonical::{HttpsRedirect, WwwMode};

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
