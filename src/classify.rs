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

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

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

/// Which rule decided, for `classify --explain` and logs.
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
    automaton: AhoCorasick,
    rules: Vec<Rule>,
}

impl Classifier {
    /// Compiles `lists` into one automaton.
    pub fn new(lists: &RuleLists) -> Result<Self, RulesError> {
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostFirst)
            .kind(Some(AhoCorasickKind::DFA))
            .build(lists.rules.iter().map(|r| r.token.as_bytes()))?;
        Ok(Self {
            automaton,
            rules: lists.rules.clone(),
        })
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
        let mut exception = None;
        for m in self.automaton.find_iter(ua) {
            let index = m.pattern().as_usize();
            match self.rules[index].kind {
                Kind::Bot => {
                    return Verdict {
                        class: UaClass::Bot,
                        reason: Reason::Token(index),
                    }
                }
                Kind::Human => exception = Some(index),
            }
        }
        Verdict {
            class: UaClass::Human,
            reason: Reason::NoBotToken(exception),
        }
    }

    /// A short human-readable name of the rule behind `reason`, such as
    /// `bot-marks:bot` or `no-bot-token`.
    pub fn explain(&self, reason: Reason) -> String {
        let rule = |i: usize| {
            let r = &self.rules[i];
            format!("{}:{}", r.list, r.token)
        };
        match reason {
            Reason::EmptyUserAgent => "empty-user-agent".to_owned(),
            Reason::Token(i) => rule(i),
            Reason::NoBotToken(None) => "no-bot-token".to_owned(),
            Reason::NoBotToken(Some(i)) => format!("no-bot-token (exception {})", rule(i)),
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
mod tests {
    use super::*;

    fn classifier() -> Classifier {
        Classifier::new(&RuleLists::embedded()).expect("embedded rules compile")
    }

    const FIREFOX: &str =
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0";
    const CHROME_ANDROID: &str = "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36";
    const GOOGLEBOT: &str =
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

    #[test]
    fn table() {
        let c = classifier();
        let rows: &[(&[u8], UaClass, &str)] = &[
            (FIREFOX.as_bytes(), UaClass::Human, "no-bot-token"),
            (CHROME_ANDROID.as_bytes(), UaClass::Human, "no-bot-token"),
            (GOOGLEBOT.as_bytes(), UaClass::Bot, "bot-marks:bot"),
            (b"GOOGLEBOT", UaClass::Bot, "bot-marks:bot"),
            (b"curl/8.5.0", UaClass::Bot, "bot-clients:curl"),
            (
                b"python-requests/2.31",
                UaClass::Bot,
                "bot-clients:python-requests",
            ),
            (
                b"facebookexternalhit/1.1",
                UaClass::Bot,
                "bot-named:facebookexternalhit",
            ),
            (
                b"Mozilla/5.0 ChatGPT-User/1.0",
                UaClass::Bot,
                "bot-named:ChatGPT-User",
            ),
            (b"", UaClass::Bot, "empty-user-agent"),
            (b"   ", UaClass::Bot, "empty-user-agent"),
            (
                b"Mozilla/5.0 (Linux; Android 9; CUBOT P30) Chrome/120 Mobile",
                UaClass::Human,
                "no-bot-token (exception human:CUBOT)",
            ),
            (
                b"Mozilla/5.0 (Linux; Android 9; CUBOT P30) Googlebot/2.1",
                UaClass::Bot,
                "bot-marks:bot",
            ),
            (
                b"Lynx/2.9.0 libwww-FM/2.14 SSL-MM/1.4.1",
                UaClass::Human,
                "no-bot-token (exception human:libwww-FM)",
            ),
            (b"libwww-perl/6.72", UaClass::Bot, "bot-clients:libwww"),
            (
                b"Mozilla/5.0 \xff\xfe bot \x80",
                UaClass::Bot,
                "bot-marks:bot",
            ),
            (b"Mozilla/5.0 \xff\xfe\x80", UaClass::Human, "no-bot-token"),
        ];
        for &(ua, class, why) in rows {
            let v = c.classify(Some(ua));
            assert_eq!(v.class, class, "{}", String::from_utf8_lossy(ua));
            assert_eq!(c.explain(v.reason), why, "{}", String::from_utf8_lossy(ua));
        }
        assert_eq!(c.classify(None).class, UaClass::Bot);
    }

    #[test]
    fn lines_in_lines_out() {
        let c = classifier();
        let mut input = &b"curl/8\r\nMozilla/5.0 Firefox/1\n\nx bot"[..];
        let mut out = Vec::new();
        let n = classify_lines(&c, true, &mut input, &mut out).expect("in-memory io");
        assert_eq!(n, 4);
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "bot\tbot-clients:curl\nhuman\tno-bot-token\nbot\tempty-user-agent\nbot\tbot-marks:bot\n"
        );
    }
}
