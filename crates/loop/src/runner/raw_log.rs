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
    /// The most the file keeps ([`crate::logs::LogBudget::stream_cap`]).
    cap: u64,
    path: PathBuf,
}

impl RawLog {
    /// A log at `path` keeping at most `cap` bytes, created when the first bytes arrive.
    pub(super) fn new(path: PathBuf, cap: u64) -> Self {
        RawLog {
            file: None,
            opened: false,
            written: 0,
            cap,
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
        let room = usize::try_from(self.cap.saturating_sub(self.written)).unwrap_or(usize::MAX);
        let take = bytes.len().min(room);
        if file.write_all(&bytes[..take]).is_err() {
            self.file = None;
            return;
        }
        self.written += take as u64;
        if take < bytes.len() {
            let _ = write!(
                file,
                "\n[ralph: log cut at {} bytes (half of max_log_mib, at most 256 MiB): the rest of this stream was shown, not kept]\n",
                self.cap
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

#[cfg(test)]
mod tests {
    use super::RawLog;

    /// `max_log_mib = 1` still let one iteration write 256 MiB per stream: the cap was a
    /// constant, whatever the budget.
    #[test]
    fn a_stream_keeps_no_more_than_its_cap_then_says_it_was_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run-0001-iter-0001.out");
        let cap = crate::logs::LogBudget {
            keep_runs: 1,
            max_mib: 1,
        }
        .stream_cap();
        assert_eq!(cap, 512 * 1024);
        let mut log = RawLog::new(path.clone(), cap);
        let chunk = vec![b'x'; 64 * 1024 + 7];
        for _ in 0..40 {
            log.write(&chunk);
        }
        log.finish();
        let kept = std::fs::read(&path).unwrap();
        let (body, note) = kept.split_at(cap as usize);
        assert!(body.iter().all(|&b| b == b'x'));
        let note = String::from_utf8_lossy(note);
        assert!(
            note.starts_with("\n[ralph: log cut at 524288 bytes"),
            "{note}"
        );
        assert!(note.len() < 200, "{note}");
    }
}
