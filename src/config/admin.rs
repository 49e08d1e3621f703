//! `[admin]`: the metrics and health listener.

use std::net::SocketAddr;

use serde::Deserialize;

use super::{invalid, ConfigError};

/// `[admin]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    /// Address of the metrics and health listener (off when absent).
    pub listen: Option<String>,
    /// Keep the live crawl report for `/report` (default true).
    pub report: Option<bool>,
}

/// `[admin]`, validated: the listener's address, when on, and whether
/// the live crawl report is kept (only with a listener to read it).
pub(super) fn admin_config(raw: RawAdmin) -> Result<(Option<SocketAddr>, bool), ConfigError> {
    let RawAdmin { listen, report } = raw;
    let listen = listen
        .map(|a| {
            a.parse::<SocketAddr>().map_err(|_| {
                invalid(
                    "admin.listen",
                    format!("{a:?} is not an address like 127.0.0.1:9090"),
                )
            })
        })
        .transpose()?;
    Ok((listen, listen.is_some() && report.unwrap_or(true)))
}
