//! [`RawLog`]: an agent stream's raw bytes in `.ralph/logs/`.

use std::path::{Path, PathBuf};

/// Raw output of one agent run, on disk; capped so a runaway agent cannot fill the disk.
///
/// The file is created when the first bytes arrive, not before the agent starts: on a busy
/// ext4 disk a create waits for the journal (a millisecond or more), which would otherwise sit
/// between one agent and the next; and an agent that prints nothing on a stream leaves no
/// empty file for it.
pub(super) struct RawLog {
    file: Option<std::io::BufWriter<std::fs::File>>,
    /// Whether creating the file was tried (it is tried once).
    opened: bool,
    written: u64,
    path: PathBuf,
}

/// Per-stream cap on what `.ralph/logs/` keeps of one iteration.
const LOG_CAP: u64 = 256 * 1024 * 1024;

impl RawLog {
    /// A log at `path`, created when the first bytes arrive.
    pub(super) fn new(path: PathBuf) -> Self {
        RawLog {
            file: None,
            opened: false,
            written: 0,
            path,
        }
    }

    fn open(path: &Path) -> Option<std::io::BufWriter<std::fs::File>> {
        ralph_protocol::open_plain(
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true),
            path,
        )
        .ok()
        .map(|f| std::io::BufWriter::with_capacity(256 * 1024, f))
    }

    /// Appends `bytes`, up to the cap; a log that cannot be written is given up, not fatal.
    pub(super) fn write(&mut self, bytes: &[u8]) {
        use std::io::Write;
        if !self.opened && !bytes.is_empty() {
            self.opened = true;
            self.file = Self::open(&self.path);
        }
        let Some(file) = self.file.as_mut() else {
            return;
        };
        let room = LOG_CAP.saturating_sub(self.written) as usize;
        let take = bytes.len().min(room);
        if file.write_all(&bytes[..take]).is_err() {
            self.file = None;
            return;
        }
        self.written += take as u64;
        if take < bytes.len() {
            let _ = write!(
                file,
                "\n[ralph: log cut at {LOG_CAP} bytes; see {}]\n",
                self.path.display()
            );
            self.file = None;
        }
    }

    /// Flushes what is buffered.
    pub(super) fn flush(&mut self) {
        use std::io::Write;
        if let Some(f) = self.file.as_mut() {
            let _ = f.flush();
        }
    }

    /// Flushes what is buffered, at the end of the run.
    pub(super) fn finish(&mut self) {
        self.flush();
    }
}
