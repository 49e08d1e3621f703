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
}

/// `[admin]`, validated: the listener's address, when on.
pub(super) fn admin_listen(raw: RawAdmin) -> Result<Option<SocketAddr>, ConfigError> {
    let RawAdmin { listen } = raw;
    listen
        .map(|a| {
            a.parse::<SocketAddr>().map_err(|_| {
                invalid(
                    "admin.listen",
                    format!("{a:?} is not an address like 127.0.0.1:9090"),
                )
            })
        })
        .transpose()
}
