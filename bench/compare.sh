#!/bin/sh
# trit against mainline llama.cpp and the memory-bandwidth roofline, in one run:
#  1. streaming-read bandwidth (before and after, since it drifts on shared machines);
#  2. `trit synth` models of real shapes (cached in $BENCH_DIR);
#  3. `trit bench` pp/tg on each, and llama.cpp v0.5.0 (npm node-llama-cpp, prebuilt CPU build) on
#     the TQ1_0/TQ2_0 files it can read;
#  4. a table of t/s, decode / roofline and trit / llama.cpp ratios.
# Environment: BENCH_DIR (default /tmp/trit-bench), SHAPES, TYPES, THREADS (default: cores),
# PP (512), TG (128), REPS (3). Needs node/npm for the llama.cpp side (skipped without them).
set -eu
cd "$(dirname "$0")/.."
DIR=${BENCH_DIR:-/tmp/trit-bench}
SHAPES=${SHAPES:-"qwen3-1.7b qwen3-8b qwen35-27b"}
TYPES=${TYPES:-"PTQ1_0 PQ2_0 TQ2_0"}
THREADS=${THREADS:-$(nproc)}
PP=${PP:-512} TG=${TG:-128} REPS=${REPS:-3}
TRIT=build/release/trit
mkdir -p "$DIR"
make -s -j2 all build/release/bandwidth

if command -v npm >/dev/null && [ ! -d "$DIR/node/node_modules/node-llama-cpp" ]; then
    mkdir -p "$DIR/node"
    (cd "$DIR/node" && npm init -y >/dev/null && npm install --omit=optional --ignore-scripts --no-audit --no-fund \
        node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1 >/dev/null) || echo "note: node-llama-cpp unavailable" >&2
fi
LLAMA=""
[ -d "$DIR/node/node_modules/node-llama-cpp" ] && cp bench/llamacpp.mjs "$DIR/node/" && LLAMA="$DIR/node/llamacpp.mjs"

BW0=$(build/release/bandwidth "$THREADS")
RESULTS="$DIR/results.jsonl"
: > "$RESULTS"
for shape in $SHAPES; do
    arch=${shape%%-*}
    for type in $TYPES; do
        f="$DIR/$shape-$type.gguf"
        [ -f "$f" ] || $TRIT synth --arch "$arch" --shape "$shape" --type "$type" -o "$f" >&2
        # decode reads every tensor but the embedding table, unless the output head is that table
        bytes=$($TRIT bench -m "$f" -p 0 -n 1 -r 1 --no-warmup -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["model_bytes_per_token"])')
        $TRIT bench -m "$f" -p "$PP" -n "$TG" -r "$REPS" -t "$THREADS" -o jsonl |
            python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l); print(json.dumps({"engine": "trit", "shape": sys.argv[1], "type": sys.argv[2], "bytes": int(sys.argv[3]),
        "test": ("pp%d" % r["n_prompt"]) if r["n_prompt"] else ("tg%d" % r["n_gen"]), "ts": r["avg_ts"], "sd": r["stddev_ts"]}))' \
            "$shape" "$type" "$bytes" >> "$RESULTS"
        case "$type" in TQ1_0|TQ2_0)
            [ -n "$LLAMA" ] && (cd "$DIR/node" && node llamacpp.mjs "$f" -p "$PP" -n "$TG" -t "$THREADS" -r "$REPS") |
                python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l); print(json.dumps({"engine": "llama.cpp", "shape": sys.argv[1], "type": sys.argv[2], "bytes": int(sys.argv[3]),
        "test": r["test"], "ts": r["avg_ts"], "sd": r["stddev_ts"]}))' "$shape" "$type" "$bytes" >> "$RESULTS" ;;
        esac
    done
done
BW1=$(build/release/bandwidth "$THREADS")

python3 - "$RESULTS" "$BW0" "$BW1" "$PP" "$TG" "$THREADS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bw0, bw1, pp, tg, nth = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
bw = (bw0 + bw1) / 2
get = lambda e, s, t, test: next((r for r in rows if (r["engine"], r["shape"], r["type"], r["test"]) == (e, s, t, test)), None)
print(f"streaming read: {bw0:.1f} GB/s before, {bw1:.1f} GB/s after ({nth} threads); roofline = bytes per token / {bw:.1f} GB/s\n")
print("| shape | type | GB/token | trit pp%s | trit tg%s | tg / roofline | llama.cpp pp%s | llama.cpp tg%s | pp ratio | tg ratio | pp / tg |" % (pp, tg, pp, tg))
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for s in dict.fromkeys(r["shape"] for r in rows):
    for t in dict.fromkeys(r["type"] for r in rows if r["shape"] == s):
        p, g = get("trit", s, t, "pp" + pp), get("trit", s, t, "tg" + tg)
        lp, lg = get("llama.cpp", s, t, "pp" + pp), get("llama.cpp", s, t, "tg" + tg)
        gb = (p or g)["bytes"] / 1e9
        roof = bw / gb
        f = lambda r: "%.2f ± %.2f" % (r["ts"], r["sd"]) if r else "–"
        ratio = lambda a, b: "%.2f×" % (a["ts"] / b["ts"]) if a and b else "–"
        print(f"| {s} | {t} | {gb:.2f} | {f(p)} | {f(g)} | {(g['ts'] / roof * 100 if g else 0):.0f} % | {f(lp)} | {f(lg)} | {ratio(p, lp)} | {ratio(g, lg)} | {ratio(p, g)} |")
# the smaller format must pay off: trit on PTQ1_0 against llama.cpp on TQ2_0 of the same shape
for s in dict.fromkeys(r["shape"] for r in rows):
    a, b = get("trit", s, "PTQ1_0", "tg" + tg), get("llama.cpp", s, "TQ2_0", "tg" + tg)
    if a and b: print(f"\n{s}: trit PTQ1_0 tg / llama.cpp TQ2_0 tg = {a['ts'] / b['ts']:.2f}×")
PY
