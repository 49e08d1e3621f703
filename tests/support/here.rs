//! crawlgate on the test's own runtime: [`Here`] starts it as
//! [`super::Proxy`] does, through the library entry production uses, but
//! with its workers, its admin listener and its clocks as tasks beside
//! the test's ([`crawlgate::run::Runner::run_here`]), so that a paused
//! clock (`#[tokio::test(start_paused = true)]`, moved on with
//! `tokio::time::advance`) governs every timer of crawlgate: the
//! connections' header-read, keep-alive, HTTP/2 and tunnel idle timeouts
//! as well as the request path's (cache ages, shedding, DNS lookups).
//! [`super::Proxy`] runs its workers on threads with runtimes of their
//! own, whose clocks a test cannot pause.
//!
//! Under a paused clock Tokio moves time on by itself whenever the
//! runtime has nothing to do, also while a task waits on a socket that
//! another thread or process serves: every party whose timing matters
//! (upstream, DNS server, client) runs on the test's runtime too, and a
//! `timeout` of the test's own guards against a hang in virtual time only.

use std::ops::Deref;

use crawlgate::config::Overrides;

use super::Proxy;

/// A crawlgate served on the test's runtime, on free loopback ports, with
/// one worker unless the overrides ask for more; otherwise a [`Proxy`].
pub struct Here {
    proxy: Proxy,
}

impl Here {
    /// Starts crawlgate with `toml` as its config file and `upstream`.
    pub async fn start(toml: &str, upstream: &str) -> Self {
        Self::start_with(
            toml,
            Overrides {
                upstream: Some(upstream.to_owned()),
                ..Overrides::default()
            },
        )
        .await
    }

    /// Starts crawlgate with `toml` as its config file and `overrides`.
    pub async fn start_with(toml: &str, overrides: Overrides) -> Self {
        let proxy = Proxy::launch(toml, overrides, true).await;
        Self { proxy }
    }

    /// Drains and waits for the server to return (see [`Proxy::stop`]).
    pub async fn stop(self) {
        self.proxy.stop().await;
    }
}

impl Deref for Here {
    type Target = Proxy;

    fn deref(&self) -> &Proxy {
        &self.proxy
    }
}
