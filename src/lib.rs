//! crawlgate: an edge reverse proxy that keeps robots off action links,
//! sends one canonical redirect for duplicate addresses, synthesizes
//! robots.txt and forwards everything else, streaming, to an unchanged site.
//!
//! # Life of a request
//!
//! 1. [`run::Runner`] binds the listeners and starts one event loop per
//!    worker; [`server`] accepts a connection there (plain, or TLS with the
//!    certificate [`tls`] picks by SNI) and runs hyper's HTTP/1 or HTTP/2
//!    server on it with [`service::handle`] as the service, reading the
//!    current [`state`] (the snapshot a reload swaps, and the worker's own
//!    part derived from it).
//! 2. `handle` classifies the User-Agent, [`verify`]s a robot's claim to a
//!    crawler operator (a table lookup; DNS, bounded in time, only where
//!    the ranges do not settle it), borrows the request's method,
//!    authority, path, query and User-Agent into [`policy::Facts`] and calls
//!    [`policy::decide_classified`], a pure function: refuse a spoofed claim
//!    or a refused AI crawler, block a bot's action URL
//!    ([`query`] knows how PHP reads parameter names), redirect to the
//!    [`canonical`] address, serve [`robots`].txt, [`shed`] a robot while
//!    the upstream is under pressure (the pressure is a fact handed in),
//!    or forward.
//! 3. A synthetic decision becomes a [`response`]; `Forward` goes through
//!    [`proxy::Upstream`], which rewrites headers and streams both bodies.
//!    An HTTP/1.1 upgrade (WebSocket) the upstream accepts with 101 is
//!    spliced both ways by [`tunnel`] in the connection's own task.
//! 4. Each request's [`outcome::Outcome`] is recorded when its response
//!    body is done: counted, and written to the process's access log
//!    ([`state::Process`]).
//!
//! # Layout
//!
//! * [`config`]: TOML file + flags → validated [`config::Config`].
//! * [`rules`]: the token lists in `rules/` (embedded or from a folder).
//! * [`classify`], [`query`], [`canonical`], [`robots`], [`policy`]: the
//!   decision, with no I/O (robots checks one file's existence); [`shed`]:
//!   the pure shedding state machine and the process-wide load tracker
//!   that feeds it; [`cache`]: the robots-only cache, and [`validators`]
//!   (ETags, 304s) for what crawlgate serves itself; [`verify`]: whether
//!   a robot is the crawler it claims (the operators' published IP ranges
//!   as a lookup table, reverse-then-forward DNS), with the range lists'
//!   store and refresh.
//! * [`service`], [`proxy`], [`response`], [`server`]: the network side;
//!   [`framing`] refuses request heads an upstream could read differently.
//! * [`state`]: the process's state, the snapshot a reload replaces, each
//!   worker's own part, and where they are built.
//! * [`tls`]: the certificate folder and the SNI resolver; [`live`]: the
//!   running state and its reload; [`run`]: the one entry that binds,
//!   serves and obeys control events (reload, drain, exit), used by
//!   [`cli::run`] (with the signals `main` maps to them), `demo` and the
//!   tests.
//! * [`sitemap`]: sitemap sets built from the site's data and written whole
//!   (`crawlgate sitemap build`), their index, and the folder they live in.
//! * [`demo`]: a sample site behind the proxy, for `crawlgate demo`.
//! * [`cli`]: the command line (clap's types) and each subcommand's work
//!   and report; `main` parses it and maps signals and exit codes.
//! * [`logging`]: the `RUST_LOG` filter and the limiter for repeated lines.

pub mod access_log;
pub mod admin;
pub mod cache;
pub mod canonical;
pub mod classify;
pub mod cli;
pub mod clock;
pub mod config;
pub mod demo;
pub mod framing;
pub mod live;
pub mod logging;
pub mod metrics;
pub mod observe;
pub mod outcome;
pub mod policy;
pub mod proxy;
pub mod query;
pub mod response;
pub mod robots;
pub mod route;
pub mod rules;
pub mod run;
pub mod server;
pub mod service;
pub mod shed;
pub mod sitemap;
pub mod state;
#[doc(hidden)]
pub mod testing;
pub mod tls;
pub mod tunnel;
pub mod validators;
pub mod verify;
