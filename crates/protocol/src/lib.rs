//! ralph's plain data and the `.ralph/` formats: what every process that takes part in a loop
//! reads and writes, and nothing else.
//!
//! # Theory of operation
//!
//! A loop (`ralph run`) and its front ends (the terminal panel, `ralph answer`, `ralph ask`,
//! `ralph status`, a remote broker) are separate processes that meet in one directory,
//! `.ralph/`. This crate is that meeting place: the file formats, and the rules for writing
//! them so that no reader ever sees half a file and no two writers both win.
//!
//! Private modules, one `pub use` list below; each module is one idea:
//!
//! - `workspace`: [`Workspace`] names every file under `.ralph/` and owns the only ways to
//!   touch them: atomic, symlink-refusing writes ([`write_atomic`]), bounded reads
//!   ([`read_text`], [`read_text_tail`]), no-clobber creation (`create_atomic`, inside the
//!   crate: how the first answer wins), and the lock that keeps two loops out of one workspace
//!   ([`WorkspaceLock`]).
//! - `question` is the agent's question ([`Question`], `question.md`); `answer` is the
//!   human's answer ([`Answer`], `answer.md`, first writer wins); `countdown` is the deadline
//!   ([`Countdown`]); `clarifications` is the record of every question and its answer
//!   (written by the desk).
//! - `state` is `state.json` ([`State`]) and `events.jsonl` ([`log_event`]): what other
//!   processes read about the loop.
//! - `desk` is the one owner of a question's life ([`Desk`]: open, step, close, deliver,
//!   archive; the loop and a lone `ralph ask` drive it, sync and told the clock), and how any
//!   other process reads the question waiting ([`question_waiting`]) and answers it
//!   ([`answer_question`]: one encoding, one size limit, first answer wins, who answered
//!   recorded).
//! - `registry` lists the loops running on this machine, one small file each
//!   ([`registered_loops`]); `user_dirs` says where a person's config and ralph's state live
//!   outside any project ([`user_dir`]).
//! - `broker` is `ralph serve`'s share of the state directory: its lock ([`BrokerLock`]), the
//!   answer links (hashes only, [`mint_link`]) and the requests (skip, more time,
//!   [`send_request`]) it leaves in a loop's `.ralph/`.
//! - `stop` is `.ralph/stop`: another process (`ralph stop`, the broker) asks the loop to
//!   stop as Ctrl-C would ([`request_stop`]).
//! - `event` is the vocabulary between a loop and its front end: events out ([`LoopEvent`]),
//!   controls in ([`Control`]).
//! - `time` is how the files write time ([`timestamp`]: RFC 3339, UTC, milliseconds).
//! - `text` makes untrusted text safe to show on one line ([`one_line`], [`clean`]);
//!   `frontmatter` splits a file's YAML header from its body ([`split_frontmatter`]).
//!
//! No tokio, no process control: a front end that only reads and answers depends on this
//! crate and `ralph-signal`, not on the runner.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod answer;
mod broker;
pub mod budget;
mod clarifications;
mod countdown;
mod criteria;
mod desk;
mod event;
mod frontmatter;
mod land;
mod question;
mod registry;
mod state;
mod stop;
mod text;
mod time;
mod user_dirs;
mod workspace;

pub use answer::{
    Answer, AnsweredBy, Forged, KEY_FILE as ANSWER_KEY_FILE, is_genuine, key as answer_key,
    read as read_answer,
};
pub use broker::{
    AcquireError, BrokerInfo, BrokerLock, Channel, LINK_MAX_AGE, LOCK_FILE as BROKER_LOCK_FILE,
    LinkRecord, MAX_EXTEND, MIN_EXTEND, REQUEST_FILE, Request, RequestAction, answer_url,
    describe_span, get_secret, mint as mint_link, put_secret, request as send_request,
    running as broker_running, running_in as broker_running_in, state_dir as broker_state_dir,
    take_request, verify as verify_link,
};
pub use countdown::{Countdown, EXTEND_BY, IDLE_RESUME};
pub use criteria::{Criterion, criteria_of, parse_criteria};
pub use desk::{
    ANSWER_PLACEHOLDER, AskerStep, Asking, ClaimError, Claimed, Closed, Delivery, Desk, DeskError,
    Ended, Found as FoundAnswer, Input as DeskInput, MAX_ANSWER_BYTES, NewClaim, Now, OnTimeout,
    PickUp, QuestionId, Refusal, Reply, Stepped, Submitted, Waiting, answer as answer_question,
    answer_command, answer_hint, answer_to, compose as compose_answer, encode as encode_answer,
    guide, read_back, submit as submit_answer, waiting as question_waiting,
    waiting_as as question_waiting_as,
};
pub use event::{Control, LoopEvent, Outcome};
pub use frontmatter::{Fences, Found as Frontmatter, is_fence, split as split_frontmatter};
pub use land::LandMode;
pub use question::{MAX_QUESTION_BYTES, Picks, Question, QuestionOption, fallback_words};
pub use registry::{
    LoopEntry, Registration, list as registered_loops, list_in as registered_loops_in, register,
    registry_dir,
};
pub use state::{
    AgentChoice, AskClaim, ClosedQuestion, PendingQuestion, RaisedBy, State, StateError, Status,
    log_event, read_events, task_digest,
};
pub use stop::{FILE_NAME as STOP_FILE, StopBy, request as request_stop, take as take_stop};
pub use text::{clean, cut, is_bidi_control, one_line, shell_quote};
pub use time::{local_time, parse_timestamp, timestamp};
pub use user_dirs::{STATE_DIR_ENV, UserDir, user_dir};
pub use workspace::{
    DIR_NAME, SpareFile, Workspace, WorkspaceError, WorkspaceLock, append, busy, open_plain,
    read_text, read_text_tail, write_atomic, write_atomic_unsynced,
};
