//! Golden fixtures: every `tests/fixtures/*.eml` normalises to exactly its `*.json`.
//! `UPDATE_GOLDEN=1 cargo test -p ctxgate-email golden` rewrites the JSON files; review the diff.

use ctxgate_email::normalize;

use crate::support::fixtures_dir;

/// Fixtures the brief requires; the test fails if one goes missing.
const REQUIRED: &[&str] = &[
    "plain",
    "html_only",
    "alternative",
    "latin1",
    "windows1252",
    "shift_jis",
    "quoted_reply",
    "outlook_reply",
    "forwarded",
    "broken_mime",
    "encoded_subject",
    "folded_references",
    "attachment",
];

#[test]
fn fixtures_match_their_golden_json() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let dir = fixtures_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("fixtures directory")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            (path.extension()? == "eml").then(|| path.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    names.sort();
    for required in REQUIRED {
        assert!(
            names.iter().any(|n| n == required),
            "fixture {required}.eml is missing"
        );
    }

    let mut mismatches = Vec::new();
    for name in &names {
        let raw = std::fs::read(dir.join(format!("{name}.eml"))).expect("fixture");
        let mail = normalize(&raw).unwrap_or_else(|e| panic!("{name}.eml: {e}"));
        let actual = serde_json::to_value(&mail).expect("serialise");
        let golden_path = dir.join(format!("{name}.json"));
        if update {
            let pretty = serde_json::to_string_pretty(&actual).expect("pretty") + "\n";
            std::fs::write(&golden_path, pretty).expect("write golden");
            continue;
        }
        let golden = std::fs::read_to_string(&golden_path).unwrap_or_else(|e| {
            panic!("{}: {e} (run with UPDATE_GOLDEN=1)", golden_path.display())
        });
        let expected: serde_json::Value = serde_json::from_str(&golden).expect("golden JSON");
        if actual != expected {
            mismatches.push(format!(
                "{name}: expected\n{}\nactual\n{}",
                serde_json::to_string_pretty(&expected).unwrap_or_default(),
                serde_json::to_string_pretty(&actual).unwrap_or_default()
            ));
        }
        // The golden JSON is also a valid serialised form: it reads back to the same value.
        let round_trip: ctxgate_email::NormalizedMail =
            serde_json::from_str(&golden).expect("golden deserialises");
        assert_eq!(
            serde_json::to_value(&round_trip).expect("serialise"),
            expected,
            "{name}"
        );
    }
    assert!(
        mismatches.is_empty(),
        "golden mismatches:\n{}",
        mismatches.join("\n\n")
    );
}
