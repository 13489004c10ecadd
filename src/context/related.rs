//! Other words for a word: synonyms from the senses people mostly mean and the word's derived
//! forms ("vehicle"/"car" when WordNet says so, "allergy"/"allergic", "manage"/"manager"), so
//! archive recall finds what was said in other words. The table is built from WordNet 3.0 by
//! `tools/wordnet/related.py` and compiled in.

use std::collections::HashMap;
use std::sync::LazyLock;

static TABLE: LazyLock<HashMap<&'static str, Vec<&'static str>>> = LazyLock::new(|| {
    include_str!("related_words.txt")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('\t'))
        .map(|(w, rel)| (w, rel.split(' ').collect()))
        .collect()
});

/// The dictionary forms `word` may be an inflection of, as WordNet's own detachment rules
/// give them ("manages" -> "manage", "hobbies" -> "hobby", "biggest" -> "big").
fn base_forms(word: &str) -> Vec<String> {
    const RULES: &[(&str, &str)] = &[
        ("ies", "y"),
        ("ses", "s"),
        ("xes", "x"),
        ("zes", "z"),
        ("ches", "ch"),
        ("shes", "sh"),
        ("men", "man"),
        ("es", "e"),
        ("es", ""),
        ("s", ""),
        ("ied", "y"),
        ("ed", "e"),
        ("ed", ""),
        ("ing", "e"),
        ("ing", ""),
        ("er", ""),
        ("er", "e"),
        ("est", ""),
        ("est", "e"),
    ];
    let mut out: Vec<String> = Vec::new();
    for (suffix, with) in RULES {
        if let Some(stem) = word.strip_suffix(suffix)
            && stem.len() >= 2
        {
            let form = format!("{stem}{with}");
            if !out.contains(&form) {
                out.push(form);
            }
        }
        // Doubled consonants: "running" -> "run", "stopped" -> "stop".
        if matches!(*suffix, "ing" | "ed" | "er" | "est")
            && let Some(stem) = word.strip_suffix(suffix)
            && let [.., a, b] = stem.as_bytes()
            && a == b
            && stem.len() >= 3
        {
            let form = stem[..stem.len() - 1].to_owned();
            if !out.contains(&form) {
                out.push(form);
            }
        }
    }
    out
}

/// The words related to `word` (lowercase): the table's entry for the word when it is a
/// dictionary form, otherwise the entries of the forms it is an inflection of.
pub fn related(word: &str) -> Vec<&'static str> {
    if let Some(rel) = TABLE.get(word) {
        return rel.clone();
    }
    let mut out: Vec<&'static str> = Vec::new();
    for form in base_forms(word) {
        for r in TABLE.get(form.as_str()).into_iter().flatten() {
            if !out.contains(r) {
                out.push(r);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synonyms_and_derived_forms() {
        assert!(related("car").contains(&"automobile"));
        assert!(related("allergy").contains(&"allergic"));
        assert!(related("manages").contains(&"manager"), "inflected form");
        assert!(related("bicycles").contains(&"bike"), "plural");
        // A plural that WordNet lists as an idiom of its own ("these days" = "years") is looked
        // up through its dictionary form instead.
        assert!(!related("days").contains(&"years"));
        assert!(related("xyzzy").is_empty());
    }

    #[test]
    fn inflections_lead_to_their_dictionary_forms() {
        assert!(base_forms("hobbies").contains(&"hobby".to_owned()));
        assert!(base_forms("running").contains(&"run".to_owned()));
        assert!(base_forms("manages").contains(&"manage".to_owned()));
        assert!(base_forms("biggest").contains(&"big".to_owned()));
    }
}
