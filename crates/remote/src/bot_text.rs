//! The agent's markdown as a Telegram message shows it: the HTML subset the Bot API renders
//! (`parse_mode: HTML`). Every character of the agent's text is escaped; only the tags made
//! here from markdown's own structure pass (bold, italic, strikethrough, code, blocks of code,
//! quotes, and links to `http`, `https` and `mailto` only), so a question's `<b>` or
//! `<script>` shows as the text it is.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use crate::page::{esc, safe_url};

/// `md` (agent-written markdown) as Telegram HTML, every tag it opens closed.
pub(crate) fn markdown(md: &str) -> String {
    let md = ralph_protocol::clean(md);
    let mut out = String::new();
    // Whether each open link was kept (a `javascript:` one is dropped, its text kept).
    let mut links: Vec<bool> = Vec::new();
    // Each open list's next number (`None`: bullets).
    let mut lists: Vec<Option<u64>> = Vec::new();
    for event in Parser::new_ext(&md, Options::ENABLE_STRIKETHROUGH) {
        match event {
            Event::Start(Tag::Paragraph) => {}
            Event::End(TagEnd::Paragraph) if lists.is_empty() => out.push_str("\n\n"),
            Event::End(TagEnd::Paragraph) => {}
            Event::Start(Tag::Heading { .. } | Tag::Strong) => out.push_str("<b>"),
            Event::End(TagEnd::Heading(_)) => out.push_str("</b>\n\n"),
            Event::End(TagEnd::Strong) => out.push_str("</b>"),
            Event::Start(Tag::Emphasis) => out.push_str("<i>"),
            Event::End(TagEnd::Emphasis) => out.push_str("</i>"),
            Event::Start(Tag::Strikethrough) => out.push_str("<s>"),
            Event::End(TagEnd::Strikethrough) => out.push_str("</s>"),
            Event::Start(Tag::BlockQuote(_)) => out.push_str("<blockquote>"),
            Event::End(TagEnd::BlockQuote(_)) => out.push_str("</blockquote>\n"),
            Event::Start(Tag::CodeBlock(_)) => out.push_str("<pre>"),
            Event::End(TagEnd::CodeBlock) => out.push_str("</pre>\n\n"),
            Event::Start(Tag::List(start)) => {
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push('\n');
                }
                lists.push(start);
            }
            Event::End(TagEnd::List(_)) => {
                lists.pop();
                if lists.is_empty() {
                    out.push('\n');
                }
            }
            Event::Start(Tag::Item) => {
                out.push_str(&"  ".repeat(lists.len().saturating_sub(1)));
                match lists.last_mut() {
                    Some(Some(n)) => {
                        out.push_str(&format!("{n}. "));
                        *n += 1;
                    }
                    _ => out.push_str("• "),
                }
            }
            Event::End(TagEnd::Item) if !out.ends_with('\n') => out.push('\n'),
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                let keep = safe_url(&dest_url);
                if keep {
                    out.push_str(&format!("<a href=\"{}\">", esc(&dest_url)));
                }
                links.push(keep);
            }
            // The guard pops the link whether or not it was kept.
            Event::End(TagEnd::Link | TagEnd::Image) if links.pop() == Some(true) => {
                out.push_str("</a>")
            }
            // Raw HTML, block or inline, shows as the text it is.
            Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => out.push_str(&esc(&t)),
            Event::Code(t) => out.push_str(&format!("<code>{}</code>", esc(&t))),
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::Rule => out.push_str("———\n\n"),
            _ => {}
        }
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::markdown;

    #[test]
    fn markdown_becomes_telegrams_tags_and_the_agents_html_stays_text() {
        assert_eq!(
            markdown("Should the **session store** use `Redis`?\n\nBoth *work*."),
            "Should the <b>session store</b> use <code>Redis</code>?\n\nBoth <i>work</i>."
        );
        assert_eq!(
            markdown("Pick <b>one</b> <script>alert(1)</script> & \"go\""),
            "Pick &lt;b&gt;one&lt;/b&gt; &lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;go&quot;"
        );
        assert_eq!(
            markdown(
                "[ok](https://example.com/?a=1&b=\"2\") [bad](javascript:alert(1)) ![img](data:x)"
            ),
            "<a href=\"https://example.com/?a=1&amp;b=&quot;2&quot;\">ok</a> bad img"
        );
        assert_eq!(
            markdown("Steps:\n\n1. build\n2. test\n   - unit\n\n```\nmake <all>\n```"),
            "Steps:\n\n1. build\n2. test\n  • unit\n\n<pre>make &lt;all&gt;\n</pre>"
        );
        assert_eq!(markdown("# Cache\n\nbody"), "<b>Cache</b>\n\nbody");
        assert_eq!(markdown("\u{1b}[31mred\u{1b}[0m \u{202e}evil"), "red evil");
    }
}
