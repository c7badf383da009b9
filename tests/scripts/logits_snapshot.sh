#!/bin/sh
# Writes `trit logits` for every golden model (and the stories260K family) into DIR, under each
# kernel set this CPU has, packed and unpacked, f16 and f32 KV; `--check REF` then compares DIR
# with an earlier snapshot byte for byte. Used to show that a change leaves the arithmetic alone.
#   tests/scripts/logits_snapshot.sh DIR [--check REFDIR]
set -eu
out=$1
ref=${3:-}
bin=${TRIT_BIN:-build/release/trit}
shared=${TRIT_SHARED:-../shared}
mkdir -p "$out"
tokens=1,15,27,300,42,7,99,100,3,5,200,17,64,128,255,2
for m in "$shared"/golden/models/*.gguf "$shared"/data/models/stories260K*.gguf; do
    [ -f "$m" ] || { echo "missing $m" >&2; exit 1; }
    name=$(basename "$m" .gguf)
    for set in scalar avx2 avxvnni avx512 amx neon; do
        for flags in "" "-nr" "-ctk f32 -ctv f32"; do
            tag=$(echo "$name.$set$flags" | tr -d ' ')
            TRIT_CPU=$set "$bin" logits -m "$m" --tokens $tokens -o "$out/$tag.f32" $flags \
                >/dev/null 2>"$out/$tag.err" || { rm -f "$out/$tag.f32"; continue; }
            # a set this CPU lacks falls back to another: not a run of its own
            grep -q "not available" "$out/$tag.err" && rm -f "$out/$tag.f32"
            rm -f "$out/$tag.err"
        done
    done
done
n=$(ls "$out"/*.f32 | wc -l)
echo "$n logit files in $out"
if [ -n "$ref" ]; then
    bad=0
    for f in "$ref"/*.f32; do
        g="$out/$(basename "$f")"
        cmp -s "$f" "$g" || { echo "DIFFERS: $(basename "$f")"; bad=$((bad + 1)); }
    done
    [ "$(ls "$ref"/*.f32 | wc -l)" -eq "$n" ] || { echo "file counts differ"; bad=$((bad + 1)); }
    [ $bad -eq 0 ] && echo "byte-identical to $ref" || { echo "$bad differ"; exit 1; }
fi
