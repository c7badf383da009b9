#!/usr/bin/env python3
"""Writes the GGUF fuzzer's seeds from the golden models (make fuzz-gguf runs it): each keeps
its file's keys (arrays cut to 8 elements), its three smallest tensors and its smallest quantized
one, so that a seed is a few kilobytes and every input the fuzzer makes from it stays small.
Usage: python3 fuzz/gguf_seeds.py ../shared OUTDIR"""
import os, struct, sys

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value types (8, 9: string, array)


def read_value(b, o, t):
    if t == 8:
        n, = struct.unpack_from('<Q', b, o)
        return b[o:o + 8 + n], o + 8 + n
    if t == 9:
        et, n = struct.unpack_from('<IQ', b, o)
        start, p = o, o + 12
        kept = b''
        for i in range(n):
            v, p2 = read_value(b, p, et)
            if i < 8:
                kept += v
            p = p2
        return struct.pack('<IQ', et, min(n, 8)) + kept, p
    return b[o:o + SIZES[t]], o + SIZES[t]


def seed(path, out):
    b = open(path, 'rb').read()
    magic, ver, nt, nkv = struct.unpack_from('<4sIQQ', b, 0)
    o, kvs, align = 24, [], 32
    for _ in range(nkv):
        kl, = struct.unpack_from('<Q', b, o)
        key = b[o + 8:o + 8 + kl]
        t, = struct.unpack_from('<I', b, o + 8 + kl)
        v, o2 = read_value(b, o + 12 + kl, t)
        if key == b'general.alignment':
            align, = struct.unpack_from('<I', v)
        kvs.append(b[o:o + 12 + kl] + v)
        o = o2
    ts = []
    for _ in range(nt):
        nl, = struct.unpack_from('<Q', b, o)
        name = b[o + 8:o + 8 + nl]
        nd, = struct.unpack_from('<I', b, o + 8 + nl)
        dims = b[o + 12 + nl:o + 12 + nl + 8 * nd]
        typ, off = struct.unpack_from('<IQ', b, o + 12 + nl + 8 * nd)
        ts.append([name, nd, dims, typ, off])
        o += 12 + nl + 8 * nd + 12
    data0 = (o + align - 1) // align * align
    offs = sorted(t[4] for t in ts) + [len(b) - data0]
    size = {t[4]: offs[offs.index(t[4]) + 1] - t[4] for t in ts}
    by_size = sorted(ts, key=lambda t: size[t[4]])
    quant = [t for t in by_size if t[3] not in (0, 1)][:1]  # and the smallest quantized one
    keep = [t for t in by_size if t not in quant][:4 - len(quant)] + quant
    head = struct.pack('<4sIQQ', magic, ver, len(keep), len(kvs)) + b''.join(kvs)
    data, infos = b'', b''
    for name, nd, dims, typ, off in keep:
        infos += struct.pack('<Q', len(name)) + name + struct.pack('<I', nd) + dims + struct.pack('<IQ', typ, len(data))
        data += b[data0 + off:data0 + off + size[off]]
        data += b'\0' * (-len(data) % align)
    head += infos
    head += b'\0' * (-len(head) % align)
    open(out, 'wb').write(head + data)


shared, dst = sys.argv[1], sys.argv[2]
golden = os.path.join(shared, 'golden', 'models')
for f in sorted(os.listdir(golden)):
    if f.endswith('.gguf') and (f.startswith('tiny-qwen35') or f.startswith('tiny-llama') or 'hadamard' in f):
        seed(os.path.join(golden, f), os.path.join(dst, f))
