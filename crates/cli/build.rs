//! Links `ralph` for a fast start on Linux: `ralph status` and `ralph --version` should cost about
//! what starting any process costs (see "Start-up at 2.4 ms" in docs/benchmarks.md).
//!
//! One link setting, measured on `ralph --version`: the unwinder linked in (`libgcc_eh.a`)
//! instead of loaded (`libgcc_s.so`).
//!
//! Loading `libgcc_s` costs a library mapped and relocated, and its constructor runs `cpuid`,
//! which traps to the hypervisor on a virtual machine: about a seventh of the CPU time left.
//! Panics unwind the same way; this is the unwinder Rust itself links under `crt-static`.
//!
//! Considered and not done: linking at a fixed address (`-no-pie`). As a position-independent
//! executable, ralph has the loader apply some 14,700 relative relocations at every start
//! (about 190,000 instructions and 66 page faults, 0.2 to 0.3 ms here); at a fixed address the
//! linker would resolve them once. But ralph reads untrusted agent output all day, and a fixed
//! address for its code gives up address-space randomization, a defence worth more than those
//! fractions of a millisecond. A fully static binary would skip the loader altogether, but
//! needs `crt-static` in the compiler flags, which cargo also applies to proc-macro crates
//! unless every build names `--target`. The setting lives here rather than in
//! `.cargo/config.toml` because it concerns this package alone: the other workspace crates
//! build as usual, and a plain `cargo build` of a fresh clone gets it.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=crates/cli/build.rs");
    let cfg = |key: &str| env::var(key).unwrap_or_default();
    // A crt-static build has the unwinder linked in already.
    let crt_static = cfg("CARGO_CFG_TARGET_FEATURE")
        .split(',')
        .any(|f| f == "crt-static");
    if cfg("CARGO_CFG_TARGET_OS") != "linux" || cfg("CARGO_CFG_TARGET_ENV") != "gnu" || crt_static {
        return;
    }
    if let Some(archive) = static_unwinder() {
        // The compiler finds it in its own directory when linking; an upgrade moves it, so
        // look again then.
        println!("cargo::rerun-if-changed={}", archive.display());
        println!("cargo::rustc-link-lib=static=gcc_eh");
    }
}

/// `libgcc_eh.a` as the C compiler that links ralph finds it, if it has one. Not when
/// cross-compiling: the compiler asked here would be the host's.
fn static_unwinder() -> Option<PathBuf> {
    if env::var("HOST").ok()? != env::var("TARGET").ok()? {
        return None;
    }
    let cc = env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".into());
    let out = Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()?;
    // A compiler without the archive prints the bare name back.
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (path.is_absolute() && path.is_file()).then_some(path)
}
