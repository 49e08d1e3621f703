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
//! # Layers
//!
//! Imports point down this table, never up: a module names only modules
//! of its own row or of the rows below it (`tests/layers.rs` reads this
//! table and every `crate::` path of `src/`, and fails on an upward import
//! or a circle).
//!
//! | layer | modules |
//! | --- | --- |
//! | 10. entry: the command line, the one run loop and its control events | [`cli`], [`run`], [`demo`] |
//! | 9. server: listeners, TLS and HTTP/1, HTTP/2 connections; the admin listener | [`server`], [`admin`] |
//! | 8. service: a request through decision, forwarding and answer; its record finished | [`service`], [`observe`] |
//! | 7. state: process, snapshot and worker state; loading and reload | [`state`], [`live`] |
//! | 6. the record: what a request was and what happened; the access-log writer; the crawl report | [`outcome`], [`access_log`], [`report`] |
//! | 5. answers and forwarding: the upstream client, responses, the robots cache, tunnels | [`proxy`], [`response`], [`cache`], [`tunnel`] |
//! | 4. the decision: pure, from facts to a decision | [`policy`], [`robots`] |
//! | 3. what the decision reads from the process: metrics, certificates, crawler verification | [`metrics`], [`tls`], [`verify`] |
//! | 2. classes and request shapes | [`classify`], [`canonical`], [`framing`], [`http1`], [`sitemap`], [`shed`] |
//! | 1. values and config sections | [`config`], [`rules`], [`query`], [`route`], [`validators`], [`clock`], [`logging`], [`testing`] |
//!
//! * [`config`]: TOML file + flags → validated [`config::Config`], one
//!   file per section; [`rules`]: the token lists in `rules/`; [`route`]:
//!   what was done with a request, as counted and logged; [`clock`]:
//!   clocks in atomics; [`validators`]: ETags and 304s.
//! * [`classify`]: the User-Agent classifier and the one class table;
//!   [`query`] knows how PHP reads parameter names; [`canonical`]: the
//!   canonical address; [`framing`] refuses request heads an upstream could
//!   read differently; [`http1`] reads HTTP/1.1 heads in place and the
//!   framing of their bodies, strictly; [`shed`]: the pure shedding state machine and the
//!   load tracker that feeds it; [`sitemap`]: sitemap sets built from the
//!   site's data, their index, and the folder they are served from.
//! * [`verify`]: whether a robot is the crawler it claims (the operators'
//!   published ranges as a lookup table, reverse-then-forward DNS, Web Bot
//!   Auth signatures), with the range lists' store and refresh;
//!   [`metrics`]: Prometheus metrics; [`tls`]: the certificate folder and
//!   the SNI resolver.
//! * [`policy`]: the decision, with no I/O; [`robots`]: the synthesized
//!   robots.txt.
//! * [`proxy`]: the upstream client, header rewriting, upstream errors and
//!   their statuses, the streaming bodies; [`response`]: crawlgate's own
//!   answers; [`cache`]: the robots-only cache; [`tunnel`]: upgraded
//!   connections spliced both ways.
//! * [`state`]: what the process owns from start to exit, the snapshot a
//!   reload replaces, each worker's own part, and where they are built;
//!   [`live`]: loading (the same for check-config, start and reload) and
//!   the swap.
//! * [`run`]: the one entry that binds, serves and obeys control events
//!   (reload, drain, exit), used by [`cli::run`] (with the signals `main`
//!   maps to them), [`demo`] and the tests; [`cli`]: the command line and
//!   each subcommand's work and report; [`logging`]: the `RUST_LOG` filter
//!   and the limiter for repeated lines; [`testing`]: helpers for tests.

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
pub mod http1;
pub mod live;
pub mod logging;
pub mod metrics;
pub mod observe;
pub mod outcome;
pub mod policy;
pub mod proxy;
pub mod query;
pub mod report;
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
