//! The class table: every class a request can count as, each with a
//! small id and its name, built once per rules load from the rule lists.
//!
//! `human`, `unknown` and `no-user-agent` have fixed ids; each bot list
//! follows once, in rule order. Every per-class table (the class header,
//! the shedding tiers, the request counters, the access log's name) is a
//! vector indexed by [`ClassId`], so reading one on the request path is an
//! index, never a search or an allocation.

use crate::config::{HUMAN_CLASS, NO_USER_AGENT_CLASS, UNKNOWN_CLASS};
use crate::rules::{Kind, Rule};

use super::{Reason, UaClass, Verdict};

/// A class's index in its [`Classes`] table (stable for one rules load).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClassId(u16);

impl ClassId {
    /// Not a robot.
    pub const HUMAN: ClassId = ClassId(0);
    /// A robot no list names: found by structure alone, or a spoofed
    /// crawler claim ([`UNKNOWN_CLASS`]).
    pub const UNKNOWN: ClassId = ClassId(1);
    /// An empty or missing User-Agent ([`NO_USER_AGENT_CLASS`]).
    pub const NO_USER_AGENT: ClassId = ClassId(2);

    /// The index into a per-class table.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// The class table of one rules load (see the module doc).
#[derive(Clone, Debug)]
pub struct Classes {
    /// Each id's name, indexed by [`ClassId`].
    names: Vec<Box<str>>,
    /// Each rule's class: its list's for a bot token, human for the rest.
    rule_class: Vec<ClassId>,
}

impl Classes {
    /// The table of `rules`: the fixed classes, then each bot list once,
    /// in rule order.
    pub fn new(rules: &[Rule]) -> Self {
        let mut names: Vec<Box<str>> = vec![
            HUMAN_CLASS.into(),
            UNKNOWN_CLASS.into(),
            NO_USER_AGENT_CLASS.into(),
        ];
        let rule_class = rules
            .iter()
            .map(|rule| match rule.kind {
                Kind::Human | Kind::Shape => ClassId::HUMAN,
                Kind::Bot => match names.iter().position(|n| **n == *rule.list) {
                    Some(i) => ClassId(i as u16),
                    None => {
                        names.push(rule.list.clone());
                        ClassId((names.len() - 1) as u16)
                    }
                },
            })
            .collect();
        Self { names, rule_class }
    }

    /// How many classes (the length of every per-class table).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Never: the fixed classes are always there.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Every id, in order.
    pub fn ids(&self) -> impl Iterator<Item = ClassId> {
        (0..self.names.len() as u16).map(ClassId)
    }

    /// `class`'s name (metrics, access log, the class header, `[shed]
    /// order`): a list's name, `unknown`, `no-user-agent` or `human`.
    pub fn name(&self, class: ClassId) -> &str {
        self.names.get(class.index()).map_or(UNKNOWN_CLASS, |n| n)
    }

    /// The class named `name`, if the table has it.
    pub fn find(&self, name: &str) -> Option<ClassId> {
        let i = self.names.iter().position(|n| **n == *name)?;
        Some(ClassId(i as u16))
    }

    /// The class of rule `rule` (index into the rules): its list's for a
    /// bot token.
    pub fn of_rule(&self, rule: usize) -> ClassId {
        self.rule_class
            .get(rule)
            .copied()
            .unwrap_or(ClassId::UNKNOWN)
    }

    /// The class a request with `verdict` counts as, once verification
    /// has spoken: the one id every per-class table is read with. A
    /// crawler claim that its operator's own method refuted (`spoofed`)
    /// is an `unknown` robot, not the class it claimed.
    pub fn of(&self, verdict: &Verdict, spoofed: bool) -> ClassId {
        if verdict.class != UaClass::Bot {
            return ClassId::HUMAN;
        }
        match verdict.reason {
            Reason::EmptyUserAgent => ClassId::NO_USER_AGENT,
            Reason::NoBotToken(_) | Reason::DeviceModel(_) => ClassId::HUMAN,
            _ if spoofed => ClassId::UNKNOWN,
            Reason::Token(rule) => self.of_rule(rule),
            Reason::Structure(_) => ClassId::UNKNOWN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::Classifier;
    use crate::rules::RuleLists;

    fn classifier() -> Classifier {
        Classifier::new(&RuleLists::embedded()).expect("rules")
    }

    #[test]
    fn the_fixed_classes_have_fixed_ids_and_names() {
        let c = classifier();
        let classes = c.classes();
        assert_eq!(classes.name(ClassId::HUMAN), "human");
        assert_eq!(classes.name(ClassId::UNKNOWN), "unknown");
        assert_eq!(classes.name(ClassId::NO_USER_AGENT), "no-user-agent");
        assert_eq!(classes.find("human"), Some(ClassId::HUMAN));
        assert_eq!(classes.find("unknown"), Some(ClassId::UNKNOWN));
        assert_eq!(classes.find("no-user-agent"), Some(ClassId::NO_USER_AGENT));
        assert_eq!(classes.find("none"), None);
        // Ids are indices: the same table twice gives the same ids.
        let again = classifier();
        for id in classes.ids() {
            assert_eq!(again.classes().name(id), classes.name(id));
            assert_eq!(classes.find(classes.name(id)), Some(id));
        }
    }

    #[test]
    fn each_bot_list_is_one_class_in_rule_order() {
        let lists = RuleLists::embedded();
        let classes = Classes::new(&lists.rules);
        let mut expected: Vec<&str> = vec!["human", "unknown", "no-user-agent"];
        for rule in lists.rules.iter().filter(|r| r.kind == Kind::Bot) {
            if !expected.contains(&&*rule.list) {
                expected.push(&rule.list);
            }
        }
        let names: Vec<&str> = classes.ids().map(|id| classes.name(id)).collect();
        assert_eq!(names, expected);
        assert!(names.contains(&"search") && names.contains(&"ai"));
        for (i, rule) in lists.rules.iter().enumerate() {
            let want = match rule.kind {
                Kind::Bot => &*rule.list,
                Kind::Human | Kind::Shape => "human",
            };
            assert_eq!(classes.name(classes.of_rule(i)), want, "rule {i}");
        }
    }

    #[test]
    fn a_spoofed_claim_is_unknown() {
        let c = classifier();
        let class = |ua: Option<&[u8]>, spoofed: bool| c.class_of(&c.classify(ua), spoofed);
        let gptbot = Some(&b"GPTBot/1.2"[..]);
        assert_eq!(c.class_name(class(gptbot, false)), "ai");
        assert_eq!(class(gptbot, true), ClassId::UNKNOWN);
        // Structure alone: unknown, spoofed or not.
        let tool = Some(&b"SiteTool/2.1"[..]);
        assert_eq!(class(tool, false), ClassId::UNKNOWN);
        assert_eq!(class(None, true), ClassId::NO_USER_AGENT);
        let firefox = Some(&b"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Firefox/133.0"[..]);
        assert_eq!(class(firefox, true), ClassId::HUMAN);
    }
}
