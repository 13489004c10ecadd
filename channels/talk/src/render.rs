//! Turns a Talk message's `{placeholder}` text into readable text and finds who it mentions.
//!
//! Rich object strings (`docs/chat.md`, "Rich Object String"): the text holds `{key}` and
//! `messageParameters[key]` describes the object. Mentions are `mention-*` keys whose type is
//! `user`, `guest`, `call` (that is `@all`), `user-group`, `federated_user` or `team`.

use std::collections::BTreeMap;

use crate::wire::RichObject;

/// A message rendered for people and the assistant.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rendered {
    pub text: String,
    /// User ids mentioned directly (`@all` and group mentions are not listed).
    pub mentioned_users: Vec<String>,
    /// The message mentioned everyone in the room (`@all`).
    pub mentions_all: bool,
}

pub fn render(message: &str, parameters: &BTreeMap<String, RichObject>) -> Rendered {
    let mut out = Rendered::default();
    let mut text = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(open) = rest.find('{') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if parameters.contains_key(&after[..close]) => {
                let key = &after[..close];
                let object = &parameters[key];
                text.push_str(&readable(key, object, &mut out));
                rest = &after[close + 1..];
            }
            _ => {
                text.push('{');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    out.text = text;
    out
}

fn readable(key: &str, object: &RichObject, out: &mut Rendered) -> String {
    let name = if object.name.is_empty() {
        object.id.as_str()
    } else {
        object.name.as_str()
    };
    match object.kind.as_str() {
        "user" | "guest" | "federated_user" if key.starts_with("mention") => {
            if object.kind == "user" && !out.mentioned_users.contains(&object.id) {
                out.mentioned_users.push(object.id.clone());
            }
            format!("@{name}")
        }
        "call" => {
            out.mentions_all = true;
            format!("@{name}")
        }
        "user-group" | "group" | "team" | "circle" => format!("@{name}"),
        "file" | "talk-attachment" | "deck-card" | "geo-location" | "talk-poll" => {
            format!("[{name}]")
        }
        _ => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(kind: &str, id: &str, name: &str) -> RichObject {
        RichObject {
            kind: kind.into(),
            id: id.into(),
            name: name.into(),
        }
    }

    #[test]
    fn mentions_files_and_all() {
        let params = BTreeMap::from([
            (
                "mention-user1".to_owned(),
                object("user", "bot", "Assistant"),
            ),
            ("mention-call1".to_owned(), object("call", "room1", "Team")),
            ("file".to_owned(), object("file", "12", "plan.pdf")),
        ]);
        let r = render(
            "{mention-user1} and {mention-call1}: see {file} {unknown}",
            &params,
        );
        assert_eq!(r.text, "@Assistant and @Team: see [plan.pdf] {unknown}");
        assert_eq!(r.mentioned_users, vec!["bot".to_owned()]);
        assert!(r.mentions_all);
    }

    #[test]
    fn braces_without_parameters_stay() {
        let r = render("code { x } {", &BTreeMap::new());
        assert_eq!(r.text, "code { x } {");
        assert!(r.mentioned_users.is_empty());
    }
}
