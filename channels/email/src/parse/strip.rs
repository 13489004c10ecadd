//! Removes quoted history and signatures from a body so that a thread's messages do not repeat
//! each other in the store.
//!
//! Line rules, applied before any forward marker (forwarded content is kept verbatim, it is what
//! the sender wants read):
//! - lines starting with `>` are dropped, with the attribution line introducing them
//!   ("On … wrote:", also wrapped over two lines and in a few other languages);
//! - an Outlook history block (`-----Original Message-----`, or `From:` followed by `Sent:`/`Date:`
//!   and `To:`/`Subject:` lines) drops everything from there on;
//! - the `-- ` signature separator drops the lines after it (up to a forward marker), and a
//!   trailing mobile footer ("Sent from my iPhone") is dropped too.
//!
//! When the subject marks a forward (`Fwd:`, `Fw:`, …), an Outlook history block starts the
//! forwarded content instead of history. If stripping would leave nothing, the text is kept.

pub(super) struct Stripped {
    pub text: String,
    pub quote_stripped: bool,
    pub signature_stripped: bool,
}

/// Whether the subject's first prefix marks a forward (`Fwd:`, `FW:`, `WG:`, `TR:`, `RV:`, `Enc:`).
pub(super) fn is_forward_subject(subject: &str) -> bool {
    let Some((prefix, _)) = subject.trim_start().split_once(':') else {
        return false;
    };
    let prefix = prefix.trim().to_ascii_lowercase();
    let prefix = prefix.split('[').next().unwrap_or_default().trim();
    matches!(prefix, "fwd" | "fw" | "wg" | "tr" | "rv" | "enc")
}

pub(super) fn strip(text: &str, forward: bool) -> Stripped {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut keep: Vec<&str> = Vec::with_capacity(lines.len());
    let mut quote_stripped = false;
    let mut signature_stripped = false;
    let mut in_signature = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if is_forward_marker(line) || (forward && starts_history(&lines, i)) {
            keep.extend_from_slice(&lines[i..]);
            break;
        }
        if in_signature {
            i += 1;
        } else if is_signature_separator(line) {
            signature_stripped = true;
            in_signature = true;
            i += 1;
        } else if starts_history(&lines, i) {
            quote_stripped = true;
            break;
        } else if let Some(n) = attribution_len(&lines, i) {
            quote_stripped = true;
            i += n;
        } else if is_quoted(line) {
            quote_stripped = true;
            i += 1;
        } else {
            keep.push(line);
            i += 1;
        }
    }
    trim_tail(&mut keep);
    if keep.last().is_some_and(|l| is_mobile_footer(l)) {
        keep.pop();
        signature_stripped = true;
        trim_tail(&mut keep);
    }
    if keep.iter().all(|l| l.trim().is_empty()) && !text.trim().is_empty() {
        return Stripped {
            text: text.to_owned(),
            quote_stripped: false,
            signature_stripped: false,
        };
    }
    Stripped {
        text: keep.join("\n"),
        quote_stripped,
        signature_stripped,
    }
}

/// Drops trailing blank lines and separator rules (`____`, `----`, `====`).
fn trim_tail(lines: &mut Vec<&str>) {
    while let Some(last) = lines.last() {
        let t = last.trim();
        let rule = t.len() >= 3 && t.chars().all(|c| matches!(c, '_' | '-' | '=' | '*'));
        if t.is_empty() || rule {
            lines.pop();
        } else {
            break;
        }
    }
}

fn is_quoted(line: &str) -> bool {
    line.trim_start().starts_with('>')
}

fn is_signature_separator(line: &str) -> bool {
    line == "-- " || line == "--"
}

/// The words between a line's dashes, lower-case: `-----Original Message-----` → `original message`.
fn dashed_label(line: &str) -> Option<String> {
    let t = line.trim();
    if !t.starts_with("--") {
        return None;
    }
    Some(
        t.trim_matches(|c: char| c == '-' || c.is_whitespace())
            .to_lowercase(),
    )
}

fn is_forward_marker(line: &str) -> bool {
    const LABELS: &[&str] = &[
        "forwarded message",
        "original message follows",
        "weitergeleitete nachricht",
        "message transféré",
        "mensaje reenviado",
        "doorgestuurd bericht",
        "messaggio inoltrato",
    ];
    let t = line.trim().to_lowercase();
    t == "begin forwarded message:"
        || t == "anfang der weitergeleiteten nachricht:"
        || dashed_label(line).is_some_and(|l| LABELS.contains(&l.as_str()))
}

fn is_original_message_marker(line: &str) -> bool {
    const LABELS: &[&str] = &[
        "original message",
        "ursprüngliche nachricht",
        "message d'origine",
        "mensaje original",
        "oorspronkelijk bericht",
        "messaggio originale",
    ];
    dashed_label(line).is_some_and(|l| LABELS.contains(&l.as_str()))
}

fn has_label(line: &str, labels: &[&str]) -> bool {
    let t = line.trim_start();
    labels.iter().any(|label| {
        t.get(..label.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(label))
    })
}

/// An Outlook history block starts here: an "Original Message" rule, or a `From:` line followed
/// within six lines by a `Sent:`/`Date:` line and a `To:`/`Subject:` line.
fn starts_history(lines: &[&str], i: usize) -> bool {
    const FROM: &[&str] = &["From:", "Von:", "De:", "Van:", "Da:", "Från:", "Fra:"];
    const SENT: &[&str] = &[
        "Sent:",
        "Date:",
        "Gesendet:",
        "Datum:",
        "Envoyé :",
        "Envoyé:",
        "Date :",
        "Enviado:",
        "Verzonden:",
        "Inviato:",
        "Skickat:",
        "Sendt:",
    ];
    const TO_OR_SUBJECT: &[&str] = &[
        "To:",
        "Subject:",
        "An:",
        "Betreff:",
        "À :",
        "À:",
        "Objet :",
        "Objet:",
        "Para:",
        "Asunto:",
        "Aan:",
        "Onderwerp:",
        "A:",
        "Oggetto:",
        "Till:",
        "Ämne:",
        "Til:",
        "Emne:",
    ];
    if is_original_message_marker(lines[i]) {
        return true;
    }
    if !has_label(lines[i], FROM) {
        return false;
    }
    let window = &lines[i + 1..lines.len().min(i + 7)];
    window.iter().any(|l| has_label(l, SENT)) && window.iter().any(|l| has_label(l, TO_OR_SUBJECT))
}

fn ends_attribution(line: &str) -> bool {
    const ENDINGS: &[&str] = &[
        "wrote:",
        "writes:",
        "schrieb:",
        "a écrit :",
        "a écrit:",
        "escribió:",
        "schreef:",
        "scrisse:",
        "skrev:",
        "kirjoitti:",
        "napisał:",
        "escreveu:",
    ];
    let t = line.trim_end().to_lowercase();
    ENDINGS.iter().any(|e| t.ends_with(e))
}

fn starts_attribution(line: &str) -> bool {
    const STARTS: &[&str] = &[
        "On ", "Am ", "Le ", "El ", "Op ", "Il ", "Den ", "W dniu ", "Em ",
    ];
    has_label(line, STARTS)
}

fn next_non_blank_is_quoted(lines: &[&str], from: usize) -> bool {
    lines
        .iter()
        .skip(from)
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| is_quoted(l))
}

/// Number of lines of an attribution introducing a quote at `i` (one, or two when wrapped).
fn attribution_len(lines: &[&str], i: usize) -> Option<usize> {
    if ends_attribution(lines[i]) && next_non_blank_is_quoted(lines, i + 1) {
        return Some(1);
    }
    let wrapped = starts_attribution(lines[i])
        && lines.get(i + 1).is_some_and(|l| ends_attribution(l))
        && next_non_blank_is_quoted(lines, i + 2);
    wrapped.then_some(2)
}

fn is_mobile_footer(line: &str) -> bool {
    let t = line.trim().to_lowercase();
    t.starts_with("sent from my ")
        || t.starts_with("sent from mail for windows")
        || t.starts_with("get outlook for ")
        || (t.starts_with("von meinem ") && t.ends_with("gesendet"))
        || t.starts_with("envoyé de mon ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> (String, bool, bool) {
        let s = strip(text, false);
        (s.text, s.quote_stripped, s.signature_stripped)
    }

    #[test]
    fn drops_quotes_and_attribution() {
        let text = "Yes, Tuesday works.\n\nOn Mon, 3 Jun 2024 at 10:00, Alice <a@x.org> wrote:\n> Does Tuesday work?\n> \n> Alice";
        assert_eq!(run(text), ("Yes, Tuesday works.".into(), true, false));
    }

    #[test]
    fn keeps_inline_answers_between_quotes() {
        let text = "On Mon, Alice wrote:\n> Q1?\nA1.\n> Q2?\nA2.";
        assert_eq!(run(text).0, "A1.\nA2.");
    }

    #[test]
    fn wrapped_attribution_is_two_lines() {
        let text = "Fine.\n\nOn Mon, Jun 3, 2024 at 10:00 AM Alice Example <\nalice@example.org> wrote:\n\n> hi";
        assert_eq!(run(text).0, "Fine.");
    }

    #[test]
    fn wrote_without_quote_is_content() {
        let text = "Here is what I wrote:\nthe plan";
        assert_eq!(run(text), (text.into(), false, false));
    }

    #[test]
    fn signature_is_dropped() {
        assert_eq!(
            run("Thanks\n-- \nBob\n+1 555"),
            ("Thanks".into(), false, true)
        );
        assert_eq!(run("Thanks\n--\nBob"), ("Thanks".into(), false, true));
        assert_eq!(
            run("Thanks\n\nSent from my iPhone"),
            ("Thanks".into(), false, true)
        );
    }

    #[test]
    fn outlook_original_message_cuts_history() {
        let text =
            "Agreed.\n\n-----Original Message-----\nFrom: Bob\nSent: Monday\nnot quoted history";
        assert_eq!(run(text), ("Agreed.".into(), true, false));
    }

    #[test]
    fn outlook_header_block_cuts_history() {
        let text = "See you.\n\n________________________________\nFrom: Bob <b@x>\nSent: Monday, June 3, 2024 10:00\nTo: Ann\nSubject: Meeting\n\nOld text";
        assert_eq!(run(text), ("See you.".into(), true, false));
        let german = "Ok.\n\nVon: Bob\nGesendet: Montag\nAn: Ann\nBetreff: X\nalt";
        assert_eq!(run(german).0, "Ok.");
    }

    #[test]
    fn from_line_alone_is_content() {
        let text = "From: the team\nWe ship today.";
        assert_eq!(run(text).0, text);
    }

    #[test]
    fn forwarded_content_is_kept() {
        let text = "FYI\n-- \nAnn\n\n---------- Forwarded message ---------\nFrom: Carol <c@x>\nDate: Mon\nSubject: Report\nTo: Ann\n\n> keep me\nReport body";
        let s = strip(text, true);
        assert!(s.signature_stripped);
        assert!(!s.quote_stripped);
        assert!(
            s.text.starts_with("FYI\n---------- Forwarded message"),
            "{}",
            s.text
        );
        assert!(s.text.ends_with("> keep me\nReport body"));
    }

    #[test]
    fn outlook_forward_by_subject_keeps_the_block() {
        let text = "Please look.\n\n________________________________\nFrom: Carol\nSent: Monday\nTo: Ann\nSubject: Numbers\n\nQ3 numbers";
        let s = strip(text, true);
        assert!(s.text.ends_with("Q3 numbers"), "{}", s.text);
        assert!(!s.quote_stripped);
    }

    #[test]
    fn everything_quoted_keeps_the_original() {
        let text = "> only a quote\n> nothing else";
        assert_eq!(run(text), (text.into(), false, false));
    }

    #[test]
    fn forward_subjects() {
        for s in ["Fwd: x", "FW: x", "fw[2]: x", "WG: x", "TR: x", "Enc: x"] {
            assert!(is_forward_subject(s), "{s}");
        }
        for s in ["Re: Fwd: x", "Forward planning", "", "Fwdx"] {
            assert!(!is_forward_subject(s), "{s}");
        }
    }
}
