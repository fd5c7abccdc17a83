//! The macro's path template parser on any text: nothing panics, and a template it
//! accepts gives back its text exactly. The same checks as the property tests in
//! `macros/src/ast.rs`, with coverage guiding the input.

#![no_main]

use libfuzzer_sys::fuzz_target;

// The proc-macro crate exports only its macro, so the parser's file is compiled
// here as a module of this crate.
#[path = "../../macros/src/template.rs"]
mod template;

use template::Part;

/// Whether `s` is exactly one identifier token to the lexer (`r#` included).
fn one_ident_token(s: &str) -> bool {
    let Ok(tokens) = s.parse::<proc_macro2::TokenStream>() else {
        return false;
    };
    let mut tokens = tokens.into_iter();
    match (tokens.next(), tokens.next()) {
        (Some(proc_macro2::TokenTree::Ident(i)), None) => i == s,
        _ => false,
    }
}

fn is_dot_segment(seg: &str) -> bool {
    let seg = seg.to_ascii_lowercase().replace("%2e", ".");
    seg == "." || seg == ".."
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let t = template::parse(s);

    // Parameters are numbered in template order, one part per name.
    let params: Vec<usize> = t
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Param(i) => Some(*i),
            Part::Lit(_) => None,
        })
        .collect();
    assert_eq!(params, (0..t.names.len()).collect::<Vec<_>>(), "{s:?}");
    // Literal text is never empty, and two literals are never adjacent.
    for (i, part) in t.parts.iter().enumerate() {
        if let Part::Lit(text) = part {
            assert!(!text.is_empty(), "{s:?}");
            assert!(!matches!(t.parts.get(i + 1), Some(Part::Lit(_))), "{s:?}");
        }
    }
    // Each name is an identifier, as written or raw, and appears once.
    for (i, name) in t.names.iter().enumerate() {
        assert!(
            one_ident_token(name) || one_ident_token(&format!("r#{name}")),
            "{s:?}: {name:?}"
        );
        assert!(!t.names[..i].contains(name), "{s:?}: {name:?} twice");
    }
    if !t.problems.is_empty() {
        return;
    }

    // Accepted: the parts give back the text, a name as `{name}` or `{r#name}`.
    let mut rest = s;
    for part in &t.parts {
        rest = match part {
            Part::Lit(text) => {
                assert!(
                    !text.contains(['{', '}', '?', '#', '\\']),
                    "{s:?}: {text:?}"
                );
                rest.strip_prefix(text.as_str())
            }
            Part::Param(i) => {
                let name = &t.names[*i];
                rest.strip_prefix(&format!("{{{name}}}"))
                    .or_else(|| rest.strip_prefix(&format!("{{r#{name}}}")))
            }
        }
        .unwrap_or_else(|| panic!("{s:?}: {part:?} is not next in {rest:?}"));
    }
    assert_eq!(rest, "", "{s:?}");
    assert!(s.starts_with('/'), "{s:?}");
    assert!(!s.split('/').any(is_dot_segment), "{s:?}");
    // URL parsers would drop a tab or a line break, and so change the path.
    assert!(!s.contains(char::is_control), "{s:?}");
    // A value never completes a `%` escape left open before it (the runtime encodes a
    // value's own `%`, but not its hex digits): filled with `2e` or `e`, no segment is
    // a dot segment.
    for fill in ["2e", "e"] {
        let filled: String = t
            .parts
            .iter()
            .map(|p| match p {
                Part::Lit(text) => text.as_str(),
                Part::Param(_) => fill,
            })
            .collect();
        assert!(
            !filled.split('/').any(is_dot_segment),
            "{s:?} filled with {fill:?}"
        );
    }
});
