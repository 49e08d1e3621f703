use super::*;

/// (raw parameter name as sent, name in PHP's `$_GET`, name in Nette's
/// `Url::parseQuery`). `None` = the parameter gets no name there.
///
/// Every row was observed with PHP 8.2 `parse_str` and Nette 3's parser;
/// `php_agrees_with_the_truth_table` re-checks them whenever `php` is present.
const TRUTH: &[(&str, Option<&str>, Option<&str>)] = &[
    ("do", Some("do"), Some("do")),
    ("%64o", Some("do"), Some("do")),
    ("%64%6F", Some("do"), Some("do")),
    ("do[]", Some("do"), Some("do")),
    ("do[a]", Some("do"), Some("do")),
    ("do[]x", Some("do"), Some("do")),
    ("do[", Some("do_"), Some("do")),
    ("do[x", Some("do_x"), Some("do")),
    ("do[x.y z[", Some("do_x_y_z_"), Some("do")),
    ("do.[", Some("do__"), Some("do.")),
    ("do.x[", Some("do_x_"), Some("do.x")),
    ("do[%00]", Some("do_"), Some("do")),
    ("do[a%00", Some("do_a"), Some("do")),
    ("do%5B%5D", Some("do"), Some("do")),
    ("do%5bx%5d", Some("do"), Some("do")),
    ("do%5D", Some("do]"), Some("do")),
    ("do%5Dx", Some("do]x"), Some("do")),
    ("do]", Some("do]"), Some("do")),
    ("%5Ffid", Some("_fid"), Some("_fid")),
    ("_fid", Some("_fid"), Some("_fid")),
    (".fid", Some("_fid"), Some(".fid")),
    ("%2Efid", Some("_fid"), Some(".fid")),
    (" fid", Some("fid"), Some(" fid")),
    ("+do", Some("do"), Some(" do")),
    ("%20%20do", Some("do"), Some("  do")),
    ("d.o", Some("d_o"), Some("d.o")),
    ("d+o", Some("d_o"), Some("d o")),
    ("do%20", Some("do_"), Some("do ")),
    ("do%20[]", Some("do_"), Some("do ")),
    ("do%00x", Some("do"), None),
    ("do %00", Some("do_"), None),
    ("%00do", None, None),
    ("DO", Some("DO"), Some("DO")),
    ("[do]", None, None),
    ("a[do]", Some("a"), Some("a")),
    ("do%2", Some("do%2"), Some("do%2")),
    ("%2564o", Some("%64o"), Some("%64o")),
    ("+%5Dx", Some("]x"), None),
    ("undo", Some("undo"), Some("undo")),
    ("fid", Some("fid"), Some("fid")),
];

fn php(raw: &str) -> Option<String> {
    let mut buf = [0u8; 256];
    php_name(raw.as_bytes(), &mut buf).map(|n| String::from_utf8_lossy(n).into_owned())
}

fn nette(raw: &str) -> Option<String> {
    let mut buf = [0u8; 256];
    nette_name(raw.as_bytes(), &mut buf).map(|n| String::from_utf8_lossy(n).into_owned())
}

#[test]
fn php_names_follow_the_truth_table() {
    for &(raw, want, _) in TRUTH {
        assert_eq!(php(raw).as_deref(), want, "php name of {raw:?}");
    }
}

#[test]
fn nette_names_follow_the_truth_table() {
    for &(raw, _, want) in TRUTH {
        assert_eq!(nette(raw).as_deref(), want, "nette name of {raw:?}");
    }
}

#[test]
fn names_that_do_not_fit_the_buffer_are_none() {
    let mut buf = [0u8; 4];
    assert_eq!(php_name(b"abcd", &mut buf), Some(&b"abcd"[..]));
    assert_eq!(php_name(b"abcde", &mut buf), None);
    assert_eq!(php_name(b"ab[cde", &mut buf), None);
    assert_eq!(nette_name(b"abcde", &mut buf), None);
    // Leading spaces are dropped before they could count against the buffer.
    let long_spaces = format!("{}do", "+".repeat(1000));
    assert_eq!(php_name(long_spaces.as_bytes(), &mut buf), Some(&b"do"[..]));
}

#[test]
fn action_param_is_the_union_of_both_parsers() {
    let blocked = ["do", "_fid"];
    let cases: &[(&str, Option<usize>)] = &[
        ("do=vote", Some(0)),
        ("a=1&do=vote", Some(0)),
        ("a=1&%64o=vote", Some(0)),
        ("do[]=1", Some(0)),
        ("do[=1", Some(0)),   // Nette only
        ("do%5D=1", Some(0)), // Nette only
        ("+do=1", Some(0)),   // PHP only
        (".fid=1", Some(1)),  // PHP only
        ("_fid=abc", Some(1)),
        ("do", Some(0)),
        ("undo=1", None),
        ("x=do", None),
        ("x=1&y=_fid", None),
        ("DO=1", None),
        ("d.o=1", None),
        ("&&&", None),
        ("", None),
        ("=do", None),
        ("x=1;do=2", None),
        ("%00do=1", None),
    ];
    for &(query, want) in cases {
        assert_eq!(
            action_param(query.as_bytes(), &blocked),
            want,
            "query {query:?}"
        );
    }
}

#[test]
fn decoding_is_php_urldecode() {
    let decode = |s: &str| UrlDecoded::new(s.as_bytes()).collect::<Vec<u8>>();
    assert_eq!(decode("a+b%41%4a%4A%zz%4%"), b"a bAJJ%zz%4%");
    assert_eq!(decode("%00%ff"), [0, 0xff]);
}

/// Runs every row of [`TRUTH`] through real PHP: `parse_str` for `$_GET`
/// and, for Nette, the same rewrite its `Url::parseQuery` applies.
#[test]
fn php_agrees_with_the_truth_table() {
    let Some(php_bin) = crate::testing::php_binary() else {
        return;
    };
    let script = r#"
        $in = stream_get_contents(STDIN);
        foreach (explode("\n", rtrim($in, "\n")) as $raw) {
            $q = $raw . '=1';
            parse_str($q, $a);
            $s = str_replace(['%5B', '%5b'], '[', $q);
            $s = preg_replace('#&([^[&=]+)([^&]*)#', '&0[$1]$2', '&' . $s);
            parse_str($s, $r);
            $n = array_filter(array_keys($r[0] ?? []), 'is_string');
            echo json_encode(array_map('strval', array_keys($a))), "\t", json_encode(array_values($n)), "\n";
        }
    "#;
    let input: String = TRUTH.iter().map(|(raw, _, _)| format!("{raw}\n")).collect();
    let out = crate::testing::run_with_stdin(&php_bin, &["-r", script], input.as_bytes());
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), TRUTH.len(), "php output: {out}");
    for (line, &(raw, want_php, want_nette)) in lines.iter().zip(TRUTH) {
        let list = |want: Option<&str>| match want {
            Some(name) => format!("[{}]", json_string(name)),
            None => "[]".to_owned(),
        };
        let expected = format!("{}\t{}", list(want_php), list(want_nette));
        assert_eq!(*line, expected, "real PHP disagrees on {raw:?}");
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
