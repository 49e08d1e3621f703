//! The crawl report: per robot, what it fetched and what that cost, from
//! access-log lines (`crawlgate report`) or from the running proxy.
//!
//! [`line`] reads a log line into an [`line::Entry`]; the tally counts
//! entries in one pass and in bounded memory; [`model::Report`] is the
//! finished report that every output form renders.

pub mod html;
pub mod line;
pub mod model;
pub mod text;
