//! Input generation: byte-level mutations of corpus entries, arbitrary bytes and token soup, as
//! proptest strategies (so a failing input shrinks).

use std::sync::Arc;

use proptest::collection::vec;
use proptest::prelude::*;

/// One byte-level edit; positions are taken modulo the input's length.
#[derive(Debug, Clone)]
enum Edit {
    FlipBit {
        at: usize,
        bit: u8,
    },
    SetByte {
        at: usize,
        byte: u8,
    },
    Interesting {
        at: usize,
        which: usize,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    Token {
        at: usize,
        which: usize,
    },
    Delete {
        at: usize,
        len: usize,
    },
    Repeat {
        at: usize,
        len: usize,
        times: usize,
    },
    Splice {
        at: usize,
        from: usize,
        start: usize,
        len: usize,
    },
    Truncate {
        at: usize,
    },
}

/// Bytes that sit on parser decisions.
const INTERESTING: &[u8] = &[
    0, 0x7f, 0x80, 0xbf, 0xc0, 0xed, 0xf4, 0xff, b'\r', b'\n', b'\t', b' ', b'"', b'\\', b'{',
    b'}', b'[', b']', b':', b',', b'<', b'>', b'=', b'?', b'-', b'.', b'/', b'0', b'9', b'e',
];

/// Tokens every target gets in addition to its own dictionary.
const COMMON_TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\r\n\r\n",
    b"\0",
    b"\xff\xfe",
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b"\xf0\x9f\x98",
    b"\xef\xbb\xbf",
    b"-9223372036854775809",
    b"18446744073709551616",
    b"1e999999",
    b"-0",
    b"NaN",
];

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Edit::FlipBit { at, bit }),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Edit::SetByte { at, byte }),
        3 => (any::<usize>(), any::<usize>()).prop_map(|(at, which)| Edit::Interesting { at, which }),
        2 => (any::<usize>(), vec(any::<u8>(), 1..16)).prop_map(|(at, bytes)| Edit::Insert { at, bytes }),
        4 => (any::<usize>(), any::<usize>()).prop_map(|(at, which)| Edit::Token { at, which }),
        2 => (any::<usize>(), 1usize..64).prop_map(|(at, len)| Edit::Delete { at, len }),
        1 => (any::<usize>(), 1usize..32, 2usize..2_000)
            .prop_map(|(at, len, times)| Edit::Repeat { at, len, times }),
        2 => (any::<usize>(), any::<usize>(), any::<usize>(), 1usize..256)
            .prop_map(|(at, from, start, len)| Edit::Splice { at, from, start, len }),
        1 => any::<usize>().prop_map(|at| Edit::Truncate { at }),
    ]
}

fn apply(seed: &[u8], edits: &[Edit], seeds: &[Vec<u8>], dictionary: &[&'static [u8]]) -> Vec<u8> {
    let mut out = seed.to_vec();
    // Largest a mutant may grow to, so that repetition cannot make inputs run away.
    let cap = (seed.len() * 2).max(64 * 1024);
    for e in edits {
        let pos = |at: usize, len: usize| at % (len + 1);
        match e {
            Edit::FlipBit { at, bit } if !out.is_empty() => {
                let i = at % out.len();
                out[i] ^= 1 << bit;
            }
            Edit::SetByte { at, byte } if !out.is_empty() => {
                let i = at % out.len();
                out[i] = *byte;
            }
            Edit::Interesting { at, which } if !out.is_empty() => {
                let i = at % out.len();
                out[i] = INTERESTING[which % INTERESTING.len()];
            }
            Edit::Insert { at, bytes } => {
                let i = pos(*at, out.len());
                out.splice(i..i, bytes.iter().copied());
            }
            Edit::Token { at, which } => {
                let all = COMMON_TOKENS.len() + dictionary.len();
                let n = which % all;
                let token = if n < COMMON_TOKENS.len() {
                    COMMON_TOKENS[n]
                } else {
                    dictionary[n - COMMON_TOKENS.len()]
                };
                let i = pos(*at, out.len());
                out.splice(i..i, token.iter().copied());
            }
            Edit::Delete { at, len } if !out.is_empty() => {
                let i = at % out.len();
                let end = (i + len).min(out.len());
                out.drain(i..end);
            }
            Edit::Repeat { at, len, times } if !out.is_empty() => {
                let i = at % out.len();
                let end = (i + len).min(out.len());
                let chunk = out[i..end].to_vec();
                let times = (*times).min(cap.saturating_sub(out.len()) / chunk.len().max(1));
                let repeated: Vec<u8> = chunk.repeat(times);
                out.splice(end..end, repeated);
            }
            Edit::Splice {
                at,
                from,
                start,
                len,
            } => {
                let other = &seeds[from % seeds.len()];
                if !other.is_empty() {
                    let s = start % other.len();
                    let end = (s + len).min(other.len());
                    let i = pos(*at, out.len());
                    out.splice(i..i, other[s..end].iter().copied());
                }
            }
            Edit::Truncate { at } => {
                let i = pos(*at, out.len());
                out.truncate(i);
            }
            _ => {}
        }
        if out.len() > cap {
            out.truncate(cap);
        }
    }
    out
}

/// Mutated corpus entries (mostly), arbitrary bytes, and dictionary token soup.
pub fn inputs(
    seeds: Arc<Vec<Vec<u8>>>,
    dictionary: &'static [&'static [u8]],
) -> impl Strategy<Value = Vec<u8>> {
    let n = seeds.len();
    let mutants = (0..n, vec(edit(), 1..8))
        .prop_map(move |(i, edits)| apply(&seeds[i], &edits, &seeds, dictionary));
    let soup = vec(any::<usize>(), 0..64).prop_map(move |picks| {
        let all = COMMON_TOKENS.len() + dictionary.len();
        picks
            .into_iter()
            .flat_map(|p| {
                let n = p % all;
                if n < COMMON_TOKENS.len() {
                    COMMON_TOKENS[n]
                } else {
                    dictionary[n - COMMON_TOKENS.len()]
                }
                .iter()
                .copied()
            })
            .collect::<Vec<u8>>()
    });
    prop_oneof![
        8 => mutants,
        1 => vec(any::<u8>(), 0..512),
        2 => soup,
    ]
}

/// What JSON parsers react to, for the JSON targets.
pub const JSON_TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"[]",
    b"{}",
    b"\"",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"\\udc00",
    b"\\ud83d\\ude06",
    b"\\uDFFF\\uD800",
    b"\\r\\n",
    b"\\\"",
    b"null",
    b"true",
    b"false",
    b"0",
    b"-1",
    b"1.5",
    b"1e400",
    b"9223372036854775807",
    b":",
    b",",
    b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    b"{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":",
];
