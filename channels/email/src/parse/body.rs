//! Body selection (text/plain preferred, else HTML converted to text), RFC 3676 `format=flowed`,
//! and the final clean-up: history stripping, blank-line collapsing and the size cap.

use mail_parser::{Message, MessagePart, MimeHeaders, PartType};

use super::{Body, BodySource, Limits, strip};

/// Wide enough that html2text never wraps a paragraph: line breaks come from the HTML only.
const HTML_RENDER_WIDTH: usize = 10_000;

pub(super) struct Extracted {
    text: String,
    source: BodySource,
    /// HTML beyond the conversion cap was dropped.
    truncated: bool,
}

pub(super) fn extract(message: &Message<'_>, limits: &Limits) -> Extracted {
    // The text bodies in order: plain parts as they are, HTML parts (an HTML-only message, or
    // inline HTML between plain parts of a mixed message) converted.
    let from_text_body = render(message, &message.text_body, limits);
    if from_text_body.has_plain && !from_text_body.text.trim().is_empty() {
        return Extracted {
            source: BodySource::Plain,
            ..from_text_body.into()
        };
    }
    if !from_text_body.text.trim().is_empty() {
        return Extracted {
            source: BodySource::Html,
            ..from_text_body.into()
        };
    }
    // A blank plain alternative: the HTML alternative instead.
    let from_html_body = render(message, &message.html_body, limits);
    if !from_html_body.text.trim().is_empty() {
        return Extracted {
            source: BodySource::Html,
            ..from_html_body.into()
        };
    }
    Extracted {
        text: String::new(),
        source: BodySource::None,
        truncated: false,
    }
}

struct Rendered {
    text: String,
    has_plain: bool,
    truncated: bool,
}

impl From<Rendered> for Extracted {
    fn from(r: Rendered) -> Self {
        Extracted {
            text: r.text,
            source: BodySource::None,
            truncated: r.truncated,
        }
    }
}

fn render(message: &Message<'_>, ids: &[u32], limits: &Limits) -> Rendered {
    let mut texts = Vec::new();
    let mut has_plain = false;
    let mut truncated = false;
    for part in ids.iter().filter_map(|&id| message.parts.get(id as usize)) {
        match &part.body {
            PartType::Text(text) if text.trim().is_empty() => {}
            PartType::Text(text) => {
                has_plain = true;
                texts.push(if is_flowed(part) {
                    unflow(text, is_delsp(part))
                } else {
                    text.to_string()
                });
            }
            PartType::Html(html) => {
                let (text, cut) = html_to_text(html, limits.max_html_bytes);
                truncated |= cut;
                texts.push(text);
            }
            _ => {}
        }
    }
    Rendered {
        text: texts.join("\n\n"),
        has_plain,
        truncated,
    }
}

/// Strips history, tidies whitespace and applies the size cap.
pub(super) fn finish(extracted: Extracted, subject: Option<&str>, max_bytes: usize) -> Body {
    let text = normalize_newlines(&extracted.text);
    let stripped = strip::strip(&text, strip::is_forward_subject(subject.unwrap_or("")));
    let tidy = tidy(&stripped.text);
    let (text, cut) = truncate(&tidy, max_bytes);
    Body {
        text,
        source: extracted.source,
        quote_stripped: stripped.quote_stripped,
        signature_stripped: stripped.signature_stripped,
        truncated: cut || extracted.truncated,
    }
}

fn is_flowed(part: &MessagePart<'_>) -> bool {
    part.content_type()
        .and_then(|ct| ct.attribute("format"))
        .is_some_and(|f| f.eq_ignore_ascii_case("flowed"))
}

fn is_delsp(part: &MessagePart<'_>) -> bool {
    part.content_type()
        .and_then(|ct| ct.attribute("delsp"))
        .is_some_and(|f| f.eq_ignore_ascii_case("yes"))
}

/// RFC 3676: joins soft line breaks (a line ending in a space), removes space-stuffing, keeps
/// the quote depth of each paragraph.
pub(super) fn unflow(text: &str, delsp: bool) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for line in normalize_newlines(text).split('\n') {
        let depth = line.bytes().take_while(|&b| b == b'>').count();
        let content = &line[depth..];
        let content = content.strip_prefix(' ').unwrap_or(content);
        let soft = content.ends_with(' ') && content != "-- ";
        let content = if soft && delsp {
            &content[..content.len() - 1]
        } else {
            content
        };
        match &mut open {
            Some((d, buf)) if *d == depth => buf.push_str(content),
            _ => {
                if let Some(paragraph) = open.take() {
                    out.push(render_flowed(paragraph));
                }
                open = Some((depth, content.to_owned()));
            }
        }
        if !soft && let Some(paragraph) = open.take() {
            out.push(render_flowed(paragraph));
        }
    }
    if let Some(paragraph) = open.take() {
        out.push(render_flowed(paragraph));
    }
    out.join("\n")
}

fn render_flowed((depth, text): (usize, String)) -> String {
    if depth == 0 {
        text
    } else {
        format!("{} {text}", ">".repeat(depth))
    }
}

/// HTML → text with html2text (layout tables flattened, no decoration). Documents nested deeper
/// than [`MAX_HTML_DEPTH`] (html2text's time grows with depth squared) and documents html2text
/// refuses go through mail-parser's linear tag stripper instead.
fn html_to_text(html: &str, max_bytes: usize) -> (String, bool) {
    let (html, cut) = cut_at_char_boundary(html, max_bytes);
    let rendered = if nesting_exceeds(html, MAX_HTML_DEPTH) {
        None
    } else {
        html2text::config::plain_no_decorate()
            .raw_mode(true)
            .allow_width_overflow()
            .string_from_read(html.as_bytes(), HTML_RENDER_WIDTH)
            .ok()
    };
    let text = rendered.unwrap_or_else(|| mail_parser::decoders::html::html_to_text(html));
    (text, cut)
}

/// Real mail, even layout-table newsletters, nests far less than this.
const MAX_HTML_DEPTH: usize = 1_000;

/// A cheap upper estimate of element nesting: opening tags minus closing tags, void elements
/// and self-closing tags excluded.
fn nesting_exceeds(html: &str, limit: usize) -> bool {
    const VOID: &[&str] = &[
        "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr",
    ];
    let bytes = html.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(offset) = bytes[i..].iter().position(|&b| b == b'<') {
        let start = i + offset + 1;
        let end = bytes[start..]
            .iter()
            .position(|&b| b == b'>')
            .map_or(bytes.len(), |e| start + e);
        let tag = &html[start..end];
        i = end.min(bytes.len());
        if let Some(closing) = tag.strip_prefix('/') {
            if !closing.is_empty() {
                depth = depth.saturating_sub(1);
            }
            continue;
        }
        let name_len = tag
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(tag.len());
        let name = &tag[..name_len];
        if name.is_empty()
            || tag.ends_with('/')
            || VOID.iter().any(|v| v.eq_ignore_ascii_case(name))
        {
            continue;
        }
        depth += 1;
        if depth > limit {
            return true;
        }
    }
    false
}

fn normalize_newlines(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// Trailing spaces removed, no leading or trailing blank lines, at most one blank line in a row,
/// no stray control characters (tabs and newlines stay), no-break spaces as plain spaces and
/// zero-width spaces / BOMs dropped.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0usize;
    for line in text.split('\n') {
        let line: String = line
            .chars()
            .filter_map(|c| match c {
                '\u{a0}' => Some(' '),
                '\u{200b}' | '\u{feff}' => None,
                '\t' => Some(c),
                c if c.is_control() => None,
                c => Some(c),
            })
            .collect();
        let line = line.trim_end();
        if line.is_empty() {
            blank_run += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank_run > 0 { "\n\n" } else { "\n" });
        }
        blank_run = 0;
        out.push_str(line);
    }
    out
}

fn cut_at_char_boundary(text: &str, max_bytes: usize) -> (&str, bool) {
    if text.len() <= max_bytes {
        return (text, false);
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// Cuts at `max_bytes` (on a character boundary) and appends a marker saying how much is gone.
pub(super) fn truncate(text: &str, max_bytes: usize) -> (String, bool) {
    let (kept, cut) = cut_at_char_boundary(text, max_bytes);
    if !cut {
        return (text.to_owned(), false);
    }
    let missing = text.len() - kept.len();
    (
        format!(
            "{}\n\n[truncated: {missing} more bytes not shown]",
            kept.trim_end()
        ),
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unflow_joins_soft_breaks_and_keeps_quotes() {
        let flowed = "Hello \r\nworld.\r\n> quoted \r\n> more\r\n \r\n-- \r\nsig";
        assert_eq!(
            unflow(flowed, false),
            "Hello world.\n> quoted more\n\n-- \nsig"
        );
        assert_eq!(unflow("a \r\nb", true), "ab");
    }

    #[test]
    fn unflow_removes_space_stuffing() {
        assert_eq!(
            unflow(" From the start\n >not a quote", false),
            "From the start\n>not a quote"
        );
    }

    #[test]
    fn truncate_marks_and_respects_char_boundaries() {
        let (text, cut) = truncate("héllo wörld", 2);
        assert!(cut);
        assert_eq!(text, "h\n\n[truncated: 12 more bytes not shown]");
        let (text, cut) = truncate("short", 5);
        assert!(!cut);
        assert_eq!(text, "short");
    }

    #[test]
    fn tidy_collapses_blank_lines_and_controls() {
        assert_eq!(tidy("\n\na  \n\n\n\nb\u{0}c\t\n\n"), "a\n\nbc");
        assert_eq!(tidy("\u{feff}x\u{a0}y\u{200b}z\u{a0}"), "x yz");
    }

    #[test]
    fn html_converts_paragraphs_lists_and_entities() {
        let (text, cut) = html_to_text(
            "<html><body><p>Hi &amp; bye</p><ul><li>one</li><li>two</li></ul>\
             <blockquote>old</blockquote><script>x()</script></body></html>",
            1000,
        );
        assert!(!cut);
        assert!(text.contains("Hi & bye"), "{text}");
        assert!(text.contains("* one"), "{text}");
        assert!(text.contains("> old"), "{text}");
        assert!(!text.contains("x()"), "{text}");
    }

    #[test]
    fn html_nesting_estimate() {
        assert!(!nesting_exceeds("<div><p>a<br>b<img src=x/></p></div>", 2));
        assert!(nesting_exceeds("<div><div><div>x</div></div></div>", 2));
        assert!(!nesting_exceeds(&"<div>x</div>".repeat(10_000), 2));
        assert!(!nesting_exceeds("<<<>>> < / > <", 2));
        let deep = format!("{}text", "<div>".repeat(5_000));
        assert!(nesting_exceeds(&deep, MAX_HTML_DEPTH));
        let (text, _) = html_to_text(&deep, usize::MAX);
        assert_eq!(text.trim(), "text");
    }

    #[test]
    fn html_over_the_cap_is_cut() {
        let html = format!("<p>{}</p>", "é".repeat(100));
        let (_, cut) = html_to_text(&html, 10);
        assert!(cut);
    }
}
