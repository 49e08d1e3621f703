//! The crate's modules import one way, down the layers that `src/lib.rs`'s
//! crate doc draws: a module imports only modules of its own layer or of
//! layers below, and never in a circle. The table in the doc is the one
//! statement of the order; this reads it and every `crate::` path of
//! `src/`, so neither can drift from the other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The layers of `lib.rs`'s "Layers" table, bottom first: each row is
/// `| N. name | [`a`], [`b`] |`.
fn layers(lib: &str) -> Vec<(String, Vec<String>)> {
    let mut rows = Vec::new();
    let mut inside = false;
    for line in lib.lines() {
        let Some(text) = line.strip_prefix("//!") else {
            continue;
        };
        let text = text.trim();
        if text.starts_with('#') {
            inside = text == "# Layers";
            continue;
        }
        if !inside || !text.starts_with('|') || text.starts_with("| ---") {
            continue;
        }
        let cells: Vec<&str> = text.trim_matches('|').split('|').map(str::trim).collect();
        let [name, modules] = cells[..] else {
            panic!("a layer row has two cells: {text}");
        };
        if name == "layer" {
            continue; // the header
        }
        let modules = modules
            .split(',')
            .map(|m| {
                m.trim()
                    .trim_start_matches("[`")
                    .trim_end_matches("`]")
                    .to_string()
            })
            .collect();
        rows.push((name.to_string(), modules));
    }
    // The table is written top (main's side) first, as one reads down.
    rows.reverse();
    rows
}

/// The crate's top-level modules, from `pub mod` / `mod` lines of lib.rs.
fn declared(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            l.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_string)
        })
        .collect()
}

/// The code of a file without comments and without its inline test
/// module (tests may reach anywhere).
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules a piece of code names through `crate::`, with
/// the grouped form `use crate::{a::X, b};` read as well.
fn imports(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            let mut depth = 0;
            let mut start = 0;
            let body = &group[..end];
            for (i, c) in body.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.insert(ident(body[start..i].trim()));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            found.insert(ident(body[start..].trim()));
        } else {
            found.insert(ident(rest));
        }
    }
    found.remove("");
    found
}

/// Every module's imports of other top-level modules: files under
/// `src/NAME/` and `src/NAME.rs` count as `NAME`; test-only files
/// (`tests.rs`, `tests/`) do not count.
fn graph(modules: &BTreeSet<String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("src/ is readable") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "tests") {
                    stack.push(path);
                }
                continue;
            }
            let rel = path.strip_prefix(src()).expect("under src");
            let is_rs = path.extension().is_some_and(|e| e == "rs");
            if !is_rs || path.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            let top = rel
                .components()
                .next()
                .and_then(|c| c.as_os_str().to_str())
                .expect("utf-8 name")
                .trim_end_matches(".rs")
                .to_string();
            if !modules.contains(&top) {
                continue; // lib.rs, main.rs
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            let names = imports(&code(&text));
            let edges = graph.entry(top.clone()).or_default();
            edges.extend(
                names
                    .into_iter()
                    .filter(|n| *n != top && modules.contains(n)),
            );
        }
    }
    graph
}

/// A circle through `start`, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        start: &str,
        at: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in graph.get(at).into_iter().flatten() {
            if next == start {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, start, next, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_string()];
    walk(graph, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn modules_import_down_the_layers_of_the_crate_doc() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    let layers = layers(&lib);
    assert!(layers.len() >= 5, "lib.rs draws the layers: {layers:?}");
    let modules = declared(&lib);
    let mut layer_of = BTreeMap::new();
    for (n, (name, members)) in layers.iter().enumerate() {
        for m in members {
            assert!(modules.contains(m), "layer {name} names {m}, not a module");
            let before = layer_of.insert(m.clone(), n);
            assert!(before.is_none(), "{m} is in two layers");
        }
    }
    let missing: Vec<_> = modules
        .iter()
        .filter(|m| !layer_of.contains_key(*m))
        .collect();
    assert!(missing.is_empty(), "lib.rs's layers omit {missing:?}");

    let graph = graph(&modules);
    let mut upward = Vec::new();
    for (from, edges) in &graph {
        for to in edges {
            if layer_of[to] > layer_of[from] {
                upward.push(format!(
                    "{from} ({}) imports {to} ({})",
                    layers[layer_of[from]].0, layers[layer_of[to]].0
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports pointing up:\n{}",
        upward.join("\n")
    );
    for module in graph.keys() {
        if let Some(path) = circle(&graph, module) {
            panic!("an import circle: {}", path.join(" -> "));
        }
    }
}

/// The check sees what it must: a grouped `use`, a path in a body, and
/// not a comment or a test module.
#[test]
fn the_reader_finds_imports_and_ignores_comments_and_tests() {
    let text = "use crate::{a::X, b, c::{D, E}};\n\
                // crate::commented\n\
                /// [`crate::doc`]\n\
                fn f() { crate::d::g(); }\n\
                #[cfg(test)]\nmod tests {\n use crate::e;\n}\n";
    let found: Vec<_> = imports(&code(text)).into_iter().collect();
    assert_eq!(found, ["a", "b", "c", "d"]);
    let mut graph = BTreeMap::new();
    graph.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    graph.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(
        circle(&graph, "a"),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
}
