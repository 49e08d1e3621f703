//! The decision: what to do with a request, as a pure function.
//!
//! [`decide`] takes the facts of a request (borrowed from it) and the
//! loaded [`Policy`] and returns a [`Decision`]; it does no I/O and can be
//! tested with tables. The order is the product (docs/how-it-works.md, "What happens to a
//! request"):
//!
//! 1. classify the User-Agent (and, for a robot that claims a crawler
//!    operator, the [`Identity`] verification found, handed in); with
//!    `[verify] spoofed = "block"` a spoofed claim is refused on every URL;
//!    with `[ai] enforce`, a claim to an AI crawler of a refused kind is
//!    refused on every URL but robots.txt, in every verification state;
//! 2. a bot asking for an action URL is blocked (before anything else, so a
//!    robot cannot reach an action through a redirect either);
//! 3. a non-canonical address is redirected, both fixes in one hop;
//! 4. `GET|HEAD /robots.txt` is answered by the proxy, and so is
//!    `GET|HEAD /sitemaps/<name>` when there is a sitemap folder;
//! 5. a robot's request that the robots cache holds fresh is answered from
//!    it ([`crate::cache`]; the lookup is handed in as a [`CacheProbe`],
//!    asked only here, only for robots, and never for a class that must
//!    see the live site, [`LiveClasses`]);
//! 6. a robot whose class is shed under the current [`Pressure`] is
//!    answered 503 (or 429) with `Retry-After` ([`crate::shed`]), or from a
//!    stale cache entry when there is one (a class that must see the live
//!    site never gets one); humans never are, and a spoofed
//!    claim is shed as the unknown robot it is;
//! 7. everything else is forwarded.

use std::sync::Arc;

use http::{Method, StatusCode};

use crate::classify::{ClassId, Classifier, UaClass, Verdict};
use crate::config::{AiConfig, AiKind, BotCacheConfig, RedirectConfig, Spoofed};
use crate::route::Route;
use crate::shed::{robot_class, Pressure, Shed, ShedPolicy, UnknownClass};
use crate::sitemap::SERVED_PATH;
use crate::verify::Identity;
use crate::{canonical, query};

/// What the request path needs, compiled from config and rules. One
/// immutable snapshot; a reload builds a new one.
#[derive(Debug)]
pub struct Policy {
    /// The User-Agent classifier (shared with the access log's writer,
    /// which names classes and rules with it).
    pub classifier: Arc<Classifier>,
    /// Parameter names that make a URL an action.
    pub blocked_params: Vec<Box<str>>,
    /// Canonical redirect settings.
    pub redirect: RedirectConfig,
    /// Shedding robots under pressure, when on.
    pub shed: Option<ShedPolicy>,
    /// What a spoofed crawler claim gets.
    pub spoofed: Spoofed,
    /// The AI-crawler policy, when stated.
    pub ai: Option<AiConfig>,
    /// Whether `/sitemaps/` is served from a sitemap folder.
    pub sitemaps: bool,
    /// The robot classes the robots cache neither answers nor fills.
    pub live_classes: LiveClasses,
}

/// The robot classes that must see the live site (`[bot_cache]
/// live_classes`: uptime monitors, server-to-server callbacks): the robots
/// cache never answers them, fresh, stale or `304`, and their answers
/// never fill it. A per-class table, indexed by [`ClassId`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveClasses(Vec<bool>);

impl LiveClasses {
    /// Compiles `live_classes` (as written, or `None` for the default)
    /// against `classifier`'s classes. A name written that is not a robot
    /// class of the rules is an error; a default name the rules do not
    /// have (a rules folder of its own) is left out.
    pub fn new(
        live_classes: Option<&[Box<str>]>,
        classifier: &Classifier,
    ) -> Result<Self, UnknownClass> {
        let mut live = vec![false; classifier.classes().len()];
        let written = live_classes.is_some();
        let names: Vec<&str> = match live_classes {
            Some(names) => names.iter().map(|n| &**n).collect(),
            None => BotCacheConfig::DEFAULT_LIVE_CLASSES.to_vec(),
        };
        for name in names {
            match robot_class(classifier, name) {
                Ok(id) => live[id.index()] = true,
                Err(unknown) if written => return Err(unknown),
                Err(_) => {}
            }
        }
        Ok(Self(live))
    }

    /// Whether requests of `class` must see the live site (an index, on
    /// the request path).
    pub fn contains(&self, class: ClassId) -> bool {
        self.0.get(class.index()).copied().unwrap_or(false)
    }
}

/// The facts of one request that the decision depends on, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    /// The request method.
    pub method: &'a Method,
    /// `http` or `https`: how the client reached us.
    pub scheme: &'a str,
    /// The request-target's authority, or else the Host header, as received.
    pub authority: Option<&'a str>,
    /// The path, as received.
    pub path: &'a str,
    /// The query, as received, without `?`.
    pub query: Option<&'a str>,
    /// The User-Agent header bytes.
    pub user_agent: Option<&'a [u8]>,
    /// The upstream's load, as shedding sees it (the default: none).
    pub pressure: Pressure,
    /// What the robots cache holds for this request, asked only for a
    /// robot (`None`: no cache).
    pub cache: Option<CacheProbe<'a>>,
    /// What verification found, for a robot that claims a crawler
    /// operator (`None`: no claim, or verification off).
    pub identity: Option<Identity>,
    /// The kind of AI crawler the robot claims to be, if any.
    pub ai: Option<AiKind>,
}

/// What the cache holds for a request, for the decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cached {
    /// Nothing usable (or the request may not use the cache).
    None,
    /// A fresh entry.
    Fresh,
    /// An entry past its freshness but within `max_stale`: only instead
    /// of an error.
    Stale,
}

/// The robots cache's lookup for one request, asked lazily: humans never
/// pay for it.
#[derive(Clone, Copy)]
pub struct CacheProbe<'a>(pub &'a dyn Fn() -> Cached);

impl std::fmt::Debug for CacheProbe<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheProbe")
    }
}

/// What to do with the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Answer 403: a bot asked for an action URL.
    Block {
        /// Index into [`Policy::blocked_params`] of the name it resolved to.
        param: usize,
    },
    /// Answer 403: a spoofed crawler claim, with `spoofed = "block"`.
    BlockSpoofed,
    /// Answer 403: an AI crawler of a kind the site refuses, with
    /// `[ai] enforce`.
    BlockAi(AiKind),
    /// Answer with a redirect to the canonical address.
    Redirect {
        /// 301 for GET/HEAD, 308 otherwise (keeps method and body).
        status: StatusCode,
        /// The absolute canonical URL (still to be checked as a header).
        location: String,
    },
    /// Answer with the synthesized robots.txt.
    ServeRobots,
    /// Answer `GET|HEAD /sitemaps/…` from the sitemap folder.
    ServeSitemap,
    /// Answer 503 or 429 with `Retry-After`: a robot while the upstream is
    /// under pressure.
    Shed(Shed),
    /// Answer a robot from the robots cache.
    FromCache {
        /// A stale entry, in place of a shed answer.
        stale: bool,
    },
    /// Pass the request to the upstream.
    Forward,
}

impl Decision {
    /// What kind of outcome this is: the route the metrics and the access
    /// log name it by.
    pub fn route(&self) -> Route {
        match self {
            Decision::Block { .. } | Decision::BlockSpoofed | Decision::BlockAi(_) => Route::Block,
            Decision::Redirect { .. } => Route::Redirect,
            Decision::ServeRobots => Route::Robots,
            Decision::ServeSitemap => Route::Sitemap,
            Decision::Shed(_) => Route::Shed,
            Decision::FromCache { .. } => Route::Cache,
            Decision::Forward => Route::Forward,
        }
    }
}

/// Decides what to do with the request described by `facts`.
pub fn decide(facts: &Facts<'_>, policy: &Policy) -> (Verdict, Decision) {
    let verdict = policy.classifier.classify(facts.user_agent);
    let spoofed = facts.identity == Some(Identity::Spoofed);
    let class = policy.classifier.class_of(&verdict, spoofed);
    let decision = decide_classified(verdict, class, facts, policy);
    (verdict, decision)
}

/// [`decide`] for a User-Agent already classified as `verdict`, of
/// `class` once verification has spoken ([`Classifier::class_of`] with
/// `facts.identity`): the request path classifies first, to know whether
/// to verify a claim, and reads every per-class table with that one id.
pub fn decide_classified(
    verdict: Verdict,
    class: ClassId,
    facts: &Facts<'_>,
    policy: &Policy,
) -> Decision {
    let spoofed = facts.identity == Some(Identity::Spoofed);
    if spoofed && policy.spoofed == Spoofed::Block {
        return Decision::BlockSpoofed;
    }
    let read = facts.method == Method::GET || facts.method == Method::HEAD;
    let robots_txt = read && facts.path == "/robots.txt";
    // A request that names an AI crawler of a kind the site refuses is
    // refused, whatever verification found: the refusal is of the purpose
    // the User-Agent states, and holds for whoever states it (the real
    // crawler, one whose list is not loaded, one no list can check, or a
    // spoofer, who asked to be treated as that crawler). Verification
    // decides the class, the shedding tier, the log and the metrics, not
    // this. robots.txt stays readable, since it is where the refusal is
    // stated.
    if let (Some(kind), Some(ai), false) = (facts.ai, &policy.ai, robots_txt) {
        if ai.enforce && !ai.allows(kind) {
            return Decision::BlockAi(kind);
        }
    }

    if verdict.class == UaClass::Bot {
        if let Some(query) = facts.query {
            if let Some(param) = query::action_param(query.as_bytes(), &policy.blocked_params) {
                return Decision::Block { param };
            }
        }
    }

    if let Some(authority) = facts.authority {
        if let Some(location) = canonical::location(
            &policy.redirect,
            facts.scheme,
            authority,
            facts.path,
            facts.query,
        ) {
            let status = if facts.method == Method::GET || facts.method == Method::HEAD {
                StatusCode::MOVED_PERMANENTLY
            } else {
                StatusCode::PERMANENT_REDIRECT
            };
            return Decision::Redirect { status, location };
        }
    }

    if robots_txt {
        return Decision::ServeRobots;
    }
    if policy.sitemaps && read && facts.path.starts_with(SERVED_PATH) {
        return Decision::ServeSitemap;
    }

    if verdict.class == UaClass::Bot {
        // A class that must see the live site is not looked up: the cache
        // neither answers it (fresh or stale) nor, without a probe, fills
        // from it.
        let cached = match facts.cache {
            Some(probe) if !policy.live_classes.contains(class) => (probe.0)(),
            _ => Cached::None,
        };
        if cached == Cached::Fresh {
            return Decision::FromCache { stale: false };
        }
        let shed = policy.shed.as_ref();
        if let Some(shed) = shed.and_then(|s| s.decide(class, facts.pressure)) {
            if cached == Cached::Stale {
                return Decision::FromCache { stale: true };
            }
            return Decision::Shed(shed);
        }
    }

    Decision::Forward
}

/// The embedded rules with the defaults (`do` and `_fid` blocked,
/// `www.` to the apex, no shedding), for the tests of this module and of
/// what reads a `Policy`.
#[cfg(test)]
pub(crate) fn test_policy() -> Policy {
    Policy {
        classifier: Arc::new(
            Classifier::new(&crate::rules::RuleLists::embedded()).expect("rules compile"),
        ),
        blocked_params: vec!["do".into(), "_fid".into()],
        redirect: RedirectConfig {
            https: None,
            www: crate::config::WwwMode::Apex,
            strip_www_path: true,
            hosts: Vec::new(),
        },
        shed: None,
        spoofed: Spoofed::Log,
        ai: None,
        sitemaps: false,
        live_classes: LiveClasses::default(),
    }
}

#[cfg(test)]
mod tests;
