#!/bin/sh
# bench/gpu.sh: the Vulkan backend on a real GPU (the device tool's machine), from a tree whose
# build/release was built here (carry it, and .gl with the loader's .deb files when the machine
# has no libvulkan: see the device tool's README). It runs the Vulkan tests on the device, the
# device's read bandwidth with the matrix-vector kernel of each type against it (vk-bench), and
# synthetic qwen3-8b and qwen35-27b in PTQ1_0, PQ2_0 and TQ2_0 at -ngl 99: pp512 and tg128,
# beside the model's bytes a token reads, so decode is a fraction of the measured bandwidth.
# SHAPES (arch:shape ...) and TYPES narrow it to fit the device time (the 27B files take ~7 GB
# each to write); writes $OUT/gpu.md when OUT is set.
# SHAPES=qwen3:tiny PROBE_MIB=64 runs it in a minute on lavapipe, to check the script.
set -eu
cd "$(dirname "$0")/.."
B=${BUILD:-build/release}
SHAPES=${SHAPES:-qwen3:qwen3-8b qwen35:qwen35-27b}
TYPES=${TYPES:-PTQ1_0 PQ2_0 TQ2_0}
PROBE_MIB=${PROBE_MIB:-4096}
REPORT=${OUT:-/tmp}/gpu.md
if ! ldconfig -p | grep -q 'libvulkan\.so\.1'; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$ICD" ]; then export VK_DRIVER_FILES="$ICD"; fi
{
    echo "# trit on $("$B/trit" run --list-devices 2>&1 | head -1), $(date -u +%Y-%m-%d)"
    echo
    echo '## Vulkan tests on the device'
    echo '```'
    TRIT_SHARED=${SHARED:-../shared} "$B/trit-tests" vulkan 2>&1 | tail -12
    echo '```'
    echo
    echo "## Read bandwidth and matrix x vector (vk-bench, $PROBE_MIB MiB probe)"
    "$B/vk-bench" "$PROBE_MIB"
    for as in $SHAPES; do
        arch=${as%%:*} shape=${as#*:}
        echo
        echo "## Synthetic $shape at -ngl 99 (trit bench, 3 runs)"
        for t in $TYPES; do
            f=/tmp/trit-gpu-$shape-$t.gguf
            [ -f "$f" ] || "$B/trit" synth --arch "$arch" --shape "$shape" --type "$t" -o "$f" >/dev/null 2>&1
            "$B/trit" bench -m "$f" -ngl 99 -p 512 -n 128 -r 3 -o md | grep -v '^build:'
            "$B/trit" bench -m "$f" -ngl 99 -p 0 -n 128 -r 3 -o json |
                python3 -c 'import json, sys
r = json.load(sys.stdin)[0]
b = r["model_bytes_per_token"]
print("%s: %.3f GB a token, tg128 %.1f t/s = %.1f GB/s of weights" % (r["model_type"], b / 1e9, r["avg_ts"], r["avg_ts"] * b / 1e9))'
            rm -f "$f"
        done
    done
} 2>&1 | tee "$REPORT"
