#!/usr/bin/env python3
"""Writes tests/data/verifier/pyunicode.txt: the code points for which CPython's str.isdigit() and
str.isspace() are true, as inclusive hex ranges. The math_dapo normalizer (common/reward/math_dapo.c)
uses both (the integer-comma rule and strip()/`\\s`); tests/unit/test_verifier_rules.c checks every
code point of its tables against this file. Reference: CPython 3.11.7, unicodedata 14.0.0 (the interpreter
the verifier cases were produced with)."""
import os
import sys
import unicodedata

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
out = os.path.join(root, "tests", "data", "verifier", "pyunicode.txt")


def ranges(pred):
    r, start = [], None
    for c in range(0x110001):
        ok = c <= 0x10FFFF and pred(chr(c))
        if ok and start is None:
            start = c
        elif not ok and start is not None:
            r.append((start, c - 1))
            start = None
    return r


with open(out, "w") as f:
    f.write(f"# python {sys.version.split()[0]} unicodedata {unicodedata.unidata_version}\n")
    for name, pred in (("isdigit", str.isdigit), ("isspace", str.isspace)):
        for a, b in ranges(pred):
            f.write(f"{name} {a:X} {b:X}\n")
print("wrote", out)
