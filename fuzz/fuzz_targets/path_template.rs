//! The macro's path template parser on any text: nothing panics, and a template it
//! accepts gives back its text exactly. The checks are `macros/src/template_check.rs`,
//! which the property tests in `macros/src/ast.rs` run too; here coverage guides the
//! input.

#![no_main]

use libfuzzer_sys::fuzz_target;

// The proc-macro crate exports only its macro, so the parser's file is compiled
// here as a module of this crate.
#[path = "../../macros/src/template.rs"]
mod template;

#[path = "../../macros/src/template_check.rs"]
mod template_check;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let t = template::parse(s);
    if let Err(broken) = template_check::check(s, &t.parts, &t.names, &t.problems) {
        panic!("{broken}");
    }
});
