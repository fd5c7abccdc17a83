//! Collects errors instead of stopping at the first one, so a single build shows the
//! user every mistake (as serde_derive's `Ctxt`).

use std::cell::RefCell;
use std::fmt::Display;
use std::thread;

use proc_macro2::Span;
use quote::ToTokens;

/// An error accumulator. Push with [`Ctxt::error_spanned_by`] or [`Ctxt::error_at`];
/// finish with [`Ctxt::check`], which must be called (a `Drop` guard panics otherwise).
#[derive(Default)]
pub struct Ctxt {
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    pub fn new() -> Self {
        Ctxt {
            errors: RefCell::new(Some(Vec::new())),
        }
    }

    /// An error spanning all of `tokens`.
    pub fn error_spanned_by(&self, tokens: impl ToTokens, msg: impl Display) {
        self.syn_error(syn::Error::new_spanned(tokens.into_token_stream(), msg));
    }

    /// An error at one span.
    pub fn error_at(&self, span: Span, msg: impl Display) {
        self.syn_error(syn::Error::new(span, msg));
    }

    /// An error syn already produced (e.g. a syntax error inside an attribute).
    pub fn syn_error(&self, err: syn::Error) {
        if let Some(errors) = self.errors.borrow_mut().as_mut() {
            errors.push(err);
        }
    }

    /// All errors pushed, combined into one, or `Ok` if there were none.
    pub fn check(self) -> syn::Result<()> {
        let errors = self.errors.borrow_mut().take().unwrap_or_default();
        let mut iter = errors.into_iter();
        let Some(mut combined) = iter.next() else {
            return Ok(());
        };
        for rest in iter {
            combined.combine(rest);
        }
        Err(combined)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        if !thread::panicking() && self.errors.borrow().is_some() {
            panic!("forgot to check for errors");
        }
    }
}
