//! Decoder throughput per stream format, next to the limit (a `memmem` scan for `<ralph>`)
//! and, for JSON, the naive approach (`serde_json::Value` per line), on the same bytes; for
//! plain text, also the least any decoder that shows the text must do (a UTF-8 check and a
//! copy).
//!
//! `cargo bench -p ralph-bench --bench decode`; `BENCH_QUICK=1` for 32 MiB corpora instead
//! of 256 MiB. `ralph-bench` reads the estimates criterion writes into `target/criterion/`.

#![forbid(unsafe_code)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use ralph_bench::corpus::Corpus;
use ralph_bench::{baseline, decode, quick};
use ralph_signal::StreamFormat;

fn corpus_size() -> usize {
    if quick() { 32 << 20 } else { 256 << 20 }
}

fn decoders(c: &mut Criterion) {
    for corpus in Corpus::ALL {
        let data = corpus.generate(corpus_size(), true);
        // Correctness before speed: exactly the planted signal, or the numbers mean nothing.
        let seen = decode(corpus.format(), &data);
        assert_eq!(
            seen.signals, 1,
            "{corpus:?}: the decoder must find the planted signal"
        );

        let mut group = c.benchmark_group(corpus.name());
        group.throughput(Throughput::Bytes(data.len() as u64));
        // The same number of iterations per sample: each one is long enough on its own.
        group.sampling_mode(SamplingMode::Flat);
        group.bench_function("memmem", |b| b.iter(|| baseline::memmem(black_box(&data))));
        group.bench_function("decoder", |b| {
            b.iter(|| decode(corpus.format(), black_box(&data)))
        });
        if corpus.format() == StreamFormat::Text {
            group.bench_function("validate_copy", |b| {
                b.iter(|| baseline::validate_and_copy(black_box(&data)))
            });
        } else {
            group.bench_function("naive_value", |b| {
                b.iter(|| baseline::naive(corpus, black_box(&data)))
            });
        }
        group.finish();
    }
}

fn config() -> Criterion {
    // Each iteration reads hundreds of megabytes, so few samples already say a lot.
    let (warm_up, measure) = if quick() { (1, 2) } else { (2, 6) };
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(warm_up))
        .measurement_time(Duration::from_secs(measure))
        .without_plots()
}

criterion_group! {
    name = benches;
    config = config();
    targets = decoders
}
criterion_main!(benches);
