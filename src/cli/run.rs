//! `crawlgate` without a subcommand: the proxy, from flags and config to
//! a drain or an exit, with the control events `main` maps signals to.

use std::future::Future;
use std::io;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::{init_tracing, systemd_state_dir, Failure, Outcome, RunArgs};
use super::{EXIT_CONFIG, EXIT_INTERRUPTED};
use crate::config::Overrides;
use crate::live::Live;
use crate::run::{BindError, Control, Runner, Stopped};

/// Why the proxy stopped with an error once its config was loaded.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The runtime's threads or its I/O driver could not be set up.
    #[error("cannot start the runtime")]
    Runtime(#[source] io::Error),
    /// The signal handlers could not be installed.
    #[error("cannot install a signal handler")]
    Signals(#[source] io::Error),
    /// A listener could not be set up.
    #[error(transparent)]
    Bind(#[from] BindError),
    /// Serving failed.
    #[error(transparent)]
    Serve(#[from] io::Error),
}

/// Loads the config (flags over the file), binds and serves until a drain
/// completes (success) or an exit cuts it short ([`EXIT_INTERRUPTED`]).
///
/// `listen` is called on the control thread's runtime before anything is
/// bound, so that no signal meets its default action once a listener is:
/// it returns the future that sends the [`Control`] events (the signals'
/// meaning, in `main`).
pub fn proxy<L, F>(args: RunArgs, listen: L) -> Outcome
where
    L: FnOnce(mpsc::Sender<Control>) -> io::Result<F>,
    F: Future<Output = ()>,
{
    let _log = init_tracing();
    let overrides = Overrides {
        default_state_dir: systemd_state_dir(),
        ..args.overrides
    };
    let live = match Live::start(args.config, overrides) {
        Ok(live) => Arc::new(live),
        Err(err) => return Err(Failure::chain(EXIT_CONFIG, &err)),
    };
    match serve(live, listen) {
        Ok(Stopped::Drained) => Ok(()),
        Ok(Stopped::Exited) => {
            // The binary's target, like the signals' own lines.
            tracing::warn!(
                target: "crawlgate",
                "second shutdown signal: exiting without draining"
            );
            Err(Failure::silent(EXIT_INTERRUPTED))
        }
        Err(err) => Err(Failure::chain(1, &err)),
    }
}

fn serve<L, F>(live: Arc<Live>, listen: L) -> Result<Stopped, RunError>
where
    L: FnOnce(mpsc::Sender<Control>) -> io::Result<F>,
    F: Future<Output = ()>,
{
    // This thread only turns signals into control events; the workers run
    // their own event loops.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    let stopped = rt.block_on(async {
        let (events, control) = mpsc::channel(4);
        // Handlers first, so that no signal meets the default action
        // once anything is bound.
        let signals = listen(events).map_err(RunError::Signals)?;
        let server = Runner::bind(live)?;
        tokio::select! {
            stopped = server.run(control) => Ok(stopped?),
            () = signals => Ok(Stopped::Exited),
        }
    });
    // Without waiting for the worker threads: after an exit they may
    // still hold connections.
    rt.shutdown_background();
    stopped
}
