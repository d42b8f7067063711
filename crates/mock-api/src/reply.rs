//! A scripted model turn settled for one request (tool ids made up, `{cwd}` substituted), and
//! the pieces every API's rendering shares: Server-Sent Events and splitting text in two.
//!
//! Each module of [`crate::api`] spells a [`Turn`] the way its clients expect. Text and a tool
//! call's JSON arguments always go out in two pieces, so a client that does not join the
//! pieces would show it, and a `<ralph>` tag in the middle of a text arrives split.

use serde_json::Value;

use crate::scenario::Block;

/// A model turn ready to send.
#[derive(Debug, Clone)]
pub struct Turn {
    /// Request number `n` of the mock, for ids: `msg_mock_<n>`.
    pub n: usize,
    /// Echoes the request's model.
    pub model: String,
    /// A rough token count of the request, for `usage`.
    pub input_tokens: u64,
    /// What the model says and calls, in order.
    pub blocks: Vec<TurnBlock>,
}

/// One settled block of a [`Turn`].
#[derive(Debug, Clone, PartialEq)]
pub enum TurnBlock {
    /// Text the model says.
    Text(String),
    /// A tool call with its id settled.
    ToolUse {
        /// The scripted id, or `toolu_mock_<n>_<i>`.
        id: String,
        /// The tool's name, as the client's tool list has it.
        name: String,
        /// The tool's arguments.
        input: Value,
    },
}

impl Turn {
    /// Builds turn number `n` from scripted blocks, substituting `{cwd}`.
    pub fn new(n: usize, model: &str, input_tokens: u64, blocks: &[Block], cwd: &str) -> Turn {
        let blocks = blocks
            .iter()
            .enumerate()
            .map(|(i, b)| match b {
                Block::Text(t) => TurnBlock::Text(t.replace("{cwd}", cwd)),
                Block::ToolUse(t) => TurnBlock::ToolUse {
                    id: t
                        .id
                        .clone()
                        .unwrap_or_else(|| format!("toolu_mock_{n}_{i}")),
                    name: t.name.clone(),
                    input: crate::scenario::substitute(&t.input, cwd),
                },
            })
            .collect();
        Turn {
            n,
            model: model.to_string(),
            input_tokens,
            blocks,
        }
    }

    /// `msg_mock_<n>`.
    pub fn id(&self) -> String {
        format!("msg_mock_{}", self.n)
    }

    /// Whether the turn calls a tool (so the client runs it and comes back).
    pub fn calls_tools(&self) -> bool {
        self.blocks
            .iter()
            .any(|b| matches!(b, TurnBlock::ToolUse { .. }))
    }

    /// All the text, joined.
    pub fn text(&self) -> String {
        self.blocks
            .iter()
            .filter_map(|b| match b {
                TurnBlock::Text(t) => Some(t.as_str()),
                TurnBlock::ToolUse { .. } => None,
            })
            .collect()
    }

    /// A rough count of what the turn says.
    pub fn output_tokens(&self) -> u64 {
        let chars: usize = self
            .blocks
            .iter()
            .map(|b| match b {
                TurnBlock::Text(t) => t.len(),
                TurnBlock::ToolUse { name, input, .. } => name.len() + input.to_string().len(),
            })
            .sum();
        (chars as u64 / 4).max(1)
    }
}

/// Appends one Server-Sent Event: `event: NAME` when named, then `data: JSON`.
pub fn sse_event(out: &mut String, name: Option<&str>, data: &Value) {
    if let Some(name) = name {
        out.push_str("event: ");
        out.push_str(name);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(&data.to_string());
    out.push_str("\n\n");
}

/// `s` in two pieces split at a character boundary near the middle (one piece when short).
pub fn halves(s: &str) -> Vec<&str> {
    if s.len() < 2 {
        return vec![s];
    }
    let mut mid = s.len() / 2;
    while !s.is_char_boundary(mid) {
        mid += 1;
    }
    if mid == s.len() {
        return vec![s];
    }
    vec![&s[..mid], &s[mid..]]
}

/// A test turn: text with a tag, then a tool call whose input names `{cwd}`.
#[cfg(test)]
pub fn test_turn() -> Turn {
    use crate::scenario::ToolUse;
    use serde_json::json;
    Turn::new(
        3,
        "model-x",
        10,
        &[
            Block::Text("héllo <ralph>DONE</ralph>".into()),
            Block::ToolUse(ToolUse {
                id: None,
                name: "Write".into(),
                input: json!({"file_path": "{cwd}/a.txt", "content": "x"}),
            }),
        ],
        "/w",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_turn_settles_ids_and_cwd() {
        let t = test_turn();
        assert_eq!(t.id(), "msg_mock_3");
        assert!(t.calls_tools());
        assert_eq!(t.text(), "héllo <ralph>DONE</ralph>");
        assert_eq!(
            t.blocks[1],
            TurnBlock::ToolUse {
                id: "toolu_mock_3_1".into(),
                name: "Write".into(),
                input: json!({"file_path": "/w/a.txt", "content": "x"}),
            }
        );
    }

    #[test]
    fn halves_respect_char_boundaries() {
        assert_eq!(halves("é"), ["é"]);
        assert_eq!(halves("aéb").concat(), "aéb");
        assert_eq!(halves(""), [""]);
    }
}
