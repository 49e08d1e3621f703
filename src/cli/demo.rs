//! `crawlgate demo`: the proxy in front of the built-in sample site, on a
//! runtime of its own, until the shutdown future completes.

use std::future::Future;
use std::net::SocketAddr;

use super::run::RunError;
use super::{init_tracing, Failure, Outcome};

/// Runs [`crate::demo::run`] on `listen` until `shutdown` completes.
pub fn run(listen: Option<SocketAddr>, shutdown: impl Future<Output = ()>) -> Outcome {
    let _log = init_tracing();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|err| Failure::chain(1, &RunError::Runtime(err)))?;
    // The hints call the binary that is running, wherever it is.
    let program = std::env::current_exe()
        .map(|p| crate::demo::shell_quote(&p.display().to_string()))
        .unwrap_or_else(|_| "crawlgate".to_owned());
    rt.block_on(crate::demo::run(listen, &program, shutdown))
        .map_err(|err| Failure::chain(1, &err))
}
