//! The archive search query: callers write FTS5 syntax (the trait's contract, and SQLite's
//! native language); PostgreSQL gets the same query as `to_tsquery` text, in which every
//! phrase is a quoted string (so nothing in it can act as an operator) that the `english`
//! configuration then splits, stems and rids of stopwords, as it does the messages.
//!
//! Covered: phrases (`word`, `"several words"`, `"a" + "b"`), `AND`/`OR`/`NOT` with FTS5's
//! precedence (NOT, then AND, then OR; adjacent phrases are an implicit AND binding tighter
//! than NOT), parentheses and the prefix `*`. Column filters (`text:`), `^` and `NEAR(…)`'s
//! distance are accepted and ignored (there is one column; NEAR becomes AND).

use crate::store::{StoreError, StoreResult};

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Open,
    Close,
    Star,
    Plus,
    Colon,
    Comma,
}

#[derive(Debug)]
enum Node {
    Phrase { text: String, prefix: bool },
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>, Box<Node>),
}

/// The `to_tsquery` text for an FTS5 query; `None` when it has nothing to search for.
pub(super) fn to_tsquery(fts: &str) -> StoreResult<Option<String>> {
    let tokens = tokenize(fts)?;
    if tokens.is_empty() {
        return Ok(None);
    }
    let mut parser = Parser { tokens, at: 0 };
    let node = parser.or()?;
    if parser.at < parser.tokens.len() {
        return Err(invalid(fts, "unexpected text after the query"));
    }
    Ok(render(&node))
}

fn invalid(query: &str, why: &str) -> StoreError {
    StoreError::Invalid(format!("full-text query {query:?}: {why}"))
}

fn tokenize(s: &str) -> StoreResult<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() || c == '^' => {}
            '(' => out.push(Token::Open),
            ')' => out.push(Token::Close),
            '*' => out.push(Token::Star),
            '+' => out.push(Token::Plus),
            ':' => out.push(Token::Colon),
            ',' => out.push(Token::Comma),
            '"' => {
                // FTS5 strings double a quote to hold one.
                let mut text = String::new();
                loop {
                    match chars.next() {
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            text.push('"');
                        }
                        Some('"') => break,
                        Some(c) => text.push(c),
                        None => return Err(invalid(s, "unterminated string")),
                    }
                }
                out.push(Token::Quoted(text));
            }
            c => {
                let mut word = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || "()*+:,\"^".contains(n) {
                        break;
                    }
                    word.push(n);
                    chars.next();
                }
                out.push(Token::Word(word));
            }
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn keyword(&self, k: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w == k)
    }

    fn or(&mut self) -> StoreResult<Node> {
        let mut items = vec![self.and()?];
        while self.keyword("OR") {
            self.at += 1;
            items.push(self.and()?);
        }
        Ok(one_or(items, Node::Or))
    }

    fn and(&mut self) -> StoreResult<Node> {
        let mut items = vec![self.not()?];
        while self.keyword("AND") {
            self.at += 1;
            items.push(self.not()?);
        }
        Ok(one_or(items, Node::And))
    }

    fn not(&mut self) -> StoreResult<Node> {
        let mut node = self.sequence()?;
        while self.keyword("NOT") {
            self.at += 1;
            node = Node::Not(Box::new(node), Box::new(self.sequence()?));
        }
        Ok(node)
    }

    /// Adjacent phrases and groups: an implicit AND.
    fn sequence(&mut self) -> StoreResult<Node> {
        let mut items = vec![self.primary()?];
        while self.starts_primary() {
            items.push(self.primary()?);
        }
        Ok(one_or(items, Node::And))
    }

    fn starts_primary(&self) -> bool {
        match self.peek() {
            Some(Token::Word(w)) => !matches!(w.as_str(), "AND" | "OR" | "NOT"),
            Some(Token::Quoted(_) | Token::Open) => true,
            _ => false,
        }
    }

    fn primary(&mut self) -> StoreResult<Node> {
        match self.peek().cloned() {
            Some(Token::Word(w)) if matches!(w.as_str(), "AND" | "OR" | "NOT") => {
                Err(self.error("an operator needs a phrase on each side"))
            }
            Some(Token::Open) => {
                self.at += 1;
                let node = self.or()?;
                self.expect_close()?;
                Ok(node)
            }
            Some(Token::Word(w))
                if w == "NEAR" && self.tokens.get(self.at + 1) == Some(&Token::Open) =>
            {
                self.at += 2;
                let mut items = Vec::new();
                while self.starts_primary() {
                    items.push(self.phrase()?);
                }
                if self.peek() == Some(&Token::Comma) {
                    self.at += 1;
                    if matches!(self.peek(), Some(Token::Word(_))) {
                        self.at += 1; // the distance
                    }
                }
                self.expect_close()?;
                if items.is_empty() {
                    return Err(self.error("NEAR() without phrases"));
                }
                Ok(one_or(items, Node::And))
            }
            Some(Token::Word(_) | Token::Quoted(_)) => {
                // `column:` and `{columns}:` filters: one column here, so they change nothing.
                if self.tokens.get(self.at + 1) == Some(&Token::Colon) {
                    self.at += 2;
                    return self.primary();
                }
                self.phrase()
            }
            _ => Err(self.error("expected a word, a string or '('")),
        }
    }

    /// A phrase: strings or words joined by `+`, optionally followed by the prefix `*`.
    fn phrase(&mut self) -> StoreResult<Node> {
        let mut text = String::new();
        loop {
            match self.peek().cloned() {
                Some(Token::Word(w) | Token::Quoted(w)) => {
                    self.at += 1;
                    if !text.is_empty() {
                        text.push(' ');
                    }
                    text.push_str(&w);
                }
                _ => return Err(self.error("expected a word or a string")),
            }
            if self.peek() == Some(&Token::Plus) {
                self.at += 1;
            } else {
                break;
            }
        }
        let prefix = self.peek() == Some(&Token::Star);
        if prefix {
            self.at += 1;
        }
        Ok(Node::Phrase { text, prefix })
    }

    fn expect_close(&mut self) -> StoreResult<()> {
        if self.peek() == Some(&Token::Close) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.error("expected ')'"))
        }
    }

    fn error(&self, why: &str) -> StoreError {
        StoreError::Invalid(format!(
            "full-text query: {why} at token {} of {}",
            self.at + 1,
            self.tokens.len()
        ))
    }
}

fn one_or(mut items: Vec<Node>, many: fn(Vec<Node>) -> Node) -> Node {
    if items.len() == 1 {
        items.remove(0)
    } else {
        many(items)
    }
}

/// tsquery text; parts with nothing searchable (no letter or digit) drop out.
fn render(node: &Node) -> Option<String> {
    match node {
        Node::Phrase { text, prefix } => {
            if !text.chars().any(char::is_alphanumeric) {
                return None;
            }
            let quoted = text.replace('\\', "\\\\").replace('\'', "''");
            Some(format!("'{quoted}'{}", if *prefix { ":*" } else { "" }))
        }
        Node::And(items) => join(items, " & "),
        Node::Or(items) => join(items, " | "),
        Node::Not(keep, drop) => match (render(keep), render(drop)) {
            (Some(k), Some(d)) => Some(format!("({k} & !{d})")),
            (k, _) => k,
        },
    }
}

fn join(items: &[Node], op: &str) -> Option<String> {
    let parts: Vec<String> = items.iter().filter_map(render).collect();
    match parts.len() {
        0 => None,
        1 => parts.into_iter().next(),
        _ => Some(format!("({})", parts.join(op))),
    }
}

#[cfg(test)]
mod tests {
    use super::to_tsquery;

    fn q(s: &str) -> String {
        to_tsquery(s).unwrap().unwrap_or_default()
    }

    #[test]
    fn recall_queries_become_or_of_quoted_terms() {
        assert_eq!(q(r#""berlin" OR "trip""#), "('berlin' | 'trip')");
        assert_eq!(q(r#""o'brien""#), "'o''brien'");
        assert_eq!(q(r"back\slash"), r"'back\\slash'");
        assert_eq!(q(""), "");
        assert_eq!(q(r#""" OR "!?""#), "");
    }

    #[test]
    fn precedence_follows_fts5() {
        assert_eq!(q("a OR b AND c"), "('a' | ('b' & 'c'))");
        assert_eq!(q("a OR b NOT c"), "('a' | ('b' & !'c'))");
        assert_eq!(q("a NOT b AND c"), "(('a' & !'b') & 'c')");
        assert_eq!(q("a NOT b c"), "('a' & !('b' & 'c'))");
        assert_eq!(q("(a OR b) AND c"), "(('a' | 'b') & 'c')");
    }

    #[test]
    fn phrases_prefixes_filters_and_near() {
        assert_eq!(q(r#""berlin trip"*"#), "'berlin trip':*");
        assert_eq!(q(r#""a" + "b""#), "'a b'");
        assert_eq!(q("text:(berlin)"), "'berlin'");
        assert_eq!(q("NEAR(a b, 5)"), "('a' & 'b')");
        assert_eq!(q(r#""say ""hi""""#), r#"'say "hi"'"#);
    }

    #[test]
    fn malformed_queries_are_invalid() {
        for bad in ["(a", "a OR", "\"open", "NOT a", "a )"] {
            assert!(to_tsquery(bad).is_err(), "{bad}");
        }
    }
}
