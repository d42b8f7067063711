//! Whether anyone still reads ralph's output: `ralph run | head` leaves a pipe whose reader is
//! gone after ten lines, and a loop that went on writing into it would run for nothing.

use std::io::ErrorKind;
use std::os::fd::AsFd;
use std::os::unix::fs::FileTypeExt;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// Blocks until the reader of `out` (a pipe or a socket) closes its end; returns `true` then.
/// Returns `false` at once when `out` is something else (a terminal, a file), whose reader
/// cannot go away this way, or when it cannot be watched.
pub fn wait_until_reader_gone(out: impl AsFd) -> bool {
    let Ok(meta) = out
        .as_fd()
        .try_clone_to_owned()
        .and_then(|fd| std::fs::File::from(fd).metadata())
    else {
        return false;
    };
    let kind = meta.file_type();
    if !kind.is_fifo() && !kind.is_socket() {
        return false;
    }
    // Asked for no event: poll wakes only for POLLERR (a pipe's reader closed) or POLLHUP
    // (a socket's peer hung up), which it always reports.
    let mut fds = [PollFd::new(out.as_fd(), PollFlags::empty())];
    loop {
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {
                let gone = fds[0]
                    .revents()
                    .is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP));
                if gone {
                    return true;
                }
            }
            Err(e) if std::io::Error::from(e).kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_whose_reader_closed_is_seen() {
        let (reader, writer) = std::io::pipe().unwrap();
        let watch = std::thread::spawn(move || wait_until_reader_gone(&writer));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!watch.is_finished(), "the reader is still there");
        drop(reader);
        assert!(watch.join().unwrap());
    }

    #[test]
    fn a_file_is_never_watched() {
        let file = tempfile::tempfile().unwrap();
        assert!(!wait_until_reader_gone(&file));
    }
}
