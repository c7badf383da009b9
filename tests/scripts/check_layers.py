#!/usr/bin/env python3
"""Checks that src/'s modules depend only downward, in the order docs/design.md gives: every
#include "M/..." of a file in src/<N>/ and every symbol an object of src/<N>/ takes from another
module's objects must name a module below N (or N itself). Prints each violation; exit 1 if any.
  tests/scripts/check_layers.py [BUILD_DIR]   (with BUILD_DIR, the call graph is checked too)"""
import os, re, subprocess, sys

ORDER = ["base", "types", "gguf", "hub", "kernels", "text", "model", "backend", "engine", "convert", "quant", "tools"]
RANK = {m: i for i, m in enumerate(ORDER)}
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
src = os.path.join(root, "src")
bad = []

def module_of(path):
    return os.path.relpath(path, src).split(os.sep)[0]

files = [os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if f.endswith((".c", ".h"))]
unknown = sorted({module_of(f) for f in files} - set(ORDER))
if unknown:
    bad.append("modules missing from the order: " + ", ".join(unknown))
for f in sorted(files):
    me = module_of(f)
    for n, line in enumerate(open(f, encoding="utf-8"), 1):
        m = re.match(r'\s*#\s*include\s+"([^"/]+)/', line)
        if m and m.group(1) in RANK and RANK[m.group(1)] > RANK.get(me, -1):
            bad.append("%s:%d: %s includes %s, a module above it" % (os.path.relpath(f, root), n, me, m.group(1)))

if len(sys.argv) > 1:  # the call graph, from the objects' symbol tables
    build = os.path.join(sys.argv[1], "src")
    defined, used = {}, {}
    for d, _, fs in os.walk(build):
        for f in fs:
            if not f.endswith(".o"):
                continue
            obj = os.path.join(d, f)
            me = os.path.relpath(obj, build).split(os.sep)[0]
            out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] in "TDBRCV":
                    defined[parts[2]] = me
                elif len(parts) == 2 and parts[0] == "U":
                    used.setdefault(me, set()).add(parts[1])
    if not defined:
        bad.append("no objects under %s" % build)
    for me, syms in sorted(used.items()):
        for s in sorted(syms):
            owner = defined.get(s)
            if owner and RANK[owner] > RANK[me]:
                bad.append("%s calls %s of %s, a module above it" % (me, s, owner))

for b in bad:
    print(b)
print("module layering: %d violation(s)" % len(bad))
sys.exit(1 if bad else 0)
