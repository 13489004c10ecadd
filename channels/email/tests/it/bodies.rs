//! Body selection and history stripping on small inline messages (the fixtures cover the rest).

use ctxgate_email::BodySource;

use crate::support::parse_text;

#[test]
fn a_blank_plain_alternative_falls_back_to_html() {
    let mail = parse_text(
        "From: a@x\nSubject: s\nContent-Type: multipart/alternative; boundary=A\n\n\
         --A\nContent-Type: text/plain\n\n  \n--A\nContent-Type: text/html\n\n<p>From HTML</p>\n--A--\n",
    );
    assert_eq!(mail.body.source, BodySource::Html);
    assert_eq!(mail.body.text, "From HTML");
}

#[test]
fn mixed_plain_and_inline_html_parts_are_both_kept() {
    let mail = parse_text(
        "From: a@x\nSubject: s\nContent-Type: multipart/mixed; boundary=M\n\n\
         --M\nContent-Type: text/plain\n\nfirst part\n\
         --M\nContent-Type: text/html\nContent-Disposition: inline\n\n<p>second <i>part</i></p>\n--M--\n",
    );
    assert_eq!(mail.body.source, BodySource::Plain);
    assert_eq!(mail.body.text, "first part\n\nsecond part");
}

#[test]
fn a_message_with_only_an_attachment_has_no_text() {
    let mail = parse_text(
        "From: a@x\nSubject: s\nContent-Type: multipart/mixed; boundary=M\n\n\
         --M\nContent-Type: image/jpeg\nContent-Disposition: attachment; filename=p.jpg\n\
         Content-Transfer-Encoding: base64\n\n/9j/4AAQ\n--M--\n",
    );
    assert_eq!(mail.body.source, BodySource::None);
    assert_eq!(mail.body.text, "");
    assert_eq!(mail.attachments.len(), 1);
    assert_eq!(mail.attachments[0].content_type, "image/jpeg");
    assert_eq!(mail.attachments[0].size, 6);
}

#[test]
fn outlook_html_history_and_gmail_html_signature_are_stripped() {
    let outlook = parse_text(
        "From: a@x\nSubject: RE: s\nContent-Type: text/html\n\n\
         <div><p>New answer.</p></div><hr>\
         <div><p><b>From:</b> Bot &lt;bot@x&gt;<br><b>Sent:</b> Monday<br><b>To:</b> A<br>\
         <b>Subject:</b> s</p></div><p>old text</p>",
    );
    assert_eq!(outlook.body.text, "New answer.");
    assert!(outlook.body.quote_stripped);

    let gmail = parse_text(
        "From: a@x\nSubject: s\nContent-Type: text/html\n\n\
         <div dir=\"ltr\">Thanks!<br clear=\"all\"><br>-- <br>\
         <div class=\"gmail_signature\">Ann<br>CEO</div></div>",
    );
    assert_eq!(gmail.body.text, "Thanks!");
    assert!(gmail.body.signature_stripped);
}

#[test]
fn crlf_lone_cr_and_lf_bodies_read_the_same() {
    let lf = parse_text("From: a@x\nSubject: s\n\nline one\nline two\n");
    let crlf = parse_text("From: a@x\r\nSubject: s\r\n\r\nline one\r\nline two\r\n");
    assert_eq!(lf.body.text, "line one\nline two");
    assert_eq!(crlf.body, lf.body);
}
