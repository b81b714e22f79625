#!/usr/bin/env python3
"""Turns a text file into a C string constant: embed_text.py SYMBOL INPUT OUTPUT."""
import sys

symbol, src, dst = sys.argv[1:4]
with open(src, encoding="utf-8") as f:
    text = f.read()
lines = ["const char %s[] =" % symbol]
for line in text.splitlines(keepends=True):
    escaped = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    lines.append('\t"%s"' % escaped)
lines.append("\t;\n")
with open(dst, "w", encoding="utf-8") as f:
    f.write("\n".join(lines))
