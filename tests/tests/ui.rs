//! Compile-time checks of `#[resilient_api]`: one file per mistake in `ui/`, each with
//! the exact diagnostics in its `.stderr`, and programs that must compile in `ui/pass/`.
//!
//! Regenerate the expected output with
//! `TRYBUILD=overwrite cargo test -p tests --test ui`, then review the diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*.rs");
    t.pass("ui/pass/*.rs");
}
