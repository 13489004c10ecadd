//! Parse + normalise throughput over the golden fixtures (target: ≥ 2,000 messages/s on one
//! core). Criterion reports the throughput as elements (messages) per second.
//!
//! Run: `cargo bench -p ctxgate-email --bench parse`

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ctxgate_email::Normalizer;

fn fixtures() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut all: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .expect("fixtures directory")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            if path.extension()? != "eml" {
                return None;
            }
            let name = path.file_stem()?.to_str()?.to_owned();
            Some((name, std::fs::read(&path).ok()?))
        })
        .collect();
    all.sort();
    all
}

fn bench(c: &mut Criterion) {
    let fixtures = fixtures();
    assert!(!fixtures.is_empty(), "no fixtures found");
    let normalizer = Normalizer::default();

    let mut group = c.benchmark_group("parse_normalise");
    group.throughput(Throughput::Elements(fixtures.len() as u64));
    group.bench_function("all_fixtures", |b| {
        b.iter(|| {
            for (_, raw) in &fixtures {
                let mail = normalizer.normalize(black_box(raw));
                black_box(mail.is_ok());
            }
        })
    });
    group.finish();

    // Per fixture, to spot the expensive kinds of mail.
    let mut single = c.benchmark_group("parse_normalise_one");
    single.throughput(Throughput::Elements(1));
    for (name, raw) in &fixtures {
        single.bench_function(name.as_str(), |b| {
            b.iter(|| black_box(normalizer.normalize(black_box(raw)).is_ok()))
        });
    }
    single.finish();

    // A heavy case: a ~100 KB HTML-only newsletter (nested layout tables, links, images).
    let newsletter = newsletter();
    let mut heavy = c.benchmark_group("parse_normalise_heavy");
    heavy.throughput(Throughput::Elements(1));
    heavy.bench_function("html_newsletter_100k", |b| {
        b.iter(|| black_box(normalizer.normalize(black_box(&newsletter)).is_ok()))
    });
    heavy.finish();
}

fn newsletter() -> Vec<u8> {
    let mut html = String::from("<html><head><style>td{padding:4px}</style></head><body>");
    html.push_str("<table width=\"100%\"><tr><td><table width=\"600\" align=\"center\">");
    let mut i = 0;
    while html.len() < 100_000 {
        html.push_str(&format!(
            "<tr><td><h2>Story {i}</h2><p>Lorem ipsum dolor sit amet, <b>consectetur</b> \
             adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. \
             <a href=\"https://news.example/{i}\">Read more</a></p>\
             <img src=\"https://img.example/{i}.png\" alt=\"picture {i}\" width=\"600\"></td></tr>"
        ));
        i += 1;
    }
    html.push_str("</table></td></tr></table></body></html>");
    format!(
        "From: News <news@example.org>\r\nTo: bot@example.org\r\nSubject: Weekly news\r\n\
         Message-ID: <news-1@example.org>\r\nContent-Type: text/html; charset=utf-8\r\n\r\n{html}"
    )
    .into_bytes()
}

criterion_group!(benches, bench);
criterion_main!(benches);
