#!/bin/sh
# trit against mainline llama.cpp and the memory-bandwidth roofline, in one run (issue #4):
#  1. streaming-read bandwidth (bench/bandwidth.c), before and after, since it drifts on shared
#     machines; the roofline is their mean;
#  2. `trit synth` models of real shapes, cached in $BENCH_DIR (the 27B shape: minutes and ~6 GB
#     per type);
#  3. `trit bench` pp/tg on each, and llama.cpp v0.5.0 on the TQ1_0/TQ2_0 files it can read, timed
#     by bench/llamacpp_bench.c around llama_decode as llama-bench does; it is built here against
#     the prebuilt CPU libllama of npm node-llama-cpp@3.22.1 (headers from that package's llama.cpp
#     source bundle, in a temporary folder), and skipped when node/npm or the package is missing;
#  4. a table of t/s, decode / roofline and trit / llama.cpp ratios, then the issue's goals with
#     PASS/MISS.
# Knobs (environment): BENCH_DIR (default /tmp/trit-bench), SHAPES, TYPES, THREADS (default:
# cores), REPS (2), PP and TG (tokens for every shape; by default per shape pp512/tg128 for
# qwen3-1.7b, pp256/tg64 for qwen3-8b, pp128/tg32 for the rest, which keeps the full run of three
# shapes x three types + llama.cpp near 25 minutes on 2 cores once the models exist), DEPTHS
# (default 0: every test also after that many tokens in the context, as llama-bench -d; a depth of
# 16384 on qwen3-8b takes an hour on 2 cores, most of it llama.cpp's).
set -eu
cd "$(dirname "$0")/.."
DIR=${BENCH_DIR:-/tmp/trit-bench}
SHAPES=${SHAPES:-"qwen3-1.7b qwen3-8b qwen35-27b"}
TYPES=${TYPES:-"PTQ1_0 PQ2_0 TQ2_0"}
THREADS=${THREADS:-$(nproc)}
REPS=${REPS:-2}
DEPTHS=${DEPTHS:-0}
TRIT=build/release/trit
mkdir -p "$DIR"
make -s -j2 all build/release/bandwidth

sizes() { # pp and tg token counts of a shape
    case $1 in
    qwen3-1.7b) echo "${PP:-512} ${TG:-128}" ;;
    qwen3-8b) echo "${PP:-256} ${TG:-64}" ;;
    *) echo "${PP:-128} ${TG:-32}" ;;
    esac
}

# llama.cpp: the prebuilt library and the source bundle of the same release come with npm node-llama-cpp
NLC=$DIR/node/node_modules
case $(uname -m) in x86_64) PLAT=linux-x64 ;; aarch64) PLAT=linux-arm64 ;; *) PLAT=none ;; esac
if command -v npm >/dev/null && [ ! -d "$NLC/node-llama-cpp" ]; then
    mkdir -p "$DIR/node"
    (cd "$DIR/node" && npm init -y >/dev/null && npm install --omit=optional --ignore-scripts --no-audit --no-fund \
        node-llama-cpp@3.22.1 "@node-llama-cpp/$PLAT@3.22.1" >/dev/null) || echo "note: npm could not install node-llama-cpp" >&2
fi
BINS=$NLC/@node-llama-cpp/$PLAT/bins/$PLAT
BUNDLE=$NLC/node-llama-cpp/llama/gitRelease.bundle
LLAMA=build/release/llamacpp-bench
build_llama() {
    [ -f "$BUNDLE" ] && [ -f "$BINS/libllama.v0.5.0.so" ] || return 1
    src=$(mktemp -d)
    rc=0
    # only the public headers of the bundled source are needed
    git clone -q --no-checkout "$BUNDLE" "$src/llama.cpp" &&
        git -C "$src/llama.cpp" checkout -q HEAD -- include ggml/include &&
        ${CC:-cc} -std=c11 -D_XOPEN_SOURCE=700 -O2 -Wall -Wextra -Werror -Wshadow \
            -I"$src/llama.cpp/include" -I"$src/llama.cpp/ggml/include" -DLLAMA_BIN_DIR="\"$BINS\"" \
            bench/llamacpp_bench.c -o "$LLAMA" -L"$BINS" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so \
            -l:libggml-base.so -Wl,-rpath,"$BINS" -lm || rc=1
    rm -rf "$src"
    return $rc
}
if build_llama; then HAVE_LLAMA=1; else
    HAVE_LLAMA=0
    echo "note: llama.cpp is unavailable (needs npm node-llama-cpp@3.22.1 with @node-llama-cpp/$PLAT in $DIR/node); trit alone" >&2
fi

# one JSON row per measurement: engine, shape, type, weight bytes per token, test (pp|tg), tokens, t/s
row() { python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l); e, s, t, b = sys.argv[1:5]
    if e == "trit": test, n = ("pp", r["n_prompt"]) if r["n_prompt"] else ("tg", r["n_gen"])
    else: test, n = r["test"][:2], int(r["test"][2:])
    print(json.dumps({"engine": e, "shape": s, "type": t, "bytes": int(b), "test": test, "n": n, "depth": r.get("n_depth", 0), "ts": r["avg_ts"], "sd": r["stddev_ts"]}))' "$@"; }

# ggml's threads wait for each other at every graph node by spinning, so when the cores are
# oversubscribed llama.cpp with THREADS >= 2 falls far below its idle speed (20x was seen); trit
# is hurt much less. Numbers from a busy machine say so.
LOAD0=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
BW0=$(build/release/bandwidth "$THREADS")
RESULTS=$DIR/results.jsonl
: > "$RESULTS"
for shape in $SHAPES; do
    arch=${shape%%-*}
    set -- $(sizes "$shape")
    pp=$1 tg=$2
    for type in $TYPES; do
        f=$DIR/$shape-$type.gguf
        # synth writes $f.tmp and renames it, so an interrupted run leaves no half model behind
        [ -f "$f" ] || $TRIT synth --arch "$arch" --shape "$shape" --type "$type" -o "$f" >&2
        # decode reads every tensor but the embedding table, unless the output head is that table
        bytes=$($TRIT bench -m "$f" -p 0 -n 1 -r 1 --no-warmup -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["model_bytes_per_token"])')
        for d in $DEPTHS; do
            $TRIT bench -m "$f" -p "$pp" -n "$tg" -d "$d" -r "$REPS" -t "$THREADS" -o jsonl |
                row trit "$shape" "$type" "$bytes" >> "$RESULTS"
            case $type in TQ1_0 | TQ2_0)
                [ "$HAVE_LLAMA" = 1 ] && "$LLAMA" -m "$f" -p "$pp" -n "$tg" -d "$d" -t "$THREADS" -r "$REPS" |
                    row llama.cpp "$shape" "$type" "$bytes" >> "$RESULTS" ;;
            esac
        done
    done
done
BW1=$(build/release/bandwidth "$THREADS")
LOAD1=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)

python3 - "$RESULTS" "$BW0" "$BW1" "$THREADS" "$REPS" "$LOAD0" "$LOAD1" "$(nproc)" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bw0, bw1, nth, reps = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
# the 1-minute load average at the end includes this run's own threads
cores, others = int(sys.argv[8]), max(float(sys.argv[6]), float(sys.argv[7]) - int(nth))
if others > cores * 0.5:
    print(f"WARNING: other work kept a load average of about {others:.1f} on {cores} cores: the machine was busy and"
          " llama.cpp with more than one thread suffers most, so these numbers and ratios are not trustworthy.\n")
bw = (bw0 + bw1) / 2
get = lambda e, s, t, test, d=0: next((r for r in rows if (r["engine"], r["shape"], r["type"], r["test"], r["depth"]) == (e, s, t, test, d)), None)
depths = sorted({r["depth"] for r in rows if r["depth"]})
shapes = list(dict.fromkeys(r["shape"] for r in rows))
types = lambda s: list(dict.fromkeys(r["type"] for r in rows if r["shape"] == s))
roofline = lambda g: g["ts"] * g["bytes"] / 1e9 / bw  # share of the measured bandwidth decode used
print(f"streaming read: {bw0:.1f} GB/s before, {bw1:.1f} GB/s after ({nth} threads); roofline = {(bw0 + bw1) / 2:.1f} GB/s / bytes per token; {reps} reps\n")
print("| shape | type | GB/token | tokens | trit pp t/s | trit tg t/s | tg / roofline | llama.cpp pp t/s | llama.cpp tg t/s | pp ratio | tg ratio | pp / tg |")
print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for s in shapes:
    for t in types(s):
        p, g = get("trit", s, t, "pp"), get("trit", s, t, "tg")
        lp, lg = get("llama.cpp", s, t, "pp"), get("llama.cpp", s, t, "tg")
        any_ = p or g
        n = "pp%d/tg%d" % (p["n"] if p else 0, g["n"] if g else 0)
        f = lambda r: "%.2f ± %.2f" % (r["ts"], r["sd"]) if r else "–"
        ratio = lambda a, b: "%.2f×" % (a["ts"] / b["ts"]) if a and b else "–"
        roof = "%.0f %%" % (roofline(g) * 100) if g else "–"
        print(f"| {s} | {t} | {any_['bytes'] / 1e9:.2f} | {n} | {f(p)} | {f(g)} | {roof} | {f(lp)} | {f(lg)} | {ratio(p, lp)} | {ratio(g, lg)} | {ratio(p, g)} |")

if depths:
    print("\nAt depth (tokens already in the context), against the same test from an empty context:\n")
    print("| shape | type | depth | trit pp t/s | trit tg t/s | pp / depth 0 | tg / depth 0 | llama.cpp pp t/s | llama.cpp tg t/s | pp ratio | tg ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for d in depths:
    for s in shapes:
        for t in types(s):
            p, g, p0, g0 = get("trit", s, t, "pp", d), get("trit", s, t, "tg", d), get("trit", s, t, "pp"), get("trit", s, t, "tg")
            lp, lg = get("llama.cpp", s, t, "pp", d), get("llama.cpp", s, t, "tg", d)
            f = lambda r: "%.2f ± %.2f" % (r["ts"], r["sd"]) if r else "–"
            ratio = lambda a, b: "%.2f×" % (a["ts"] / b["ts"]) if a and b else "–"
            print(f"| {s} | {t} | {d} | {f(p)} | {f(g)} | {ratio(p, p0)} | {ratio(g, g0)} | {f(lp)} | {f(lg)} | {ratio(p, lp)} | {ratio(g, lg)} |")

print("\nGoals (issue #4):")
def goal(what, value, target, unit):
    if value is None: print(f"  ----  {what}: not measured"); return
    print(f"  {'PASS' if value >= target else 'MISS'}  {what}: {value:.2f}{unit} (goal >= {target:g}{unit})")
for s in shapes:
    for t in ("PTQ1_0", "PQ2_0"):
        if s in ("qwen3-8b", "qwen35-27b") and t in types(s):
            g = get("trit", s, t, "tg")
            goal(f"{s} {t} decode / roofline", roofline(g) * 100 if g else None, 85, " %")
for s in shapes:
    a, b = get("trit", s, "TQ2_0", "tg"), get("llama.cpp", s, "TQ2_0", "tg")
    goal(f"{s} TQ2_0 tg trit / llama.cpp", a["ts"] / b["ts"] if a and b else None, 1.0, "×")
    a, b = get("trit", s, "TQ2_0", "pp"), get("llama.cpp", s, "TQ2_0", "pp")
    goal(f"{s} TQ2_0 pp trit / llama.cpp", a["ts"] / b["ts"] if a and b else None, 2.0, "×")
    a, b = get("trit", s, "PTQ1_0", "tg"), get("llama.cpp", s, "TQ2_0", "tg")
    goal(f"{s} trit PTQ1_0 tg / llama.cpp TQ2_0 tg", a["ts"] / b["ts"] if a and b else None, 1.15, "×")
for s in shapes:
    for t in types(s):
        p, g = get("trit", s, t, "pp"), get("trit", s, t, "tg")
        goal(f"{s} {t} trit pp / tg", p["ts"] / g["ts"] if p and g else None, 3.0, "×")
if depths:
    print("\nGoals at depth (issue #21):")
for d in depths:
    for s in shapes:
        a, b = get("trit", s, "TQ2_0", "tg", d), get("llama.cpp", s, "TQ2_0", "tg", d)
        goal(f"{s} TQ2_0 tg @ d{d} trit / llama.cpp", a["ts"] / b["ts"] if a and b else None, 1.5, "×")
        a, b = get("trit", s, "TQ2_0", "pp", d), get("llama.cpp", s, "TQ2_0", "pp", d)
        goal(f"{s} TQ2_0 pp @ d{d} trit / llama.cpp", a["ts"] / b["ts"] if a and b else None, 3.0, "×")
PY
