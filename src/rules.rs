//! The User-Agent token lists, read from `rules/` as data.
//!
//! The lists ship inside the binary (embedded at build time from the
//! repository's `rules/` folder) so crawlgate runs with no files at all;
//! `--rules DIR` replaces them with the `*.txt` files of `DIR`.
//!
//! Format: one token per line, `#` starts a comment, blank lines are
//! ignored, surrounding white space is trimmed. A file whose name starts with
//! `human` holds human exceptions; every other file is a list of bot tokens,
//! named after the file (`bot-named.txt` is the list `bot-named`).
//! [`crate::classify::Classifier`] compiles the lists into one automaton.

use std::fs;
use std::path::{Path, PathBuf};

/// The longest token accepted, in bytes.
pub const MAX_TOKEN_LEN: usize = 256;

const EMBEDDED: &[(&str, &str)] = &[
    ("human.txt", include_str!("../rules/human.txt")),
    ("bot-marks.txt", include_str!("../rules/bot-marks.txt")),
    ("bot-named.txt", include_str!("../rules/bot-named.txt")),
    ("bot-clients.txt", include_str!("../rules/bot-clients.txt")),
];

/// What a matching token says about the User-Agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A robot's token.
    Bot,
    /// A human exception: its span cannot count as a bot token.
    Human,
}

/// One token, with where it came from (for `classify --explain` and errors).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Bot token or human exception.
    pub kind: Kind,
    /// The list (file stem) that holds it, e.g. `bot-named`.
    pub list: Box<str>,
    /// The token as written.
    pub token: Box<str>,
    /// 1-based line in its file.
    pub line: usize,
}

/// All rule lists, in a stable order: human exceptions first (so that at
/// the same starting position an exception wins), then bot lists by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleLists {
    /// Every token of every list.
    pub rules: Vec<Rule>,
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
    /// The automaton could not be built from the tokens.
    #[error("cannot compile the rules: {0}")]
    Build(#[from] aho_corasick::BuildError),
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
        Self {
            rules,
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
        sort(&mut rules);
        Ok(Self {
            rules,
            source: Some(dir.to_owned()),
        })
    }
}

fn sort(rules: &mut [Rule]) {
    // Stable: within a list, file order is kept.
    rules.sort_by(|a, b| {
        let rank = |k: Kind| matches!(k, Kind::Bot);
        (rank(a.kind), &a.list).cmp(&(rank(b.kind), &b.list))
    });
}

fn parse_file(path: &Path, text: &str, out: &mut Vec<Rule>) -> Result<(), RulesError> {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy())
        .unwrap_or_default();
    let kind = if stem.starts_with("human") {
        Kind::Human
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
        let problem = if token.len() > MAX_TOKEN_LEN {
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
    fn embedded_equals_the_repository_folder() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
        let from_dir = RuleLists::from_dir(&dir).expect("rules/ loads");
        assert_eq!(from_dir.rules, RuleLists::embedded().rules);
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
