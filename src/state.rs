//! The state crawlgate runs with, one type per lifetime, and the one
//! place that builds them:
//!
//! * [`Process`]: created once at start, kept across reloads (metrics,
//!   health, the access log's writer, the upstream's load, the range
//!   lists, and the robots, DNS and key-directory caches);
//! * [`Snapshot`]: built from a [`crate::config::Config`] and the process
//!   at start and at each reload, which replaces it whole in the one
//!   [`Current`] swap;
//! * [`Worker`]: a worker thread's own part (its upstream connection
//!   pool, its resolver, its HTTPS client), derived from the snapshot in
//!   effect on that worker's thread ([`WorkerSlot`]).

pub mod process;
pub mod snapshot;
pub mod worker;

pub use process::{Caches, Health, Process};
pub use snapshot::{ClassValues, ConnSettings, SetupError, Snapshot, Verify};
pub use worker::{Current, Worker, WorkerSlot};
