#!/usr/bin/env python3
"""Reads llama.cpp's tests/test-json-schema-to-grammar.cpp and writes its cases as data:
tests/data/json_schema/llama_cases.json, a list of {name, schema, grammar} (grammar null when
the schema must fail). Whitespace is trimmed as that test trims it before comparing.
Usage: gen_json_schema_cases.py LLAMA_CPP_DIR > tests/data/json_schema/llama_cases.json"""
import json, re, sys

src = open(sys.argv[1] + "/tests/test-json-schema-to-grammar.cpp").read()
body = src[src.index("static void test_all"):src.index("int main()")]

def trim(s):
    s = s.strip(" \n\r\t")
    return re.sub(r"(^|\n)[ \t]+", r"\1", s)

tok = re.compile(r'R"""\((.*?)\)"""|"((?:[^"\\]|\\.)*)"|\b(SUCCESS|FAILURE)\b', re.S)
cases = []
for m in re.finditer(r"test\(\{(.*?)\n    \}\);", body, re.S):
    parts = []
    for t in tok.finditer(m.group(1)):
        if t.group(3): parts.append(t.group(3))
        elif t.group(1) is not None: parts.append(t.group(1))
        else: parts.append(json.loads('"' + t.group(2) + '"'))
    status, name, schema, grammar = parts
    cases.append({"name": name, "schema": schema.strip(),
                  "grammar": trim(grammar) + "\n" if status == "SUCCESS" else None})
json.dump(cases, sys.stdout, indent=1, ensure_ascii=False)
sys.stdout.write("\n")
