//! ralph's terminal front end: the question panel, and the pieces the loop view shares.
//!
//! # Theory of operation
//!
//! Components keep state, update and drawing apart. A component is a plain struct that takes
//! events (`handle_key`, `handle_paste`) with the current [`Instant`](std::time::Instant) and
//! answers with an action for its owner; drawing takes `&self` and the same `now`, so every
//! state can be rendered into a test buffer and snapshotted without a terminal or a clock.
//!
//! - [`question_panel`]: [`QuestionPanel`], the agent's question with options, an answer
//!   editor and a countdown that pauses while the person types.
//! - [`theme`]: [`Theme`], colours or, under `NO_COLOR`, bold/reverse/dim instead.
//!
//! Everything the agent wrote is stripped of terminal control sequences
//! ([`ralph_signal::sanitize`]) before it is drawn.

mod countdown_view;
mod markdown;
pub mod question_panel;
mod question_view;
pub mod theme;
mod wrap;

#[cfg(test)]
mod question_snapshots;

pub use question_panel::{Closed, PanelAction, QuestionPanel};
pub use question_view::PanelView;
pub use theme::Theme;
