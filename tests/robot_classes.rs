//! Issue 12.3: each well-known robot gets its class. Verified-crawler and
//! shedding features key on these classes, so a rules change that moves one
//! (Googlebot to `generic`, GPTBot to `seo`) must fail here.

use crawlgate::classify::Classifier;
use crawlgate::rules::RuleLists;

#[test]
fn well_known_robots_get_their_class() {
    let classifier = Classifier::new(&RuleLists::embedded()).expect("rules");
    let table = include_str!("data/robot_classes.tsv");
    let mut wrong = Vec::new();
    let mut rows = 0;
    for line in table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (want, ua) = line.split_once('\t').expect("class<TAB>user-agent");
        rows += 1;
        let verdict = classifier.classify(Some(ua.as_bytes()));
        let got = classifier.class_name(classifier.class_of(&verdict, false));
        if got != want {
            wrong.push(format!(
                "{ua}\n    want {want}, got {got} ({})",
                classifier.explain(verdict.reason)
            ));
        }
    }
    assert!(rows >= 60, "only {rows} robots in the table");
    assert!(
        wrong.is_empty(),
        "{} of {rows} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
