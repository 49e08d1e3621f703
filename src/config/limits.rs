//! `[limits]`: bounds on what a client may send.

use std::time::Duration;

use serde::Deserialize;

/// `[limits]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Bytes of request line plus headers.
    pub max_header_bytes: Option<usize>,
    /// Number of request headers.
    pub max_headers: Option<usize>,
    /// Bytes of the request-target.
    pub max_uri_bytes: Option<usize>,
    /// Concurrent client connections.
    pub max_connections: Option<usize>,
    /// Bytes of a request body (0 = no limit).
    pub max_body_bytes: Option<u64>,
    /// Longest pause inside an upstream response body.
    pub upstream_body_idle_timeout: Option<String>,
}

/// Resource limits, validated.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Bytes of a request head as [`crate::framing::head_len`] counts
    /// them, 8 KiB to 16 MiB.
    pub max_header_bytes: usize,
    /// Number of request headers.
    pub max_headers: usize,
    /// Bytes of the request-target.
    pub max_uri_bytes: usize,
    /// Bytes of a request body; `None` = no limit.
    pub max_body_bytes: Option<u64>,
    /// Longest pause inside an upstream response body.
    pub upstream_body_idle_timeout: Duration,
}
