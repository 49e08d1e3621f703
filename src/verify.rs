//! Verified crawlers: is a robot who its User-Agent says it is?
//!
//! A User-Agent is a claim. The crawler operators publish how to check it:
//! JSON files of the IP ranges their crawlers use ([`ranges`]), reverse
//! DNS names under their own domains that resolve back to the address.
//! `rules/crawlers.toml` ([`Operators`]) says which robots claim which
//! operator, which of its lists vouch for each, and its DNS domains.
//!
//! The decision is pure and in two steps, so that the request path pays
//! only for what it needs: a browser is never looked up at all; a robot
//! that claims no operator neither; a claim is first checked against the
//! ranges table ([`by_ranges`], one binary search), and only when the
//! ranges do not settle it and the operator documents DNS is the resolver
//! asked ([`by_dns`]). The answer is an [`Identity`]: verified (and how),
//! spoofed, or unverified.

pub mod dns;
pub mod fetch;
pub mod flight;
pub mod ranges;
pub mod signature;
pub mod store;

use std::fs;
use std::path::{Path, PathBuf};

use aho_corasick::{AhoCorasick, MatchKind};
use serde::Deserialize;

use crate::config::AiKind;

pub use ranges::{parse_ranges, Lists, PrefixTable, RangeError};

/// How a claim was proven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The address is in a published range that vouches for the robot.
    Ip,
    /// Reverse DNS under the operator's domains, resolving back.
    Dns,
    /// A signed request (Web Bot Auth).
    Signature,
}

/// What verification found for a robot that claims an operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// It is who it claims.
    Verified(Method),
    /// It is not: the operator's own method says so.
    Spoofed,
    /// Nothing certain either way (a list never loaded, a DNS timeout or
    /// failure, or an operator that publishes no method).
    Unverified,
}

impl Identity {
    /// `ip`, `dns`, `signature`, `spoofed` or `unverified`: the value of
    /// the upstream header, the log field and the metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Identity::Verified(Method::Ip) => "ip",
            Identity::Verified(Method::Dns) => "dns",
            Identity::Verified(Method::Signature) => "signature",
            Identity::Spoofed => "spoofed",
            Identity::Unverified => "unverified",
        }
    }

    /// Every value, in [`Identity::as_str`] order (for metrics).
    pub const ALL: [Identity; 5] = [
        Identity::Verified(Method::Ip),
        Identity::Verified(Method::Dns),
        Identity::Verified(Method::Signature),
        Identity::Spoofed,
        Identity::Unverified,
    ];

    /// Whether the verdict is a verification.
    pub fn is_verified(self) -> bool {
        matches!(self, Identity::Verified(_))
    }
}

/// A robot's claim to an operator, found in its User-Agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    /// Index into [`Operators::operators`].
    pub operator: usize,
    /// The lists that vouch for this robot (bits as in [`Operators::lists`]).
    pub lists: Lists,
    /// The operator documents reverse DNS.
    pub dns: bool,
    /// What kind of AI crawler the robot is, if it is one.
    pub ai: Option<AiKind>,
}

/// What the ranges say about a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Settled.
    Done(Identity),
    /// Ask reverse then forward DNS ([`by_dns`]).
    AskDns,
}

/// The first step: `found` are the lists the client address is in,
/// `loaded` the lists that have data, `dns` whether DNS checks are on.
pub fn by_ranges(claim: &Claim, found: Lists, loaded: Lists, dns: bool) -> Step {
    if claim.lists & found != 0 {
        return Step::Done(Identity::Verified(Method::Ip));
    }
    if dns && claim.dns {
        return Step::AskDns;
    }
    // Outside every list that vouches for it, and all of them are known:
    // the operator says the address is not its own.
    if claim.lists != 0 && claim.lists & loaded == claim.lists {
        return Step::Done(Identity::Spoofed);
    }
    Step::Done(Identity::Unverified)
}

/// What reverse then forward DNS answered for an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DnsAnswer {
    /// The reverse name, and whether its forward lookup holds the address.
    Name {
        /// The PTR name (any case, trailing dot or not).
        name: String,
        /// The forward lookup of `name` returned the address.
        resolves_back: bool,
    },
    /// The address has no reverse name (NXDOMAIN or no PTR record).
    NoName,
    /// No answer in time, or a server failure.
    Failed,
}

/// The second step: the operator's `domains` against the DNS answer. A
/// name outside the domains, or one that does not resolve back, is
/// spoofed; so is an address without a reverse name (the operators that
/// document DNS give every crawler address one); a failure settles nothing.
pub fn by_dns(answer: &DnsAnswer, domains: &[Box<str>]) -> Identity {
    match answer {
        DnsAnswer::Name {
            name,
            resolves_back,
        } => {
            if name_in_domains(name, domains) && *resolves_back {
                Identity::Verified(Method::Dns)
            } else {
                Identity::Spoofed
            }
        }
        DnsAnswer::NoName => Identity::Spoofed,
        DnsAnswer::Failed => Identity::Unverified,
    }
}

/// Whether `name` is one of `domains` or below one (`crawl-1.googlebot.com`
/// is below `googlebot.com`; `evilgooglebot.com` is not).
pub fn name_in_domains(name: &str, domains: &[Box<str>]) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    domains.iter().any(|domain| {
        let d = domain.as_bytes();
        let n = name.as_bytes();
        if n.len() == d.len() {
            return n.eq_ignore_ascii_case(d);
        }
        n.len() > d.len()
            && n[n.len() - d.len() - 1] == b'.'
            && n[n.len() - d.len()..].eq_ignore_ascii_case(d)
    })
}

/// One crawler operator.
#[derive(Clone, Debug)]
pub struct Operator {
    /// `google`, `bing`, …
    pub name: Box<str>,
    /// Its reverse DNS domains (empty: no DNS method).
    pub dns: Vec<Box<str>>,
    /// Its AI crawlers' robots.txt tokens, per kind in [`AiKind::ALL`]
    /// order.
    pub ai: [Vec<Box<str>>; 3],
    /// The hosts of its Web Bot Auth agents (`Signature-Agent` origins).
    pub signature: Vec<Box<str>>,
}

/// One published range list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListSpec {
    /// `<operator>.<list>`, e.g. `google.common-crawlers`.
    pub name: Box<str>,
    /// Index into [`Operators::operators`].
    pub operator: usize,
    /// The official URL.
    pub url: Box<str>,
}

/// The operators of `rules/crawlers.toml`, compiled: which robot claims
/// which operator, and the lists each robot is vouched for by.
#[derive(Clone, Debug)]
pub struct Operators {
    /// Every operator, in file order.
    pub operators: Vec<Operator>,
    /// Every list, in file order; list `i` is bit `i` of [`Lists`].
    pub lists: Vec<ListSpec>,
    /// Robot tokens, ASCII case-insensitive, leftmost-longest.
    claims: AhoCorasick,
    /// Automaton pattern → its claim.
    claim_of: Vec<Claim>,
    /// Automaton pattern → the token as written.
    tokens: Vec<Box<str>>,
    /// Where it came from (`None`: embedded).
    pub source: Option<PathBuf>,
}

/// The embedded `rules/crawlers.toml`.
const EMBEDDED: &str = include_str!("../rules/crawlers.toml");

/// The file's name in a rules folder.
pub const FILE_NAME: &str = "crawlers.toml";

/// Why `crawlers.toml` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OperatorsError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: std::io::Error,
    },
    /// Not TOML of the expected shape (the message has the line).
    #[error("{path}: {message}")]
    Shape {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// A value that cannot be used.
    #[error("{path}: [{table}] {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The table (`google` or `google.lists.common-crawlers`).
        table: String,
        /// What is wrong.
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOperator {
    robots: Vec<String>,
    #[serde(default)]
    dns: Vec<String>,
    #[serde(default)]
    lists: toml::Table,
    #[serde(default)]
    ai: RawAi,
    #[serde(default)]
    signature: Vec<String>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAi {
    #[serde(default)]
    training: Vec<String>,
    #[serde(default)]
    search: Vec<String>,
    #[serde(default)]
    user_fetch: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawList {
    url: String,
    robots: Option<Vec<String>>,
}

impl Operators {
    /// The operators embedded in the binary.
    pub fn embedded() -> Self {
        // Tested (`the_embedded_file_compiles`): a failure is a build
        // defect, caught before any release.
        #[allow(clippy::expect_used)]
        Self::parse(Path::new(FILE_NAME), EMBEDDED)
            .expect("the embedded rules/crawlers.toml is valid")
    }

    /// `dir/crawlers.toml`, or the embedded file when the folder has none.
    pub fn from_dir(dir: &Path) -> Result<Self, OperatorsError> {
        let path = dir.join(FILE_NAME);
        match fs::read_to_string(&path) {
            Ok(text) => {
                let mut operators = Self::parse(&path, &text)?;
                operators.source = Some(path);
                Ok(operators)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::embedded()),
            Err(source) => Err(OperatorsError::Read { path, source }),
        }
    }

    /// Reads a `crawlers.toml` text; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, OperatorsError> {
        let shape = |message: String| OperatorsError::Shape {
            path: path.to_owned(),
            message,
        };
        let invalid = |table: &str, message: String| OperatorsError::Invalid {
            path: path.to_owned(),
            table: table.to_owned(),
            message,
        };
        // `toml::Table` keeps file order (the crate's `preserve_order` is
        // not needed: names are sorted, which is as stable).
        let raw: toml::Table = toml::from_str(text).map_err(|e| shape(e.to_string()))?;
        let mut operators = Vec::new();
        let mut lists = Vec::new();
        let mut claim_of = Vec::new();
        let mut tokens: Vec<Box<str>> = Vec::new();
        for (name, value) in raw {
            check_name(&name).map_err(|m| invalid(&name, m))?;
            let op: RawOperator = value
                .try_into()
                .map_err(|e: toml::de::Error| invalid(&name, e.message().to_owned()))?;
            if op.robots.is_empty() {
                return Err(invalid(&name, "robots: lists no robot".to_owned()));
            }
            let index = operators.len();
            let dns = domains("dns", op.dns, "googlebot.com").map_err(|m| invalid(&name, m))?;
            let mut vouching: Vec<Lists> = vec![0; op.robots.len()];
            for (list, value) in op.lists {
                let table = format!("{name}.lists.{list}");
                check_name(&list).map_err(|m| invalid(&table, m))?;
                let spec: RawList = value
                    .try_into()
                    .map_err(|e: toml::de::Error| invalid(&table, e.message().to_owned()))?;
                if !(spec.url.starts_with("https://") || spec.url.starts_with("http://"))
                    || spec.url.parse::<http::Uri>().is_err()
                {
                    return Err(invalid(
                        &table,
                        format!("url: {:?} is not an http(s) URL", spec.url),
                    ));
                }
                if lists.len() == PrefixTable::MAX_LISTS {
                    return Err(invalid(
                        &table,
                        format!("more than {} lists in all", PrefixTable::MAX_LISTS),
                    ));
                }
                let bit: Lists = 1 << lists.len();
                match spec.robots {
                    None => vouching.iter_mut().for_each(|v| *v |= bit),
                    Some(robots) => {
                        for robot in robots {
                            let at = op
                                .robots
                                .iter()
                                .position(|r| r.eq_ignore_ascii_case(&robot))
                                .ok_or_else(|| {
                                    invalid(
                                        &table,
                                        format!("robots: {robot:?} is not one of [{name}] robots"),
                                    )
                                })?;
                            vouching[at] |= bit;
                        }
                    }
                }
                lists.push(ListSpec {
                    name: format!("{name}.{list}").into_boxed_str(),
                    operator: index,
                    url: spec.url.into_boxed_str(),
                });
            }
            let mut ai: [Vec<Box<str>>; 3] = Default::default();
            let kinds = [op.ai.training, op.ai.search, op.ai.user_fetch];
            for ((kind, tokens), slot) in AiKind::ALL.into_iter().zip(kinds).zip(&mut ai) {
                for token in tokens {
                    let token = token.trim();
                    // A robots.txt product token: letters, digits, '-', '_'.
                    let valid = !token.is_empty()
                        && token.len() <= 64
                        && token
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
                    if !valid {
                        return Err(invalid(
                            &name,
                            format!(
                                "ai.{}: {token:?} is not a robots.txt product token",
                                kind.as_str()
                            ),
                        ));
                    }
                    slot.push(token.into());
                }
            }
            let signature =
                domains("signature", op.signature, "chatgpt.com").map_err(|m| invalid(&name, m))?;
            let ai_kind = |robot: &str| {
                AiKind::ALL
                    .into_iter()
                    .zip(&ai)
                    .find(|(_, tokens)| tokens.iter().any(|t| t.eq_ignore_ascii_case(robot)))
                    .map(|(kind, _)| kind)
            };
            for (robot, lists) in op.robots.into_iter().zip(vouching) {
                let robot = robot.trim();
                if robot.is_empty()
                    || robot.len() > 64
                    || robot.bytes().any(|b| b.is_ascii_control())
                {
                    return Err(invalid(
                        &name,
                        format!("robots: {robot:?} must be 1 to 64 printable bytes"),
                    ));
                }
                if tokens.iter().any(|t| t.eq_ignore_ascii_case(robot)) {
                    return Err(invalid(&name, format!("robots: {robot:?} is named twice")));
                }
                claim_of.push(Claim {
                    operator: index,
                    lists,
                    dns: !dns.is_empty(),
                    ai: ai_kind(robot),
                });
                tokens.push(robot.into());
            }
            operators.push(Operator {
                name: name.into_boxed_str(),
                dns,
                ai,
                signature,
            });
        }
        let claims = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostLongest)
            .build(tokens.iter().map(|t| t.as_bytes()))
            .map_err(|e| shape(e.to_string()))?;
        Ok(Self {
            operators,
            lists,
            claims,
            claim_of,
            tokens,
            source: None,
        })
    }

    /// The operator a robot's User-Agent claims, if any: the leftmost
    /// (longest) robot token in it. Allocates nothing.
    pub fn claim(&self, user_agent: &[u8]) -> Option<Claim> {
        self.claims
            .find(user_agent)
            .map(|m| self.claim_of[m.pattern().as_usize()])
    }

    /// The robot token a User-Agent claims, as written in the file.
    pub fn claimed_token(&self, user_agent: &[u8]) -> Option<&str> {
        self.claims
            .find(user_agent)
            .map(|m| &*self.tokens[m.pattern().as_usize()])
    }

    /// [`Operators::claim`], with the index of the claimed token
    /// ([`Operators::token`]).
    pub fn claim_at(&self, user_agent: &[u8]) -> Option<(Claim, usize)> {
        self.claims.find(user_agent).map(|m| {
            let i = m.pattern().as_usize();
            (self.claim_of[i], i)
        })
    }

    /// A robot token as written in the file, by its index.
    pub fn token(&self, index: usize) -> &str {
        self.tokens.get(index).map_or("", |t| t)
    }

    /// Every operator's robots.txt tokens of AI crawlers of `kind`.
    pub fn ai_tokens(&self, kind: AiKind) -> impl Iterator<Item = &str> {
        let slot = AiKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
        self.operators
            .iter()
            .flat_map(move |op| op.ai[slot].iter().map(|t| &**t))
    }

    /// The operator whose Web Bot Auth agent is at `host`.
    pub fn operator_of_agent(&self, host: &str) -> Option<usize> {
        self.operators
            .iter()
            .position(|op| op.signature.iter().any(|h| h.eq_ignore_ascii_case(host)))
    }

    /// The list named `<operator>.<list>`.
    pub fn list(&self, name: &str) -> Option<usize> {
        self.lists.iter().position(|l| &*l.name == name)
    }
}

/// An operator or list name: lowercase letters, digits and `-`.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?}: a name is 1 to 64 lowercase letters, digits and '-'"
        ))
    }
}

/// The domain names of `key`, lower case, each checked.
fn domains(key: &str, names: Vec<String>, example: &str) -> Result<Vec<Box<str>>, String> {
    names
        .into_iter()
        .map(|name| {
            let name = name.to_ascii_lowercase();
            if valid_domain(&name) {
                Ok(name.into_boxed_str())
            } else {
                Err(format!(
                    "{key}: {name:?} is not a domain name like {example}"
                ))
            }
        })
        .collect()
}

/// A domain name of at least two labels, lowercase.
fn valid_domain(domain: &str) -> bool {
    domain.len() <= 253
        && domain.contains('.')
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

#[cfg(test)]
mod tests;
