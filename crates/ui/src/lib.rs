//! Placeholder; replaced by the real crate.
