//! `docs/configuration.md`, the configuration reference: made from the
//! documented example config (`deploy/crawlgate.toml`), as crawlgate.toml(5)
//! is, with each key's type, default and whether a reload applies it.
//! `tests/docs.rs` fails when the committed file differs from what this
//! writes, so the reference cannot drift from the example, and the example
//! cannot drift from the config's types (`config::keys`).

use std::fmt::Write as _;

use crate::config::{keys, Restart};

use super::man::{classify, Line, EXAMPLE};

/// The reference for the example the binary was built with.
pub fn configuration() -> String {
    markdown(EXAMPLE)
}

/// The reference for `example`, written like `deploy/crawlgate.toml`: its
/// opening comment is the introduction; each `[section]` a section with a
/// table of its keys, then an entry per block of comment lines and the
/// settings that follow them.
pub fn markdown(example: &str) -> String {
    let known = keys();
    let mut doc = Doc {
        out: String::new(),
        known: &known,
        section: None,
        entries: Vec::new(),
        prose: Vec::new(),
        comments: Vec::new(),
        settings: Vec::new(),
    };
    doc.out.push_str(
        "# Configuration reference\n\n\
         <!-- Written by `CRAWLGATE_UPDATE_DOCS=1 cargo test --test docs` from \
         deploy/crawlgate.toml; edit that file, not this one. -->\n\n",
    );
    for line in example.lines() {
        match classify(line) {
            Line::Blank => doc.end_block(),
            Line::Section(name) => {
                doc.end_block();
                doc.end_section();
                doc.section = Some(name.to_owned());
            }
            Line::Setting(text) => doc.settings.push(text),
            Line::Comment(text) => {
                if !doc.settings.is_empty() {
                    doc.end_block();
                }
                doc.comments.push(text);
            }
        }
    }
    doc.end_block();
    doc.end_section();
    doc.out
}

/// One block of settings with the comment above it.
struct Entry {
    /// The keys it sets, dotted, each with its facts.
    keys: Vec<Facts>,
    /// The comment, as Markdown.
    text: String,
    /// The settings as an operator would write them (uncommented).
    example: Vec<String>,
}

/// What the reference says of one key.
struct Facts {
    key: String,
    kind: String,
    /// The value when the example sets it; `None`: unset by default.
    default: Option<String>,
}

/// The document being written, and the section and block read so far.
struct Doc<'a> {
    out: String,
    known: &'a [String],
    /// `None` before the first `[section]`: the top-level keys.
    section: Option<String>,
    entries: Vec<Entry>,
    /// The section's comment-only blocks before its first entry.
    prose: Vec<String>,
    comments: Vec<&'a str>,
    settings: Vec<&'a str>,
}

impl Doc<'_> {
    /// Ends a block: an entry when it holds settings, else prose (the
    /// introduction at the top, the section's opening text after a header).
    fn end_block(&mut self) {
        let comments = std::mem::take(&mut self.comments);
        let settings = std::mem::take(&mut self.settings);
        if settings.is_empty() {
            if comments.is_empty() {
                return;
            }
            let text = text(&comments);
            if self.section.is_none() && self.entries.is_empty() {
                self.out.push_str(&text);
                self.out.push('\n');
            } else {
                self.prose.push(text);
            }
            return;
        }
        let entry = self.entry(&comments, &settings);
        self.entries.push(entry);
    }

    /// An entry of `settings`, the lines of one block, commented out or not.
    fn entry(&self, comments: &[&str], settings: &[&str]) -> Entry {
        let mut keys: Vec<Facts> = Vec::new();
        let mut example = Vec::new();
        // Within a `[table]` written in the block, lines are its contents,
        // not keys of the section.
        let mut in_table = false;
        let mut lines = settings.iter().peekable();
        while let Some(line) = lines.next() {
            let (commented, code) = match line.trim_start().strip_prefix('#') {
                Some(rest) => (true, rest.trim_start()),
                None => (false, line.trim_start()),
            };
            example.push(if commented {
                code.to_owned()
            } else {
                (*line).to_owned()
            });
            if let Some(table) = code.strip_prefix('[').and_then(|c| c.strip_suffix(']')) {
                in_table = true;
                if let Some(key) = self
                    .known
                    .iter()
                    .find(|k| table == k.as_str() || table.starts_with(&format!("{k}.")))
                {
                    keys.push(Facts {
                        key: key.clone(),
                        kind: "table of lists: path or URL".to_owned(),
                        default: (!commented).then(|| "see below".to_owned()),
                    });
                }
                continue;
            }
            let Some((name, value)) = code.split_once('=') else {
                continue;
            };
            let name = name.trim();
            if in_table || name.is_empty() || name.contains([' ', '"', '[']) {
                continue;
            }
            // A value that opens a list goes on to the line that closes it.
            let mut value = value.trim().to_owned();
            while value.starts_with('[') && value.parse::<toml::Value>().is_err() {
                let Some(next) = lines.next() else { break };
                let next = next.trim_start();
                let next = next.strip_prefix('#').map_or(next, str::trim_start);
                example.push(if commented {
                    format!("  {next}")
                } else {
                    (*next).to_owned()
                });
                value.push(' ');
                value.push_str(next.trim());
            }
            let key = match &self.section {
                None => name.to_owned(),
                Some(section) => format!("{section}.{name}"),
            };
            if !self.known.contains(&key) {
                continue;
            }
            keys.push(Facts {
                kind: kind(&key, &value),
                default: (!commented).then(|| compact(&value)),
                key,
            });
        }
        Entry {
            keys,
            text: text(comments),
            example,
        }
    }

    /// Writes the section read so far: its header, opening text, a table of
    /// its keys, then each entry.
    fn end_section(&mut self) {
        let entries = std::mem::take(&mut self.entries);
        let prose = std::mem::take(&mut self.prose);
        if entries.is_empty() && prose.is_empty() {
            return;
        }
        let out = &mut self.out;
        match &self.section {
            None => out.push_str("## Top-level keys\n\n"),
            Some(name) => {
                let _ = write!(out, "## `[{name}]`\n\n");
            }
        }
        for text in &prose {
            out.push_str(text);
            out.push('\n');
        }
        out.push_str("| key | type | default | a reload |\n| --- | --- | --- | --- |\n");
        for facts in entries.iter().flat_map(|e| &e.keys) {
            let _ = writeln!(
                out,
                "| [`{}`](#{}) | {} | {} | {} |",
                facts.key,
                anchor(&facts.key),
                facts.kind,
                facts
                    .default
                    .as_deref()
                    .map_or_else(|| "unset".to_owned(), |d| format!("`{}`", cell(d))),
                if Restart::KEYS.contains(&facts.key.as_str()) {
                    "needs a restart"
                } else {
                    "applies it"
                }
            );
        }
        out.push('\n');
        for entry in &entries {
            let names: Vec<String> = entry.keys.iter().map(|f| format!("`{}`", f.key)).collect();
            if names.is_empty() {
                out.push_str(&entry.text);
                out.push('\n');
                continue;
            }
            let _ = write!(out, "### {}\n\n", names.join(", "));
            out.push_str(&entry.text);
            out.push_str("\n```toml\n");
            if let Some(name) = &self.section {
                if !entry.example.iter().any(|l| l.starts_with('[')) {
                    let _ = writeln!(out, "[{name}]");
                }
            }
            for line in &entry.example {
                out.push_str(line);
                out.push('\n');
            }
            out.push_str("```\n\n");
        }
    }
}

/// The heading anchor GitHub gives `### \`key\``: lower case, dots and
/// backticks dropped.
fn anchor(key: &str) -> String {
    key.chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_'))
        .collect::<String>()
        .to_lowercase()
}

/// A value on one line, as a table cell holds it.
fn compact(value: &str) -> String {
    value
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace("[ ", "[")
        .replace(", ]", "]")
}

/// `|` would end a table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// Comment lines as Markdown: running text in paragraphs (an empty line
/// breaks one), indented lines kept as they are in a text block.
fn text(lines: &[&str]) -> String {
    let mut out = String::new();
    let mut block = false;
    for line in lines {
        let indented = line.starts_with("  ");
        if indented != block {
            out.push_str(if indented { "\n```text\n" } else { "```\n\n" });
            block = indented;
        }
        if block {
            out.push_str(line);
            out.push('\n');
        } else if line.trim().is_empty() {
            out.push('\n');
        } else {
            out.push_str(&escape(line));
            out.push('\n');
        }
    }
    if block {
        out.push_str("```\n");
    }
    out
}

/// Markdown's emphasis and HTML marks written so they print as typed.
fn escape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        if matches!(c, '*' | '<' | '>' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A key's type, read from its value in the example (and, for strings,
/// from what the string holds).
fn kind(key: &str, value: &str) -> String {
    let parsed = format!("v = {value}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"));
    let Some(parsed) = parsed else {
        return "string".to_owned();
    };
    value_kind(key, &parsed)
}

fn value_kind(key: &str, value: &toml::Value) -> String {
    match value {
        toml::Value::Boolean(_) => "boolean".to_owned(),
        toml::Value::Integer(_) => "integer".to_owned(),
        toml::Value::Float(_) => "number".to_owned(),
        toml::Value::Array(items) => match items.first() {
            Some(first) => format!("list of {}", plural(&value_kind(key, first))),
            None => "list of strings".to_owned(),
        },
        toml::Value::String(s) => string_kind(key, s).to_owned(),
        toml::Value::Table(_) => "table".to_owned(),
        toml::Value::Datetime(_) => "date".to_owned(),
    }
}

fn plural(kind: &str) -> String {
    match kind.strip_prefix("list of ") {
        Some(inner) => format!("lists of {inner}"),
        None => format!("{kind}s"),
    }
}

/// What a string value is: a duration, a size, an address, a URL, a
/// path, or text.
fn string_kind(key: &str, s: &str) -> &'static str {
    let name = key.rsplit('.').next().unwrap_or(key);
    if s.parse::<std::net::SocketAddr>().is_ok() || name == "resolver" {
        "address"
    } else if s.starts_with("http://") || s.starts_with("https://") {
        "URL"
    } else if humantime::parse_duration(s).is_ok() && s.ends_with(|c: char| c.is_alphabetic()) {
        "duration"
    } else if s.ends_with("iB") && s.parse::<bytesize::ByteSize>().is_ok() {
        "size"
    } else if s.starts_with('/')
        || name.ends_with("_dir")
        || name.ends_with("_file")
        || name.ends_with("_ca")
        || matches!(name, "certs" | "file")
    {
        "path"
    } else {
        "string"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_an_entry_and_in_its_section_s_table() {
        let doc = configuration();
        for key in keys() {
            assert!(
                doc.lines()
                    .any(|l| l.starts_with("### ") && l.contains(&format!("`{key}`"))),
                "no entry for {key}"
            );
            assert!(
                doc.contains(&format!("| [`{key}`](#{}) |", anchor(&key))),
                "{key} is not in a table"
            );
        }
    }

    #[test]
    fn types_defaults_and_reloads_are_read_from_the_example() {
        let doc = configuration();
        for row in [
            "| [`listen`](#listen) | address | `\"127.0.0.1:8080\"` | needs a restart |",
            "| [`proxy.connect_timeout`](#proxyconnect_timeout) | duration | `\"2s\"` | applies it |",
            "| [`bot_cache.size`](#bot_cachesize) | size | `\"64MiB\"` | applies it |",
            "| [`shed.max_upstream_inflight`](#shedmax_upstream_inflight) | integer | unset | applies it |",
            "| [`block.params`](#blockparams) | list of strings | `[\"do\", \"_fid\"]` | applies it |",
            "| [`log.file`](#logfile) | path | unset | needs a restart |",
        ] {
            assert!(doc.contains(row), "{row} missing from:\n{doc}");
        }
        // A list written over several lines is one value.
        assert!(doc
            .contains("| [`shed.order`](#shedorder) | list of lists of strings | `[[\"library\""));
    }

    #[test]
    fn prose_stays_prose_and_marks_print_as_typed() {
        let doc = markdown(
            "# The file.\n\n[a]\n# Opening.\n\n# A *.txt list\n#   kept  as is\n# x = <y>\nx = 1\n",
        );
        assert!(
            doc.contains("The file.\n\n## `[a]`\n\nOpening.\n\n| key |"),
            "{doc}"
        );
        assert!(
            doc.contains("A \\*.txt list\n\n```text\n  kept  as is\n```\n"),
            "{doc}"
        );
    }
}
