//! `crawlgate man --out DIR`: the manual pages. crawlgate(1) and one page
//! per subcommand come from the clap definition (clap_mangen);
//! crawlgate.toml(5) comes from the documented example config,
//! deploy/crawlgate.toml, by a small roff writer.

use std::path::{Path, PathBuf};

use clap::CommandFactory;

use super::{Cli, Failure, Outcome};

/// The documented example config, every key with its default.
pub(super) const EXAMPLE: &str = include_str!("../../deploy/crawlgate.toml");

/// Writes the pages and prints their paths, one a line.
pub fn run(out: &Path) -> Outcome {
    match write(out) {
        Ok(paths) => {
            for path in paths {
                println!("{}", path.display());
            }
            Ok(())
        }
        Err(err) => Err(Failure::new(1, &err)),
    }
}

/// Writes `crawlgate.1`, `crawlgate-<sub>.1` for each subcommand (hidden
/// ones left out) and `crawlgate.toml.5` into `out`, created if missing.
/// When `out` is a `man1` folder, the section-5 page goes to the `man5`
/// beside it, where `man 5 crawlgate.toml` looks.
pub fn write(out: &Path) -> std::io::Result<Vec<PathBuf>> {
    let context = |path: &Path, err: std::io::Error| {
        std::io::Error::new(err.kind(), format!("{}: {err}", path.display()))
    };
    let mut written = Vec::new();
    for (name, roff) in command_pages() {
        let path = out.join(format!("{name}.1"));
        put(&path, &roff).map_err(|e| context(&path, e))?;
        written.push(path);
    }
    let man5 = match (out.file_name(), out.parent()) {
        (Some(name), Some(parent)) if name == "man1" => parent.join("man5"),
        _ => out.to_path_buf(),
    };
    let path = man5.join("crawlgate.toml.5");
    put(&path, &config_page(EXAMPLE)).map_err(|e| context(&path, e))?;
    written.push(path);
    Ok(written)
}

/// Writes `text` to `path`, its folder created if missing.
fn put(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)
}

/// Each visible command's page name (`crawlgate-sitemap-build`) and roff,
/// parents first. The pages depend on the source alone (no build date, no
/// commit): the package ships them as committed under deploy/man/.
pub fn command_pages() -> Vec<(String, String)> {
    let mut root = Cli::command()
        .disable_help_subcommand(true)
        // The crate's version alone: the commit and date of `-V` and the
        // build details of `--version` are not the page's.
        .version(env!("CARGO_PKG_VERSION"))
        .long_version(None::<&'static str>);
    root.build();
    let mut pages = Vec::new();
    add_pages(&root, None, &mut pages);
    pages
}

/// Adds `cmd`'s page and its subcommands' pages to `pages`.
fn add_pages(cmd: &clap::Command, parent: Option<&str>, pages: &mut Vec<(String, String)>) {
    let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_owned();
    let children: Vec<&clap::Command> =
        cmd.get_subcommands().filter(|c| !c.is_hide_set()).collect();
    let mut roff = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .title(name.to_uppercase())
        .source(format!("crawlgate {}", env!("CARGO_PKG_VERSION")))
        .manual("crawlgate")
        .render(&mut roff)
        .expect("rendering into memory does not fail");
    let roff = String::from_utf8(roff).expect("clap_mangen writes UTF-8");
    // clap_mangen opens with the definition of an apostrophe string; the
    // title line goes first, as man's tools expect, the definition after it.
    let mut roff = match roff.find("\n.TH ") {
        Some(at) => {
            let (preamble, rest) = roff.split_at(at + 1);
            let (title, body) = rest.split_at(rest.find('\n').map_or(rest.len(), |n| n + 1));
            format!("{title}{preamble}{body}")
        }
        None => roff,
    };
    // SEE ALSO: the parent, the subcommands, and the config file's page
    // where a config file is read.
    let mut see_also: Vec<String> = parent.iter().map(|p| format!("{p}(1)")).collect();
    see_also.extend(
        children
            .iter()
            .map(|c| format!("{}(1)", c.get_display_name().unwrap_or(c.get_name()))),
    );
    if parent.is_none() || name.ends_with("-check-config") {
        see_also.push("crawlgate.toml(5)".to_owned());
    }
    roff.push_str(".SH \"SEE ALSO\"\n");
    roff.push_str(&escape(&see_also.join(", ")));
    roff.push('\n');
    pages.push((name.clone(), roff));
    for child in children {
        add_pages(child, Some(&name), pages);
    }
}

/// A line of the example, as the page uses it.
pub(super) enum Line<'a> {
    /// Empty: ends a block.
    Blank,
    /// `[section]`, not commented out.
    Section(&'a str),
    /// A setting, `key = value` or a `[table]` header, set or commented
    /// out (then with its `#`), or a line of a multi-line value.
    Setting(&'a str),
    /// A comment's text, after `#` and one space.
    Comment(&'a str),
}

pub(super) fn classify(line: &str) -> Line<'_> {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return Line::Blank;
    }
    let Some(comment) = trimmed.strip_prefix('#') else {
        if let Some(name) = trimmed.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if !name.contains(['"', '[', ',']) {
                return Line::Section(name);
            }
        }
        return Line::Setting(line.trim_end());
    };
    let text = comment.strip_prefix(' ').unwrap_or(comment);
    // A commented-out setting is one that reads as TOML; prose does not
    // (`# enabled = false.` ends a sentence).
    let code = text.trim();
    let setting =
        (code.contains('=') || code.starts_with('[')) && code.parse::<toml::Table>().is_ok();
    if setting {
        Line::Setting(trimmed)
    } else {
        Line::Comment(text)
    }
}

/// crawlgate.toml(5), from the example config `example`: its opening
/// comment is the DESCRIPTION; each `[section]` is a section of the page,
/// and each block of comment lines followed by settings an entry, tagged
/// with the setting's line, the comment as its text.
pub fn config_page(example: &str) -> String {
    let mut page = Page {
        roff: String::new(),
        comments: Vec::new(),
        settings: Vec::new(),
        keys_opened: false,
    };
    // No date, as on the command pages: the page is the same whenever built.
    page.roff.push_str(&format!(
        ".TH CRAWLGATE.TOML 5 \"\" \"crawlgate {}\" \"crawlgate\"\n",
        env!("CARGO_PKG_VERSION")
    ));
    // Keys and paths are not to be hyphenated or spread out.
    page.roff.push_str(".nh\n.ad l\n");
    page.roff
        .push_str(".SH NAME\ncrawlgate.toml \\- the configuration file of crawlgate\n");
    page.roff
        .push_str(".SH SYNOPSIS\n.B crawlgate \\-\\-config\n.I FILE\n");
    page.roff.push_str(".SH DESCRIPTION\n");
    for line in example.lines() {
        match classify(line) {
            Line::Blank => page.flush(),
            Line::Section(name) => {
                page.flush();
                page.keys_opened = true;
                page.roff
                    .push_str(&format!(".SH {}\n", escape(&format!("[{name}]"))));
            }
            Line::Setting(text) => page.settings.push(text),
            Line::Comment(text) => {
                if !page.settings.is_empty() {
                    page.flush();
                }
                page.comments.push(text);
            }
        }
    }
    page.flush();
    page.roff.push_str(".SH \"SEE ALSO\"\n");
    page.roff
        .push_str(&escape("crawlgate(1), crawlgate-check-config(1)"));
    page.roff.push('\n');
    page.roff
}

/// The page being written, and the block read so far.
struct Page<'a> {
    roff: String,
    comments: Vec<&'a str>,
    settings: Vec<&'a str>,
    /// Whether a section for keys has begun (the top-level keys get one
    /// after the DESCRIPTION).
    keys_opened: bool,
}

impl Page<'_> {
    /// Writes the block read so far: an entry when it has settings, a
    /// paragraph when only comments.
    fn flush(&mut self) {
        let comments = std::mem::take(&mut self.comments);
        let settings = std::mem::take(&mut self.settings);
        if settings.is_empty() {
            if !comments.is_empty() {
                self.roff.push_str(".PP\n");
                self.text(&comments);
            }
            return;
        }
        if !self.keys_opened {
            self.keys_opened = true;
            self.roff.push_str(".PP\n");
            self.roff.push_str(&escape(
                "Each key is shown as the example file has it: set to its default, \
                 or commented out (#) when it is unset by default.",
            ));
            self.roff.push_str("\n.SH \"TOP\\-LEVEL KEYS\"\n");
        }
        self.roff.push_str(".TP\n");
        self.roff.push_str(&tag(settings[0]));
        self.roff.push('\n');
        if settings.len() > 1 {
            self.roff.push_str(".nf\n");
            for line in &settings[1..] {
                self.roff.push_str(&escape(line));
                self.roff.push('\n');
            }
            self.roff.push_str(".fi\n");
        }
        self.text(&comments);
    }

    /// Comment lines as running text; an empty one is a paragraph break, an
    /// indented one starts a line of its own (roff breaks there).
    fn text(&mut self, lines: &[&str]) {
        for line in lines {
            if line.trim().is_empty() {
                self.roff.push_str(".sp\n");
            } else {
                self.roff.push_str(&escape(line));
                self.roff.push('\n');
            }
        }
    }
}

/// A setting line as an entry's tag: the key in bold.
fn tag(setting: &str) -> String {
    let (hash, code) = match setting.strip_prefix('#') {
        Some(rest) => ("# ", rest.trim_start()),
        None => ("", setting),
    };
    let tagged = match code.split_once('=') {
        Some((key, value)) if !code.starts_with('[') => {
            format!("\\fB{}\\fR={}", escape(key), escape(value))
        }
        _ => format!("\\fB{}\\fR", escape(code)),
    };
    format!("{}{tagged}", escape(hash))
}

/// `text` as a roff text line: backslashes and hyphens written so that
/// they print as typed, and a leading `.` or `'` not read as a request.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    if text.starts_with(['.', '\'']) {
        out.push_str("\\&");
    }
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\e"),
            '-' => out.push_str("\\-"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_is_text_and_settings_are_tags() {
        let example = "# The file.\n\n# Address.\nlisten = \"a\"\n\n[tls]\n# Off unless\n\
                       # enabled = false.\n# Set.\n# listen = \"0.0.0.0:443\"\n\n\
                       # .dot and \\e\n# [tls.x]\n# k-v = 1\nlist = [\n  1,\n]\n";
        let page = config_page(example);
        assert!(page.starts_with(".TH CRAWLGATE.TOML 5 "), "{page}");
        let body = page.split_once(".SH DESCRIPTION\n").expect("description").1;
        let expected = concat!(
            ".PP\nThe file.\n",
            ".PP\nEach key is shown as the example file has it: set to its default, ",
            "or commented out (#) when it is unset by default.\n",
            ".SH \"TOP\\-LEVEL KEYS\"\n",
            ".TP\n\\fBlisten \\fR= \"a\"\nAddress.\n",
            ".SH [tls]\n",
            ".TP\n# \\fBlisten \\fR= \"0.0.0.0:443\"\nOff unless\nenabled = false.\nSet.\n",
            ".TP\n# \\fB[tls.x]\\fR\n.nf\n# k\\-v = 1\nlist = [\n  1,\n]\n.fi\n",
            "\\&.dot and \\ee\n",
            ".SH \"SEE ALSO\"\ncrawlgate(1), crawlgate\\-check\\-config(1)\n",
        );
        assert_eq!(body, expected);
    }

    #[test]
    fn every_visible_command_has_a_page_that_names_its_family() {
        let pages = command_pages();
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        for name in [
            "crawlgate",
            "crawlgate-demo",
            "crawlgate-check-config",
            "crawlgate-sitemap",
            "crawlgate-sitemap-build",
        ] {
            assert!(names.contains(&name), "{names:?}");
        }
        assert!(!names
            .iter()
            .any(|n| n.contains("man") || n.contains("help")));
        let (_, build) = &pages[names
            .iter()
            .position(|n| *n == "crawlgate-sitemap-build")
            .expect("page")];
        assert!(build.starts_with(".TH "), "{build}");
        assert!(
            build.ends_with(".SH \"SEE ALSO\"\ncrawlgate\\-sitemap(1)\n"),
            "{build}"
        );
    }
}
