//! The budget loops share across a machine: rate limits and a fleet's spend.
//!
//! # How it works
//!
//! Loops are separate processes (`ralph run`, one per task; `ralph fleet` starts several), so
//! what they share lives in ralph's state directory ([`UserDir::State`]), one small JSON file
//! per writer:
//!
//! - [`limits`]: `limits/<agent key>.<pid>.json`, "this agent's account is rate limited until
//!   T". A loop that hits a limit writes one; every loop of the same agent reads them before it
//!   starts an iteration and waits until the latest `until`.
//! - [`fleet`]: `fleets/<fleet id>/spent/<loop>.json`, what one loop of a fleet has cost so
//!   far. The fleet's total is their sum; a loop checks it before each iteration.
//!
//! Each file has one writer, which replaces it whole (a temporary file, then a rename), so a
//! reader sees an old record or a new one and two writers never lose each other's update:
//! there is no lock to wait on, and a loop killed mid-write leaves at most a `.tmp-` file.
//! Readers skip whatever is not a record of theirs (junk, a newer ralph's files) and leave it
//! alone; records that only describe the past (a limit whose time is over) are removed by
//! whoever reads them first.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::user_dirs::{STATE_DIR_ENV, UserDir, user_dir};

pub mod fleet;
pub mod limits;

/// The largest record a reader reads; anything bigger is not one of ours.
const MAX_RECORD_BYTES: u64 = 64 * 1024;

/// `sub` in ralph's state directory, or an error that says how to get one.
fn state_subdir(sub: &str) -> io::Result<PathBuf> {
    user_dir(UserDir::State)
        .map(|dir| dir.join(sub))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no home directory to keep ralph's state in; set {STATE_DIR_ENV}"),
            )
        })
}

/// Writes `value` as `dir/name` whole (temporary file, sync, rename), making `dir` (owner
/// only: it names the user's projects) if needed.
fn write_record(dir: &Path, name: &str, value: &impl Serialize) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut json = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    json.push(b'\n');
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    tmp.write_all(&json)?;
    tmp.as_file().sync_data()?;
    tmp.persist(dir.join(name)).map_err(|e| e.error)?;
    Ok(())
}

/// Reads one record; `None` when it is missing, not a plain file, too big, or not a `T`.
fn read_record<T: DeserializeOwned>(path: &Path) -> Option<T> {
    // Never a pipe or device, whose open could block every loop that looks.
    let file = crate::workspace::open_plain(fs::OpenOptions::new().read(true), path).ok()?;
    let mut raw = Vec::new();
    file.take(MAX_RECORD_BYTES).read_to_end(&mut raw).ok()?;
    serde_json::from_slice(&raw).ok()
}

/// The plain `.json` files in `dir` whose names start with `prefix`, with the part of the name
/// between the two; temporary files (`.tmp-`) and everything else are skipped.
fn records_in<'a>(
    dir: &Path,
    prefix: &'a str,
) -> impl Iterator<Item = (PathBuf, String)> + use<'a> {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(move |dirent| {
            let name = dirent.file_name().into_string().ok()?;
            let middle = name.strip_prefix(prefix)?.strip_suffix(".json")?;
            (!name.starts_with('.')).then(|| (dirent.path(), middle.to_string()))
        })
}

/// A stable 64-bit FNV-1a hash of `bytes`, in hex, for file names every ralph agrees on (the
/// std hashers are seeded per process or may change between Rust releases).
pub(crate) fn stable_hash(bytes: &[u8]) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = bytes.iter().fold(OFFSET, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    });
    format!("{hash:016x}")
}
