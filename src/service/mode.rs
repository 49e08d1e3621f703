//! What is carried out of a decision in each [`Mode`]: in observe mode
//! every synthetic answer gives way to forwarding the request as it came.

use crate::config::Mode;
use crate::policy::Decision;

/// What to do with `decision` in `mode`, and whether that is the decision
/// itself (`enforced`). Enforce mode carries out every decision; observe
/// mode forwards instead of any synthetic answer (block, refused crawler,
/// redirect, robots.txt, sitemap file, shed, cached copy). A `Forward`
/// is carried out in both modes.
pub fn carried_out(decision: Decision, mode: Mode) -> (Decision, bool) {
    match (mode, decision) {
        (Mode::Enforce, decision) | (Mode::Observe, decision @ Decision::Forward) => {
            (decision, true)
        }
        (Mode::Observe, _) => (Decision::Forward, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AiKind;
    use crate::route::Route;
    use crate::shed::Shed;
    use http::StatusCode;

    fn every_decision() -> Vec<Decision> {
        vec![
            Decision::Block { param: 0 },
            Decision::BlockSpoofed,
            Decision::BlockAi(AiKind::Training),
            Decision::Redirect {
                status: StatusCode::MOVED_PERMANENTLY,
                location: "https://example.com/".to_owned(),
            },
            Decision::ServeRobots,
            Decision::ServeSitemap,
            Decision::Shed(Shed {
                status: StatusCode::SERVICE_UNAVAILABLE,
                retry_after: 30,
            }),
            Decision::FromCache { stale: true },
            Decision::Forward,
        ]
    }

    #[test]
    fn enforce_mode_carries_out_every_decision() {
        for decision in every_decision() {
            let route = decision.route();
            let (done, enforced) = carried_out(decision, Mode::Enforce);
            assert!(enforced, "{route:?}");
            assert_eq!(done.route(), route);
        }
    }

    #[test]
    fn observe_mode_forwards_every_request_and_says_what_was_not_done() {
        for decision in every_decision() {
            let route = decision.route();
            let (done, enforced) = carried_out(decision, Mode::Observe);
            assert!(matches!(done, Decision::Forward), "{route:?}");
            assert_eq!(enforced, route == Route::Forward, "{route:?}");
        }
    }
}
