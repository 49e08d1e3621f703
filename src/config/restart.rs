//! The settings taken once, at start, which a reload only reports.

use std::net::SocketAddr;
use std::path::PathBuf;

/// The settings the process takes once, at start: the sockets it binds,
/// the threads it runs, the connection cap they share. A reload that
/// changes one reports it ([`Config::restart_needed`]) and keeps the
/// running value; everything else in [`Config`] follows a reload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restart {
    /// Plain-HTTP listen address.
    pub listen: SocketAddr,
    /// HTTPS listen address, when there is a TLS listener.
    pub tls_listen: Option<SocketAddr>,
    /// Offer HTTP/2 by ALPN on the TLS listener (set into its acceptor).
    pub tls_http2: bool,
    /// Worker threads (≥ 1).
    pub workers: usize,
    /// Concurrent client connections across the workers; more wait in the
    /// listen backlog.
    pub max_connections: usize,
    /// The admin listener (metrics, health), when on.
    pub admin_listen: Option<SocketAddr>,
    /// The access-log file; `None` = standard error.
    pub log_file: Option<PathBuf>,
}

impl Restart {
    /// Every setting with its key, as an operator would write it: the one
    /// list [`Config::restart_needed`] compares.
    pub(super) fn entries(&self) -> [(&'static str, String); 7] {
        let none = || "none".to_owned();
        let tls_listen = self.tls_listen.map_or_else(none, |a| a.to_string());
        let admin_listen = self.admin_listen.map_or_else(none, |a| a.to_string());
        let log_file = self
            .log_file
            .as_ref()
            .map_or_else(|| "stderr".to_owned(), |p| p.display().to_string());
        [
            ("listen", self.listen.to_string()),
            ("tls.listen", tls_listen),
            ("tls.http2", self.tls_http2.to_string()),
            ("proxy.workers", self.workers.to_string()),
            ("limits.max_connections", self.max_connections.to_string()),
            ("admin.listen", admin_listen),
            ("log.file", log_file),
        ]
    }
}

#[cfg(test)]
mod tests {
    use crate::config::tests::load;

    #[test]
    fn restart_needed_names_what_a_reload_cannot_change() {
        let old = load("listen = \"127.0.0.1:1\"\n[tls]\nlisten = \"127.0.0.1:2\"").expect("valid");
        let same = load(
            "listen = \"127.0.0.1:1\"\n[tls]\nlisten = \"127.0.0.1:2\"\n[redirect]\nwww = \"off\"",
        )
        .expect("valid");
        assert!(old.restart_needed(&same).is_empty());
        let moved = load("listen = \"127.0.0.1:3\"\n[limits]\nmax_connections = 5").expect("valid");
        let keys: Vec<_> = old
            .restart_needed(&moved)
            .into_iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(
            keys,
            [
                "listen",
                "tls.listen",
                "tls.http2",
                "limits.max_connections"
            ]
        );
    }
}
