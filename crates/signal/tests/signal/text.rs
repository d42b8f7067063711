//! Plain text: which signals each text fixture must yield, and targeted cases.

use ralph_signal::SignalKind::{Done, Gutter, Question};
use ralph_signal::{AgentEvent, DISPLAY_CAP, LINE_CAP, Signal, SignalKind, StreamFormat};

use crate::util::{assert_chunking_invariant, decode, decode_chunks, fixture, signals};

fn fixture_signals(name: &str) -> Vec<(SignalKind, u64)> {
    signals(&decode(
        StreamFormat::Text,
        &fixture(&format!("text/{name}")),
    ))
}

/// The expected signals of every text fixture, stated here so that accepting a snapshot
/// blindly cannot hide a wrong answer.
#[test]
fn each_text_fixture_yields_exactly_its_signals() {
    let expected: &[(&str, &[(SignalKind, u64)])] = &[
        ("signal-done-plain.txt", &[(Done, 5)]),
        (
            "signal-each-kind.txt",
            &[
                (Question, 2),
                (Gutter, 3),
                (Done, 4),
                (Done, 5),
                (Gutter, 5),
            ],
        ),
        ("signal-near-misses.txt", &[]),
        ("signal-inside-fence.txt", &[(Gutter, 25), (Done, 32)]),
        (
            "signal-inside-inline-code.txt",
            &[(Done, 3), (Question, 4), (Gutter, 5), (Done, 6)],
        ),
        ("signal-split-lines-crlf.txt", &[(Question, 6)]),
        ("signal-unterminated-last-line.txt", &[(Done, 2)]),
        ("signal-in-unclosed-fence.txt", &[]),
        ("hostile-ansi-osc.txt", &[(Done, 9), (Question, 10)]),
        ("invalid-utf8-nul.bin", &[(Done, 3)]),
        ("progress-carriage-return.txt", &[(Question, 3)]),
        // Prose that quotes a tag outside code counts: agents are told to use backticks.
        ("markdown-agent-report.txt", &[(Question, 17), (Done, 21)]),
        ("empty.txt", &[]),
        ("blank-lines-only.txt", &[]),
    ];
    let mut names: Vec<String> = std::fs::read_dir(crate::util::fixtures_dir().join("text"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut listed: Vec<&str> = expected.iter().map(|(n, _)| *n).collect();
    listed.sort();
    assert_eq!(
        names, listed,
        "every text fixture has expected signals here"
    );
    for (name, want) in expected {
        assert_eq!(fixture_signals(name), *want, "{name}");
    }
}

#[test]
fn a_signal_event_follows_the_text_of_its_line() {
    let events = decode(
        StreamFormat::Text,
        b"before\nnow <ralph>DONE</ralph>\nafter\n",
    );
    assert_eq!(
        events,
        [
            AgentEvent::Text("before".into()),
            AgentEvent::Text("now <ralph>DONE</ralph>".into()),
            AgentEvent::Signal(Signal {
                kind: Done,
                line: "now <ralph>DONE</ralph>".into(),
                line_number: 2,
            }),
            AgentEvent::Text("after".into()),
        ]
    );
}

/// A `Text` carries every line one `feed` showed; a signal splits it, so that the signal
/// still comes right after its own line.
#[test]
fn one_feed_shows_its_lines_in_one_event_until_a_signal() {
    let mut decoder = ralph_signal::Decoder::new(StreamFormat::Text);
    let mut events = Vec::new();
    decoder.feed(
        b"one\r\n```\n<ralph>DONE</ralph>\n```\n\x1b[1mbold\x1b[0m\nnow <ralph>GUTTER</ralph>\nafter\nunfini",
        &mut events,
    );
    let gutter = Signal {
        kind: Gutter,
        line: "now <ralph>GUTTER</ralph>".into(),
        line_number: 6,
    };
    assert_eq!(
        events,
        [
            AgentEvent::Text(
                "one\n```\n<ralph>DONE</ralph>\n```\nbold\nnow <ralph>GUTTER</ralph>".into()
            ),
            AgentEvent::Signal(gutter),
            AgentEvent::Text("after".into()),
        ]
    );
    events.clear();
    decoder.finish(&mut events);
    assert_eq!(events, [AgentEvent::Text("unfini".into())]);
}

#[test]
fn every_tag_is_found_once_at_every_split_point() {
    for tag in [
        "<ralph>DONE</ralph>",
        "<ralph>QUESTION</ralph>",
        "<ralph>GUTTER</ralph>",
        "<ralph>COMPLETE</ralph>",
    ] {
        for text in [
            tag.to_owned(),
            format!("{tag}\n"),
            format!("xx {tag} yy\r\n"),
            format!("<ralph><ralph>{tag}</ralph>\n"),
        ] {
            let events = assert_chunking_invariant(StreamFormat::Text, text.as_bytes(), &text);
            assert_eq!(signals(&events).len(), 1, "{text:?}");
        }
    }
}

#[test]
fn fence_state_carries_across_lines_and_feeds() {
    let text = b"```\n<ralph>DONE</ralph>\n```\n<ralph>GUTTER</ralph>\n";
    let events = assert_chunking_invariant(StreamFormat::Text, text, "fence");
    assert_eq!(signals(&events), [(Gutter, 4)]);
    // Fence lines with nothing else in them are shown with their neighbours and their state
    // taken later: still in order, before a coloured line or a CRLF one.
    let text = b"~~~~ sh\nplain\n\x1b[1m<ralph>DONE</ralph>\x1b[0m\n~~~~\r\nx\n\x1b[1m<ralph>GUTTER</ralph>\n";
    let events = assert_chunking_invariant(StreamFormat::Text, text, "fence, colours");
    assert_eq!(signals(&events), [(Gutter, 6)]);
    // A coloured fence line is a fence line once its colours are stripped, and is cleaned
    // on the short path for coloured lines: it still opens and closes the block.
    let text = b"\x1b[2m```\x1b[0m\n<ralph>DONE</ralph>\n\x1b[1;31merror\x1b[0m: x\n\x1b[2m```\x1b[0m\n<ralph>GUTTER</ralph>\n";
    let events = assert_chunking_invariant(StreamFormat::Text, text, "coloured fences");
    assert_eq!(signals(&events), [(Gutter, 5)]);
}

#[test]
fn decoder_reads_a_second_stream_after_finish() {
    let mut decoder = ralph_signal::Decoder::new(StreamFormat::Text);
    let mut out = Vec::new();
    decoder.feed(b"```\nopen fence, no newline", &mut out);
    decoder.finish(&mut out);
    out.clear();
    decoder.feed(b"<ralph>DONE</ralph>", &mut out);
    decoder.finish(&mut out);
    assert_eq!(
        signals(&out),
        [(Done, 1)],
        "line numbers and fences start over"
    );
}

#[test]
fn display_text_is_cut_with_a_note() {
    let line = format!("{}<ralph>DONE</ralph>\n", "a".repeat(10_000));
    let events = decode(StreamFormat::Text, line.as_bytes());
    let AgentEvent::Text(text) = &events[0] else {
        panic!("{events:?}")
    };
    let more = 10_000 + 19 - DISPLAY_CAP;
    assert_eq!(
        *text,
        format!("{} … [{more} more bytes]", "a".repeat(DISPLAY_CAP))
    );
    assert_eq!(
        signals(&events),
        [(Done, 1)],
        "the signal past the cut still counts"
    );
}

/// A line just over the cap takes the streaming path; it must still find tags at every
/// split, including one straddling the cap itself.
#[test]
fn lines_over_the_cap_find_tags_at_every_split() {
    let tag = b"<ralph>QUESTION</ralph>";
    for at in [0, 100, LINE_CAP - 10, LINE_CAP + 5] {
        let mut line = vec![b'z'; LINE_CAP + 40];
        line[at..at + tag.len()].copy_from_slice(tag);
        line.push(b'\n');
        let whole = decode(StreamFormat::Text, &line);
        assert_eq!(signals(&whole), [(Question, 1)], "tag at {at}");
        for cut in (0..line.len()).step_by(997).chain(at..at + tag.len() + 1) {
            let (a, b) = line.split_at(cut);
            assert_eq!(
                decode_chunks(StreamFormat::Text, [a, b]),
                whole,
                "tag at {at}, cut {cut}"
            );
        }
        let bytewise_near_tag = [
            &line[..at],
            &line[at..at + 3],
            &line[at + 3..at + 11],
            &line[at + 11..],
        ];
        assert_eq!(decode_chunks(StreamFormat::Text, bytewise_near_tag), whole);
    }
}

/// Regression: a plain line over the cap that arrived whole in one chunk took the ordinary
/// path (exact code spans) while the same line arriving in pieces took the streaming one
/// (approximate spans), so its signals depended on chunking. Here the two rules disagree.
#[test]
fn a_line_over_the_cap_is_judged_the_same_however_it_arrives() {
    let pad = "p".repeat(LINE_CAP);
    let line = format!("`` a ` {pad} <ralph>DONE</ralph> ` c\nnext\n");
    let whole = decode(StreamFormat::Text, line.as_bytes());
    for cut in [1, 100, LINE_CAP, line.len() - 8] {
        let (a, b) = line.as_bytes().split_at(cut);
        assert_eq!(
            decode_chunks(StreamFormat::Text, [a, b]),
            whole,
            "cut at {cut}"
        );
    }
    assert_eq!(
        signals(&whole),
        [(Done, 1)],
        "the streaming rule: an unclosed run, so it counts"
    );
}

#[test]
fn lines_over_the_cap_respect_fences_and_spans() {
    let pad = "p".repeat(LINE_CAP);
    let cases = [
        (format!("```\n{pad} <ralph>DONE</ralph>\n```\n"), vec![]),
        (format!("`{pad} <ralph>DONE</ralph>`\n"), vec![]),
        (format!("``{pad} ` <ralph>DONE</ralph>\n"), vec![(Done, 1)]),
        (format!("```{pad}\n<ralph>DONE</ralph>\n"), vec![]),
        (
            format!("```{pad}`x`\n<ralph>DONE</ralph>\n"),
            vec![(Done, 2)],
        ),
    ];
    for (text, want) in cases {
        let events = decode(StreamFormat::Text, text.as_bytes());
        assert_eq!(signals(&events), want, "{}", &text[..20]);
    }
}

#[test]
fn invalid_utf8_never_panics_and_shows_replacement_characters() {
    let events = decode(StreamFormat::Text, b"\xff\xfe\x00abc\xe2\x82");
    assert_eq!(
        events,
        [AgentEvent::Text("\u{fffd}\u{fffd}abc\u{fffd}".into())]
    );
}
