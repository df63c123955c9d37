#!/usr/bin/env python3
"""Generates src/infer/text/unicode_tables.h, the Unicode data the WordPiece
tokenizer needs (src/infer/text/bert_normalizer.cpp), without ICU.

The tokenizer must give the ids the reference gives (Hugging Face
`tokenizers`, BertNormalizer + BertPreTokenizer), and the reference does not
follow one Unicode version: its categories come from the `unicode_categories`
crate (an old Unicode, and it counts private use Co as a control character),
its lower-casing from Rust's std (a newer Unicode than Python's), its NFD from
`unicode-normalization-alignments`, and one of its CJK ranges has a typo
(0x2B920 where BERT says 0x2B820). Tables built from Python's unicodedata
alone would differ from it on about 138,000 code points. So this script asks
the reference itself, one code point at a time, what each step does, and
takes from unicodedata only what the reference cannot be asked one code point
at a time: the canonical combining classes that order marks in NFD. It prints
where the reference departs from unicodedata, so that a change of `tokenizers`
version shows up as a changed summary.

Usage: pip install tokenizers; python3 scripts/gen_unicode_tables.py
(writes the header; pass --check to only compare with the committed one).
"""

import argparse
import os
import sys
import unicodedata as ud

try:
    import tokenizers
    from tokenizers import normalizers, pre_tokenizers
except ImportError:
    sys.exit("gen_unicode_tables.py needs the reference: pip install tokenizers")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "src", "infer", "text", "unicode_tables.h")

HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3


def code_points():
    return (cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)


def step(**kw):
    """One BertNormalizer step alone (every other step off)."""
    args = dict(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    args.update(kw)
    return normalizers.BertNormalizer(**args).normalize_str


def ranges(cps):
    """Sorted code points -> [(first, last)] runs."""
    out = []
    for cp in cps:
        if out and out[-1][1] + 1 == cp:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return out


def hangul_nfd(cp):
    # The algorithmic Hangul decomposition (Unicode 3.12), done in C++ too.
    s = cp - HANGUL_FIRST
    lead, vowel, trail = 0x1100 + s // 588, 0x1161 + (s % 588) // 28, 0x11A7 + s % 28
    return [lead, vowel] + ([trail] if trail != 0x11A7 else [])


def probe():
    clean, cjk = step(clean_text=True), step(handle_chinese_chars=True)
    strip, lower = step(strip_accents=True), step(lowercase=True)
    nfd = normalizers.NFD().normalize_str
    split = pre_tokenizers.BertPreTokenizer().pre_tokenize_str

    t = dict(dropped=[], spaces=[], cjk=[], marks=[], punct=[], decomp={}, lower={})
    for cp in code_points():
        c = chr(cp)
        r = clean(c)
        if r == "":
            t["dropped"].append(cp)
        elif r == " " and c != " ":
            t["spaces"].append(cp)
        if cjk(c) == " " + c + " ":
            t["cjk"].append(cp)
        d = nfd(c)
        if d != c:
            if HANGUL_FIRST <= cp <= HANGUL_LAST:
                assert [ord(x) for x in d] == hangul_nfd(cp), hex(cp)
            else:
                t["decomp"][cp] = [ord(x) for x in d]
        elif strip(c) == "":
            t["marks"].append(cp)
        lo = lower(c)
        if lo != c:
            t["lower"][cp] = [ord(x) for x in lo]
        if cp > 0x7F and len(split("a" + c + "a")) == 3:
            t["punct"].append(cp)
    return t


def check_assumptions(t):
    """What bert_normalizer.cpp relies on; a new reference may break it."""
    dropped, spaces = set(t["dropped"]), set(t["spaces"])
    split = pre_tokenizers.BertPreTokenizer().pre_tokenize_str
    # Only ' ' is left to split on after clean_text: every other whitespace
    # the pre-tokenizer knows is turned into ' ' or dropped first.
    for cp in code_points():
        if cp != 0x20 and len(split("a" + chr(cp) + "a")) == 2:
            assert cp in dropped or cp in spaces, hex(cp)
    # Decompositions and lower-case forms make nothing clean_text would touch,
    # and no CJK character, so the steps can run one character at a time.
    # (A code point clean_text drops or turns into ' ' never reaches NFD, and
    # a CJK one already has its spaces.)
    cjk = set(t["cjk"])
    for table in (t["decomp"], t["lower"]):
        for cp, v in table.items():
            if cp in dropped or cp in spaces or cp in cjk:
                continue
            for x in v:
                assert x not in dropped and x not in spaces and x not in cjk, hex(cp)
    # A decomposition is final (NFD is applied once, not to a fixed point).
    for v in t["decomp"].values():
        for x in v:
            assert x not in t["decomp"] and not HANGUL_FIRST <= x <= HANGUL_LAST, hex(x)
    # Lengths fit the table's fields.
    assert max(len(v) for v in t["decomp"].values()) <= 255
    assert max(len(v) for v in t["lower"].values()) <= 255


def summarize(t):
    """Where the reference departs from unicodedata (printed, not used)."""
    def cat(cp):
        return ud.category(chr(cp))

    def count(label, cps):
        by = {}
        for cp in cps:
            by[cat(cp)] = by.get(cat(cp), 0) + 1
        print(f"  {label}: {len(cps)} {dict(sorted(by.items()))}")

    dropped, marks, punct = set(t["dropped"]), set(t["marks"]), set(t["punct"])
    ws = {0x9, 0xA, 0xD}
    ud_dropped = {cp for cp in code_points() if cp not in ws and (cp in (0, 0xFFFD) or cat(cp) in ("Cc", "Cf"))}
    ud_marks = {cp for cp in code_points() if cat(cp) == "Mn" and ud.normalize("NFD", chr(cp)) == chr(cp)}
    ud_punct = {cp for cp in code_points() if cp > 0x7F and cat(cp).startswith("P")}
    print(f"reference tokenizers {tokenizers.__version__}, unicodedata {ud.unidata_version}:")
    count("dropped by the reference, not by unicodedata Cc/Cf", sorted(dropped - ud_dropped))
    count("dropped by unicodedata Cc/Cf, kept by the reference", sorted(ud_dropped - dropped))
    count("Mn in unicodedata, kept by the reference", sorted(ud_marks - marks))
    count("stripped by the reference, not Mn in unicodedata", sorted(marks - ud_marks))
    count("punctuation in unicodedata, not in the reference", sorted(ud_punct - punct))
    count("punctuation in the reference, not in unicodedata", sorted(punct - ud_punct))


def emit(t):
    ccc = {}
    for cp in code_points():
        if ud.combining(chr(cp)):
            ccc[cp] = ud.combining(chr(cp))
    ccc_runs = []
    for cp in sorted(ccc):
        if ccc_runs and ccc_runs[-1][1] + 1 == cp and ccc_runs[-1][2] == ccc[cp]:
            ccc_runs[-1][1] = cp
        else:
            ccc_runs.append([cp, cp, ccc[cp]])

    lines = [
        "#pragma once",
        "// GENERATED by scripts/gen_unicode_tables.py: do not edit; run the script.",
        f"// Source: the reference tokenizer (Hugging Face tokenizers {tokenizers.__version__}), asked one",
        "// code point at a time what each BertNormalizer step and BertPreTokenizer do,",
        f"// and Python's unicodedata {ud.unidata_version} for canonical combining classes.",
        "// All arrays are sorted by code point, for binary search (unicode_props.cpp).",
        "",
        "#include <cstdint>",
        "",
        "// Not clang-formatted: `make format` would make it differ from what the script writes.",
        "// clang-format off",
        "namespace ferry::infer::text::tables {",
        "",
        "struct Range {",
        "  char32_t first, last;",
        "};",
        "struct ClassRange {",
        "  char32_t first, last;",
        "  std::uint8_t value;",
        "};",
        "// A code point's replacement: length code points at offset in the data array.",
        "struct Mapping {",
        "  char32_t cp;",
        "  std::uint16_t offset;",
        "  std::uint8_t length;",
        "};",
        "",
    ]

    def range_table(name, why, cps):
        rs = ranges(sorted(cps))
        lines.append(f"// {why} ({len(cps)} code points)")
        lines.append(f"inline constexpr Range {name}[] = {{")
        row = []
        for a, b in rs:
            row.append(f"{{0x{a:X}, 0x{b:X}}},")
            if len(row) == 6:
                lines.append("    " + " ".join(row))
                row = []
        if row:
            lines.append("    " + " ".join(row))
        lines.append("};")
        lines.append("")

    def mapping_table(name, why, table):
        data, entries = [], []
        for cp in sorted(table):
            entries.append((cp, len(data), len(table[cp])))
            data.extend(table[cp])
        assert len(data) < 65536
        lines.append(f"// {why} ({len(entries)} code points)")
        lines.append(f"inline constexpr char32_t {name}Data[] = {{")
        for i in range(0, len(data), 10):
            lines.append("    " + " ".join(f"0x{x:X}," for x in data[i:i + 10]))
        lines.append("};")
        lines.append(f"inline constexpr Mapping {name}[] = {{")
        for i in range(0, len(entries), 4):
            lines.append("    " + " ".join(f"{{0x{cp:X}, {o}, {n}}}," for cp, o, n in entries[i:i + 4]))
        lines.append("};")
        lines.append("")

    range_table("kDropped", "clean_text drops these (controls, format, private use, NUL, U+FFFD)", t["dropped"])
    range_table("kSpaces", "clean_text turns these into ' ' (besides ASCII \\t \\n \\r)", [c for c in t["spaces"] if c > 0x7F])
    range_table("kCjk", "handle_chinese_chars puts spaces around these", t["cjk"])
    range_table("kNonspacingMarks", "strip_accents drops these after NFD", t["marks"])
    range_table("kPunctuation", "BertPreTokenizer makes each of these a word (non-ASCII only)", t["punct"])
    mapping_table("kDecompositions", "NFD's full canonical decompositions, Hangul syllables aside", t["decomp"])
    mapping_table("kLowercase", "Lower-case forms (Rust char::to_lowercase), one to three code points", t["lower"])

    lines.append(f"// Canonical combining classes other than 0 ({len(ccc)} code points)")
    lines.append("inline constexpr ClassRange kCombiningClasses[] = {")
    for i in range(0, len(ccc_runs), 4):
        lines.append("    " + " ".join(f"{{0x{a:X}, 0x{b:X}, {v}}}," for a, b, v in ccc_runs[i:i + 4]))
    lines.append("};")
    lines.append("")
    lines.append("}  // namespace ferry::infer::text::tables")
    lines.append("// clang-format on")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed header, write nothing")
    args = ap.parse_args()
    t = probe()
    check_assumptions(t)
    summarize(t)
    text = emit(t)
    if args.check:
        with open(OUT, encoding="utf-8") as f:
            same = f.read() == text
        print("unicode_tables.h is up to date" if same else "unicode_tables.h differs: regenerate it")
        sys.exit(0 if same else 1)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {OUT} ({len(text)} bytes)")


if __name__ == "__main__":
    main()
