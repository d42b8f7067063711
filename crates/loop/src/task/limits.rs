//! How much of a task file ralph reads and parses.

/// The largest task file ralph reads: 16 MiB.
pub const FILE_SIZE_LIMIT: u64 = 16 * 1024 * 1024;

/// The largest frontmatter ralph parses: 256 KiB. Settings are short; prose goes in the body.
pub const FRONTMATTER_SIZE_LIMIT: usize = 256 * 1024;

/// The deepest `[`/`{` nesting allowed in the frontmatter.
pub const MAX_FLOW_NESTING: usize = 32;
