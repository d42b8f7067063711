//! What can be wrong with a task file, worded for the person who has to fix it.
//!
//! Every message names the file, and the line and column when there is one, says what is
//! wrong and then how to fix it. [`Problem`] keeps those two halves apart
//! ([`Problem::summary`], [`Problem::fix`]) so a UI can lay them out differently; `Display`
//! joins them into one line.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use super::key::{CONFIG_KEYS, Key};
use super::limits::{FILE_SIZE_LIMIT, FRONTMATTER_SIZE_LIMIT};

/// What a task file looks like, quoted by the frontmatter errors.
const LAYOUT: &str =
    "the file must start with a line '---', then YAML keys (task, max_iterations, ...), then '---'";

/// Why a task file could not be loaded.
///
/// I/O failures keep the [`io::Error`] as a field named `error` rather than as the error's
/// `source`: the message already says what went wrong, and a printed chain would repeat it.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// There is no file at the path.
    #[error("{}", not_found(path))]
    NotFound {
        /// The path that was looked up.
        path: PathBuf,
    },
    /// The file exists but could not be read (permissions, I/O error).
    #[error(
        "{}: cannot read the task file ({}). Check that you may read it (ls -l {}), \
         e.g. chmod u+r {}",
        path.display(), error, path.display(), path.display()
    )]
    Unreadable {
        /// The path that was read.
        path: PathBuf,
        /// What the operating system said.
        error: io::Error,
    },
    /// The path names a directory (possibly through a symlink).
    #[error("{}", is_directory(path))]
    IsDirectory {
        /// The path that was given.
        path: PathBuf,
    },
    /// The path names a FIFO, socket or device, which could block or never end.
    #[error(
        "{}: is not a regular file (a pipe, socket or device). Save the task in an ordinary \
         markdown file and give its path",
        path.display()
    )]
    NotRegularFile {
        /// The path that was given.
        path: PathBuf,
    },
    /// The file is over [`FILE_SIZE_LIMIT`].
    #[error(
        "{}: the file is {size} bytes, over the limit of {} bytes (16 MiB). A task file holds \
         the task and its checklist: move logs and data into other files and mention their paths",
        path.display(), FILE_SIZE_LIMIT
    )]
    TooLarge {
        /// The path that was read.
        path: PathBuf,
        /// The size found (at least `FILE_SIZE_LIMIT + 1`).
        size: u64,
    },
    /// The contents are wrong at a known place.
    #[error("{}:{line}:{column}: {problem}", path.display())]
    Invalid {
        /// The path of the task file.
        path: PathBuf,
        /// 1-based line in the whole file.
        line: usize,
        /// 1-based column, counted in characters.
        column: usize,
        /// What is wrong there.
        problem: Problem,
    },
}

/// The name `ralph init` gives the task file, and `ralph run` looks for.
const DEFAULT_NAME: &str = "RALPH_TASK.md";

/// [`TaskError::NotFound`]: `ralph init` writes only `RALPH_TASK.md`, so for another name
/// (`--task tasks/cache.md`) the path may be mistyped, or the template needs moving there.
fn not_found(path: &Path) -> String {
    if path.file_name().is_some_and(|name| name == DEFAULT_NAME) {
        format!(
            "{}: no task file here. Create one with `ralph init` (it writes a commented template \
             that explains every key), then edit it",
            path.display()
        )
    } else {
        format!(
            "{}: no such task file. Check its path, or create it: `ralph init` \
             writes a commented template as {DEFAULT_NAME}, which you can move there and edit",
            path.display()
        )
    }
}

/// [`TaskError::IsDirectory`]: the task file inside it, when there is one; a directory in the
/// task file's own place is in the way.
fn is_directory(path: &Path) -> String {
    let inside = path.join(DEFAULT_NAME);
    let fix = if inside.is_file() {
        format!(
            "Give the path of the task file inside it: {}",
            inside.display()
        )
    } else if path.file_name().is_some_and(|name| name == DEFAULT_NAME) {
        "A directory is where the task file should be: move or rename it, then write the task \
         file there (`ralph init` writes a commented template)"
            .to_owned()
    } else {
        "Give the path of the markdown task file itself, not of a directory".to_owned()
    };
    format!("{}: is a directory, not a task file. {fix}", path.display())
}

impl TaskError {
    /// The 1-based line and column of the problem, when it has a place in the file.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            TaskError::Invalid { line, column, .. } => Some((*line, *column)),
            _ => None,
        }
    }

    /// The problem with the contents, if that is what this error is about.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            TaskError::Invalid { problem, .. } => Some(problem),
            _ => None,
        }
    }
}

/// One thing wrong with the contents of a task file.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// The file has no bytes at all.
    EmptyFile,
    /// The file does not start with `---`.
    NoFrontmatter,
    /// `---` is there, but after blank lines.
    BlankLinesBeforeFrontmatter,
    /// Hugo-style `+++` TOML frontmatter.
    TomlFrontmatter,
    /// The file starts with YAML keys but no `---` line above them.
    MissingOpeningDelimiter,
    /// The opening `---` has no closing `---`.
    UnterminatedFrontmatter,
    /// Nothing (or only comments) between the two `---` lines.
    EmptyFrontmatter,
    /// The frontmatter is over [`FRONTMATTER_SIZE_LIMIT`] bytes.
    FrontmatterTooLarge {
        /// Its size in bytes.
        size: usize,
    },
    /// A byte sequence that is not UTF-8.
    InvalidUtf8 {
        /// The first offending byte.
        byte: u8,
    },
    /// The file is UTF-16 (it starts with a UTF-16 byte order mark).
    Utf16,
    /// A tab in the indentation of the YAML.
    TabIndent,
    /// The YAML does not parse.
    Yaml {
        /// The parser's description, with its positions moved to the file's line numbers.
        detail: String,
    },
    /// Lists or mappings nested deeper than `limit` levels: [`MAX_FLOW_NESTING`](super::limits::MAX_FLOW_NESTING) for
    /// `[`/`{`, or the YAML parser's recursion limit.
    TooDeep {
        /// The number of levels allowed.
        limit: usize,
    },
    /// YAML aliases that expand to an enormous number of values ("billion laughs").
    AliasBomb,
    /// A `...` line ends the YAML document and more YAML follows.
    MultipleDocuments,
    /// A custom YAML tag such as `!shell`.
    YamlTag,
    /// The frontmatter is a list or a single value instead of `key: value` lines.
    NotAMapping {
        /// What it is instead ("a list").
        found: String,
    },
    /// A key that is a list or a mapping rather than a name.
    KeyNotText {
        /// What it is instead.
        found: String,
    },
    /// The same key twice.
    DuplicateKey {
        /// The key.
        key: String,
        /// Where it first appeared, when that could be found.
        first_line: Option<usize>,
    },
    /// No `task` key; `misspelt` is an unknown key that was most likely meant to be it.
    MissingTask {
        /// The unknown key close to `task` (`tsk`, `Task`), if there is one.
        misspelt: Option<String>,
    },
    /// A known key with a value of the wrong kind or out of range.
    BadValue {
        /// The key.
        key: Key,
        /// What the value must be ("a whole number of at least 1").
        expected: String,
        /// What it is ("\"ten\"", "a list").
        found: String,
        /// A correct line, or a sentence saying what to do.
        example: String,
    },
}

impl Problem {
    /// What is wrong, without the fix.
    pub fn summary(&self) -> String {
        match self {
            Problem::EmptyFile => "the task file is empty".to_owned(),
            Problem::NoFrontmatter => format!("no frontmatter: {LAYOUT}"),
            Problem::MissingOpeningDelimiter => {
                "no frontmatter: the keys must sit between two '---' lines".to_owned()
            }
            Problem::BlankLinesBeforeFrontmatter => {
                "no frontmatter on the first line: the file starts with blank lines".to_owned()
            }
            Problem::TomlFrontmatter => "TOML frontmatter (+++) is not supported".to_owned(),
            Problem::UnterminatedFrontmatter => {
                "the frontmatter that opens here with '---' is never closed".to_owned()
            }
            Problem::EmptyFrontmatter => "the frontmatter is empty".to_owned(),
            Problem::FrontmatterTooLarge { size } => format!(
                "the frontmatter is {size} bytes, over the limit of {FRONTMATTER_SIZE_LIMIT} \
                 bytes (256 KiB)"
            ),
            Problem::InvalidUtf8 { byte } => {
                format!("the file is not valid UTF-8 (byte 0x{byte:02X} here)")
            }
            Problem::Utf16 => "the file is UTF-16, not UTF-8".to_owned(),
            Problem::TabIndent => {
                "a tab is used for indentation; YAML allows only spaces".to_owned()
            }
            Problem::Yaml { detail } => format!("the frontmatter is not valid YAML: {detail}"),
            Problem::TooDeep { limit } => {
                format!("the frontmatter nests lists or mappings more than {limit} levels deep")
            }
            Problem::AliasBomb => "the frontmatter's YAML aliases (*name) expand to too many \
                                   values, like a 'billion laughs' attack"
                .to_owned(),
            Problem::MultipleDocuments => {
                "the frontmatter holds more than one YAML document".to_owned()
            }
            Problem::YamlTag => "YAML tags like '!name' are not supported".to_owned(),
            Problem::NotAMapping { found } => {
                format!("the frontmatter must be 'key: value' lines, but it is {found}")
            }
            Problem::KeyNotText { found } => {
                format!("keys must be plain names like 'task', found {found}")
            }
            Problem::DuplicateKey { key, first_line } => match first_line {
                Some(line) => format!("key '{key}' appears twice (first on line {line})"),
                None => format!("key '{key}' appears twice"),
            },
            Problem::MissingTask { misspelt: None } => {
                "the frontmatter has no 'task' key".to_owned()
            }
            Problem::MissingTask {
                misspelt: Some(key),
            } => format!("the frontmatter has no 'task' key ('{key}' is not one)"),
            Problem::BadValue {
                key,
                expected,
                found,
                ..
            } => format!("{} must be {expected}, found {found}", key.name()),
        }
    }

    /// How to fix it: one or two sentences.
    pub fn fix(&self) -> String {
        match self {
            Problem::EmptyFile => format!(
                "Write the task into it ({LAYOUT}), or run `ralph init` to write a template"
            ),
            Problem::NoFrontmatter => {
                "Start the file with the settings between two '---' lines (`task:` at least); \
                 `ralph init` in an empty directory writes a commented template"
                    .to_owned()
            }
            Problem::MissingOpeningDelimiter => {
                "Add a line '---' above the first key, as the first line of the file".to_owned()
            }
            Problem::BlankLinesBeforeFrontmatter => {
                "Delete the blank lines so that '---' is the very first line".to_owned()
            }
            Problem::TomlFrontmatter => "Write the keys as YAML between '---' lines, like \
                                         'task: Add a cache'"
                .to_owned(),
            Problem::UnterminatedFrontmatter => {
                "Add a line '---' after the last key; the markdown body goes below it".to_owned()
            }
            Problem::EmptyFrontmatter => "Add at least the task between the '---' lines, like: \
                                          task: Add a session cache to the API server"
                .to_owned(),
            Problem::FrontmatterTooLarge { .. } => "Keep the settings in the frontmatter and move \
                                                    long text into the markdown body below it"
                .to_owned(),
            Problem::InvalidUtf8 { .. } => {
                "Save the file as UTF-8 (most editors have an encoding option when saving)"
                    .to_owned()
            }
            Problem::Utf16 => "Save the file as UTF-8, e.g. iconv -f UTF-16 -t UTF-8".to_owned(),
            Problem::TabIndent => {
                "Replace the tab at the start of this line with spaces".to_owned()
            }
            Problem::Yaml { detail } => yaml_hint(detail).to_owned(),
            Problem::TooDeep { .. } => {
                "A task file needs at most a list of strings: flatten the value".to_owned()
            }
            Problem::AliasBomb => "Write the values out in full instead of using anchors (&name) \
                                   and aliases (*name)"
                .to_owned(),
            Problem::MultipleDocuments => "Remove the '...' line: the frontmatter ends at the \
                                           second '---' line"
                .to_owned(),
            Problem::YamlTag => {
                "Remove the tag and write the plain value (quote it if needed)".to_owned()
            }
            Problem::NotAMapping { .. } => {
                "Write one setting per line, like: task: Add a session cache".to_owned()
            }
            Problem::KeyNotText { .. } => "Write the key as a name followed by ':', like \
                                           'task: ...'"
                .to_owned(),
            Problem::DuplicateKey { .. } => "Keep one of them and delete the other".to_owned(),
            Problem::MissingTask { misspelt: None } => {
                "Add a line like: task: Add a session cache to the API server".to_owned()
            }
            Problem::MissingTask {
                misspelt: Some(key),
            } => format!("Did you mean 'task'? Rename '{key}' to 'task'"),
            Problem::BadValue { example, .. } => example.clone(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}. {}", self.summary(), self.fix())
    }
}

impl std::error::Error for Problem {}

/// Something in a task file that ralph ignores but the author probably did not mean.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskWarning {
    /// The path of the task file.
    pub path: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What was noticed.
    pub kind: WarningKind,
}

/// The kinds of [`TaskWarning`].
#[derive(Debug, Clone, PartialEq)]
pub enum WarningKind {
    /// A frontmatter key ralph does not know; it is ignored.
    UnknownKey {
        /// The key as written.
        key: String,
        /// The known key it most resembles, if any is close.
        suggestion: Option<Key>,
    },
    /// A key a config file (`config.toml`) does not take; it is ignored.
    UnknownConfigKey {
        /// The key as written.
        key: String,
        /// The config key it most resembles, if any is close.
        suggestion: Option<Key>,
    },
    /// No checkbox in the body and no `test_command`: nothing checks a DONE, so the agent's
    /// word is taken for it.
    NothingToCheck {
        /// Whether `completion_criteria` lists criteria (which go to the agent, unchecked).
        listed_criteria: bool,
    },
    /// A line of the body that looks like a checkbox but is not one (`-[ ] x`, `- [] x`), so
    /// it is no criterion.
    NotACheckbox {
        /// The line as a checkbox is written.
        fixed: String,
    },
    /// `test_command` runs a program that is not on `PATH`: every DONE would be rejected.
    TestCommandNotFound {
        /// The program's name, as written.
        program: String,
    },
}

impl WarningKind {
    /// What to do about it, in a sentence.
    pub fn fix(&self) -> String {
        match self {
            WarningKind::UnknownKey { .. } | WarningKind::UnknownConfigKey { .. } => {
                "rename the key, or delete it; until then ralph ignores it".into()
            }
            WarningKind::NothingToCheck { .. } => {
                "write the criteria as checkboxes below the frontmatter (- [ ] the tests pass), or set a test_command".into()
            }
            WarningKind::TestCommandNotFound { .. } => {
                "install it, or add its directory to PATH, or correct test_command".into()
            }
            WarningKind::NotACheckbox { fixed } => format!("write it as: {fixed}"),
        }
    }
}

impl TaskWarning {
    /// The warning whole, where it is and what to do, as a run prints it; `Display` says only
    /// where and what, for a report that gives [`WarningKind::fix`] a line of its own.
    pub fn with_fix(&self) -> String {
        match &self.kind {
            // Its message says what is ignored and why; the fix is plain from it.
            WarningKind::UnknownKey { .. } | WarningKind::UnknownConfigKey { .. } => {
                self.to_string()
            }
            WarningKind::NothingToCheck { .. } => {
                format!("{self}. To have ralph check the work, {}", self.kind.fix())
            }
            WarningKind::TestCommandNotFound { .. } => {
                format!("{self}. Before the loop can finish, {}", self.kind.fix())
            }
            WarningKind::NotACheckbox { fixed } => format!("{self}. Write it as: {fixed}"),
        }
    }
}

impl fmt::Display for TaskWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.path.display(), self.line, self.column)?;
        match &self.kind {
            WarningKind::UnknownKey {
                key,
                suggestion: Some(known),
            }
            | WarningKind::UnknownConfigKey {
                key,
                suggestion: Some(known),
            } => write!(
                f,
                "unknown key '{key}': did you mean '{}'? Until it is renamed it is ignored",
                known.name()
            ),
            WarningKind::UnknownKey {
                key,
                suggestion: None,
            } => {
                let names: Vec<&str> = Key::ALL.iter().map(|k| k.name()).collect();
                write!(
                    f,
                    "unknown key '{key}' is ignored. The keys ralph knows are: {}",
                    names.join(", ")
                )
            }
            WarningKind::UnknownConfigKey {
                key,
                suggestion: None,
            } => {
                let names: Vec<&str> = CONFIG_KEYS.iter().map(|k| k.name()).collect();
                write!(
                    f,
                    "unknown key '{key}' is ignored. The keys this file may set are: {}",
                    names.join(", ")
                )
            }
            WarningKind::NothingToCheck { listed_criteria } => write!(
                f,
                "nothing checks this task's DONE: the body has no checkboxes{} and there is no \
                 test_command, so the agent's word is taken for it",
                if *listed_criteria {
                    " (completion_criteria go to the agent, but ralph cannot tick them)"
                } else {
                    ""
                },
            ),
            WarningKind::NotACheckbox { .. } => write!(
                f,
                "this line looks like a checkbox but is not one, so ralph does not count it as a \
                 criterion"
            ),
            WarningKind::TestCommandNotFound { program } => write!(
                f,
                "test_command runs `{program}`, which is not on PATH here: the tests cannot pass, \
                 so every DONE would be rejected"
            ),
        }
    }
}

/// A fix for a YAML syntax error, chosen by the parser's wording of it.
fn yaml_hint(detail: &str) -> &'static str {
    if detail.contains("mapping values are not allowed") {
        "A value that contains ': ' must be in quotes, like task: \"Fix: the login bug\"; \
         and a key must start in the same column as the keys above it"
    } else if detail.contains("did not find expected key") {
        "Keys at the same level must start in the same column: check the indentation of this \
         line and the lines above it"
    } else if detail.contains("quoted scalar") {
        "A quote is never closed: add the closing quote, or remove the opening one"
    } else if detail.contains("expected ',' or ']'") {
        "A list opened with '[' is never closed: add the ']' (or put the value in quotes)"
    } else if detail.contains("expected ',' or '}'") {
        "A mapping opened with '{' is never closed: add the '}' (or put the value in quotes)"
    } else if detail.contains("control characters are not allowed") {
        "Remove the control character (such as a NUL byte) from the frontmatter"
    } else if detail.contains("unknown anchor") {
        "The alias *name refers to an anchor &name that is not defined above it: write the \
         value out instead"
    } else if detail.contains("cannot start any token") {
        "A value cannot start with @ or `: put the value in quotes"
    } else {
        "Check the indentation (spaces only) and the quoting near here; a value that contains \
         ': ' or starts with one of [ ] { } & * ! | > ' \" % @ ` must be in quotes"
    }
}
