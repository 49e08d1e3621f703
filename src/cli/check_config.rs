//! `crawlgate check-config FILE`: the checks of a start, without its side
//! effects, and the one-line summary with the certificates' notes.

use std::path::Path;
use std::sync::Arc;

use super::{systemd_state_dir, Failure, Outcome, EXIT_CONFIG};
use crate::config::Overrides;
use crate::tls::certificate_notes;

/// The checks of a start without its side effects: `crate::live::load`
/// is what `Live::start` runs before it creates the state folder and opens
/// the access log, so what passes here starts (ports aside).
pub fn run(file: &Path) -> Outcome {
    let process = Arc::new(crate::state::Process::new());
    let overrides = Overrides {
        default_state_dir: systemd_state_dir(),
        ..Overrides::default()
    };
    match crate::live::load(Some(file), &overrides, &process, true) {
        Ok(loaded) => {
            let config = loaded.config;
            let tls = config
                .restart
                .tls_listen
                .map(|listen| {
                    let n = loaded.certs.as_ref().map_or(0, |c| c.loaded.len());
                    let plural = if n == 1 { "" } else { "s" };
                    format!(", tls {listen} with {n} certificate{plural}")
                })
                .unwrap_or_default();
            println!(
                "{}: ok (listen {}{tls}, upstream {}://{}, mode {})",
                file.display(),
                config.restart.listen,
                config.upstream.scheme,
                config.upstream.authority,
                config.mode.as_str(),
            );
            for (warning, line) in loaded
                .certs
                .as_ref()
                .map(certificate_notes)
                .unwrap_or_default()
            {
                let mark = if warning { "warning: " } else { "" };
                println!("  {mark}{line}");
            }
            Ok(())
        }
        Err(err) => Err(Failure::chain(EXIT_CONFIG, &err)),
    }
}
