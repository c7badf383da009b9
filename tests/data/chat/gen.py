#!/usr/bin/python3
"""Regenerates the chat-template fixtures in this folder with Python's Jinja2 (Debian's
python3-jinja2), configured as Hugging Face's apply_chat_template configures it.

usage: tests/data/chat/gen.py [SHARED]   (SHARED defaults to ../shared)
Writes qwen3.json (the Qwen3 template on a set of conversations), vocab.json (the template stored
in ggml-vocab-qwen35.gguf) and jinja.json (small templates, one feature each)."""
import json
import os
import struct
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../../../shared")


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def gguf_string(path, key):
    """One string value from a GGUF file's metadata."""
    with open(path, "rb") as f:
        assert f.read(4) == b"GGUF"
        _, _, n_kv = struct.unpack("<IQQ", f.read(20))
        sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

        def read_str():
            (n,) = struct.unpack("<Q", f.read(8))
            return f.read(n).decode("utf-8")

        def read_value(t):
            if t == 8:
                return read_str()
            if t == 9:
                et, n = struct.unpack("<IQ", f.read(12))
                return [read_value(et) for _ in range(n)]
            return f.read(sizes[t])

        for _ in range(n_kv):
            k = read_str()
            (t,) = struct.unpack("<I", f.read(4))
            v = read_value(t)
            if k == key:
                return v
    raise KeyError(key)


def msg(role, content, reasoning=None):
    m = {"role": role, "content": content}
    if reasoning is not None:
        m["reasoning_content"] = reasoning
    return m


SYS = msg("system", "You are Bonsai, a concise assistant.")
THOUGHT = msg("assistant", "<think>\nThe user greets me.\nI should greet back.\n</think>\n\nHello! How can I help?")
CONVERSATIONS = {
    "user": [msg("user", "Hi there")],
    "system_user": [SYS, msg("user", "What is 2+2?")],
    "multi_turn": [SYS, msg("user", "Hi"), THOUGHT, msg("user", "Tell me a joke.")],
    "history_plain": [msg("user", "Hi"), msg("assistant", "Hello."), msg("user", "Bye"), msg("assistant", "Goodbye.")],
    "last_assistant_thought": [msg("user", "Hi"), THOUGHT],
    "reasoning_field": [msg("user", "Why?"), msg("assistant", "Because.", "Think first.\n")],
    "think_no_newlines": [msg("user", "Q"), msg("assistant", "<think>short</think>A")],
    "two_closes": [msg("user", "Q"), msg("assistant", "<think>a</think>b</think>\n\nc")],
    "system_later": [msg("user", "Hi"), msg("system", "Be brief."), msg("user", "Again")],
    "tools": [msg("user", "Weather?"), msg("assistant", "<think>call the tool</think>\n\nLet me check."),
              msg("tool", "sunny"), msg("tool", "22C"), msg("assistant", "<think>\nsummarise\n</think>\n\nSunny, 22C.")],
    "tool_response_user": [msg("user", "Q1"), msg("assistant", "<think>r1</think>A1"),
                           msg("user", "<tool_response>\nx\n</tool_response>"), msg("assistant", "<think>r2</think>A2")],
    "unicode_braces": [msg("user", "Ünïcödé 日本語 {{ not_a_var }} {% if %} 'quotes' \"dq\" \\ back\nslash\ttab")],
    "empty_content": [msg("user", ""), msg("assistant", "")],
}


def main():
    env = environment()
    with open(os.path.join(SHARED, "data/tokenizers/qwen3/tokenizer_config.json")) as f:
        qwen3 = env.from_string(json.load(f)["chat_template"])
    cases = []
    for name, messages in CONVERSATIONS.items():
        for gen in (True, False):
            for think in (True, False):
                text = qwen3.render(messages=messages, add_generation_prompt=gen, enable_thinking=think)
                cases.append({"name": f"{name}/gen={int(gen)}/think={int(think)}", "messages": messages,
                              "add_generation_prompt": gen, "enable_thinking": think, "expected": text})
    write("qwen3.json", {"template": "data/tokenizers/qwen3/tokenizer_config.json", "cases": cases})

    vocab_tmpl = gguf_string(os.path.join(SHARED, "data/vocab/ggml-vocab-qwen35.gguf"), "tokenizer.chat_template")
    vt = env.from_string(vocab_tmpl)
    vcases = []
    for name in ("user", "system_user", "multi_turn"):
        for gen in (True, False):
            vcases.append({"name": f"{name}/gen={int(gen)}", "messages": CONVERSATIONS[name], "add_generation_prompt": gen,
                           "enable_thinking": True,
                           "expected": vt.render(messages=CONVERSATIONS[name], add_generation_prompt=gen, enable_thinking=True)})
    write("vocab.json", {"template": "data/vocab/ggml-vocab-qwen35.gguf", "cases": vcases})

    with open(os.path.join(HERE, "jinja_templates.json")) as f:
        feature_cases = json.load(f)
    for c in feature_cases:
        c["expected"] = env.from_string(c["template"]).render(**c.get("context", {}))
    write("jinja.json", feature_cases)


def write(name, obj):
    with open(os.path.join(HERE, name), "w") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
