//! The HTML the broker serves: the question page, the dashboard and the short pages around them.
//!
//! Everything the agent wrote (question, context, options, task, signals) is untrusted. The
//! question's markdown goes through pulldown-cmark with every raw HTML event turned into text,
//! images turned into plain links, and links kept only for `http`, `https` and `mailto`; every
//! other value is escaped here. The page loads nothing from outside the binary: one stylesheet
//! and one script, served by the broker itself, and the Content-Security-Policy allows no
//! inline script.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};
use ralph_protocol::clean;

use ralph_fleet::rows::{LoopRow, needing_you, state_words};

use crate::loops::{self, LoopView, QuestionView, project_name};

/// Escapes `s` for HTML text and attribute values (quoted with `"`), cleaned first as every
/// front end cleans agent text ([`ralph_protocol::clean`]: escape sequences, bidi
/// controls, zero-width and tag characters).
pub(crate) fn esc(s: &str) -> String {
    let s = clean(s);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The text of the first block of agent-written markdown, without its markup (`**Redis**` is
/// `Redis`, a link its text), for a one-line mention such as the dashboard's link; to be
/// escaped like any text.
pub(crate) fn first_line_text(md: &str) -> String {
    use pulldown_cmark::{Event, Parser, TagEnd};
    let mut out = String::new();
    for event in Parser::new(md) {
        match event {
            Event::Text(t) | Event::Code(t) | Event::InlineHtml(t) | Event::Html(t) => {
                out.push_str(&t)
            }
            Event::SoftBreak | Event::HardBreak => out.push(' '),
            Event::End(
                TagEnd::Paragraph
                | TagEnd::Heading(_)
                | TagEnd::Item
                | TagEnd::CodeBlock
                | TagEnd::TableCell,
            ) if !out.trim().is_empty() => break,
            _ => {}
        }
    }
    out.trim().to_string()
}

/// Renders agent-written markdown with no HTML of its own and only harmless links.
pub(crate) fn markdown(md: &str) -> String {
    let md = clean(md);
    let parser = Parser::new_ext(&md, Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES);
    let mut dropped_links = Vec::new();
    let events = parser.filter_map(|event| match event {
        // Raw HTML, block or inline, shows as the text it is.
        Event::Html(h) | Event::InlineHtml(h) => Some(Event::Text(h)),
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }) => {
            let safe = safe_url(&dest_url);
            dropped_links.push(!safe);
            safe.then_some(Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }))
        }
        Event::End(TagEnd::Link) => match dropped_links.pop() {
            Some(true) => None,
            _ => Some(Event::End(TagEnd::Link)),
        },
        // An image would be fetched by the browser (the CSP blocks it anyway): a link instead.
        Event::Start(Tag::Image { dest_url, .. }) => {
            let safe = safe_url(&dest_url);
            dropped_links.push(!safe);
            safe.then_some(Event::Start(Tag::Link {
                link_type: LinkType::Inline,
                dest_url,
                title: CowStr::Borrowed(""),
                id: CowStr::Borrowed(""),
            }))
        }
        Event::End(TagEnd::Image) => match dropped_links.pop() {
            Some(true) => None,
            _ => Some(Event::End(TagEnd::Link)),
        },
        other => Some(other),
    });
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events);
    html
}

/// Whether a link of the agent's may be followed: `http`, `https` and `mailto` only.
pub(crate) fn safe_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|p| lower.starts_with(p))
}

/// A whole page around `body`.
fn layout(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<meta name=\"referrer\" content=\"no-referrer\">\
<title>{}</title><link rel=\"stylesheet\" href=\"/assets/page.css\">\
<script src=\"/assets/page.js\" defer></script></head>\n<body>{body}</body></html>\n",
        esc(title)
    )
}

/// `1h 02m`, `4m 57s`, `12s`.
pub(crate) fn duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// What the page says once `q`'s deadline passed (the script says it too when its countdown
/// runs out, from the page's `data-timed-out`).
fn timed_out_words(q: &QuestionView) -> String {
    format!(
        "deadline passed: the agent went on with {}; a late answer still reaches it",
        ralph_protocol::fallback_words(q.default.as_deref())
    )
}

/// What the page says while the loop that asked is stopped (the script says it too when the
/// loop stops with the page open, from the page's `data-stopped`).
const STOPPED_WORDS: &str =
    "the loop is stopped: an answer waits for its next `ralph run`, which delivers it";

/// The question page an answer link opens. `post` is where the form goes.
pub(crate) fn question(q: &QuestionView, post: &str, now: SystemTime) -> String {
    let mut b = String::new();
    let project = q.project();
    let left_ms = q
        .deadline
        .map(|d| d.duration_since(now).unwrap_or_default().as_millis());
    let timed_out = timed_out_words(q);
    let _ = write!(
        b,
        "<main class=\"question\" data-post=\"{}\" data-events=\"{}/events\" data-timed-out=\"{}\" data-stopped=\"{}\" data-max-bytes=\"{}\"{}>",
        esc(post),
        esc(post),
        esc(&timed_out),
        esc(STOPPED_WORDS),
        ralph_protocol::MAX_ANSWER_BYTES,
        match left_ms {
            Some(ms) if !q.timed_out && q.live => format!(" data-left-ms=\"{ms}\""),
            _ => String::new(),
        }
    );
    let _ = write!(
        b,
        "<header><h1>{}</h1><p class=\"meta\">iteration {} · <span id=\"countdown\">{}</span></p></header>",
        esc(&project),
        q.iteration,
        match (q.timed_out, left_ms) {
            _ if !q.live => esc(STOPPED_WORDS),
            (true, _) => esc(&timed_out),
            (false, Some(ms)) => format!(
                "{} left",
                duration(Duration::from_millis(ms.try_into().unwrap_or(u64::MAX)))
            ),
            (false, None) => "no deadline".to_string(),
        }
    );
    let _ = write!(b, "<section class=\"text\">{}</section>", markdown(&q.text));
    if let Some(c) = &q.context {
        let _ = write!(
            b,
            "<details class=\"context\"><summary>Context</summary>{}</details>",
            markdown(c)
        );
    }
    let _ = write!(
        b,
        "<form id=\"answer\" method=\"post\" action=\"{}\">",
        esc(post)
    );
    if !q.options.is_empty() {
        // Nothing is picked beforehand, the default included: a pick made for the user would
        // turn the answer they write in their own words into a note under it. The default
        // is marked, and is what Skip (or the deadline) gives.
        let (kind, legend) = match q.multi_select {
            true => ("checkbox", "Pick any number of options"),
            false => ("radio", "Pick an option"),
        };
        let _ = write!(b, "<fieldset class=\"options\"><legend>{legend}</legend>");
        for (i, (label, description)) in q.options.iter().enumerate() {
            let default = q.default.as_deref() == Some(label.as_str());
            let _ = write!(
                b,
                "<label class=\"option{}\"><input type=\"{kind}\" name=\"option\" value=\"{}\"><span class=\"body\"><span class=\"label\">{}</span>{}{}</span></label>",
                if default { " default" } else { "" },
                i + 1,
                esc(label),
                if default {
                    " <span class=\"badge\">default</span>"
                } else {
                    ""
                },
                description
                    .as_deref()
                    .map(|d| format!("<span class=\"description\">{}</span>", esc(d)))
                    .unwrap_or_default()
            );
        }
        if !q.multi_select {
            // A radio button, once picked, cannot be unpicked by a tap: the script shows this.
            b.push_str(
                "<button type=\"button\" id=\"unpick\" class=\"link\" hidden>Clear the pick</button>",
            );
        }
        b.push_str("</fieldset>");
    }
    if let Some(d) = &q.default
        && !q.options.iter().any(|(l, _)| l == d)
    {
        let _ = write!(
            b,
            "<p class=\"default\">If nobody answers: <span>{}</span></p>",
            esc(d)
        );
    }
    // No `maxlength`: the browser would cut a long paste without a word, and send the rest.
    // The script says when the answer is over the limit, and the broker refuses it, keeping
    // the text on the page.
    let _ = write!(
        b,
        "<label class=\"note\" for=\"text\">{}</label><textarea id=\"text\" name=\"answer\" rows=\"4\"></textarea><p id=\"size\" class=\"error\" hidden></p>",
        if q.options.is_empty() {
            "Your answer"
        } else {
            "A note with your pick, or an answer of your own"
        },
    );
    // Skip needs a loop to skip; more time, a deadline ahead too.
    let hidden = |shown: bool| if shown { "" } else { " hidden" };
    let _ = write!(
        b,
        "<div class=\"actions\"><button type=\"submit\" class=\"send\">Send</button>\
<button type=\"submit\" name=\"action\" value=\"skip\" class=\"secondary\"{}>{}</button>",
        hidden(q.live),
        loops::skip_label(q)
    );
    let _ = write!(
        b,
        "<button type=\"submit\" name=\"action\" value=\"extend\" class=\"secondary\"{}>+{}</button></div>",
        hidden(q.live && q.deadline.is_some() && !q.timed_out),
        ralph_protocol::describe_span(crate::loops::PAGE_EXTEND)
    );
    b.push_str("</form><p id=\"result\" role=\"status\" aria-live=\"polite\"></p></main>");
    layout(&format!("{project}: a question waits"), &b)
}

/// The page shown after the form was posted without JavaScript, or when a link's question is
/// answered.
pub(crate) fn message(title: &str, text: &str) -> String {
    message_page(title, text, "")
}

/// [`message`] with a link back to the dashboard, for what was asked from it.
pub(crate) fn message_back(title: &str, text: &str) -> String {
    message_page(title, text, "<p><a href=\"/\">Back to the loops</a></p>")
}

fn message_page(title: &str, text: &str, after: &str) -> String {
    layout(
        title,
        &format!(
            "<main class=\"message\"><h1>{}</h1><p>{}</p>{after}</main>",
            esc(title),
            code_spans(&esc(text))
        ),
    )
}

/// Escaped `text` with each pair of backticks (`ralph status`, a command to run) shown as
/// code, as the terminal's words mean them; an odd one out stays as it is.
fn code_spans(text: &str) -> String {
    let parts: Vec<&str> = text.split('`').collect();
    if parts.len().is_multiple_of(2) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (i, part) in parts.iter().enumerate() {
        match i % 2 {
            1 => {
                let _ = write!(out, "<code>{part}</code>");
            }
            _ => out.push_str(part),
        }
    }
    out
}

/// The page for a link that is not (or no longer) one: the same for every wrong token, so it
/// tells a stranger nothing, and says what to do to whoever followed an old link.
pub(crate) fn not_found() -> String {
    message(
        "Nothing here",
        "This link opens nothing (or nothing any more): an answer link opens its question only while it waits, and a pairing link works once, for 10 minutes. On the machine, `ralph status` shows a waiting question's link, and `ralph serve pair web` makes a new pairing link.",
    )
}

/// The page an answer link opens after its question closed (for as long as a late answer is
/// told how, [`loops::CLOSED_TOLD_FOR`]): how it closed.
pub(crate) fn closed(how: &str) -> String {
    message(
        "No longer waiting",
        &format!("This question is no longer waiting: {how}."),
    )
}

/// The dashboard: every loop, waiting ones first, each with its waiting question's page.
pub(crate) fn dashboard(
    loops: &[(LoopView, Option<String>)],
    fleet: &[LoopRow],
    now: SystemTime,
) -> String {
    layout(
        "ralph loops",
        &format!(
            "<main class=\"dashboard\" data-events=\"/events\">{}</main>",
            dashboard_body(loops, fleet, now)
        ),
    )
}

/// What the dashboard's `<main>` holds: the page at first, and each `loops` event of its
/// stream after, which the page's script puts in its place.
pub(crate) fn dashboard_body(
    loops: &[(LoopView, Option<String>)],
    fleet: &[LoopRow],
    now: SystemTime,
) -> String {
    let mut b = String::from("<h1>ralph loops</h1>");
    if loops.is_empty() {
        b.push_str("<p>No ralph loop is running on this machine.</p>");
    }
    fleet_table(&mut b, loops, fleet);
    for (l, link) in loops {
        let elapsed = l
            .row
            .started_at
            .as_deref()
            .and_then(ralph_protocol::parse_timestamp)
            .and_then(|s| now.duration_since(s).ok());
        let _ = write!(
            b,
            "<article class=\"loop{}\"><h2>{}</h2><p class=\"status\">{}</p><dl>",
            if l.question.is_some() { " waiting" } else { "" },
            esc(&project_name(&l.row.root)),
            esc(&state_words(&l.row))
        );
        let row = |b: &mut String, k: &str, v: &str| {
            let _ = write!(b, "<dt>{k}</dt><dd>{}</dd>", esc(v));
        };
        if !l.row.task.is_empty() {
            row(&mut b, "task", &l.row.task);
        }
        row(
            &mut b,
            "iteration",
            &match l.row.max_iterations {
                0 => l.row.iteration.to_string(),
                max => format!("{} of {max}", l.row.iteration),
            },
        );
        // The stream sends nothing when only the clock moved: a running loop's time is
        // counted on by the page's script, from `data-elapsed-ms`.
        match elapsed {
            Some(e) if l.row.running => {
                let _ = write!(
                    b,
                    "<dt>elapsed</dt><dd class=\"elapsed\" data-elapsed-ms=\"{}\">{}</dd>",
                    e.as_millis(),
                    duration(e)
                );
            }
            Some(e) => row(&mut b, "elapsed", &duration(e)),
            None => row(&mut b, "elapsed", "?"),
        }
        if let Some(s) = &l.row.last_signal {
            row(&mut b, "last signal", s);
        }
        if let Some(c) = l.row.cost_usd {
            row(&mut b, "cost", &format!("${c:.2}"));
        }
        b.push_str("</dl>");
        if let (Some(q), Some(link)) = (&l.question, link) {
            let first = first_line_text(&q.text);
            let _ = write!(
                b,
                "<p class=\"ask\"><a href=\"{}\">Answer: {}</a></p>",
                esc(link),
                esc(&first)
            );
        }
        if l.row.running {
            let _ = write!(
                b,
                "<form class=\"stop\" method=\"post\" action=\"/stop\"><input type=\"hidden\" name=\"root\" value=\"{}\"><button type=\"submit\">Stop this loop</button></form>",
                esc(&l.row.root.display().to_string())
            );
        }
        b.push_str("</article>");
    }
    b
}

/// The fleet: every loop on the machine (running, or resting in a worktree: done, landing,
/// landed, needing a landing or a review) as the terminal's fleet view lists them, the ones
/// that need their human first, each with its diff against its base; a waiting one links to
/// its question's page.
fn fleet_table(b: &mut String, loops: &[(LoopView, Option<String>)], fleet: &[LoopRow]) {
    if fleet.is_empty() {
        return;
    }
    let waiting = needing_you(fleet);
    let _ = write!(
        b,
        "<section class=\"fleet\"><h2>The fleet: {} loop{}, {waiting} need{} you</h2><table><thead><tr><th>state</th><th>loop</th><th>task</th><th>iteration</th><th>cost</th><th>criteria</th><th>diff</th></tr></thead><tbody>",
        fleet.len(),
        if fleet.len() == 1 { "" } else { "s" },
        if waiting == 1 { "s" } else { "" },
    );
    for row in fleet {
        let link = loops
            .iter()
            .find(|(l, _)| l.row.root == row.root)
            .and_then(|(_, link)| link.as_ref());
        let state = match link {
            Some(link) => format!("<a href=\"{}\">{}</a>", esc(link), esc(&state_words(row))),
            None => esc(&state_words(row)),
        };
        let iteration = match row.max_iterations {
            0 => String::new(),
            max => format!("{}/{max}", row.iteration),
        };
        let cost = row.cost_usd.map(|c| format!("${c:.2}")).unwrap_or_default();
        let criteria = match (row.criteria_done, row.criteria_total) {
            (Some(d), Some(t)) => format!("{d}/{t}"),
            _ => String::new(),
        };
        let diff = row.diff.map(|d| d.to_string()).unwrap_or_default();
        let _ = write!(
            b,
            "<tr class=\"{}\"><td class=\"state\">{state}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"diff\">{}</td></tr>",
            row.state.as_str(),
            esc(&row.name()),
            esc(&row.task),
            esc(&iteration),
            esc(&cost),
            esc(&criteria),
            esc(&diff),
        );
    }
    b.push_str("</tbody></table></section>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_and_script_links_in_a_question_stay_text() {
        let html = markdown(
            "Pick one <script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n\
[click](javascript:alert(3)) [ok](https://example.com) ![i](http://evil/x.png) [d](data:text/html,hi)",
        );
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(!html.contains("javascript:"), "{html}");
        assert!(!html.contains("data:"), "{html}");
        assert!(
            html.contains("<a href=\"https://example.com\">ok</a>"),
            "{html}"
        );
        assert!(
            html.contains("<a href=\"http://evil/x.png\">i</a>"),
            "{html}"
        );
    }

    #[test]
    fn the_dashboard_mentions_a_question_by_its_text_not_its_markup() {
        assert_eq!(
            first_line_text("Should we use **Redis** or `memcached`?\nMore here.\n\nLater."),
            "Should we use Redis or memcached? More here."
        );
        assert_eq!(first_line_text("# Cache\n\nbody"), "Cache");
        assert_eq!(first_line_text("- one\n- two"), "one");
        assert_eq!(first_line_text("[<b>](javascript:x)"), "<b>");
    }

    #[test]
    fn commands_in_a_message_show_as_code_and_a_lone_backtick_as_itself() {
        assert_eq!(
            code_spans("run `ralph status` &amp; `ralph serve pair web`."),
            "run <code>ralph status</code> &amp; <code>ralph serve pair web</code>."
        );
        assert_eq!(code_spans("it`s"), "it`s");
    }

    #[test]
    fn escapes_attributes_and_control_characters() {
        assert_eq!(esc("a\"<b>&'\u{1b}[31m"), "a&quot;&lt;b&gt;&amp;&#39;");
    }
}
