//! The frontmatter keys ralph knows, by name: the vocabulary the reader, the setters
//! ([`super::keys`]) and the error messages share.

/// The keys a config file (`config.toml`) may set, all of them task-file keys.
pub const CONFIG_KEYS: [Key; 5] = [
    Key::Agent,
    Key::Bell,
    Key::DesktopNotification,
    Key::NotifyCommand,
    Key::WebhookUrl,
];

/// A known frontmatter key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    /// `task`
    Task,
    /// `completion_criteria`
    CompletionCriteria,
    /// `max_iterations`
    MaxIterations,
    /// `test_command`
    TestCommand,
    /// `agent`
    Agent,
    /// `agent_args`
    AgentArgs,
    /// `model`
    Model,
    /// `question_timeout`
    QuestionTimeout,
    /// `iteration_timeout`
    IterationTimeout,
    /// `test_timeout`
    TestTimeout,
    /// `on_question_timeout`
    OnQuestionTimeout,
    /// `max_consecutive_failures`
    MaxConsecutiveFailures,
    /// `max_cost_usd`
    MaxCostUsd,
    /// `bell`
    Bell,
    /// `desktop_notification`
    DesktopNotification,
    /// `notify_command`
    NotifyCommand,
    /// `webhook_url`
    WebhookUrl,
    /// `sandbox`
    Sandbox,
    /// `sandbox_write`
    SandboxWrite,
    /// `sandbox_read`
    SandboxRead,
    /// `sandbox_net`
    SandboxNet,
    /// `checkpoints`
    Checkpoints,
    /// `worktree`
    Worktree,
    /// `worktree_setup`
    WorktreeSetup,
    /// `land`
    Land,
    /// `land_with`
    LandWith,
    /// `land_attempts`
    LandAttempts,
}

impl Key {
    /// Every key, in the order the example file documents them.
    pub const ALL: [Key; 27] = [
        Key::Task,
        Key::CompletionCriteria,
        Key::MaxIterations,
        Key::TestCommand,
        Key::Agent,
        Key::AgentArgs,
        Key::Model,
        Key::QuestionTimeout,
        Key::IterationTimeout,
        Key::TestTimeout,
        Key::OnQuestionTimeout,
        Key::MaxConsecutiveFailures,
        Key::MaxCostUsd,
        Key::Bell,
        Key::DesktopNotification,
        Key::NotifyCommand,
        Key::WebhookUrl,
        Key::Sandbox,
        Key::SandboxWrite,
        Key::SandboxRead,
        Key::SandboxNet,
        Key::Checkpoints,
        Key::Worktree,
        Key::WorktreeSetup,
        Key::Land,
        Key::LandWith,
        Key::LandAttempts,
    ];

    /// The key as written in the file.
    pub fn name(self) -> &'static str {
        match self {
            Key::Task => "task",
            Key::CompletionCriteria => "completion_criteria",
            Key::MaxIterations => "max_iterations",
            Key::TestCommand => "test_command",
            Key::Agent => "agent",
            Key::AgentArgs => "agent_args",
            Key::Model => "model",
            Key::QuestionTimeout => "question_timeout",
            Key::IterationTimeout => "iteration_timeout",
            Key::TestTimeout => "test_timeout",
            Key::OnQuestionTimeout => "on_question_timeout",
            Key::MaxConsecutiveFailures => "max_consecutive_failures",
            Key::MaxCostUsd => "max_cost_usd",
            Key::Bell => "bell",
            Key::DesktopNotification => "desktop_notification",
            Key::NotifyCommand => "notify_command",
            Key::WebhookUrl => "webhook_url",
            Key::Sandbox => "sandbox",
            Key::SandboxWrite => "sandbox_write",
            Key::SandboxRead => "sandbox_read",
            Key::SandboxNet => "sandbox_net",
            Key::Checkpoints => "checkpoints",
            Key::Worktree => "worktree",
            Key::WorktreeSetup => "worktree_setup",
            Key::Land => "land",
            Key::LandWith => "land_with",
            Key::LandAttempts => "land_attempts",
        }
    }

    /// The key with exactly this name.
    pub fn from_name(name: &str) -> Option<Key> {
        Key::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The known key an unknown one was most likely meant to be, if any is close.
    pub fn suggest(unknown: &str) -> Option<Key> {
        let names = Key::ALL.map(Key::name);
        nearest(unknown, &names).and_then(Key::from_name)
    }

    /// Whether the value is a YAML list.
    pub(super) fn takes_list(self) -> bool {
        matches!(
            self,
            Key::CompletionCriteria
                | Key::AgentArgs
                | Key::SandboxWrite
                | Key::SandboxRead
                | Key::SandboxNet
        )
    }

    /// A correct line for this key, used in "Write it like: ..." hints.
    pub(super) fn example(self) -> &'static str {
        match self {
            Key::Task => "task: Add a session cache to the API server",
            Key::CompletionCriteria => "completion_criteria: [\"cargo test passes\"]",
            Key::MaxIterations => "max_iterations: 10",
            Key::TestCommand => "test_command: cargo test --quiet",
            Key::Agent => "agent: claude",
            Key::AgentArgs => "agent_args: [\"--verbose\"]",
            Key::Model => "model: opus",
            Key::QuestionTimeout => "question_timeout: 5m",
            Key::IterationTimeout => "iteration_timeout: 30m",
            Key::TestTimeout => "test_timeout: 10m",
            Key::OnQuestionTimeout => "on_question_timeout: continue",
            Key::MaxConsecutiveFailures => "max_consecutive_failures: 3",
            Key::MaxCostUsd => "max_cost_usd: 5.00",
            Key::Bell => "bell: false",
            Key::DesktopNotification => "desktop_notification: false",
            Key::NotifyCommand => "notify_command: ~/bin/tell-me",
            Key::WebhookUrl => "webhook_url: https://hooks.example.com/ralph",
            Key::Sandbox => "sandbox: true",
            Key::SandboxWrite => "sandbox_write: [\"~/.cache/my-tool\"]",
            Key::SandboxRead => "sandbox_read: [\"~/src/shared-lib\"]",
            Key::SandboxNet => "sandbox_net: [443]",
            Key::Checkpoints => "checkpoints: false",
            Key::Worktree => "worktree: true",
            Key::WorktreeSetup => "worktree_setup: npm ci",
            Key::Land => "land: auto",
            Key::LandWith => "land_with: merge",
            Key::LandAttempts => "land_attempts: 2",
        }
    }

    /// "Write it like: ..." with this key's example.
    pub(super) fn write_it_like(self) -> String {
        format!("Write it like: {}", self.example())
    }
}

/// The string among `candidates` that `word` is most likely a misspelling of (ignoring case,
/// `-` and `_`), for "did you mean" hints.
pub fn nearest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let normal = word.trim().to_lowercase().replace(['-', ' '], "_");
    if let Some(exact) = candidates.iter().find(|c| **c == normal) {
        return Some(exact);
    }
    candidates
        .iter()
        .map(|c| (*c, strsim::jaro_winkler(&normal, c)))
        .filter(|(c, score)| *score >= 0.85 || strsim::damerau_levenshtein(&normal, c) <= 2)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, _)| c)
}
