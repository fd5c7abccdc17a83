//! What must hold for the parse of any path template text, and more for one the
//! parser accepts. Checked by the property tests beside `Template` (`ast.rs`) and by
//! the fuzz target `fuzz/fuzz_targets/path_template.rs`, which both include this file
//! (a proc-macro crate exports nothing else).

use crate::template::Part;

/// Return the message as an error unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

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

/// `.` or `..`, also percent-encoded, in any letter case.
fn is_dot_segment(seg: &str) -> bool {
    let seg = seg.to_ascii_lowercase().replace("%2e", ".");
    seg == "." || seg == ".."
}

/// Check the parse of `s` (its parts, names and problems); the error says what broke.
pub fn check(s: &str, parts: &[Part], names: &[String], problems: &[String]) -> Result<(), String> {
    // Parameters are numbered in template order, one part per name.
    let params: Vec<usize> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Param(i) => Some(*i),
            Part::Lit(_) => None,
        })
        .collect();
    ensure!(
        params == (0..names.len()).collect::<Vec<_>>(),
        "{s:?}: parameters {params:?} for {} names",
        names.len()
    );
    // Literal text is never empty, and two literals are never adjacent.
    for (i, part) in parts.iter().enumerate() {
        if let Part::Lit(text) = part {
            ensure!(!text.is_empty(), "{s:?}: an empty literal");
            ensure!(
                !matches!(parts.get(i + 1), Some(Part::Lit(_))),
                "{s:?}: two literals in a row"
            );
        }
    }
    // Each name is an identifier, as written or raw (`type` is `r#type`), and
    // appears once.
    for (i, name) in names.iter().enumerate() {
        ensure!(
            one_ident_token(name) || one_ident_token(&format!("r#{name}")),
            "{s:?}: {name:?} is no identifier"
        );
        ensure!(!names[..i].contains(name), "{s:?}: {name:?} twice");
    }
    // Each problem is said once (a name written three times is one problem).
    for (i, problem) in problems.iter().enumerate() {
        ensure!(
            !problems[..i].contains(problem),
            "{s:?}: {problem:?} said twice"
        );
    }
    if !problems.is_empty() {
        return Ok(());
    }

    // Accepted: the parts give back the text exactly, a name as `{name}` or
    // `{r#name}`, as it was written.
    let mut rest = s;
    for part in parts {
        let next = match part {
            Part::Lit(text) => {
                ensure!(
                    !text.contains(['{', '}', '?', '#', '\\']),
                    "{s:?}: literal {text:?}"
                );
                rest.strip_prefix(text.as_str())
            }
            Part::Param(i) => {
                let name = names.get(*i).map_or("", String::as_str);
                rest.strip_prefix(&format!("{{{name}}}"))
                    .or_else(|| rest.strip_prefix(&format!("{{r#{name}}}")))
            }
        };
        let Some(after) = next else {
            return Err(format!("{s:?}: {part:?} is not next in {rest:?}"));
        };
        rest = after;
    }
    ensure!(rest.is_empty(), "{s:?}: {rest:?} left over");
    ensure!(s.starts_with('/'), "{s:?}: no leading `/`");
    ensure!(!s.split('/').any(is_dot_segment), "{s:?}: a dot segment");
    // URL parsers would drop a tab or a line break, and so change the path.
    ensure!(!s.contains(char::is_control), "{s:?}: a control character");
    // Every `%` in the text starts an escape of two hex digits.
    for part in parts {
        if let Part::Lit(text) = part {
            let b = text.as_bytes();
            ensure!(
                (0..b.len()).filter(|&at| b[at] == b'%').all(|at| {
                    b.get(at + 1..at + 3)
                        .is_some_and(|d| d.iter().all(u8::is_ascii_hexdigit))
                }),
                "{s:?}: a `%` that starts no escape in {text:?}"
            );
        }
    }
    // A value never completes a `%` escape left open before it (the runtime encodes a
    // value's own `%`, but not its hex digits): filled with `2e` or `e`, no segment is
    // a dot segment.
    for fill in ["2e", "e"] {
        let filled: String = parts
            .iter()
            .map(|p| match p {
                Part::Lit(text) => text.as_str(),
                Part::Param(_) => fill,
            })
            .collect();
        ensure!(
            !filled.split('/').any(is_dot_segment),
            "{s:?} filled with {fill:?}: a dot segment"
        );
    }
    Ok(())
}
