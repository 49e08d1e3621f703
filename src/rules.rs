//! The User-Agent token lists, read from `rules/` as data.
//!
//! The lists ship inside the binary (embedded at build time from the
//! repository's `rules/` folder) so crawlgate runs with no files at all;
//! `--rules DIR` replaces them with the `*.txt` files of `DIR`.
//!
//! Format (see `rules/README.md`): one token per line, `#` starts a
//! comment, blank lines are ignored, surrounding white space is trimmed. A
//! token may carry conditions on its edges: a leading `^` (the match must
//! start the User-Agent) or `\b` (the byte before it must not be a letter or
//! digit), a trailing `$` (the match must end the User-Agent) or `\b`. A
//! file whose name starts with `human` holds human exceptions, one whose
//! name starts with `browser` holds browser-grammar marks (platforms,
//! engines, handset shapes); every other file is a list of bot tokens whose
//! name (the file stem, e.g. `search`) is the class of the robots it finds.
//! `signals.conf` switches the structural signals (see [`Signals`]).
//! [`crate::classify::Classifier`] compiles the lists into automata.

use std::fs;
use std::path::{Path, PathBuf};

/// The longest token accepted, in bytes.
pub const MAX_TOKEN_LEN: usize = 256;

/// The repository's `rules/` folder, embedded. A test checks that it holds
/// exactly these files.
const EMBEDDED: &[(&str, &str)] = &[
    ("ai.txt", include_str!("../rules/ai.txt")),
    ("archiver.txt", include_str!("../rules/archiver.txt")),
    ("automation.txt", include_str!("../rules/automation.txt")),
    ("browser.txt", include_str!("../rules/browser.txt")),
    ("feed.txt", include_str!("../rules/feed.txt")),
    ("generic.txt", include_str!("../rules/generic.txt")),
    ("human.txt", include_str!("../rules/human.txt")),
    ("library.txt", include_str!("../rules/library.txt")),
    ("monitor.txt", include_str!("../rules/monitor.txt")),
    ("preview.txt", include_str!("../rules/preview.txt")),
    ("search.txt", include_str!("../rules/search.txt")),
    ("seo.txt", include_str!("../rules/seo.txt")),
    ("service.txt", include_str!("../rules/service.txt")),
    ("structural.txt", include_str!("../rules/structural.txt")),
];

/// Files whose name starts with this hold browser-grammar marks
/// ([`Kind::Shape`]).
const MARKS_PREFIX: &str = "browser";

/// The embedded `signals.conf`.
const EMBEDDED_SIGNALS: &str = include_str!("../rules/signals.conf");

/// What a matching token says about the User-Agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A robot's token.
    Bot,
    /// A human exception: its span cannot count as a bot token.
    Human,
    /// A mark of browser grammar (a platform, engine or handset shape):
    /// with [`Signal::NoBrowserShape`] on, a User-Agent without any bot
    /// token and without any such mark is a robot.
    Shape,
}

/// A structural signal: a decision on the shape of a User-Agent rather than
/// on a listed name. Each one is switched in `signals.conf`; its measured
/// gain and cost are in `rules/README.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// No bot token and no browser-grammar mark (`browser*.txt`) at all:
    /// a tool, a library or a placeholder, not a browser.
    NoBrowserShape,
    /// A generic bot token (`generic.txt`) inside the device-model position
    /// of a handset's platform comment (`(Linux; Android 9; SMARTBOT
    /// Pro Build/…)`) is a model name, not a robot's mark.
    DeviceModel,
}

impl Signal {
    /// Every signal, in the order of [`Signals`].
    pub const ALL: [Signal; 2] = [Signal::NoBrowserShape, Signal::DeviceModel];

    /// The name used in `signals.conf` and by `classify --explain`.
    pub fn name(self) -> &'static str {
        match self {
            Signal::NoBrowserShape => "no-browser-shape",
            Signal::DeviceModel => "device-model",
        }
    }
}

/// Which structural signals are on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signals {
    on: [bool; Signal::ALL.len()],
}

impl Signals {
    /// All signals off: the token lists alone.
    pub const NONE: Signals = Signals {
        on: [false; Signal::ALL.len()],
    };

    /// Whether `signal` is on.
    pub fn is_on(&self, signal: Signal) -> bool {
        self.on[signal as usize]
    }

    /// `self` with `signal` switched to `on`.
    pub fn with(mut self, signal: Signal, on: bool) -> Self {
        self.on[signal as usize] = on;
        self
    }
}

/// A condition on one edge of a match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edge {
    /// No condition.
    Free,
    /// The neighbouring byte, if any, is not an ASCII letter or digit
    /// (written `\b`).
    Word,
    /// The match is at the start (`^`) or end (`$`) of the User-Agent.
    Anchor,
    /// The User-Agent ends at most this many bytes after the match
    /// (written `$~N`; end edge only): a short tail such as a version.
    Near(u16),
}

/// One token, with where it came from (for `classify --explain` and errors).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Bot token or human exception.
    pub kind: Kind,
    /// The list (file stem) that holds it, e.g. `search`: for bot tokens,
    /// the class of robot.
    pub list: Box<str>,
    /// The bytes to find, without edge markers.
    pub token: Box<str>,
    /// Condition on the byte before the match.
    pub start: Edge,
    /// Condition on the byte after the match.
    pub end: Edge,
    /// The match must have exactly the token's letter case (written in
    /// double quotes: `"Bot"`); otherwise ASCII case is ignored.
    pub exact_case: bool,
    /// 1-based line in its file.
    pub line: usize,
}

impl Rule {
    /// Whether a match of this rule's token at `ua[start..end]` satisfies
    /// the rule's edge conditions.
    pub fn accepts(&self, ua: &[u8], start: usize, end: usize) -> bool {
        let before_ok = match self.start {
            Edge::Free => true,
            Edge::Anchor => start == 0,
            Edge::Word => start == 0 || !ua[start - 1].is_ascii_alphanumeric(),
            Edge::Near(_) => true,
        };
        let after_ok = match self.end {
            Edge::Free => true,
            Edge::Anchor => end == ua.len(),
            Edge::Word => ua.get(end).is_none_or(|b| !b.is_ascii_alphanumeric()),
            Edge::Near(n) => ua.len() - end <= usize::from(n),
        };
        before_ok && after_ok && (!self.exact_case || &ua[start..end] == self.token.as_bytes())
    }

    /// The rule as written in its file (`^curl/`, `\bbot\b`).
    pub fn written(&self) -> String {
        let start = match self.start {
            Edge::Word => "\\b",
            Edge::Anchor => "^",
            Edge::Free | Edge::Near(_) => "",
        };
        let end = match self.end {
            Edge::Free => String::new(),
            Edge::Word => "\\b".to_owned(),
            Edge::Anchor => "$".to_owned(),
            Edge::Near(n) => format!("$~{n}"),
        };
        if self.exact_case {
            format!("{start}\"{}\"{end}", self.token)
        } else {
            format!("{start}{}{end}", self.token)
        }
    }
}

/// All rule lists, in a stable order: human exceptions first (so that at
/// the same starting position an exception wins), then bot lists by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleLists {
    /// Every token of every list.
    pub rules: Vec<Rule>,
    /// The structural signals that are on.
    pub signals: Signals,
    /// Where the lists came from: `None` for the embedded set.
    pub source: Option<PathBuf>,
}

/// Why a rules folder could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// The folder or a file in it could not be read.
    #[error("cannot read rules from {path}: {source}")]
    Read {
        /// The folder or file.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: std::io::Error,
    },
    /// A line holds something that is not a usable token.
    #[error("{file}:{line}: {problem}")]
    Line {
        /// The file.
        file: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The folder holds no bot token at all, which would make every visitor
    /// a human; almost certainly the wrong folder.
    #[error("no bot tokens in {0} (expected *.txt token lists)")]
    NoBotTokens(PathBuf),
    /// A structural signal needs marks that the folder's browser*.txt files
    /// do not have.
    #[error("signal {signal} is on but the browser*.txt files of {dir} hold no marks; switch it off in signals.conf or add marks")]
    NoShapeMarks {
        /// The signal's name.
        signal: &'static str,
        /// The folder.
        dir: PathBuf,
    },
    /// The automaton could not be built from the tokens.
    #[error("cannot compile the rules: {0}")]
    Build(#[from] aho_corasick::BuildError),
    /// A broken invariant of the automaton library (a bug).
    #[error("cannot compile the rules: {0}")]
    Internal(&'static str),
}

impl RuleLists {
    /// The lists embedded in the binary.
    pub fn embedded() -> Self {
        let mut rules = Vec::new();
        for (name, text) in EMBEDDED {
            // The embedded files are tested (`embedded_rules_parse`), so a
            // bad line here is a build defect; skipping it keeps this total.
            let _ = parse_file(Path::new(name), text, &mut rules);
        }
        sort(&mut rules);
        let signals = embedded_signals();
        Self {
            rules,
            signals,
            source: None,
        }
    }

    /// Reads every `*.txt` file of `dir`.
    pub fn from_dir(dir: &Path) -> Result<Self, RulesError> {
        let read_err = |path: &Path, source| RulesError::Read {
            path: path.to_owned(),
            source,
        };
        let mut files = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| read_err(dir, e))? {
            let path = entry.map_err(|e| read_err(dir, e))?.path();
            if path.extension().is_some_and(|ext| ext == "txt") && path.is_file() {
                files.push(path);
            }
        }
        files.sort();
        let mut rules = Vec::new();
        for path in &files {
            let text = fs::read_to_string(path).map_err(|e| read_err(path, e))?;
            parse_file(path, &text, &mut rules)?;
        }
        if !rules.iter().any(|r| r.kind == Kind::Bot) {
            return Err(RulesError::NoBotTokens(dir.to_owned()));
        }
        // A folder without browser*.txt (token lists written before the
        // marks existed) gets the built-in marks.
        let has_marks_file = files.iter().any(|f| {
            f.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(MARKS_PREFIX))
        });
        if !has_marks_file {
            for (name, text) in EMBEDDED.iter().filter(|(n, _)| n.starts_with(MARKS_PREFIX)) {
                parse_file(Path::new(name), text, &mut rules)?;
            }
        }
        sort(&mut rules);
        // A folder without its own signals.conf gets the built-in switches.
        let signals_path = dir.join("signals.conf");
        let signals = match fs::read_to_string(&signals_path) {
            Ok(text) => parse_signals(&signals_path, &text)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => embedded_signals(),
            Err(e) => return Err(read_err(&signals_path, e)),
        };
        if signals.is_on(Signal::NoBrowserShape) && !rules.iter().any(|r| r.kind == Kind::Shape) {
            return Err(RulesError::NoShapeMarks {
                signal: Signal::NoBrowserShape.name(),
                dir: dir.to_owned(),
            });
        }
        Ok(Self {
            rules,
            signals,
            source: Some(dir.to_owned()),
        })
    }
}

fn sort(rules: &mut [Rule]) {
    // Stable: within a list, file order is kept.
    rules.sort_by(|a, b| {
        let rank = |k: Kind| match k {
            Kind::Human => 0,
            Kind::Bot => 1,
            Kind::Shape => 2,
        };
        (rank(a.kind), &a.list).cmp(&(rank(b.kind), &b.list))
    });
}

/// The built-in `signals.conf`. It is tested
/// (`signals_parse_and_errors_name_the_line`), so a bad line here is a
/// build defect; all signals off keeps this total.
fn embedded_signals() -> Signals {
    parse_signals(Path::new("signals.conf"), EMBEDDED_SIGNALS).unwrap_or(Signals::NONE)
}

/// Reads `signals.conf`: `name = on|off` per line, `#` comments; a signal
/// not named is off.
fn parse_signals(path: &Path, text: &str) -> Result<Signals, RulesError> {
    let mut signals = Signals::NONE;
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |problem| RulesError::Line {
            file: path.to_owned(),
            line: i + 1,
            problem,
        };
        let (name, value) = line
            .split_once('=')
            .ok_or(bad("expected `signal = on` or `signal = off`"))?;
        let signal = Signal::ALL
            .into_iter()
            .find(|s| s.name() == name.trim())
            .ok_or(bad(
                "unknown signal (known: no-browser-shape, device-model)",
            ))?;
        let on = match value.trim() {
            "on" => true,
            "off" => false,
            _ => return Err(bad("the value must be `on` or `off`")),
        };
        signals = signals.with(signal, on);
    }
    Ok(signals)
}

fn parse_file(path: &Path, text: &str, out: &mut Vec<Rule>) -> Result<(), RulesError> {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy())
        .unwrap_or_default();
    let kind = if stem.starts_with("human") {
        Kind::Human
    } else if stem.starts_with(MARKS_PREFIX) {
        Kind::Shape
    } else {
        Kind::Bot
    };
    for (i, line) in text.lines().enumerate() {
        let token = match line.find('#') {
            Some(hash) => &line[..hash],
            None => line,
        }
        .trim();
        if token.is_empty() {
            continue;
        }
        let (start, token) = if let Some(rest) = token.strip_prefix('^') {
            (Edge::Anchor, rest)
        } else if let Some(rest) = token.strip_prefix("\\b") {
            (Edge::Word, rest)
        } else {
            (Edge::Free, token)
        };
        let near = token
            .rsplit_once("$~")
            .and_then(|(rest, n)| Some((rest, n.parse::<u16>().ok()?)));
        let (end, token) = if let Some((rest, n)) = near {
            (Edge::Near(n), rest)
        } else if let Some(rest) = token.strip_suffix('$') {
            (Edge::Anchor, rest)
        } else if let Some(rest) = token.strip_suffix("\\b") {
            (Edge::Word, rest)
        } else {
            (Edge::Free, token)
        };
        let (exact_case, token) = match token.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
            Some(inner) => (true, inner),
            None => (false, token),
        };
        let problem = if token.is_empty() {
            Some("empty token (only edge markers)")
        } else if token.len() > MAX_TOKEN_LEN {
            Some("token longer than 256 bytes")
        } else if token.bytes().any(|b| b.is_ascii_control()) {
            Some("token contains a control character")
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(RulesError::Line {
                file: path.to_owned(),
                line: i + 1,
                problem,
            });
        }
        out.push(Rule {
            kind,
            list: stem.as_ref().into(),
            token: token.into(),
            start,
            end,
            exact_case,
            line: i + 1,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_rules_parse() {
        for (name, text) in EMBEDDED {
            let mut rules = Vec::new();
            parse_file(Path::new(name), text, &mut rules).expect("embedded rules parse");
            assert!(!rules.is_empty(), "{name} is empty");
        }
    }

    #[test]
    fn edge_markers_parse_and_apply() {
        let mut rules = Vec::new();
        parse_file(
            Path::new("x.txt"),
            "^curl/\n\\bbot\\b\nA$\nplain\n\"Bot\"\n",
            &mut rules,
        )
        .expect("parses");
        let written: Vec<String> = rules.iter().map(Rule::written).collect();
        assert_eq!(written, ["^curl/", "\\bbot\\b", "A$", "plain", "\"Bot\""]);
        assert!(rules[4].accepts(b"LanaiBotapr", 5, 8));
        parse_file(Path::new("x.txt"), "^WhatsApp/$~14\n", &mut rules).expect("parses");
        let near = &rules[5];
        assert_eq!(near.written(), "^WhatsApp/$~14");
        assert!(near.accepts(b"WhatsApp/2.23.20.0 A", 0, 9));
        assert!(!near.accepts(b"WhatsApp/2.11.102 Android/4.3 Device/x", 0, 9));
        assert!(!rules[4].accepts(b"CUBOT", 2, 5));
        let (curl, bot, a) = (&rules[0], &rules[1], &rules[2]);
        assert!(curl.accepts(b"curl/8", 0, 5));
        assert!(!curl.accepts(b"x curl/8", 2, 7));
        assert!(bot.accepts(b"a bot/1", 2, 5));
        assert!(bot.accepts(b"bot", 0, 3));
        assert!(!bot.accepts(b"IDbot553", 2, 5));
        assert!(!bot.accepts(b"robots", 2, 5));
        assert!(a.accepts(b"x A", 2, 3));
        assert!(!a.accepts(b"x Ab", 2, 3));
        let err = parse_file(Path::new("x.txt"), "^$\n", &mut rules).expect_err("empty");
        assert!(err
            .to_string()
            .ends_with("x.txt:1: empty token (only edge markers)"));
    }

    #[test]
    fn signals_parse_and_errors_name_the_line() {
        let on = parse_signals(Path::new("s"), EMBEDDED_SIGNALS).expect("embedded signals.conf");
        assert_eq!(RuleLists::embedded().signals, on);
        let s = parse_signals(
            Path::new("s"),
            "# c\nno-browser-shape = on\ndevice-model=off\n",
        )
        .expect("parses");
        assert!(s.is_on(Signal::NoBrowserShape) && !s.is_on(Signal::DeviceModel));
        for (text, problem) in [
            ("shape = on", "s:1: unknown signal"),
            ("\nno-browser-shape = yes", "s:2: the value must be"),
            ("device-model", "s:1: expected"),
        ] {
            let err = parse_signals(Path::new("s"), text).expect_err(text);
            assert!(err.to_string().starts_with(problem), "{err}");
        }
        // The message lists every signal there is.
        let err = parse_signals(Path::new("s"), "x = on").expect_err("unknown");
        for signal in Signal::ALL {
            assert!(err.to_string().contains(signal.name()), "{err}");
        }
    }

    #[test]
    fn the_shape_signal_needs_marks() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("bots.txt"), "bot\n").expect("write");
        // No browser*.txt: the built-in marks.
        let lists = RuleLists::from_dir(dir.path()).expect("built-in marks");
        let embedded = RuleLists::embedded();
        let marks = |l: &RuleLists| l.rules.iter().filter(|r| r.kind == Kind::Shape).count();
        assert_eq!(marks(&lists), marks(&embedded));
        // An empty one: no marks, which the signal cannot work without.
        fs::write(dir.path().join("browser.txt"), "# none\n").expect("write");
        fs::write(dir.path().join("signals.conf"), "no-browser-shape = on\n").expect("write");
        let err = RuleLists::from_dir(dir.path()).expect_err("no marks");
        assert!(matches!(err, RulesError::NoShapeMarks { .. }), "{err}");
        fs::write(dir.path().join("signals.conf"), "no-browser-shape = off\n").expect("write");
        let lists = RuleLists::from_dir(dir.path()).expect("off needs no marks");
        assert!(!lists.signals.is_on(Signal::NoBrowserShape));
        assert_eq!(marks(&lists), 0);
    }

    #[test]
    fn embedded_equals_the_repository_folder() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
        let from_dir = RuleLists::from_dir(&dir).expect("rules/ loads");
        assert_eq!(from_dir.rules, RuleLists::embedded().rules);
        assert_eq!(from_dir.signals, RuleLists::embedded().signals);
        let mut on_disk: Vec<String> = fs::read_dir(&dir)
            .expect("rules/")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".txt"))
            .collect();
        on_disk.sort();
        let embedded: Vec<&str> = EMBEDDED.iter().map(|(n, _)| *n).collect();
        assert_eq!(on_disk, embedded, "EMBEDDED must list every rules/*.txt");
    }

    #[test]
    fn human_exceptions_come_first() {
        let lists = RuleLists::embedded();
        let first_bot = lists.rules.iter().position(|r| r.kind == Kind::Bot);
        let last_human = lists.rules.iter().rposition(|r| r.kind == Kind::Human);
        assert!(last_human < first_bot);
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let long = "x".repeat(300);
        fs::write(dir.path().join("bot-a.txt"), format!("ok\n# c\n{long}\n")).expect("write");
        let err = RuleLists::from_dir(dir.path()).expect_err("too long");
        assert!(
            err.to_string()
                .ends_with("bot-a.txt:3: token longer than 256 bytes"),
            "{err}"
        );
    }

    #[test]
    fn a_folder_without_bot_tokens_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("human.txt"), "CUBOT\n").expect("write");
        assert!(matches!(
            RuleLists::from_dir(dir.path()),
            Err(RulesError::NoBotTokens(_))
        ));
        let missing = dir.path().join("nope");
        assert!(matches!(
            RuleLists::from_dir(&missing),
            Err(RulesError::Read { .. })
        ));
    }
}
