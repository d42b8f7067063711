//! [`StderrLines`]: an agent's stderr as lines for display.

/// Splits stderr into display lines: bounded, sanitized.
#[derive(Default)]
pub(super) struct StderrLines {
    partial: Vec<u8>,
}

const STDERR_LINE_CAP: usize = 4096;

impl StderrLines {
    /// The whole lines `bytes` completes; the rest waits for more.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        let mut rest = bytes;
        while let Some(i) = memchr_newline(rest) {
            self.push_capped(&rest[..i]);
            lines.push(self.take());
            rest = &rest[i + 1..];
        }
        self.push_capped(rest);
        lines
    }

    fn push_capped(&mut self, bytes: &[u8]) {
        let room = STDERR_LINE_CAP.saturating_sub(self.partial.len());
        self.partial
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn take(&mut self) -> String {
        let line = ralph_signal::sanitize(&String::from_utf8_lossy(&self.partial));
        self.partial.clear();
        line
    }

    /// The last line, when the stream ended without a newline.
    pub(super) fn finish(&mut self) -> Option<String> {
        (!self.partial.is_empty()).then(|| self.take())
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == b'\n')
}
