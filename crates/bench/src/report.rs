//! The results: criterion's decoder estimates plus the whole-process numbers, as one table on
//! stdout and `target/bench/results.json`.

use std::path::Path;

use ralph_bench::corpus::Corpus;

use crate::iterations::Overhead;
use crate::process::Throughput;
use crate::reaction::{Idle, Reaction};
use crate::startup::Startup;

/// The numbers the issue measured for the other two implementations, on this machine kind.
const ORCH: &str = "ralph-orchestrator";
const PYRALPH: &str = "pyralph";

/// One decoder benchmark as criterion estimated it.
#[derive(Debug, Clone)]
pub struct DecodeResult {
    pub corpus: &'static str,
    pub bytes: u64,
    /// Median seconds per pass, per function (`memmem`, `decoder`, `naive_value`,
    /// `validate_copy`).
    pub memmem_s: Option<f64>,
    pub decoder_s: Option<f64>,
    pub naive_s: Option<f64>,
    /// Plain text: a UTF-8 check and a copy of the bytes, nothing else
    /// (`baseline::validate_and_copy`).
    pub validate_copy_s: Option<f64>,
}

impl DecodeResult {
    fn gbps(&self, s: Option<f64>) -> Option<f64> {
        s.map(|s| self.bytes as f64 / s / 1e9)
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "corpus": self.corpus,
            "bytes": self.bytes,
            "memmem_gb_per_s": self.gbps(self.memmem_s),
            "decoder_gb_per_s": self.gbps(self.decoder_s),
            "naive_value_gb_per_s": self.gbps(self.naive_s),
            "decoder_share_of_memmem": self.memmem_s.zip(self.decoder_s).map(|(m, d)| m / d),
            "decoder_speedup_over_naive": self.naive_s.zip(self.decoder_s).map(|(n, d)| n / d),
            "validate_copy_gb_per_s": self.gbps(self.validate_copy_s),
            "validate_copy_share_of_memmem":
                self.memmem_s.zip(self.validate_copy_s).map(|(m, v)| m / v),
        })
    }
}

/// Reads `target/criterion/<corpus>/<function>/new/{estimates,benchmark}.json`.
pub fn read_criterion(target: &Path) -> Vec<DecodeResult> {
    let read = |corpus: &str, function: &str, file: &str| -> Option<serde_json::Value> {
        let path = target
            .join("criterion")
            .join(corpus)
            .join(function)
            .join("new")
            .join(file);
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    };
    let median_s = |corpus: &str, function: &str| {
        read(corpus, function, "estimates.json")?["median"]["point_estimate"]
            .as_f64()
            .map(|ns| ns / 1e9)
    };
    Corpus::ALL
        .iter()
        .filter_map(|c| {
            let bytes =
                read(c.name(), "decoder", "benchmark.json")?["throughput"]["Bytes"].as_u64()?;
            Some(DecodeResult {
                corpus: c.name(),
                bytes,
                memmem_s: median_s(c.name(), "memmem"),
                decoder_s: median_s(c.name(), "decoder"),
                naive_s: median_s(c.name(), "naive_value"),
                validate_copy_s: median_s(c.name(), "validate_copy"),
            })
        })
        .collect()
}

/// Everything one `ralph-bench` run measured.
#[derive(Debug, Default)]
pub struct Results {
    pub decode: Vec<DecodeResult>,
    pub throughput: Vec<Throughput>,
    /// Plain text printed to a tmux pane.
    pub terminal: Option<crate::process::Terminal>,
    pub overhead: Vec<Overhead>,
    pub sandbox: Option<crate::sandbox::SandboxCost>,
    pub reaction: Option<Reaction>,
    /// The same, measured on `ralph-portable` (the portable process backend).
    pub reaction_portable: Option<Reaction>,
    pub idle: Vec<Idle>,
    pub startup: Vec<Startup>,
}

/// One line of the table.
struct Row {
    what: String,
    value: String,
    target: String,
    ok: Option<bool>,
    orch: &'static str,
    pyralph: &'static str,
}

fn row(what: impl Into<String>, value: impl Into<String>, target: &str, ok: Option<bool>) -> Row {
    Row {
        what: what.into(),
        value: value.into(),
        target: target.into(),
        ok,
        orch: "",
        pyralph: "",
    }
}

impl Row {
    fn others(mut self, orch: &'static str, pyralph: &'static str) -> Row {
        self.orch = orch;
        self.pyralph = pyralph;
        self
    }
}

/// Peak RSS while streaming: under 16 MiB whatever the size (flat: the 1 GiB row holds what
/// the 200 MiB row does).
const RSS_TARGET: &str = "< 16 MiB, flat";
const RSS_CAP_KB: u64 = 16 * 1024;

fn mib(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

impl Results {
    fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        for d in &self.decode {
            let (Some(dec), Some(mem)) = (d.gbps(d.decoder_s), d.gbps(d.memmem_s)) else {
                continue;
            };
            // Context, not targets: the limit of one search for `<ralph>` (memmem), and what
            // the decoder is up against, the UTF-8 check and copy for plain text and reading
            // every line into a `serde_json::Value` for JSON lines.
            let context = match (d.gbps(d.naive_s), d.gbps(d.validate_copy_s)) {
                (Some(naive), _) => format!("{:.1}x naive ({naive:.2} GB/s)", dec / naive),
                (None, Some(v)) => format!("UTF-8 check + copy alone {v:.1} GB/s"),
                (None, None) => String::new(),
            };
            rows.push(row(
                format!("decode {} ({} MiB)", d.corpus, d.bytes >> 20),
                format!("{dec:.2} GB/s; {context}; memmem {mem:.1} GB/s"),
                ">= 1 GB/s",
                Some(dec >= 1.0),
            ));
        }
        for t in &self.throughput {
            let size = if t.bytes >= 1 << 30 {
                format!("{:.1} GiB", t.bytes as f64 / (1u64 << 30) as f64)
            } else {
                format!("{} MiB", t.bytes >> 20)
            };
            let is_200 = t.bytes < 1 << 30;
            rows.push(
                row(
                    format!("ralph run, {size} {}", t.format),
                    format!(
                        "{:.2} s; {:.1}x the pipe ({:.2} s)",
                        t.ralph.as_secs_f64(),
                        t.ratio(),
                        t.pipe.as_secs_f64()
                    ),
                    "<= 1.5x the pipe",
                    Some(t.ratio() <= 1.5),
                )
                .others(
                    if is_200 { "1.47 s (5.6x)" } else { "" },
                    if is_200 { "34.1 s" } else { "" },
                ),
            );
            rows.push(
                row(
                    format!("  peak RSS, {size} {}", t.format),
                    format!(
                        "{:.1} MiB (agent + cat alone: {:.1} MiB)",
                        mib(t.ralph_rss_kb),
                        mib(t.pipe_rss_kb)
                    ),
                    RSS_TARGET,
                    Some(t.ralph_rss_kb < RSS_CAP_KB),
                )
                .others(
                    if is_200 { "413 MiB" } else { "" },
                    if is_200 { "294 MiB" } else { "" },
                ),
            );
        }
        if let Some(t) = &self.terminal {
            rows.push(row(
                format!("  {} MiB plain text to a terminal (tmux)", t.mib),
                format!(
                    "{:.2} s; cat to the same terminal {:.2} s",
                    t.ralph.as_secs_f64(),
                    t.cat.as_secs_f64()
                ),
                "(what a real terminal costs)",
                None,
            ));
            rows.push(row(
                format!("  peak RSS, {} MiB plain text to a terminal", t.mib),
                format!("{:.1} MiB", mib(t.ralph_rss_kb)),
                RSS_TARGET,
                Some(t.ralph_rss_kb < RSS_CAP_KB),
            ));
        }
        for o in &self.overhead {
            rows.push(
                row(
                    format!(
                        "overhead per iteration ({} iterations, {})",
                        o.iterations, o.filesystem
                    ),
                    format!(
                        "{:.2} ms median ({:.2} ms mean; one fsync'd write {:.2} ms)",
                        o.median_ms(),
                        o.mean_ms(),
                        o.fsync_write_ms
                    ),
                    "<= 1 ms median",
                    Some(o.median_ms() <= 1.0),
                )
                .others("250 ms", "2005 ms"),
            );
        }
        if let Some(s) = &self.sandbox {
            rows.push(row(
                format!(
                    "what the sandbox adds per iteration ({} iterations each way)",
                    s.iterations
                ),
                format!(
                    "{:.2} ms median (gap {:.2} ms sandboxed, {:.2} ms --no-sandbox{})",
                    s.median_ms(),
                    s.on.median,
                    s.off.median,
                    s.fallback
                        .as_ref()
                        .map(|f| format!("; {:.2} ms through `ralph __sandbox`", f.median))
                        .unwrap_or_default()
                ),
                "< 1 ms median",
                Some(s.median_ms() < 1.0),
            ));
        }
        for (r, backend) in [
            (&self.reaction, ""),
            (&self.reaction_portable, ", portable backend"),
        ] {
            let Some(r) = r else { continue };
            rows.push(row(
                format!(
                    "QUESTION signal -> question shown ({} trials{backend})",
                    r.shown.n
                ),
                format!("{:.2} ms median, {:.2} ms p99", r.shown.median, r.shown.p99),
                "<= 20 ms p99",
                Some(r.shown.p99 <= 20.0),
            ));
            rows.push(row(
                format!(
                    "`ralph answer` -> next agent starts ({} trials{backend})",
                    r.next_start.n
                ),
                format!(
                    "{:.2} ms median, {:.2} ms p99",
                    r.next_start.median, r.next_start.p99
                ),
                "<= 100 ms p99",
                Some(r.next_start.p99 <= 100.0),
            ));
        }
        for i in &self.idle {
            let per_s = |n: u64| n as f64 / i.seconds;
            rows.push(
                row(
                    format!(
                        "waiting for an answer, {} ({:.0} s)",
                        i.front_end, i.seconds
                    ),
                    format!(
                        "CPU {:.3} s; {:.2} wake-ups/s; {} syscalls/s",
                        i.cpu_s,
                        per_s(i.context_switches),
                        i.syscalls_total()
                            .map_or("?".into(), |n| format!("{:.2}", per_s(n)))
                    ),
                    "CPU <= 0.3 s / 60 s, no polling",
                    Some(i.cpu_s <= 0.3 * i.seconds / 60.0),
                )
                .others("4 stat calls/s", "0 wake-ups"),
            );
        }
        for s in &self.startup {
            let target = if s.command.starts_with("ralph") {
                "<= 2.4 ms"
            } else {
                "(reference)"
            };
            let r = row(
                s.command,
                format!("{:.2} ms median, {:.2} ms p99", s.stats.median, s.stats.p99),
                target,
                s.command
                    .starts_with("ralph")
                    .then_some(s.stats.median <= 2.4),
            );
            rows.push(if s.command == "ralph --version" {
                r.others("2.4 ms", "108 ms")
            } else {
                r
            });
        }
        rows
    }

    /// The table, as plain text.
    pub fn table(&self) -> String {
        let rows = self.rows();
        let header = ["measure", "ralph", "target", "", ORCH, PYRALPH];
        let cells: Vec<[String; 6]> = rows
            .iter()
            .map(|r| {
                [
                    r.what.clone(),
                    r.value.clone(),
                    r.target.clone(),
                    match r.ok {
                        Some(true) => "ok".into(),
                        Some(false) => "MISS".into(),
                        None => String::new(),
                    },
                    r.orch.into(),
                    r.pyralph.into(),
                ]
            })
            .collect();
        let mut widths = header.map(|h| h.chars().count());
        for c in &cells {
            for (w, s) in widths.iter_mut().zip(c) {
                *w = (*w).max(s.chars().count());
            }
        }
        let line = |c: &[String]| {
            c.iter()
                .zip(widths)
                .map(|(s, w)| format!("{s}{}", " ".repeat(w - s.chars().count())))
                .collect::<Vec<_>>()
                .join(" | ")
                .trim_end()
                .to_string()
        };
        let mut out = line(&header.map(String::from));
        out.push('\n');
        out.push_str(&widths.map(|w| "-".repeat(w)).join("-|-"));
        out.push('\n');
        for c in &cells {
            out.push_str(&line(c));
            out.push('\n');
        }
        out
    }

    pub fn json(&self, machine: &serde_json::Value) -> serde_json::Value {
        serde_json::json!({
            "machine": machine,
            "decode": self.decode.iter().map(DecodeResult::json).collect::<Vec<_>>(),
            "whole_process": self.throughput.iter().map(Throughput::json).collect::<Vec<_>>(),
            "terminal": self.terminal.as_ref().map(|t| serde_json::json!({"mib": t.mib, "ralph_s": t.ralph.as_secs_f64(), "cat_s": t.cat.as_secs_f64(), "ralph_peak_rss_kb": t.ralph_rss_kb})),
            "overhead": self.overhead.iter().map(Overhead::json).collect::<Vec<_>>(),
            "sandbox": self.sandbox.as_ref().map(crate::sandbox::SandboxCost::json),
            "reaction": self.reaction.as_ref().map(Reaction::json),
            "reaction_portable": self.reaction_portable.as_ref().map(Reaction::json),
            "idle": self.idle.iter().map(Idle::json).collect::<Vec<_>>(),
            "startup": self.startup.iter().map(Startup::json).collect::<Vec<_>>(),
            "table": self.rows().iter().map(|r| serde_json::json!({
                "measure": r.what, "ralph": r.value, "target": r.target, "met": r.ok,
                ORCH: r.orch, PYRALPH: r.pyralph,
            })).collect::<Vec<_>>(),
        })
    }
}
