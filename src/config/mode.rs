//! `mode`: whether decisions are carried out (`enforce`) or only
//! recorded while every request is forwarded as it came (`observe`).

use super::{invalid, ConfigError};

/// What crawlgate does with a decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Carry every decision out (the default).
    #[default]
    Enforce,
    /// Decide as in enforce mode, record the decision, and forward the
    /// request as it came.
    Observe,
}

impl Mode {
    /// `enforce` or `observe`, as written in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Observe => "observe",
        }
    }

    /// The mode written `text`, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "enforce" => Some(Mode::Enforce),
            "observe" => Some(Mode::Observe),
            _ => None,
        }
    }
}

/// `mode`, validated (default `enforce`).
pub(super) fn mode_config(raw: Option<String>) -> Result<Mode, ConfigError> {
    let Some(text) = raw else {
        return Ok(Mode::default());
    };
    Mode::parse(&text).ok_or_else(|| {
        invalid(
            "mode",
            format!("{text:?} is not one of \"enforce\", \"observe\""),
        )
    })
}

/// A `--mode` value: a bad one is a bad flag (exit 2).
pub(super) fn mode_flag(value: &str) -> Result<String, String> {
    Mode::parse(value)
        .map(|_| value.to_owned())
        .ok_or_else(|| format!("{value:?} is not one of \"enforce\", \"observe\""))
}
