//! The PHP / Nette parameter-name parsers on arbitrary bytes: no panic, and
//! the names they return fit the buffer and obey PHP's rules.
#![no_main]

use crawlgate::query::{action_param, nette_name, php_name};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = action_param(data, &["do", "_fid"]);
    let mut buf = [0u8; 64];
    if let Some(name) = php_name(data, &mut buf) {
        assert!(!name.is_empty() && name.len() <= 64);
        assert!(!name.contains(&b'.') && !name.contains(&b' ') && !name.contains(&0));
        assert_ne!(name[0], b' ');
    }
    if let Some(name) = nette_name(data, &mut buf) {
        assert!(!name.is_empty() && !name.contains(&b']') && !name.contains(&0));
    }
});
