//! User-Agent → bot or human: tokens first, then structure.
//!
//! All bot tokens and human exceptions of the [`RuleLists`] go into one
//! Aho-Corasick automaton, ASCII case-insensitive, leftmost-longest, human
//! exceptions before bot tokens. Scanning the UA bytes left to right, each
//! match consumes its span: a human exception (`CUBOT`) therefore hides the
//! bot token inside it (`bot`), but only there; a later `Googlebot` still
//! makes the UA a bot. The first bot token found decides, unless it is a
//! generic mark in a handset's device-model position
//! ([`Signal::DeviceModel`]).
//!
//! Without a bot token, structure decides ([`Signal::NoBrowserShape`]): a
//! UA with no human exception and none of the browser-grammar marks
//! (platforms, engines, handset shapes; a second, small automaton) is a
//! tool, not a browser. Anything else is human; an empty or missing
//! User-Agent is a bot.
//!
//! The classifier is a politeness filter, not a security boundary: any UA
//! can be forged.

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::{AhoCorasick, AhoCorasickKind, Anchored, Input, MatchKind};

pub use classes::{ClassId, Classes};

use crate::rules::{Edge, Kind, Rule, RuleLists, RulesError, Signal, Signals};

mod classes;

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
    /// No bot token, and this structural signal says robot.
    Structure(Signal),
    /// The only bot token (this generic rule) sat in a handset's
    /// device-model position ([`Signal::DeviceModel`]): human.
    DeviceModel(usize),
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
    /// The [`HEADS`] that hold no token prefix, longest first, with the
    /// quick DFA's state after each: a UA that starts with one is walked
    /// from its end.
    heads: Vec<Head>,
    /// Automaton pattern → the rules with that token (case-folded), in
    /// priority order: human exceptions first, then file order.
    groups: Vec<Vec<usize>>,
    /// Each rule's name, `list:token` as written (see [`Classifier::rule_name`]).
    names: Vec<Box<str>>,
    rules: Vec<Rule>,
    /// The class table of these rules.
    classes: Classes,
    /// The browser-grammar marks ([`Kind::Shape`]), leftmost-longest; `None`
    /// when the lists have none.
    shape: Option<AhoCorasick>,
    /// Shape automaton pattern → its rules.
    shape_groups: Vec<Vec<usize>>,
    /// The common platform words that are browser-grammar marks in these
    /// lists, with their rule: the fast path of the shape check.
    platforms: Vec<Platform>,
    /// Per rule: a generic mark (`generic` list), which the device-model
    /// signal may discount.
    generic: Vec<bool>,
    signals: Signals,
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
        let (patterns, groups) = compile_patterns(lists, |k| k != Kind::Shape);
        let automaton = full_scan_automaton(&patterns)?;
        let (shape_patterns, shape_groups) = compile_patterns(lists, |k| k == Kind::Shape);
        let shape = if shape_patterns.is_empty() {
            None
        } else {
            Some(full_scan_automaton(&shape_patterns)?)
        };
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
        let mut classifier = Self {
            quick,
            quick_start,
            heads: Vec::new(),
            automaton,
            groups,
            names: lists
                .rules
                .iter()
                .map(|r| format!("{}:{}", r.list, r.written()).into_boxed_str())
                .collect(),
            rules: lists.rules.clone(),
            classes: Classes::new(&lists.rules),
            platforms: PLATFORMS
                .iter()
                .filter_map(|&word| {
                    let rule = lists.rules.iter().position(|r| {
                        r.kind == Kind::Shape && r.token.as_bytes().eq_ignore_ascii_case(word)
                    })?;
                    let r = &lists.rules[rule];
                    Some(Platform {
                        first: word[0].to_ascii_lowercase(),
                        word,
                        rule,
                        free: r.start == Edge::Free && r.end == Edge::Free && !r.exact_case,
                        local: matches!(r.end, Edge::Free | Edge::Word),
                    })
                })
                .collect(),
            shape,
            shape_groups,
            generic: lists.rules.iter().map(|r| &*r.list == "generic").collect(),
            signals: lists.signals,
        };
        classifier.heads = HEADS
            .iter()
            .filter_map(|&bytes| classifier.compile_head(bytes))
            .collect();
        classifier
            .heads
            .sort_by_key(|h| std::cmp::Reverse(h.bytes.len()));
        Ok(classifier)
    }

    /// `bytes` as a head: the quick DFA's state after walking it, when no
    /// token prefix ends inside it (a UA that starts with it then holds a
    /// prefix exactly when its rest, walked on from that state, does), and
    /// whether it settles the shape check by itself.
    fn compile_head(&self, bytes: &'static [u8]) -> Option<Head> {
        // The lookup compares the first bytes as an array first.
        let key = *bytes.first_chunk::<HEAD_KEY>()?;
        let mut state = self.quick_start;
        for &b in bytes {
            state = self.quick.next_state(Anchored::No, state, b);
            if self.quick.is_match(state) {
                return None;
            }
        }
        Some(Head {
            key,
            bytes,
            state,
            // The platform mark's conditions look at most one byte past
            // its end; inside the head, they hold for every UA it starts.
            shaped: self
                .platform_mark(bytes)
                .is_some_and(|(end, local)| local && end < bytes.len()),
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
        let (from, state, shaped) = match self.head_of(ua) {
            Some(head) => (head.bytes.len(), head.state, head.shaped),
            None => (0, self.quick_start, false),
        };
        match self.may_match(ua, from, state) {
            Some(from) => self.scan(ua, from),
            None => self.without_bot_token(ua, Reason::NoBotToken(None), shaped),
        }
    }

    /// The longest head `ua` starts with.
    #[inline]
    fn head_of(&self, ua: &[u8]) -> Option<&Head> {
        let key = ua.first_chunk::<HEAD_KEY>()?;
        // Every head starts with `Mozilla/`: most robots stop here.
        if key[0] != b'M' {
            return None;
        }
        self.heads
            .iter()
            .find(|h| h.key == *key && ua.starts_with(h.bytes))
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

    /// Whether the prefix of any token occurs in `ua[from..]` (ASCII
    /// case-insensitively), walking on from the quick DFA's `state` (the
    /// state after `ua[..from]`, in which no prefix ends). When none does,
    /// no rule can match (a token occurrence contains its prefix), so the
    /// answer is human without a full scan and without lowercasing a copy.
    ///
    /// When one does, returns the position from which the full scan may
    /// start: no token starts earlier, since its prefix would have ended in
    /// the part of the first lane already walked.
    fn may_match(&self, ua: &[u8], from: usize, state: StateID) -> Option<usize> {
        const OVERLAP: usize = QUICK_PREFIX - 1;
        let q = (ua.len() - from) / 4;
        if q <= OVERLAP {
            return self.walk(ua, from, state).map(scan_start);
        }
        // Lane k walks the bytes from offsets[k] on, `len` of them (the
        // last lane: to the end). Lane k > 0 starts OVERLAP bytes before
        // its quarter, so every occurrence that ends in its quarter lies
        // wholly in lane k; lanes may also see some of their neighbour's,
        // which is harmless. Equal lengths keep the four walks in step to
        // the end, with no serial tails.
        let len = q + OVERLAP;
        let offsets = [
            from,
            from + q - OVERLAP,
            from + 2 * q - OVERLAP,
            from + 3 * q - OVERLAP,
        ];
        let s0 = &ua[from..from + len];
        let s1 = &ua[offsets[1]..offsets[1] + len];
        let s2 = &ua[offsets[2]..offsets[2] + len];
        let s3 = &ua[offsets[3]..];
        let dfa = &self.quick;
        let step = |sid: &mut StateID, byte: u8| {
            *sid = dfa.next_state(Anchored::No, *sid, byte);
            dfa.is_special(*sid)
        };
        let mut ids = [state, self.quick_start, self.quick_start, self.quick_start];
        // The earliest prefix end found so far, and how many lanes (from
        // the first) may still hold an earlier one: once lane k has found
        // its first, the lanes after it can only hold later ones, and the
        // lanes before it walk on, still in step.
        let mut earliest = usize::MAX;
        let mut live = 4;
        let lanes = s0.iter().zip(s1).zip(s2).zip(&s3[..len]);
        for (i, (((&b0, &b1), &b2), &b3)) in lanes.enumerate() {
            let special = step(&mut ids[0], b0)
                | step(&mut ids[1], b1)
                | step(&mut ids[2], b2)
                | step(&mut ids[3], b3);
            if !special {
                continue;
            }
            if let Some(k) = ids[..live].iter().position(|&sid| dfa.is_match(sid)) {
                earliest = earliest.min(offsets[k] + i);
                live = k;
                if live == 0 {
                    break;
                }
            }
        }
        if live == 4 {
            // Nothing found; only the last lane has bytes left (fewer than
            // four).
            return self.walk(ua, offsets[3] + len, ids[3]).map(scan_start);
        }
        Some(scan_start(earliest))
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
        let mut model = None;
        let mut at = from.min(ua.len());
        while let Some(m) = self.automaton.find(Input::new(ua).span(at..ua.len())) {
            let Some(index) = self.holding(&self.groups, ua, &m) else {
                // A shorter token may still match from the next byte on.
                at = m.start() + 1;
                continue;
            };
            match self.rules[index].kind {
                Kind::Bot => {
                    if self.generic[index]
                        && self.signals.is_on(Signal::DeviceModel)
                        && in_device_model(ua, m.start(), m.end())
                    {
                        model = Some(index);
                        at = m.end();
                        continue;
                    }
                    return Verdict {
                        class: UaClass::Bot,
                        reason: Reason::Token(index),
                    };
                }
                Kind::Human => {
                    exception = Some(index);
                    at = m.end();
                }
                // Not in this automaton.
                Kind::Shape => at = m.end(),
            }
        }
        let reason = match (exception, model) {
            (Some(_), _) | (None, None) => Reason::NoBotToken(exception),
            (None, Some(i)) => Reason::DeviceModel(i),
        };
        self.without_bot_token(ua, reason, false)
    }

    /// The verdict for a UA without a bot token (`reason` says what the
    /// scan saw): a human exception keeps it human; otherwise, with
    /// [`Signal::NoBrowserShape`] on, it needs a browser-grammar mark
    /// (`shaped`: its head is known to hold one, no need to look).
    #[inline]
    fn without_bot_token(&self, ua: &[u8], reason: Reason, shaped: bool) -> Verdict {
        let excepted = matches!(reason, Reason::NoBotToken(Some(_)));
        let shapeless = || !shaped && !self.has_shape(ua);
        if !excepted && self.signals.is_on(Signal::NoBrowserShape) && shapeless() {
            return Verdict {
                class: UaClass::Bot,
                reason: Reason::Structure(Signal::NoBrowserShape),
            };
        }
        Verdict {
            class: UaClass::Human,
            reason,
        }
    }

    /// Whether any browser-grammar mark holds in `ua`. A browser's
    /// platform comment comes early (`Mozilla/5.0 (Windows NT …`), so the
    /// search mostly stops within the first 20 bytes.
    fn has_shape(&self, ua: &[u8]) -> bool {
        self.platform_mark(ua).is_some() || self.first_shape_mark(ua).is_some()
    }

    /// The shape check's fast path: the platform comment's first word is
    /// one of the common platform marks (`Mozilla/5.0 (Windows NT …`),
    /// compared in place. Returns where the word ends, and whether its
    /// rule's conditions depend on nothing past the byte after it.
    fn platform_mark(&self, ua: &[u8]) -> Option<(usize, bool)> {
        // An array comparison: a few register compares, no memcmp call.
        let open = if ua.first_chunk::<13>() == Some(MOZILLA) {
            MOZILLA.len() - 1
        } else {
            ua.iter().take(32).position(|&b| b == b'(')?
        };
        let mut at = open + 1;
        // `(compatible; MSIE 8.0; Windows NT …`: the platform follows.
        const COMPATIBLE: &[u8] = b"compatible; ";
        if ua.len() >= at + COMPATIBLE.len()
            && ua[at..at + COMPATIBLE.len()].eq_ignore_ascii_case(COMPATIBLE)
        {
            at += COMPATIBLE.len();
        }
        let rest = &ua[at..];
        let first = rest.first()?.to_ascii_lowercase();
        self.platforms
            .iter()
            .find(|p| {
                p.first == first
                    && rest.len() >= p.word.len()
                    && rest[..p.word.len()].eq_ignore_ascii_case(p.word)
                    && (p.free || self.rules[p.rule].accepts(ua, at, at + p.word.len()))
            })
            .map(|p| (at + p.word.len(), p.local))
    }

    /// The first rule of match `m`'s group whose edge and case conditions
    /// hold there, in priority order.
    fn holding(&self, groups: &[Vec<usize>], ua: &[u8], m: &aho_corasick::Match) -> Option<usize> {
        groups[m.pattern().as_usize()]
            .iter()
            .copied()
            .find(|&i| self.rules[i].accepts(ua, m.start(), m.end()))
    }

    /// The first browser-grammar mark that holds in `ua` (index into
    /// [`Classifier::rules`]): what the evaluation credits a mark with.
    #[doc(hidden)]
    pub fn first_shape_mark(&self, ua: &[u8]) -> Option<usize> {
        let shape = self.shape.as_ref()?;
        let mut at = 0;
        while let Some(m) = shape.find(Input::new(ua).span(at..ua.len())) {
            if let Some(i) = self.holding(&self.shape_groups, ua, &m) {
                return Some(i);
            }
            at = m.start() + 1;
        }
        None
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

    /// The class table of these rules.
    pub fn classes(&self) -> &Classes {
        &self.classes
    }

    /// The class a request with `verdict` counts as ([`Classes::of`]: a
    /// spoofed claim is `unknown`).
    pub fn class_of(&self, verdict: &Verdict, spoofed: bool) -> ClassId {
        self.classes.of(verdict, spoofed)
    }

    /// A class's name ([`Classes::name`]): the list whose token decided,
    /// `unknown`, `no-user-agent`, or `human`.
    pub fn class_name(&self, class: ClassId) -> &str {
        self.classes.name(class)
    }
}

/// One of [`PLATFORMS`] that the lists hold as a mark.
#[derive(Clone, Debug)]
struct Platform {
    /// The word's first byte, lower case: most candidates fail on it.
    first: u8,
    word: &'static [u8],
    /// Its rule in [`Classifier::rules`].
    rule: usize,
    /// The rule has no edge or case condition: the match alone holds.
    free: bool,
    /// The rule's end condition looks at no more than the byte after the
    /// word (none, or a word boundary): whether it holds is settled by
    /// the bytes up to there.
    local: bool,
}

/// How most browser UAs start; the shape check compares it as one array.
const MOZILLA: &[u8; 13] = b"Mozilla/5.0 (";

/// A [`HEADS`] entry that holds no token prefix (see [`Classifier::new`]).
#[derive(Clone, Debug)]
struct Head {
    /// Its first [`HEAD_KEY`] bytes, compared as an array before the rest.
    key: [u8; HEAD_KEY],
    bytes: &'static [u8],
    /// The quick DFA's state after `bytes`.
    state: StateID,
    /// `bytes` holds a platform mark whose conditions it settles: a UA
    /// that starts with it has browser shape.
    shaped: bool,
}

/// How many bytes of a head [`Classifier::head_of`] compares as an array
/// (`Mozilla/5.0 (W`); shorter heads are not used.
const HEAD_KEY: usize = 14;

/// How the User-Agents of the common browsers start, byte for byte: the
/// platform comments of Windows, macOS, Android, Linux, iPhone and iPad,
/// and, where the UA-reduction of Chrome, Safari and Firefox froze them,
/// the engine tokens after them; Internet Explorer's and the classic
/// crawler's `(compatible; `. The quick check walks a UA that starts
/// with one from its end, in the state the DFA has there (computed when
/// the rules load), instead of from byte 0: a shorter walk, the same
/// answer. A head in which a rule's token prefix ends is not used, so
/// custom rules cannot make this wrong, only slower.
const HEADS: [&[u8]; 17] = [
    b"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) ",
    b"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:",
    b"Mozilla/5.0 (Windows NT 10.0; ",
    b"Mozilla/5.0 (Windows NT ",
    b"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) ",
    b"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) ",
    b"Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:",
    b"Mozilla/5.0 (Macintosh; Intel Mac OS X ",
    b"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) ",
    b"Mozilla/5.0 (Linux; Android ",
    b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) ",
    b"Mozilla/5.0 (X11; ",
    b"Mozilla/5.0 (iPhone; CPU iPhone OS ",
    b"Mozilla/5.0 (iPad; CPU OS ",
    b"Mozilla/5.0 (compatible; MSIE ",
    b"Mozilla/4.0 (compatible; MSIE ",
    b"Mozilla/5.0 (compatible; ",
];

/// The platform words that most browsers' comments start with, tried first
/// by the shape check (each only if the lists hold it as a mark).
const PLATFORMS: [&[u8]; 12] = [
    b"iPhone",
    b"Linux",
    b"Windows",
    b"MSIE",
    b"Macintosh",
    b"X11",
    b"iPad",
    b"Android",
    b"J2ME",
    b"iPod",
    b"BlackBerry",
    b"MIDP-",
];

/// A leftmost-longest, ASCII case-insensitive contiguous NFA over
/// `patterns`: the full scan's automaton, for the tokens and for the marks.
fn full_scan_automaton(patterns: &[String]) -> Result<AhoCorasick, RulesError> {
    Ok(AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::LeftmostLongest)
        .kind(Some(AhoCorasickKind::ContiguousNFA))
        .build(patterns)?)
}

/// The token lists' rules of the kinds `keep` selects, case-folded and
/// deduplicated: the automaton's patterns and, per pattern, its rules in
/// priority order.
fn compile_patterns(
    lists: &RuleLists,
    keep: impl Fn(Kind) -> bool,
) -> (Vec<String>, Vec<Vec<usize>>) {
    let mut patterns: Vec<String> = Vec::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for (i, rule) in lists.rules.iter().enumerate() {
        if !keep(rule.kind) {
            continue;
        }
        let folded = rule.token.to_ascii_lowercase();
        let id = *index.entry(folded.clone()).or_insert_with(|| {
            patterns.push(folded);
            groups.push(Vec::new());
            patterns.len() - 1
        });
        groups[id].push(i);
    }
    (patterns, groups)
}

/// Whether `ua[start..end]` lies in the device-model position of a
/// handset's platform comment: inside the first parenthesis, in a segment
/// after the one naming Android, that is neither the OS version nor a
/// `compatible` claim, not followed by `/` (a product
/// with a version is a robot's name, not a model), and without a contact
/// address. `(Linux; Android 9; SMARTBOT Pro Build/PPR1)`: yes;
/// `(compatible; SomeBot/1.0)` and `(Linux; Android 9; x) … somebot`: no.
fn in_device_model(ua: &[u8], start: usize, end: usize) -> bool {
    let Some(open) = ua.iter().position(|&b| b == b'(') else {
        return false;
    };
    if start <= open {
        return false;
    }
    let close = ua[open..]
        .iter()
        .position(|&b| b == b')')
        .map_or(ua.len(), |p| open + p);
    if end > close || ua.get(end) == Some(&b'/') {
        return false;
    }
    let first = open + 1;
    let seg_start = ua[first..start]
        .iter()
        .rposition(|&b| b == b';')
        .map_or(first, |p| first + p + 1);
    // The model follows the Android version: `(Linux; Android 9; MODEL`.
    if !contains_ci(&ua[first..seg_start], b"android") {
        return false;
    }
    let seg_end = ua[end..close]
        .iter()
        .position(|&b| b == b';')
        .map_or(close, |p| end + p);
    let segment = ua[seg_start..seg_end].trim_ascii();
    let starts = |word: &[u8]| {
        segment.len() >= word.len() && segment[..word.len()].eq_ignore_ascii_case(word)
    };
    let not_a_model = starts(b"android")
        || starts(b"linux")
        || starts(b"compatible")
        || contains_ci(segment, b"http")
        || segment.contains(&b'@');
    !not_a_model
}

/// ASCII case-insensitive substring test (`needle` lower case).
fn contains_ci(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
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
            Reason::Structure(signal) => write!(f, "structure:{}", signal.name()),
            Reason::DeviceModel(i) => write!(f, "no-bot-token (device model: {})", rule(i)),
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
