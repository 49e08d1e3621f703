//! The decision: what to do with a request, as a pure function.
//!
//! [`decide`] takes the facts of a request (borrowed from it) and the
//! loaded [`Policy`] and returns a [`Decision`]; it does no I/O and can be
//! tested with tables. The order is the product (README, "What happens to a
//! request"):
//!
//! 1. classify the User-Agent;
//! 2. a bot asking for an action URL is blocked (before anything else, so a
//!    robot cannot reach an action through a redirect either);
//! 3. a non-canonical address is redirected, both fixes in one hop;
//! 4. `GET|HEAD /robots.txt` is answered by the proxy;
//! 5. everything else is forwarded.

use http::{Method, StatusCode};

use crate::classify::{Classifier, UaClass, Verdict};
use crate::config::RedirectConfig;
use crate::{canonical, query};

/// What the request path needs, compiled from config and rules. One
/// immutable snapshot; a reload builds a new one.
#[derive(Debug)]
pub struct Policy {
    /// The User-Agent classifier.
    pub classifier: Classifier,
    /// Parameter names that make a URL an action.
    pub blocked_params: Vec<Box<str>>,
    /// Canonical redirect settings.
    pub redirect: RedirectConfig,
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
}

/// What to do with the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Answer 403: a bot asked for an action URL.
    Block {
        /// Index into [`Policy::blocked_params`] of the name it resolved to.
        param: usize,
    },
    /// Answer with a redirect to the canonical address.
    Redirect {
        /// 301 for GET/HEAD, 308 otherwise (keeps method and body).
        status: StatusCode,
        /// The absolute canonical URL (still to be checked as a header).
        location: String,
    },
    /// Answer with the synthesized robots.txt.
    ServeRobots,
    /// Pass the request to the upstream.
    Forward,
}

impl Decision {
    /// `block`, `redirect`, `robots` or `forward`, for logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Block { .. } => "block",
            Decision::Redirect { .. } => "redirect",
            Decision::ServeRobots => "robots",
            Decision::Forward => "forward",
        }
    }
}

/// Decides what to do with the request described by `facts`.
pub fn decide(facts: &Facts<'_>, policy: &Policy) -> (Verdict, Decision) {
    let verdict = policy.classifier.classify(facts.user_agent);

    if verdict.class == UaClass::Bot {
        if let Some(query) = facts.query {
            if let Some(param) = query::action_param(query.as_bytes(), &policy.blocked_params) {
                return (verdict, Decision::Block { param });
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
            return (verdict, Decision::Redirect { status, location });
        }
    }

    if facts.path == "/robots.txt" && (facts.method == Method::GET || facts.method == Method::HEAD)
    {
        return (verdict, Decision::ServeRobots);
    }

    (verdict, Decision::Forward)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::WwwMode;
    use crate::rules::RuleLists;

    fn policy() -> Policy {
        Policy {
            classifier: Classifier::new(&RuleLists::embedded()).expect("rules compile"),
            blocked_params: vec!["do".into(), "_fid".into()],
            redirect: RedirectConfig {
                https: None,
                www: WwwMode::Apex,
                strip_www_path: true,
                hosts: Vec::new(),
            },
        }
    }

    const HUMAN: &[u8] = b"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";
    const BOT: &[u8] = b"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)";

    fn run(method: Method, host: &str, target: &str, ua: Option<&[u8]>) -> (UaClass, String) {
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (target, None),
        };
        let facts = Facts {
            method: &method,
            scheme: "http",
            authority: Some(host),
            path,
            query,
            user_agent: ua,
        };
        let policy = policy();
        let (verdict, decision) = decide(&facts, &policy);
        let shown = match decision {
            Decision::Block { param } => format!("block {}", policy.blocked_params[param]),
            Decision::Redirect { status, location } => format!("{} {location}", status.as_u16()),
            other => other.as_str().to_owned(),
        };
        (verdict.class, shown)
    }

    /// (method, host, request-target, User-Agent, expected class, expected decision)
    type Row<'a> = (
        &'a Method,
        &'a str,
        &'a str,
        Option<&'a [u8]>,
        UaClass,
        &'a str,
    );

    #[test]
    fn table() {
        use UaClass::{Bot, Human};
        let get = Method::GET;
        let rows: &[Row<'_>] = &[
            (&get, "example.com", "/", Some(HUMAN), Human, "forward"),
            (
                &get,
                "example.com",
                "/?do=vote",
                Some(HUMAN),
                Human,
                "forward",
            ),
            (&get, "example.com", "/?do=vote", Some(BOT), Bot, "block do"),
            (
                &get,
                "example.com",
                "/a?x=1&%64o=vote",
                Some(BOT),
                Bot,
                "block do",
            ),
            (
                &get,
                "example.com",
                "/a?_fid=abc",
                Some(BOT),
                Bot,
                "block _fid",
            ),
            (
                &get,
                "example.com",
                "/a?.fid=abc",
                Some(BOT),
                Bot,
                "block _fid",
            ),
            (&get, "example.com", "/a?undo=1", Some(BOT), Bot, "forward"),
            (&get, "example.com", "/a?x=do", Some(BOT), Bot, "forward"),
            (&get, "example.com", "/?do=1", None, Bot, "block do"),
            (&get, "example.com", "/?do=1", Some(b""), Bot, "block do"),
            // Block wins over redirect: no hop toward an action for a bot.
            (
                &get,
                "www.example.com",
                "/www/?do=1",
                Some(BOT),
                Bot,
                "block do",
            ),
            (
                &get,
                "www.example.com",
                "/www/a?do=1",
                Some(HUMAN),
                Human,
                "301 http://example.com/a?do=1",
            ),
            (
                &get,
                "www.example.com",
                "/a?b=1",
                Some(BOT),
                Bot,
                "301 http://example.com/a?b=1",
            ),
            (
                &Method::POST,
                "www.example.com",
                "/form",
                Some(HUMAN),
                Human,
                "308 http://example.com/form",
            ),
            (
                &Method::HEAD,
                "example.com",
                "/www/",
                Some(HUMAN),
                Human,
                "301 http://example.com/",
            ),
            (&get, "example.com", "/robots.txt", Some(BOT), Bot, "robots"),
            (
                &Method::HEAD,
                "example.com",
                "/robots.txt",
                Some(HUMAN),
                Human,
                "robots",
            ),
            (
                &get,
                "example.com",
                "/robots.txt?x=1",
                Some(BOT),
                Bot,
                "robots",
            ),
            (
                &Method::POST,
                "example.com",
                "/robots.txt",
                Some(BOT),
                Bot,
                "forward",
            ),
            (
                &get,
                "www.example.com",
                "/robots.txt",
                Some(BOT),
                Bot,
                "301 http://example.com/robots.txt",
            ),
            (
                &get,
                "example.com",
                "/robots.txt/",
                Some(BOT),
                Bot,
                "forward",
            ),
        ];
        for &(method, host, target, ua, class, want) in rows {
            let (got_class, got) = run(method.clone(), host, target, ua);
            assert_eq!(
                (got_class, got.as_str()),
                (class, want),
                "{method} {host}{target}"
            );
        }
    }

    #[test]
    fn no_authority_means_no_redirect() {
        let facts = Facts {
            method: &Method::GET,
            scheme: "http",
            authority: None,
            path: "/www/a",
            query: None,
            user_agent: Some(HUMAN),
        };
        assert_eq!(decide(&facts, &policy()).1, Decision::Forward);
    }
}
