//! User-Agent → bot or human, in one automaton pass.
//!
//! All tokens of all [`RuleLists`] go into one Aho-Corasick automaton,
//! ASCII case-insensitive, leftmost-first, human exceptions before bot
//! tokens. Scanning the UA bytes left to right, each match consumes its span:
//! a human exception (`CUBOT`) therefore hides the bot token inside it
//! (`bot`), but only there; a later `Googlebot` still makes the UA a bot.
//! The first bot token found decides. No match at all means human; an empty
//! or missing User-Agent is a bot.
//!
//! The classifier is a politeness filter, not a security boundary: any UA
//! can be forged.

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::{AhoCorasick, AhoCorasickKind, Anchored, Input, MatchKind};

use crate::rules::{Kind, Rule, RuleLists, RulesError};

/// Bot or human.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UaClass {
    /// A robot: crawler, previewer, script, HTTP library.
    Bot,
    /// Anything else.
    Human,
}

impl UaClass {
    /// `"bot"` or `"human"`.
    pub fn as_str(self) -> &'static str {
        match self {
            UaClass::Bot => "bot",
            UaClass::Human => "human",
        }
    }
}

/// Which rule decided, for `classify --explain`, logs and per-class policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// No User-Agent header, or an empty one.
    EmptyUserAgent,
    /// This bot token matched (index into [`Classifier::rules`]).
    Token(usize),
    /// No bot token outside the spans of human exceptions; the last
    /// exception that matched, if any.
    NoBotToken(Option<usize>),
}

/// The class of one User-Agent and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Bot or human.
    pub class: UaClass,
    /// The deciding rule.
    pub reason: Reason,
}

/// The compiled token lists. Build once per rules load; cheap to share
/// behind an `Arc`.
///
/// ```
/// use crawlgate::classify::{Classifier, UaClass};
/// use crawlgate::rules::RuleLists;
///
/// let classifier = Classifier::new(&RuleLists::embedded())?;
/// let googlebot = b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
/// assert_eq!(classifier.classify(Some(googlebot)).class, UaClass::Bot);
/// let phone = b"Mozilla/5.0 (Linux; Android 9; CUBOT P30) Chrome/120 Mobile Safari/537.36";
/// assert_eq!(classifier.classify(Some(phone)).class, UaClass::Human);
/// assert_eq!(classifier.classify(None).class, UaClass::Bot);
/// # Ok::<(), crawlgate::rules::RulesError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Classifier {
    /// All tokens, ASCII case-insensitive, leftmost-longest: the full scan,
    /// run only when the quick check says a rule could match. A contiguous
    /// NFA (~120 KiB) rather than a DFA (~1.4 MiB): it runs on one UA in six
    /// and mostly stops at an early match, and its small size leaves the
    /// cache to the quick check.
    automaton: AhoCorasick,
    /// Every token's first [`QUICK_PREFIX`] bytes as a plain (all-matches)
    /// ASCII case-insensitive DFA: "could any rule match at all?". Almost no browser
    /// UA contains any of them, so most classifications end after this
    /// check, which runs four independent walks over four slices of the UA
    /// so that the CPU overlaps their table lookups.
    quick: aho_corasick::dfa::DFA,
    quick_start: StateID,
    /// Automaton pattern → the rules with that token (case-folded), in
    /// priority order: human exceptions first, then file order.
    groups: Vec<Vec<usize>>,
    /// Each rule's name, `list:token` as written (see [`Classifier::rule_name`]).
    names: Vec<Box<str>>,
    rules: Vec<Rule>,
}

/// Length of the token prefixes in the quick check; the four slices overlap
/// by one byte less, so every occurrence lies wholly inside one slice.
const QUICK_PREFIX: usize = 8;

/// Where the full scan may start when the earliest token prefix found by
/// the quick check ends at byte `end`: every token's prefix ends at `end`
/// or later, and a prefix is at most [`QUICK_PREFIX`] bytes long.
fn scan_start(end: usize) -> usize {
    (end + 1).saturating_sub(QUICK_PREFIX)
}

impl Classifier {
    /// Compiles `lists` into one automaton.
    pub fn new(lists: &RuleLists) -> Result<Self, RulesError> {
        let mut patterns: Vec<String> = Vec::new();
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut index = std::collections::HashMap::new();
        for (i, rule) in lists.rules.iter().enumerate() {
            let folded = rule.token.to_ascii_lowercase();
            let id = *index.entry(folded.clone()).or_insert_with(|| {
                patterns.push(folded);
                groups.push(Vec::new());
                patterns.len() - 1
            });
            groups[id].push(i);
        }
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostLongest)
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .build(&patterns)?;
        let mut prefixes: Vec<&[u8]> = patterns
            .iter()
            .map(|p| &p.as_bytes()[..p.len().min(QUICK_PREFIX)])
            .collect();
        prefixes.sort_unstable();
        prefixes.dedup();
        let quick = aho_corasick::dfa::DFA::builder()
            .match_kind(MatchKind::Standard)
            .ascii_case_insensitive(true)
            .build(&prefixes)?;
        let quick_start = quick
            .start_state(Anchored::No)
            .map_err(|_| RulesError::Internal("the quick automaton has no unanchored start"))?;
        Ok(Self {
            quick,
            quick_start,
            automaton,
            groups,
            names: lists
                .rules
                .iter()
                .map(|r| format!("{}:{}", r.list, r.written()).into_boxed_str())
                .collect(),
            rules: lists.rules.clone(),
        })
    }

    /// Rule `i`'s name as [`Classifier::explain`] writes it
    /// (`search:Googlebot`), built once per rules load so that the access
    /// log names rules without formatting them.
    pub fn rule_name(&self, i: usize) -> &str {
        self.names.get(i).map_or("?", |n| n)
    }

    /// The rules, indexed as in [`Reason`].
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The class of robot behind a verdict: the name of the list whose token
    /// decided (`search`, `ai`, `library`, …), or `None` for humans and
    /// `Some("empty")` for an empty User-Agent.
    pub fn robot_class(&self, verdict: &Verdict) -> Option<&str> {
        match verdict.reason {
            Reason::EmptyUserAgent => Some("empty"),
            Reason::Token(i) => Some(&self.rules[i].list),
            Reason::NoBotToken(_) => None,
        }
    }

    /// Classifies a User-Agent given as raw header bytes (need not be UTF-8).
    pub fn classify(&self, user_agent: Option<&[u8]>) -> Verdict {
        let ua = match user_agent {
            Some(ua) if !ua.iter().all(|b| b.is_ascii_whitespace()) => ua,
            _ => {
                return Verdict {
                    class: UaClass::Bot,
                    reason: Reason::EmptyUserAgent,
                }
            }
        };
        match self.may_match(ua) {
            Some(from) => self.scan(ua, from),
            None => Verdict {
                class: UaClass::Human,
                reason: Reason::NoBotToken(None),
            },
        }
    }

    /// [`Self::classify`] without the quick check: the reference the fuzzer
    /// compares against. Not for the request path.
    #[doc(hidden)]
    pub fn classify_without_quick_check(&self, ua: &[u8]) -> Verdict {
        if ua.iter().all(|b| b.is_ascii_whitespace()) {
            return self.classify(Some(ua));
        }
        self.scan(ua, 0)
    }

    /// Whether the prefix of any token occurs in `ua` (ASCII
    /// case-insensitively). When none does, no rule can match (a token
    /// occurrence contains its prefix), so the answer is human without a full
    /// scan and without lowercasing a copy.
    ///
    /// When one does, returns the position from which the full scan may
    /// start: no token starts earlier, since its prefix would have ended in
    /// the part of the first lane already walked.
    fn may_match(&self, ua: &[u8]) -> Option<usize> {
        const OVERLAP: usize = QUICK_PREFIX - 1;
        let n = ua.len();
        let q = n / 4;
        if q <= OVERLAP {
            return self.walk(ua, 0, self.quick_start).map(scan_start);
        }
        // Slice k holds the occurrences that end in [k*q, (k+1)*q) (the
        // last one: up to n), starting up to OVERLAP bytes earlier.
        let offsets = [0, q - OVERLAP, 2 * q - OVERLAP, 3 * q - OVERLAP];
        let s0 = &ua[..q];
        let s1 = &ua[offsets[1]..2 * q];
        let s2 = &ua[offsets[2]..3 * q];
        let s3 = &ua[offsets[3]..];
        let slices = [s0, s1, s2, s3];
        let dfa = &self.quick;
        let step = |sid: &mut StateID, byte: u8| {
            *sid = dfa.next_state(Anchored::No, *sid, byte);
            dfa.is_special(*sid)
        };
        let mut ids = [self.quick_start; 4];
        let lanes = s0.iter().zip(&s1[..q]).zip(&s2[..q]).zip(&s3[..q]);
        for (i, (((&b0, &b1), &b2), &b3)) in lanes.enumerate() {
            let special = step(&mut ids[0], b0)
                | step(&mut ids[1], b1)
                | step(&mut ids[2], b2)
                | step(&mut ids[3], b3);
            if !special {
                continue;
            }
            let Some(k) = ids.iter().position(|&sid| dfa.is_match(sid)) else {
                continue;
            };
            // Lane k has the first prefix end at or after step i; a lane
            // before it may still hold an earlier one beyond step i: walk
            // those on to their first match, and start at the earliest.
            let mut earliest = offsets[k] + i;
            for j in 0..k {
                if let Some(end) = self.walk(slices[j], i + 1, ids[j]) {
                    earliest = earliest.min(offsets[j] + end);
                    break; // lane j's positions all precede lane j+1's
                }
            }
            return Some(scan_start(earliest));
        }
        // Lane 0 is done without a match; the tails in lane order.
        for k in 1..4 {
            if let Some(end) = self.walk(slices[k], q, ids[k]) {
                return Some(scan_start(offsets[k] + end));
            }
        }
        None
    }

    /// Walks `bytes[from..]` in the quick DFA from state `sid`; the index
    /// of the first byte that ends a token prefix.
    fn walk(&self, bytes: &[u8], from: usize, mut sid: StateID) -> Option<usize> {
        for (i, &b) in bytes.iter().enumerate().skip(from) {
            sid = self.quick.next_state(Anchored::No, sid, b);
            if self.quick.is_special(sid) && self.quick.is_match(sid) {
                return Some(i);
            }
        }
        None
    }

    /// The full scan from byte `from` on (no token starts earlier): finds
    /// tokens left to right and applies each match's rule conditions, which
    /// see the whole UA (anchors and boundaries stay exact).
    fn scan(&self, ua: &[u8], from: usize) -> Verdict {
        let mut exception = None;
        let mut at = from.min(ua.len());
        while let Some(m) = self.automaton.find(Input::new(ua).span(at..ua.len())) {
            let group = &self.groups[m.pattern().as_usize()];
            let accepted = group
                .iter()
                .copied()
                .find(|&i| self.rules[i].accepts(ua, m.start(), m.end()));
            let Some(index) = accepted else {
                // A shorter token may still match from the next byte on.
                at = m.start() + 1;
                continue;
            };
            match self.rules[index].kind {
                Kind::Bot => {
                    return Verdict {
                        class: UaClass::Bot,
                        reason: Reason::Token(index),
                    }
                }
                Kind::Human => {
                    exception = Some(index);
                    at = m.end();
                }
            }
        }
        Verdict {
            class: UaClass::Human,
            reason: Reason::NoBotToken(exception),
        }
    }

    /// A short human-readable name of the rule behind `reason`, such as
    /// `search:Googlebot` or `no-bot-token`.
    pub fn explain(&self, reason: Reason) -> String {
        self.explained(reason).to_string()
    }

    /// [`Classifier::explain`]'s text as a `Display`, for writers that
    /// must not allocate per User-Agent (the access log).
    pub fn explained(&self, reason: Reason) -> Explained<'_> {
        Explained {
            classifier: self,
            reason,
        }
    }

    /// The class of a verdict as a label (metrics, access log): the list
    /// whose token decided, `no-user-agent`, or `human`.
    pub fn class_label(&self, verdict: &Verdict) -> &str {
        match self.robot_class(verdict) {
            None => "human",
            Some(_) if verdict.reason == Reason::EmptyUserAgent => "no-user-agent",
            Some(list) => list,
        }
    }
}

/// The name of the rule behind a reason; see [`Classifier::explained`].
pub struct Explained<'a> {
    classifier: &'a Classifier,
    reason: Reason,
}

impl std::fmt::Display for Explained<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rule = |i: usize| self.classifier.rule_name(i);
        match self.reason {
            Reason::EmptyUserAgent => f.write_str("empty-user-agent"),
            Reason::Token(i) => f.write_str(rule(i)),
            Reason::NoBotToken(None) => f.write_str("no-bot-token"),
            Reason::NoBotToken(Some(i)) => write!(f, "no-bot-token (exception {})", rule(i)),
        }
    }
}

/// Reads User-Agents, one per line, from `input` and writes one line per
/// input to `output`: `bot` or `human`, and with `explain` a tab and the
/// deciding rule. Lines need not be UTF-8; a trailing `\r` is dropped.
/// Output is flushed whenever the input has nothing buffered, so the tool
/// streams when used interactively and batches when fed a file.
pub fn classify_lines(
    classifier: &Classifier,
    explain: bool,
    input: &mut impl std::io::BufRead,
    output: &mut impl std::io::Write,
) -> std::io::Result<u64> {
    let mut line = Vec::with_capacity(512);
    let mut count = 0;
    loop {
        if input.fill_buf()?.is_empty() {
            output.flush()?;
        }
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        let ua = line.strip_suffix(b"\n").unwrap_or(&line);
        let ua = ua.strip_suffix(b"\r").unwrap_or(ua);
        let verdict = classifier.classify(Some(ua));
        output.write_all(verdict.class.as_str().as_bytes())?;
        if explain {
            output.write_all(b"\t")?;
            output.write_all(classifier.explain(verdict.reason).as_bytes())?;
        }
        output.write_all(b"\n")?;
        count += 1;
    }
    output.flush()?;
    Ok(count)
}

#[cfg(test)]
mod tests;
