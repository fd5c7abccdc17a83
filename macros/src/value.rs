//! Literal values of the attribute language: strings, integers, numbers, status
//! lists and durations. Each parser reports a wrong kind of literal at the literal
//! (saying what was expected and what was found) and returns `None`.

use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Lit, LitStr, UnOp};

use crate::attr::{Level, Limit, Sp};
use crate::ctxt::Ctxt;

fn describe(expr: &Expr) -> &'static str {
    match expr {
        Expr::Lit(ExprLit { lit, .. }) => match lit {
            Lit::Str(_) => "a string",
            Lit::Int(_) => "an integer",
            Lit::Float(_) => "a float",
            Lit::Bool(_) => "a boolean",
            Lit::Char(_) => "a character",
            Lit::ByteStr(_) | Lit::CStr(_) | Lit::Byte(_) => "a byte literal",
            _ => "a literal",
        },
        Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => "a negative number",
        Expr::Path(_) => "a name",
        Expr::Array(_) => "a list",
        _ => "an expression",
    }
}

pub fn wrong_kind(cx: &Ctxt, expr: &Expr, expected: &str) {
    cx.error_spanned_by(
        expr,
        format!("expected {expected}, found {}", describe(expr)),
    );
}

/// A string literal. A suffix (`"3s"ms`) is refused, as on integers: the value would
/// be read without it, and the suffix silently dropped.
pub fn lit_str(cx: &Ctxt, expr: &Expr, expected: &str) -> Option<LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) if !unsuffixed_str(cx, s) => None,
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Some(s.clone()),
        _ => {
            wrong_kind(cx, expr, expected);
            None
        }
    }
}

/// A literal's suffix is refused rather than dropped: `base10_parse` would read
/// `queue = 1k` as a queue of 1 and `max = 3s` as 3, silently. `true` if it has none.
fn unsuffixed(cx: &Ctxt, lit: &impl ToTokens, suffix: &str, what: &str) -> bool {
    if suffix.is_empty() {
        return true;
    }
    let written = lit.to_token_stream().to_string();
    cx.error_spanned_by(
        lit,
        format!("expected {what} without a suffix, found `{written}`"),
    );
    false
}

/// `true` if the string literal has no suffix; reports it otherwise.
pub fn unsuffixed_str(cx: &Ctxt, s: &LitStr) -> bool {
    unsuffixed(cx, s, s.suffix(), "a string")
}

pub fn int(cx: &Ctxt, level: Level, expr: &Expr) -> Option<Sp<u32>> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) if !unsuffixed(cx, i, i.suffix(), "an integer") => None,
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => match i.base10_parse::<u32>() {
            Ok(value) => Some(Sp {
                value,
                span: i.span(),
                level,
            }),
            Err(_) => {
                cx.error_spanned_by(i, "expected an integer in `0..=4294967295`");
                None
            }
        },
        _ => {
            wrong_kind(cx, expr, "an integer");
            None
        }
    }
}

/// An integer or float literal, as `f64`.
pub fn number(cx: &Ctxt, level: Level, expr: &Expr) -> Option<Sp<f64>> {
    let parsed = match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) if !unsuffixed(cx, i, i.suffix(), "a number") => return None,
        Expr::Lit(ExprLit {
            lit: Lit::Float(f), ..
        }) if !unsuffixed(cx, f, f.suffix(), "a number") => return None,
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => i.base10_parse::<f64>().map(|v| (v, i.span())),
        Expr::Lit(ExprLit {
            lit: Lit::Float(f), ..
        }) => f.base10_parse::<f64>().map(|v| (v, f.span())),
        _ => {
            wrong_kind(cx, expr, "a number");
            return None;
        }
    };
    match parsed {
        Ok((value, span)) => Some(Sp { value, span, level }),
        Err(err) => {
            cx.syn_error(err);
            None
        }
    }
}

const DURATION_FORMS: &str =
    "an integer and a unit (`ms`, `s`, `m` or `h`) such as `\"250ms\"`, `\"3s\"` or `\"1m\"`";

/// `"250ms"`, `"3s"`, `"1m"`, `"1h"` in milliseconds; `None` if malformed or too large.
pub fn parse_duration(text: &str) -> Option<u64> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let scale = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    number.checked_mul(scale)
}

/// Whether `text` has a duration's form (an integer and a unit) but does not fit in
/// a `u64` of milliseconds: too large, not malformed.
fn duration_too_large(text: &str) -> bool {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0
        && matches!(&text[digits..], "ms" | "s" | "m" | "h")
        && parse_duration(text).is_none()
}

/// A duration literal, in milliseconds.
pub fn duration(cx: &Ctxt, level: Level, expr: &Expr) -> Option<Sp<u64>> {
    match limit(cx, level, expr, false)? {
        Sp {
            value: Limit::Ms(value),
            span,
            level,
        } => Some(Sp { value, span, level }),
        Sp {
            value: Limit::None, ..
        } => None,
    }
}

/// A duration literal, or `"none"` where `allow_none`.
fn limit(cx: &Ctxt, level: Level, expr: &Expr, allow_none: bool) -> Option<Sp<Limit>> {
    let expected = if allow_none {
        "a duration string such as `\"3s\"` (or `\"none\"`)"
    } else {
        "a duration string such as `\"250ms\"` or `\"3s\"`"
    };
    let lit = lit_str(cx, expr, expected)?;
    let text = lit.value();
    let value = if allow_none && text == "none" {
        Limit::None
    } else if let Some(ms) = parse_duration(&text) {
        Limit::Ms(ms)
    } else if duration_too_large(&text) {
        cx.error_spanned_by(
            &lit,
            format!(
                "duration `{text}` is too large: expected at most `{}ms`",
                u64::MAX
            ),
        );
        return None;
    } else {
        let none = if allow_none {
            ", or `\"none\"` for no limit"
        } else {
            ""
        };
        cx.error_spanned_by(
            &lit,
            format!("malformed duration `{text}`: expected {DURATION_FORMS}{none}"),
        );
        return None;
    };
    Some(Sp {
        value,
        span: lit.span(),
        level,
    })
}

pub fn statuses(cx: &Ctxt, level: Level, expr: &Expr) -> Option<Sp<Vec<Sp<u16>>>> {
    let elems: Vec<&Expr> = match expr {
        Expr::Array(array) => array.elems.iter().collect(),
        Expr::Lit(ExprLit {
            lit: Lit::Int(_), ..
        }) => vec![expr],
        _ => {
            wrong_kind(cx, expr, "a list of status codes such as `[503, 429]`");
            return None;
        }
    };
    let mut codes = Vec::new();
    for elem in elems {
        match elem {
            Expr::Lit(ExprLit {
                lit: Lit::Int(i), ..
            }) if !unsuffixed(cx, i, i.suffix(), "an HTTP status code") => {}
            Expr::Lit(ExprLit {
                lit: Lit::Int(i), ..
            }) => match i.base10_parse::<u16>() {
                Ok(code) if (400..=599).contains(&code) => codes.push(Sp {
                    value: code,
                    span: i.span(),
                    level,
                }),
                Ok(code) if (100..=399).contains(&code) => cx.error_spanned_by(
                    i,
                    format!(
                        "`{code}` is not an error status: only statuses in `400..=599` can be retried"
                    ),
                ),
                _ => cx.error_spanned_by(i, "expected an HTTP status code in `100..=599`"),
            },
            _ => wrong_kind(cx, elem, "an HTTP status code such as `503`"),
        }
    }
    Some(Sp {
        value: codes,
        span: expr.span(),
        level,
    })
}

/// A path to a function, such as `check_user` or `crate::checks::user`: for
/// `#[parse(with = ...)]`. A string is refused with a word on why, since serde's
/// `deserialize_with = "..."` takes one.
pub fn fn_path(cx: &Ctxt, level: Level, expr: &Expr) -> Option<Sp<syn::Path>> {
    match expr {
        Expr::Path(p) if p.qself.is_none() && p.attrs.is_empty() => Some(Sp {
            value: p.path.clone(),
            span: p.span(),
            level,
        }),
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => {
            cx.error_spanned_by(
                s,
                format!(
                    "expected a path to a function, found a string: write it without quotes, `with = {}`",
                    s.value()
                ),
            );
            None
        }
        _ => {
            wrong_kind(cx, expr, "a path to a function such as `check_user`");
            None
        }
    }
}

/// `"none"` allowed: for timeouts.
pub fn limit_or_none(cx: &Ctxt, level: Level, expr: &Expr) -> Option<Sp<Limit>> {
    limit(cx, level, expr, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_an_integer_and_a_unit() {
        assert_eq!(parse_duration("250ms"), Some(250));
        assert_eq!(parse_duration("3s"), Some(3_000));
        assert_eq!(parse_duration("1m"), Some(60_000));
        assert_eq!(parse_duration("2h"), Some(7_200_000));
        assert_eq!(parse_duration("0s"), Some(0));
    }

    #[test]
    fn malformed_durations_are_refused() {
        for bad in [
            "",
            "3",
            "s",
            "3 s",
            "1.5s",
            "-1s",
            "3sec",
            "3S",
            " 3s",
            "99999999999999999999h",
            "18446744073709551615h",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn too_large_is_told_apart_from_malformed() {
        for big in [
            "99999999999999999999ms",
            "18446744073709551615h",
            "18446744073709552s",
        ] {
            assert!(duration_too_large(big), "{big:?}");
        }
        for not in [
            "18446744073709551615ms",
            "3s",
            "3",
            "s",
            "1.5s",
            "99999999999999999999sec",
            "",
        ] {
            assert!(!duration_too_large(not), "{not:?}");
        }
    }
}

/// A size such as `"4MiB"`, `"512KiB"`, `"10MB"` or `"65536"` in bytes; `None` when
/// malformed or too large ([`size_too_large`] tells which).
pub fn size(text: &str) -> Option<u64> {
    let (number, factor) = size_parts(text)?;
    number.parse::<u64>().ok()?.checked_mul(factor)
}

/// Whether `text` has a size's form (an integer and a unit, if any) but does not fit
/// in a `u64` of bytes: too large, not malformed.
pub fn size_too_large(text: &str) -> bool {
    size_parts(text).is_some() && size(text).is_none()
}

/// A size's digits and its unit's factor, if it has a size's form.
fn size_parts(text: &str) -> Option<(&str, u64)> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    if number.is_empty() {
        return None;
    }
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    Some((number, factor))
}

#[cfg(test)]
mod size_tests {
    use super::{size, size_too_large};

    #[test]
    fn too_large_is_told_apart_from_malformed() {
        assert!(size_too_large("99999999999999999999GiB"));
        assert!(size_too_large("18446744073709551616"));
        assert!(size_too_large("17179869184 GiB"));
        assert!(!size_too_large("17179869183 GiB"));
        assert!(!size_too_large("4 megabytes"));
        assert!(!size_too_large("GiB"));
        assert!(!size_too_large("-1"));
    }

    #[test]
    fn sizes_parse_with_their_units() {
        assert_eq!(size("65536"), Some(65536));
        assert_eq!(size("4MiB"), Some(4 << 20));
        assert_eq!(size("512KiB"), Some(512 << 10));
        assert_eq!(size("10MB"), Some(10_000_000));
        assert_eq!(size("1 GiB"), Some(1 << 30));
        assert_eq!(size("4mb"), None);
        assert_eq!(size("-1"), None);
        assert_eq!(size("1.5MiB"), None);
        assert_eq!(size("99999999999999999999GiB"), None);
    }
}
