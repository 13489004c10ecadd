//! The configuration reference in docs/ covers every key config/default.toml has (set or
//! shown commented), so the two cannot drift apart.

#[test]
fn the_configuration_reference_names_every_key() {
    let root = env!("CARGO_MANIFEST_DIR");
    let defaults = std::fs::read_to_string(format!("{root}/config/default.toml")).unwrap();
    let reference = std::fs::read_to_string(format!("{root}/docs/configuration.md")).unwrap();
    let mut missing = Vec::new();
    for line in defaults.lines() {
        let line = line.trim_start_matches('#').trim();
        let Some((key, _)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        let is_key = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if is_key && !reference.contains(&format!("`{key}`")) {
            missing.push(key.to_owned());
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "docs/configuration.md does not document: {missing:?}"
    );
}
