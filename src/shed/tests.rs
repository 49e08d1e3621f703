use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::rules::RuleLists;

fn config() -> ShedConfig {
    ShedConfig {
        max_inflight: 8,
        max_latency: Some(Duration::from_secs(2)),
        status: StatusCode::SERVICE_UNAVAILABLE,
        retry_after: Duration::from_secs(120),
        order: ShedConfig::default_order(),
        max_search_shed: Duration::from_secs(3 * 3600),
        capped_share_permille: 250,
        escalate_after: Duration::from_secs(10),
        calm_after: Duration::from_secs(30),
    }
}

fn reading(in_flight: u64, p90_ms: Option<u64>) -> Reading {
    Reading {
        in_flight,
        latency_p90: p90_ms.map(Duration::from_millis),
    }
}

/// Drives a shedder through `steps` of (seconds since the start, reading),
/// returning (level, change) after each.
fn drive(steps: &[(u64, Reading)]) -> Vec<(u8, Option<Change>)> {
    let config = config();
    let t0 = Instant::now();
    let mut shedder = Shedder::new(t0);
    steps
        .iter()
        .map(|&(at, reading)| {
            let change = shedder.step(&config, 3, Some(2), reading, t0 + Duration::from_secs(at));
            (shedder.level(), change)
        })
        .collect()
}

#[test]
fn pressure_starts_at_once_escalates_by_time_and_holds_in_between() {
    let over = reading(8, None);
    let between = reading(7, None); // 7 > 8 * 3/4: neither over nor calm
    let got = drive(&[
        (0, reading(0, None)),
        (1, over),
        (2, over),     // not yet escalate_after at level 1
        (11, over),    // 10 s at level 1: level 2
        (12, between), // holds
        (40, between), // still holds, however long
        (41, over),    // 30 s since the last change: level 3
        (60, over),    // no level 4
    ]);
    assert_eq!(
        got,
        vec![
            (0, None),
            (1, Some(Change::Started)),
            (1, None),
            (2, Some(Change::Raised(2))),
            (2, None),
            (2, None),
            (3, Some(Change::Raised(3))),
            (3, None),
        ]
    );
}

#[test]
fn latency_alone_is_pressure_and_calm_needs_every_threshold_low() {
    let got = drive(&[
        (0, reading(0, Some(2_000))), // p90 at the threshold
        (1, reading(0, Some(1_600))), // above 3/4 of it: between
        (40, reading(0, Some(1_600))),
        (41, reading(0, Some(1_400))), // below 3/4 of 2 s: calm from here
        (70, reading(0, Some(1_400))),
        (71, reading(0, None)), // 30 s calm: ended
    ]);
    assert_eq!(
        got,
        vec![
            (1, Some(Change::Started)),
            (1, None),
            (1, None),
            (1, None),
            (1, None),
            (0, Some(Change::Ended)),
        ]
    );
}

#[test]
fn calm_lowers_one_tier_per_calm_period_and_pressure_resets_it() {
    let over = reading(100, None);
    let calm = reading(6, None); // 6 <= 8 * 3/4
    let got = drive(&[
        (0, over),
        (10, over),
        (20, over), // level 3
        (21, calm),
        (50, calm),  // 29 s of calm: not yet
        (51, calm),  // 30 s: level 2
        (58, over),  // pressure again, but under escalate_after at level 2
        (62, over),  // 11 s at level 2, but only 4 s of them under pressure
        (68, over),  // 10 s under pressure: level 3
        (69, calm),  // the calm period starts again
        (98, calm),  // 29 s
        (99, calm),  // level 2
        (129, calm), // level 1
        (159, calm), // ended
        (200, calm),
    ]);
    let levels: Vec<u8> = got.iter().map(|(l, _)| *l).collect();
    assert_eq!(levels, [1, 2, 3, 3, 3, 2, 2, 2, 3, 3, 3, 2, 1, 0, 0]);
    assert_eq!(got[8].1, Some(Change::Raised(3)));
    assert_eq!(got[12].1, Some(Change::Lowered(1)));
    assert_eq!(got[13].1, Some(Change::Ended));
}

/// Issue 25: load that returns after a quiet (calm) gap is new pressure;
/// the time since the last change is not, so the next tier waits
/// `escalate_after` of it.
#[test]
fn a_calm_gap_is_not_counted_as_pressure() {
    let over = reading(100, None);
    let calm = reading(0, None);
    let got = drive(&[
        (0, over),  // level 1
        (3, calm),  // the load ends; calm_after (30 s) is not reached
        (16, calm), // still calm
        (16, over), // load returns 13 s later: 16 s since the change
        (25, over), // 9 s under pressure
        (26, over), // 10 s: level 2
    ]);
    let levels: Vec<u8> = got.iter().map(|(l, _)| *l).collect();
    assert_eq!(levels, [1, 1, 1, 1, 1, 2]);
    assert_eq!(got[5].1, Some(Change::Raised(2)));
}

/// Issue 25: the clock steps the level with no request at all; each
/// tier drops `calm_after` after calm began (within one check), not
/// after the first request that comes along.
#[tokio::test(start_paused = true)]
async fn the_clock_ends_shedding_on_an_idle_site() {
    let classifier = Classifier::new(&RuleLists::embedded()).expect("rules");
    let policy = ShedPolicy::new(config(), &classifier).expect("classes");
    let load = Load::new();
    let mut changes = Vec::new();
    let t0 = Instant::now();
    load.tick(&policy, 100, t0, |c, _, l| changes.push((c, l)));
    assert_eq!(load.level(), 1);
    // The load ends at t0 + 1 s; from then on only the clock ticks,
    // every CHECK_EVERY, with nothing in flight.
    let mut now = t0;
    let mut ended_at = None;
    while now < t0 + Duration::from_secs(40) {
        tokio::time::advance(CHECK_EVERY).await;
        now = Instant::now();
        let in_flight = if now < t0 + Duration::from_secs(1) {
            100
        } else {
            0
        };
        load.tick(&policy, in_flight, now, |c, _, l| {
            changes.push((c, l));
            ended_at = Some(now);
        });
    }
    assert_eq!(load.level(), 0);
    assert_eq!(changes, [(Change::Started, 1), (Change::Ended, 0)]);
    let ended = ended_at.expect("ended") - t0;
    // Calm began at 1 s (first check after it); calm_after is 30 s.
    assert!(
        ended >= Duration::from_secs(31) && ended <= Duration::from_secs(31) + CHECK_EVERY * 2,
        "{ended:?}"
    );
}

/// The search-engine cap, on a test clock: after `max_search_shed` of
/// continuous shedding of the search tier, search engines are capped (let
/// through at a share); the cap ends with the shedding of that tier.
#[test]
fn search_engines_are_capped_after_max_search_shed() {
    let config = config();
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let over = reading(100, None);
    let calm = reading(0, None);
    let mut shedder = Shedder::new(t0);
    shedder.step(&config, 3, Some(2), over, at(0));
    shedder.step(&config, 3, Some(2), over, at(10));
    assert_eq!(
        shedder.step(&config, 3, Some(2), over, at(20)),
        Some(Change::Raised(3))
    );
    assert!(!shedder.search_capped());
    // Three hours less a second of search shedding: not yet.
    assert_eq!(
        shedder.step(&config, 3, Some(2), over, at(20 + 3 * 3600 - 1)),
        None
    );
    assert!(!shedder.search_capped());
    assert_eq!(
        shedder.step(&config, 3, Some(2), over, at(20 + 3 * 3600)),
        Some(Change::SearchCapped)
    );
    assert!(shedder.search_capped());
    // Reported once.
    assert_eq!(
        shedder.step(&config, 3, Some(2), over, at(20 + 3 * 3600 + 1)),
        None
    );
    // Calm: the search tier is no longer shed, the cap ends with it.
    let t = 20 + 3 * 3600 + 1;
    shedder.step(&config, 3, Some(2), calm, at(t));
    assert_eq!(
        shedder.step(&config, 3, Some(2), calm, at(t + 30)),
        Some(Change::Lowered(2))
    );
    assert!(!shedder.search_capped());
}

#[test]
fn the_capped_share_lets_that_share_of_search_requests_through() {
    let classifier = Classifier::new(&RuleLists::embedded()).expect("rules");
    let mut config = config();
    config.max_search_shed = Duration::from_millis(1);
    config.escalate_after = Duration::from_millis(1);
    let policy = ShedPolicy::new(config, &classifier).expect("classes");
    let load = Load::new();
    let t0 = Instant::now();
    let mut now = t0;
    // Raise the level to 3 and past the cap: one check per CHECK_EVERY.
    for _ in 0..6 {
        now += CHECK_EVERY;
        load.pressure(&policy, 100, now, |_, _, _| {});
    }
    assert_eq!(load.level(), 3);
    let google = classifier.classify(Some(b"Mozilla/5.0 (compatible; Googlebot/2.1)"));
    let passed = (0..1000)
        .filter(|_| {
            let p = load.pressure(&policy, 100, now, |_, _, _| {});
            policy
                .decide(classifier.class_of(&google, false), p)
                .is_none()
        })
        .count();
    assert_eq!(passed, 250);
}

#[test]
fn the_window_reports_the_90th_percentile_of_the_last_ten_seconds() {
    let window = LatencyWindow::new();
    assert_eq!(window.p90(0), None);
    for i in 0..100u64 {
        // 90 fast, 10 slow, spread over seconds 0..=4.
        let ms = if i % 10 == 9 { 4_000 } else { 40 };
        window.record(i / 20, Duration::from_millis(ms));
    }
    assert_eq!(window.p90(4), Some(Duration::from_millis(50)));
    for _ in 0..20 {
        window.record(5, Duration::from_millis(4_000));
    }
    // 30 slow of 120: the 90th percentile is slow.
    assert_eq!(window.p90(5), Some(Duration::from_millis(5_000)));
    // Later the first seconds leave the window: at 14 only second 5's
    // 20 slow samples are left, at 15 none.
    assert_eq!(window.p90(14), Some(Duration::from_millis(5_000)));
    assert_eq!(window.p90(15), None);
    // Fewer than MIN_SAMPLES say nothing.
    for _ in 0..MIN_SAMPLES - 1 {
        window.record(20, Duration::from_millis(9_000));
    }
    assert_eq!(window.p90(20), None);
}

#[test]
fn unknown_classes_in_the_order_are_refused() {
    let classifier = Classifier::new(&RuleLists::embedded()).expect("rules");
    let mut config = config();
    config.order = vec![vec!["library".into(), "serach".into()]];
    let err = ShedPolicy::new(config, &classifier).expect_err("typo");
    let text = err.to_string();
    assert!(
        text.contains("\"serach\"") && text.contains("search"),
        "{text}"
    );
}

#[test]
fn each_class_has_its_tier_by_id() {
    let classifier = Classifier::new(&RuleLists::embedded()).expect("rules");
    let classes = classifier.classes();
    let policy = ShedPolicy::new(config(), &classifier).expect("default order");
    assert_eq!(policy.tiers.len(), classes.len());
    let tier = |name: &str| policy.tiers[classes.find(name).expect(name).index()].index;
    assert_eq!(tier("human"), NEVER.index);
    for (i, names) in ShedConfig::default_order().iter().enumerate() {
        for name in names {
            assert_eq!(tier(name), i as u8, "{name}");
        }
    }
    assert!(policy.tiers[ClassId::UNKNOWN.index()].index == 0);
    assert!(policy.tiers[ClassId::NO_USER_AGENT.index()].index == 0);
    assert!(policy.tiers[classes.find("search").expect("search").index()].search);
    // Humans are never shed, at any level.
    let all = Pressure {
        level: u8::MAX,
        search_pass: Some(false),
    };
    assert_eq!(policy.decide(ClassId::HUMAN, all), None);
    assert!(policy.decide(ClassId::UNKNOWN, all).is_some());
}

#[test]
fn human_is_no_class_of_the_order() {
    let classifier = Classifier::new(&RuleLists::embedded()).expect("rules");
    let mut config = config();
    config.order = vec![vec!["human".into()]];
    let err = ShedPolicy::new(config, &classifier).expect_err("human");
    assert!(
        err.to_string()
            .contains("(one of: unknown, no-user-agent, "),
        "{err}"
    );
}
