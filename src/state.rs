//! The state crawlgate runs with, by lifetime, and the one place that
//! builds it: the process's (created once at start), and what a reload
//! replaces (built from a [`crate::config::Config`] at start and at each
//! reload).

pub mod process;
pub mod snapshot;

pub use process::{Health, Observer};
pub use snapshot::{ClassValues, ConnSettings, SetupError, Shared, Verify};
