//! Reads a robots.txt once and answers, per request and without
//! allocating, which of its rules decides a path for a robot's product
//! token.
//!
//! RFC 9309 is the spec. Where it leaves room, Google's published reading
//! is followed: a key is recognised by its start and a few common typos
//! (`Disalow`), a missing colon is forgiven when the line is two words, a
//! user-agent line names the product token its value starts with
//! (`Googlebot/2.1` names `Googlebot`), `*` followed by a space still
//! names every robot, an `Allow` of `…/index.htm…` also allows its folder
//! itself, a line is read up to 16,663 bytes and a file up to 500 KiB.
//!
//! Deliberate readings of the RFC where Google's matcher compares raw text
//! instead:
//!
//! - **Percent-encoding.** A pattern and a path are compared octet by
//!   octet after decoding `%XX` of an unreserved character (`%41` is `A`)
//!   and reading the hex of any other `%XX` without regard to case (`%2f`
//!   is `%2F`, and neither is `/`). Bytes above 0x7F count as their
//!   percent-encoding on both sides.
//! - **A `*` stands for whole octets:** it never ends inside a `%XX`, so
//!   `/*2F` does not match `/%2F`.
//! - **Priority** (the RFC's "most octets") is the length of the pattern
//!   as written, a byte above 0x7F counting as its three-byte escape, as
//!   Google counts it: `/%41` outranks `/A`.
//! - **The 500 KiB cut** drops a line that the limit cuts in two, rather
//!   than reading a shortened rule.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;

/// How much of a robots.txt is read (RFC 9309 asks for at least 500 KiB).
pub const MAX_BYTES: usize = 500 * 1024;

/// How much of one line is read; the rest of the line is ignored (Google's
/// bound: just under eight times the longest URL browsers take).
pub const MAX_LINE: usize = 2083 * 8 - 1;

/// A pattern unit that is a `*`.
const STAR: u16 = 0x200;
/// Marks a pattern or path unit as a percent-encoded octet that is not
/// decoded (a reserved or non-ASCII one).
const ENCODED: u16 = 0x100;

/// A parsed robots.txt.
///
/// Built once by [`RobotsTxt::parse`]; [`RobotsTxt::group`] finds a
/// robot's rules (cache the answer per robot) and [`RobotsTxt::decide`]
/// answers per path.
#[derive(Clone, Debug, Default)]
pub struct RobotsTxt {
    /// Every rule's pattern, as units, back to back.
    units: Vec<u16>,
    /// Every rule's pattern as written, back to back.
    text: String,
    /// Every rule; each raw group's rules are contiguous.
    rules: Vec<Rule>,
    /// Each raw group (user-agent lines in a row and the rules that
    /// follow them): its rules, highest priority first.
    groups: Vec<Range<usize>>,
    /// The raw groups of each agent, back to back.
    agent_groups: Vec<usize>,
    /// Each token a user-agent line names (lowercase; `*` for all),
    /// sorted by token, with its raw groups: merged per RFC 9309 §2.2.1.
    agents: Vec<Agent>,
    /// Lines that were neither blank, a comment nor a record, and rules
    /// before any user-agent line.
    ignored: usize,
}

/// One token's merged groups.
#[derive(Clone, Debug)]
struct Agent {
    token: Box<str>,
    /// Its entries in `agent_groups`.
    groups: Range<usize>,
}

/// One `Allow` or `Disallow` line.
#[derive(Clone, Debug)]
struct Rule {
    allow: bool,
    /// The pattern ended in `$`.
    anchored: bool,
    /// The match's weight: the pattern's length as written.
    priority: usize,
    units: Range<usize>,
    text: Range<usize>,
    line: u32,
}

/// Which rules apply to one robot: the groups that name its product
/// token, else the `*` groups, else none (everything allowed). Meaningful
/// only for the [`RobotsTxt`] that gave it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GroupId(Option<usize>);

impl GroupId {
    /// No group applies: every path is allowed.
    pub const NONE: Self = Self(None);

    /// Whether some group applies (false: every path is allowed).
    pub fn applies(self) -> bool {
        self.0.is_some()
    }
}

/// The rule that decides a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match<'a> {
    /// True for an `Allow` rule, false for a `Disallow`.
    pub allowed: bool,
    /// The rule's pattern as written (comment and blanks around it
    /// removed; invalid UTF-8 replaced).
    pub pattern: &'a str,
    /// The rule's line in the file, from 1.
    pub line: u32,
}

impl fmt::Display for Match<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = if self.allowed { "Allow" } else { "Disallow" };
        write!(f, "{key}: {}", self.pattern)
    }
}

/// What a line's key says it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    UserAgent,
    Allow,
    Disallow,
    /// `Sitemap:` and records this matcher does not use.
    Other,
}

/// A raw group while the file is read.
#[derive(Default)]
struct Building {
    /// Tokens named by its user-agent lines (lowercase; `*` for all).
    tokens: Vec<Box<str>>,
    /// Its first rule.
    first_rule: usize,
    /// A rule line was seen: the next user-agent line starts a new group.
    has_rules: bool,
}

impl RobotsTxt {
    /// Parses `text`: any bytes, never fails. Lines it cannot read are
    /// ignored and counted ([`RobotsTxt::ignored_lines`]); at most
    /// [`MAX_BYTES`] are read.
    pub fn parse(text: &[u8]) -> Self {
        let mut out = Self::default();
        let mut groups: Vec<Building> = Vec::new();
        let mut line_no: u32 = 0;
        for line in lines(text) {
            line_no = line_no.saturating_add(1);
            let (key, value) = match read_line(line) {
                Line::Blank => continue,
                Line::Unreadable => {
                    out.ignored += 1;
                    continue;
                }
                Line::Record(key, value) => (key, value),
            };
            match key {
                Key::UserAgent => {
                    let starts_group = groups.last().is_none_or(|g| g.has_rules);
                    if starts_group {
                        out.close_group(groups.last());
                        groups.push(Building {
                            first_rule: out.rules.len(),
                            ..Building::default()
                        });
                    }
                    if let (Some(group), Some(token)) = (groups.last_mut(), agent_token(value)) {
                        group.tokens.push(token);
                    }
                }
                Key::Allow | Key::Disallow => match groups.last_mut() {
                    None => out.ignored += 1,
                    Some(group) => {
                        group.has_rules = true;
                        out.push_rule(key == Key::Allow, value, line_no);
                    }
                },
                Key::Other => {}
            }
        }
        out.close_group(groups.last());
        out.index_agents(&groups);
        out
    }

    /// Lines that were neither blank, a comment nor a `key: value` record,
    /// plus rules before any user-agent line.
    pub fn ignored_lines(&self) -> usize {
        self.ignored
    }

    /// The group for a robot's product token (`Googlebot`, compared without
    /// regard to case): every group whose user-agent lines name it, merged;
    /// else the `*` groups, merged; else [`GroupId::NONE`].
    pub fn group(&self, product_token: &str) -> GroupId {
        let find = |token: &str| {
            self.agents
                .binary_search_by(|agent| {
                    agent
                        .token
                        .bytes()
                        .cmp(token.bytes().map(|b| b.to_ascii_lowercase()))
                })
                .ok()
        };
        let named = if product_token.is_empty() {
            None
        } else {
            find(product_token)
        };
        GroupId(named.or_else(|| find("*")))
    }

    /// The rule that decides `path_and_query` (it starts with `/`; empty
    /// is read as `/`) for `group`: the matching rule with the longest
    /// pattern, an `Allow` winning a tie. `None`: no rule matches, or no
    /// group applies, or the path is `/robots.txt`; the path is allowed.
    pub fn decide(&self, group: GroupId, path_and_query: &[u8]) -> Option<Match<'_>> {
        let agent = self.agents.get(group.0?)?;
        let path = if path_and_query.is_empty() {
            b"/"
        } else {
            path_and_query
        };
        if path.split(|&b| b == b'?').next() == Some(b"/robots.txt") {
            return None;
        }
        let mut best: Option<&Rule> = None;
        for &group in self.agent_groups.get(agent.groups.clone())? {
            let rules = self
                .groups
                .get(group)
                .and_then(|r| self.rules.get(r.clone()));
            for rule in rules.unwrap_or_default() {
                if let Some(best) = best {
                    match rule.priority.cmp(&best.priority) {
                        Ordering::Less => break,
                        Ordering::Equal if !rule.allow || best.allow => continue,
                        _ => {}
                    }
                }
                let units = self.units.get(rule.units.clone()).unwrap_or_default();
                if matches(units, rule.anchored, path) {
                    best = Some(rule);
                }
            }
        }
        best.map(|rule| Match {
            allowed: rule.allow,
            pattern: self.text.get(rule.text.clone()).unwrap_or_default(),
            line: rule.line,
        })
    }

    /// Whether `group` may fetch `path_and_query` (see
    /// [`RobotsTxt::decide`]).
    pub fn allowed(&self, group: GroupId, path_and_query: &[u8]) -> bool {
        self.decide(group, path_and_query).is_none_or(|m| m.allowed)
    }

    /// Records one `Allow` or `Disallow` line of the current group. An
    /// empty pattern is no rule.
    fn push_rule(&mut self, allow: bool, value: &[u8], line: u32) {
        if value.is_empty() {
            return;
        }
        let text_start = self.text.len();
        self.text.push_str(&String::from_utf8_lossy(value));
        let text = text_start..self.text.len();
        let (pattern, anchored) = match value.strip_suffix(b"$") {
            Some(head) => (head, true),
            None => (value, false),
        };
        let units = self.push_units(pattern);
        self.rules.push(Rule {
            allow,
            anchored,
            priority: written_len(value),
            units,
            text: text.clone(),
            line,
        });
        // Google's reading: `Allow: /dir/index.html` also allows `/dir/`
        // itself, as the pattern `/dir/$` would.
        if allow {
            let folder = value.iter().rposition(|&b| b == b'/');
            if let Some(slash) = folder.filter(|&i| value[i..].starts_with(b"/index.htm")) {
                let folder = &value[..=slash];
                let units = self.push_units(folder);
                self.rules.push(Rule {
                    allow,
                    anchored: true,
                    priority: written_len(folder) + 1,
                    units,
                    text,
                    line,
                });
            }
        }
    }

    /// Appends `pattern` (without its end anchor) as units.
    fn push_units(&mut self, mut pattern: &[u8]) -> Range<usize> {
        let start = self.units.len();
        while let Some((unit, len)) = unit_at(pattern) {
            self.units.push(if pattern.first() == Some(&b'*') {
                STAR
            } else {
                unit
            });
            pattern = pattern.get(len..).unwrap_or_default();
        }
        start..self.units.len()
    }

    /// Ends the raw group `group` (if any): its rules, from its first to
    /// the last one pushed, sorted by priority and then `Allow` first.
    fn close_group(&mut self, group: Option<&Building>) {
        let Some(group) = group else {
            return;
        };
        let range = group.first_rule..self.rules.len();
        if let Some(rules) = self.rules.get_mut(range.clone()) {
            rules.sort_by(|a, b| {
                b.priority
                    .cmp(&a.priority)
                    .then(b.allow.cmp(&a.allow))
                    .then(a.line.cmp(&b.line))
            });
        }
        self.groups.push(range);
    }

    /// Merges the raw groups per token.
    fn index_agents(&mut self, groups: &[Building]) {
        let mut per_token: HashMap<&str, Vec<usize>> = HashMap::new();
        for (index, group) in groups.iter().enumerate() {
            for token in &group.tokens {
                let indices = per_token.entry(token).or_default();
                // A token named twice in one group counts once.
                if indices.last() != Some(&index) {
                    indices.push(index);
                }
            }
        }
        let mut tokens: Vec<(&str, Vec<usize>)> = per_token.into_iter().collect();
        tokens.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (token, indices) in tokens {
            let start = self.agent_groups.len();
            self.agent_groups.extend(indices);
            self.agents.push(Agent {
                token: token.into(),
                groups: start..self.agent_groups.len(),
            });
        }
    }
}

/// The lines of a robots.txt: the first [`MAX_BYTES`] (less a line the
/// limit cuts), after any byte order mark (or a start of one), split at
/// CR, LF or CRLF, each cut at [`MAX_LINE`].
fn lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut text = text;
    if text.len() > MAX_BYTES {
        let cut_at_line_end = matches!(text.get(MAX_BYTES), Some(b'\n' | b'\r'));
        text = text.get(..MAX_BYTES).unwrap_or_default();
        if !cut_at_line_end {
            let kept = text.iter().rposition(|&b| b == b'\n' || b == b'\r');
            text = text.get(..kept.map_or(0, |i| i + 1)).unwrap_or_default();
        }
    }
    let bom = text
        .iter()
        .zip([0xEF, 0xBB, 0xBF])
        .take_while(|(a, b)| **a == *b)
        .count();
    let mut rest = text.get(bom..).unwrap_or_default();
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let end = rest.iter().position(|&b| b == b'\n' || b == b'\r');
        let (line, next) = match end {
            Some(i) => {
                let crlf = rest.get(i) == Some(&b'\r') && rest.get(i + 1) == Some(&b'\n');
                let skip = if crlf { 2 } else { 1 };
                (&rest[..i], rest.get(i + skip..).unwrap_or_default())
            }
            None => {
                done = true;
                (rest, &[][..])
            }
        };
        rest = next;
        Some(line.get(..MAX_LINE).unwrap_or(line))
    })
}

/// One line, read.
enum Line<'a> {
    /// Blank or a comment.
    Blank,
    /// Neither blank nor a `key: value` record.
    Unreadable,
    /// A key and its value (trimmed; the comment removed).
    Record(Key, &'a [u8]),
}

/// Reads one line.
fn read_line(line: &[u8]) -> Line<'_> {
    let line = match line.iter().position(|&b| b == b'#') {
        Some(i) => &line[..i],
        None => line,
    }
    .trim_ascii();
    if line.is_empty() {
        return Line::Blank;
    }
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let (key, value) = match line.iter().position(|&b| b == b':') {
        Some(i) => (&line[..i], &line[i + 1..]),
        // Google's reading: a forgotten colon, when the line is exactly
        // two words.
        None => {
            let Some(i) = line.iter().position(blank) else {
                return Line::Unreadable;
            };
            let value = line[i..].trim_ascii();
            if value.iter().any(blank) {
                return Line::Unreadable;
            }
            (&line[..i], value)
        }
    };
    let key = key.trim_ascii();
    if key.is_empty() {
        return Line::Unreadable;
    }
    Line::Record(key_of(key), value.trim_ascii())
}

/// What `key` names: recognised by how it starts, with Google's list of
/// common typos.
fn key_of(key: &[u8]) -> Key {
    let starts = |names: &[&[u8]]| {
        names.iter().any(|name| {
            key.get(..name.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(name))
        })
    };
    if starts(&[b"user-agent", b"useragent", b"user agent"]) {
        Key::UserAgent
    } else if starts(&[b"allow"]) {
        Key::Allow
    } else if starts(&[
        b"disallow",
        b"dissallow",
        b"dissalow",
        b"disalow",
        b"diasllow",
        b"disallaw",
    ]) {
        Key::Disallow
    } else {
        Key::Other
    }
}

/// The token a user-agent line's value names, lowercase: `*` (alone or
/// followed by a blank) for every robot, else the product token it starts
/// with (letters, `-` and `_`); `None` when it names none.
fn agent_token(value: &[u8]) -> Option<Box<str>> {
    if let Some(rest) = value.strip_prefix(b"*") {
        if rest.first().is_none_or(u8::is_ascii_whitespace) {
            return Some("*".into());
        }
    }
    let len = value
        .iter()
        .position(|&b| !(b.is_ascii_alphabetic() || b == b'-' || b == b'_'))
        .unwrap_or(value.len());
    let token = value.get(..len).filter(|t| !t.is_empty())?;
    let token = String::from_utf8_lossy(token).to_ascii_lowercase();
    Some(token.into())
}

/// The length of a pattern as Google weighs it: its bytes, one above
/// 0x7F counting as the three of its escape.
fn written_len(pattern: &[u8]) -> usize {
    pattern
        .iter()
        .map(|&b| if b.is_ascii() { 1 } else { 3 })
        .sum()
}

/// The unit at the start of `s` and how many bytes it takes: a `%XX` of
/// an unreserved character is that character, any other `%XX` or byte
/// above 0x7F is an encoded octet, anything else is itself.
fn unit_at(s: &[u8]) -> Option<(u16, usize)> {
    let &first = s.first()?;
    if first == b'%' {
        let hex = |i: usize| s.get(i).and_then(|&b| (b as char).to_digit(16));
        if let (Some(high), Some(low)) = (hex(1), hex(2)) {
            let octet = ((high << 4) | low) as u8;
            let unreserved =
                octet.is_ascii_alphanumeric() || matches!(octet, b'-' | b'.' | b'_' | b'~');
            let unit = u16::from(octet) | if unreserved { 0 } else { ENCODED };
            return Some((unit, 3));
        }
    }
    if first.is_ascii() {
        Some((u16::from(first), 1))
    } else {
        Some((ENCODED | u16::from(first), 1))
    }
}

/// Whether `pattern` (units; `*` any run of units) matches the start of
/// `path`, or all of it when `anchored`. Greedy with a return to the last
/// `*`: time at most the product of the lengths, no allocation.
fn matches(pattern: &[u16], anchored: bool, path: &[u8]) -> bool {
    let (mut p, mut s) = (0, 0);
    // After the last `*` seen: where the pattern resumes, and how much of
    // the path that `*` has taken so far.
    let mut retry: Option<(usize, usize)> = None;
    loop {
        let rest = path.get(s..).unwrap_or_default();
        match pattern.get(p) {
            None if !anchored || rest.is_empty() => return true,
            None => {}
            Some(&STAR) => {
                p += 1;
                retry = Some((p, s));
                continue;
            }
            Some(&want) => {
                if let Some((got, len)) = unit_at(rest) {
                    if got == want {
                        p += 1;
                        s += len;
                        continue;
                    }
                }
            }
        }
        // A mismatch: the last `*` takes one more unit, or there is none.
        let Some((resume, taken)) = retry else {
            return false;
        };
        let Some((_, len)) = unit_at(path.get(taken..).unwrap_or_default()) else {
            return false;
        };
        retry = Some((resume, taken + len));
        p = resume;
        s = taken + len;
    }
}

#[cfg(test)]
mod tests;
