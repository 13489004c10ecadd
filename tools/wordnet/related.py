#!/usr/bin/env python3
"""Builds src/context/related_words.txt, the table archive recall uses to search for other
words meaning what a message's words mean ("vehicle" also finds "car"... when WordNet says so).

Reads WordNet 3.0 from its dictionary directory (Debian: `apt-get install wordnet-base`, files in
/usr/share/wordnet). For every single-word lemma it keeps the senses people actually use (the
senses tagged in WordNet's sense-tagged corpus, at most SENSES per part of speech; the first
sense when none is tagged) and lists, from those senses only:

  - synonyms: the other single-word lemmas of the sense;
  - derived forms: WordNet's "derivationally related form" and "pertainym" links of the word
    itself ("allergic" -> "allergy", "cycle" -> "cyclist").

Output lines: `lemma<TAB>related related ...`, sorted, lowercase ASCII words only, at most
MAX_RELATED per lemma. Standard library only; the same input always gives the same file.

    python3 tools/wordnet/related.py [/usr/share/wordnet] > src/context/related_words.txt
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

POS = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
SENSES = 2
# Words with more senses than this mean too many things to say which other words mean the same
# ("take", "go", "time", "long"): they get no entry.
MAX_SENSES = 8
MAX_RELATED = 8
# Links followed from the word itself: derivationally related form, pertainym.
WORD_LINKS = {"+", "\\"}


HEADER = """\
# Words related in meaning or form, for archive recall (src/context/related.rs).
# Built by tools/wordnet/related.py from WordNet 3.0.
# WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.
# Used under the WordNet 3.0 license (see tools/wordnet/LICENSE).
"""


def plain(word: str) -> bool:
    return word.isascii() and word.isalpha() and word.islower() and len(word) >= 3


def load(dict_dir: Path):
    """synsets[(pos, offset)] = (words, word_links): words in order, and the lexical links
    (symbol, source word index, target pos, target offset, target word index)."""
    synsets = {}
    for pos, name in POS.items():
        for line in open(dict_dir / f"data.{name}", encoding="latin-1"):
            if line.startswith("  "):
                continue
            fields = line.split(" | ")[0].split()
            offset = fields[0]
            n = int(fields[3], 16)
            words = [fields[4 + 2 * i].split("(")[0].lower() for i in range(n)]
            i = 4 + 2 * n
            p_cnt = int(fields[i])
            links = []
            for k in range(p_cnt):
                sym, t_off, t_pos, st = fields[i + 1 + 4 * k : i + 5 + 4 * k]
                src, dst = int(st[:2], 16), int(st[2:], 16)
                if sym in WORD_LINKS and src > 0:
                    links.append((sym, src - 1, "a" if t_pos == "s" else t_pos, t_off, dst - 1))
            synsets[(pos, offset)] = (words, links)
    return synsets


def senses(dict_dir: Path):
    """index[lemma] = [(pos, offsets of the senses kept, offsets of every sense)]"""
    index = defaultdict(list)
    for pos, name in POS.items():
        for line in open(dict_dir / f"index.{name}", encoding="latin-1"):
            if line.startswith("  "):
                continue
            f = line.split()
            lemma, n_senses, p_cnt = f[0], int(f[2]), int(f[3])
            tagged = int(f[5 + p_cnt])
            offsets = f[6 + p_cnt : 6 + p_cnt + n_senses]
            keep = max(1, min(tagged, SENSES))
            index[lemma].append((pos, offsets[:keep], offsets))
    return index


# WordNet's detachment rules: the endings an inflection of each part of speech may have.
DETACH = {
    "n": [("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
          ("men", "man"), ("ies", "y")],
    "v": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""),
          ("ing", "e"), ("ing", "")],
    "a": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
}


def inflection(lemma: str, index) -> bool:
    """Whether `lemma` is also an inflection of another lemma ("days" of "day", "asking" of
    "ask"). Such entries are idioms ("these days", "for the asking"); looking the word up
    through its dictionary form gives what people mean by it."""
    for pos, rules in DETACH.items():
        for suffix, add in rules:
            if lemma.endswith(suffix) and len(lemma) > len(suffix) + 1:
                base = lemma[: -len(suffix)] + add
                forms = {base}
                if pos == "v" and suffix in ("ed", "ing") and len(base) > 2 and base[-1] == base[-2]:
                    forms.add(base[:-1])
                if any(any(p == pos for p, _, _ in index.get(f, [])) for f in forms if f != lemma):
                    return True
    return False


def main() -> None:
    dict_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/wordnet")
    synsets = load(dict_dir)
    index = senses(dict_dir)
    out = []
    for lemma in sorted(index):
        if (
            not plain(lemma)
            or sum(len(every) for _, _, every in index[lemma]) > MAX_SENSES
            or inflection(lemma, index)
        ):
            continue
        related: list[str] = []

        def add(w: str) -> None:
            if plain(w) and w != lemma and w not in related:
                related.append(w)

        # Synonyms from the senses kept, then the word's own derived forms from any sense
        # (they are forms of the word, whatever it means).
        for pos, kept, _ in index[lemma]:
            for off in kept:
                for w in synsets[(pos, off)][0]:
                    add(w)
        for pos, _, every in index[lemma]:
            for off in every:
                words, links = synsets[(pos, off)]
                if lemma not in words:
                    continue
                me = words.index(lemma)
                for sym, src, t_pos, t_off, dst in links:
                    if src == me:
                        add(synsets[(t_pos, t_off)][0][dst])
        if related:
            out.append(f"{lemma}\t{' '.join(related[:MAX_RELATED])}")
    sys.stdout.write(HEADER + "\n".join(out) + "\n")


if __name__ == "__main__":
    main()
