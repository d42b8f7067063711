//! ralph's front ends: the terminal loop view with its question panel, and plain line mode.
//!
//! # Theory of operation
//!
//! A front end takes the loop's [`LoopEvent`](ralph_protocol::LoopEvent)s from a channel and
//! sends back [`Control`](ralph_protocol::Control)s; it shares no state with the loop.
//!
//! - [`Tui`]: the loop view, an inline viewport under the agent's scrolling output.
//! - [`run_plain`]: plain lines, for pipes, CI, dumb terminals and `--no-tui`.
//!
//! Components keep state, update and drawing apart. A component is a plain struct that takes
//! events (`handle_key` with the current [`Instant`](std::time::Instant), `handle_paste`) and
//! answers with an action for its owner; drawing takes `&self` and a `now`, so every state
//! can be rendered into a test buffer and snapshotted without a terminal or a clock.
//!
//! - [`QuestionPanel`], the agent's question with options, an answer
//!   editor and the loop's countdown, which the loop pauses while the person types.
//! - [`FleetView`], one row per loop on the machine, the ones that need their human first,
//!   with the question panel for the one picked.
//! - [`Theme`], colours or, under `NO_COLOR`, bold/reverse/dim instead.
//!
//! Everything the agent wrote is stripped of terminal control sequences
//! ([`ralph_signal::sanitize`]) before it is drawn.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod countdown_view;
mod fleet;
mod markdown;
mod plain;
mod question_panel;
mod question_view;
mod terminal_notification;
mod theme;
mod tui;
mod words;
mod wrap;

#[cfg(test)]
mod question_snapshots;

pub use fleet::{
    FleetAction, FleetHost, FleetView, TICK as FLEET_TICK, leave_fleet_now, row_line,
    run_fleet_plain, run_fleet_tui, state_words,
};
pub use plain::{PlainOptions, fmt_duration, run_plain};
pub use plain::{TEXT_WIDTH, agent_event, last_line, markdown_first_line, markdown_lines};
pub use question_panel::{PanelAction, QuestionPanel};
pub use question_view::PanelView;
pub use theme::Theme;
pub use tui::{Tui, TuiOptions};
pub use words::{answer_link, label};

/// "up to 1 iteration", "up to 10 iterations": the loop's bound, as its status lines say it.
pub(crate) fn up_to_iterations(max: u32) -> String {
    let unit = if max == 1 { "iteration" } else { "iterations" };
    format!("up to {max} {unit}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_iteration_is_singular() {
        assert_eq!(super::up_to_iterations(1), "up to 1 iteration");
        assert_eq!(super::up_to_iterations(10), "up to 10 iterations");
    }
}
