//! The settings taken once, at start, which a reload only reports.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Declares [`Restart`] and its [`Restart::entries`] from one list: each
/// setting's field, type, key and how its value is shown, so that a
/// setting cannot be added without its entry.
macro_rules! restart_settings {
    (
        $(#[$struct_doc:meta])*
        pub struct Restart {
            $(
                $(#[$doc:meta])*
                $field:ident: $ty:ty = $key:literal, |$value:ident| $shown:expr
            ),* $(,)?
        }
    ) => {
        $(#[$struct_doc])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct Restart {
            $($(#[$doc])* pub $field: $ty,)*
        }

        impl Restart {
            /// The keys of these settings: what a reload cannot change.
            pub const KEYS: &'static [&'static str] = &[$($key),*];

            /// Every setting with its key, as an operator would write it: the
            /// one list [`super::Config::restart_needed`] compares.
            pub(super) fn entries(&self) -> Vec<(&'static str, String)> {
                vec![$(($key, {
                    let $value = &self.$field;
                    $shown
                })),*]
            }
        }
    };
}

restart_settings! {
    /// The settings the process takes once, at start: the sockets it binds,
    /// the threads it runs, the connection cap they share. A reload that
    /// changes one reports it ([`super::Config::restart_needed`]) and keeps
    /// the running value; everything else in [`super::Config`] follows a
    /// reload.
    pub struct Restart {
        /// Plain-HTTP listen address.
        listen: SocketAddr = "listen", |a| a.to_string(),
        /// HTTPS listen address, when there is a TLS listener.
        tls_listen: Option<SocketAddr> = "tls.listen", |a| or_none(a),
        /// Offer HTTP/2 by ALPN on the TLS listener (set into its acceptor).
        tls_http2: bool = "tls.http2", |on| on.to_string(),
        /// Worker threads (≥ 1).
        workers: usize = "proxy.workers", |n| n.to_string(),
        /// Concurrent client connections across the workers; more wait in the
        /// listen backlog.
        max_connections: usize = "limits.max_connections", |n| n.to_string(),
        /// The admin listener (metrics, health), when on.
        admin_listen: Option<SocketAddr> = "admin.listen", |a| or_none(a),
        /// The access-log file; `None` = standard error.
        log_file: Option<PathBuf> = "log.file", |file| file
            .as_ref()
            .map_or_else(|| "stderr".to_owned(), |p| p.display().to_string()),
    }
}

/// An optional address as a reload reports it.
fn or_none(address: &Option<SocketAddr>) -> String {
    address.map_or_else(|| "none".to_owned(), |a| a.to_string())
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
