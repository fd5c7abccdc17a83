//! The rules of a path template's text: `"/users/{id}"` split into literal text and
//! parameter names, with what is wrong with it.
//!
//! This file uses only `std` and `syn`, and nothing else of the macro crate, so that
//! the fuzz target in `fuzz/` can include it as a module (a proc-macro crate exports
//! nothing else). `ast.rs` wraps it in `Template`.

use syn::Ident;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    Lit(String),
    Param(usize),
}

/// A template's text, split.
pub struct Parsed {
    pub parts: Vec<Part>,
    /// Parameter names in template order; `Part::Param(i)` indexes this.
    pub names: Vec<String>,
    /// What is wrong with the template, if anything.
    pub problems: Vec<String>,
    /// Whether `names` holds every name the template has: not once a `{...}` is no
    /// name or the braces do not balance. A name written twice is still one name.
    pub names_complete: bool,
}

pub fn parse(value: &str) -> Parsed {
    let mut parts = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut problems = Vec::new();
    let mut names_complete = true;
    // Names written more than once, each reported at its first repeat.
    let mut repeated: Vec<&str> = Vec::new();
    if !value.starts_with('/') {
        problems.push(format!(
            "path template `{value}` must start with `/`, such as `\"/users/{{id}}\"`"
        ));
    }
    if value.contains('\\') {
        problems.push(format!(
            "path template `{value}` cannot hold `\\`: URL parsers read it as `/`"
        ));
    }
    // URL parsers drop tab, newline and carriage return: `".\t."` would be sent as
    // `..`, past the check below.
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        problems.push(format!(
            "path template `{}` cannot hold the control character `{}`: URL parsers drop tabs and line breaks, so the path sent would not be the one written",
            value.escape_debug(),
            c.escape_debug()
        ));
    }
    // `..` would climb out of the base URL's path (`"/../admin"`), and the URL parser
    // resolves the percent-encoded forms too.
    if let Some(dots) = value.split('/').find(|seg| {
        matches!(
            seg.to_ascii_lowercase().as_str(),
            "." | ".." | "%2e" | ".%2e" | "%2e." | "%2e%2e"
        )
    }) {
        problems.push(format!(
            "path template `{value}` cannot hold a `{dots}` segment: the URL parser resolves `.` and `..`, and `..` climbs out of the base URL's path"
        ));
    }
    // `?` or `#` outside the braces (`{r#type}` names a parameter).
    let mut query_or_fragment = false;
    let mut text = String::new();
    let mut rest = value;
    while let Some(c) = rest.chars().next() {
        match c {
            '{' => {
                let Some(end) = rest.find('}') else {
                    problems.push(format!(
                        "unbalanced braces in path template `{value}`: `{{` is never closed"
                    ));
                    names_complete = false;
                    break;
                };
                let name = &rest[1..end];
                if name.contains('{') {
                    problems.push(format!(
                        "unbalanced braces in path template `{value}`: `{{` inside `{{...}}`"
                    ));
                    names_complete = false;
                    break;
                }
                // Exactly an identifier (`syn` alone would skip spaces and comments);
                // `{type}` and `{r#type}` both name the parameter `r#type`.
                let bare = name.strip_prefix("r#").unwrap_or(name);
                // `r#r#x` is no identifier: `r#` is stripped once.
                let bare_ok = !bare.starts_with("r#");
                let is_ident = |s: &str| syn::parse_str::<Ident>(s).is_ok_and(|i| i == s);
                // A `{...}` that is no name, written twice, is one problem too.
                let mut once = |problem: String| {
                    if !problems.contains(&problem) {
                        problems.push(problem);
                    }
                };
                if name.trim() != name && !name.trim().is_empty() {
                    once(format!(
                        "`{{{name}}}` in path template `{value}` has spaces: write `{{{}}}`",
                        name.trim()
                    ));
                    names_complete = false;
                } else if !bare_ok || (!is_ident(bare) && !is_ident(&format!("r#{bare}"))) {
                    once(format!(
                        "`{{{name}}}` in path template `{value}` must name a parameter, such as `{{id}}`"
                    ));
                    names_complete = false;
                } else if names.iter().any(|n| n == bare) {
                    // Once per name, however often (and however spelled: `{r#id}`)
                    // it is written again.
                    if !repeated.contains(&bare) {
                        repeated.push(bare);
                        once(if name == bare {
                            format!("`{{{name}}}` appears twice in path template `{value}`")
                        } else {
                            format!(
                                "`{{{name}}}` names `{bare}` a second time in path template `{value}`"
                            )
                        });
                    }
                } else {
                    if !text.is_empty() {
                        parts.push(Part::Lit(std::mem::take(&mut text)));
                    }
                    parts.push(Part::Param(names.len()));
                    names.push(bare.to_owned());
                }
                rest = &rest[end + 1..];
            }
            '}' => {
                problems.push(format!(
                    "unbalanced braces in path template `{value}`: `}}` without `{{`"
                ));
                names_complete = false;
                break;
            }
            _ => {
                query_or_fragment |= matches!(c, '?' | '#');
                text.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    if query_or_fragment {
        problems.push(format!(
            "path template `{value}` cannot hold a query or fragment: use a `#[query]` parameter"
        ));
    }
    if !text.is_empty() {
        parts.push(Part::Lit(text));
    }
    // Every `%` in the text starts an escape of two hex digits. One left open just
    // before a `{name}` would be completed by the value: `%{a}%{b}` filled with `2e`
    // and `2e` is sent as `%2e%2e`, which the URL parser resolves as `..`, and no
    // value is percent-decoded back to itself. Any other (`/100%/x`) is no valid URI,
    // and what a server makes of it is anyone's guess.
    let (mut splits_escape, mut bad_escape) = (false, None);
    for (i, part) in parts.iter().enumerate() {
        let Part::Lit(text) = part else { continue };
        let before_param = matches!(parts.get(i + 1), Some(Part::Param(_)));
        let b = text.as_bytes();
        for at in (0..b.len()).filter(|&at| b[at] == b'%') {
            let digits = b[at + 1..]
                .iter()
                .take(2)
                .take_while(|d| d.is_ascii_hexdigit())
                .count();
            if digits == 2 {
                continue;
            }
            if before_param && at + 1 + digits == b.len() {
                splits_escape = true;
            } else if bad_escape.is_none() {
                bad_escape = Some(text[at..].chars().take(digits + 2).collect::<String>());
            }
        }
    }
    if splits_escape {
        problems.push(format!(
            "path template `{value}` cannot end a `%` escape with a parameter (`%{{id}}`): the value would complete the escape, and `%2e%2e` is `..` to the URL parser; write `%25` for a `%`"
        ));
    }
    if let Some(escape) = bad_escape {
        problems.push(format!(
            "path template `{value}` has a `%` without two hex digits after it (`{escape}`): a `%` starts a percent-encoded byte such as `%20`; write `%25` for a `%`"
        ));
    }
    Parsed {
        parts,
        names,
        problems,
        names_complete,
    }
}
