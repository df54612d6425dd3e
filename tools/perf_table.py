#!/usr/bin/env python3
"""Regenerates the tables of docs/performance.md: for each weight type and thread count, a
random-weight model of one shape is written with `spitectl mkmodel` and measured with
`spitectl bench --json` (prefill, decode, and the fractions of the machine's measured memory
bandwidth and peak FLOP/s, probed in the same run).

usage: tools/perf_table.py [--shape tinyllama-1.1b] [--types Q4_0,Q8_0,Q4_K_M,F16] [--threads 1,2]
                           [--vocab VOCAB.gguf] [--spitectl build/bin/spitectl] [-p 128] [-n 32] [-r 3]
Prints the Markdown table; --write docs/performance.md replaces the table between the markers.
"""
import argparse
import json
import os
import pathlib
import subprocess
import tempfile

BEGIN, END = "<!-- perf-table:begin -->", "<!-- perf-table:end -->"


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    shared = pathlib.Path(os.environ.get("SPITE_SHARED_DIR", root.parent / "shared"))
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="tinyllama-1.1b")
    ap.add_argument("--types", default="Q4_0,Q8_0,Q4_K_M,F16")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--vocab", default=str(shared / "models/vocab/ggml-vocab-llama-spm.gguf"))
    ap.add_argument("--spitectl", default=str(root / "build/bin/spitectl"))
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--write", default=None)
    a = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for t in a.types.split(","):
            model = os.path.join(tmp, f"{a.shape}-{t}.gguf")
            subprocess.run([a.spitectl, "mkmodel", "--shape", a.shape, "--type", t, "--vocab", a.vocab, "--out", model],
                           check=True, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            for th in a.threads.split(","):
                out = subprocess.run([a.spitectl, "bench", "--model", model, "-p", str(a.p), "-n", str(a.n), "-r", str(a.r),
                                      "-t", th, "--json"], check=True, capture_output=True, text=True).stdout
                r = json.loads(out)
                rows.append((t, th, r))
            os.remove(model)

    lines = [f"Shape `{a.shape}`, random weights from `spitectl mkmodel`; `spitectl bench -p {a.p} -n {a.n} -r {a.r}`.",
             "",
             "| type | threads | size | pp t/s | of peak FLOP/s | tg t/s | of bandwidth roofline | bandwidth GB/s | peak GFLOP/s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for t, th, r in rows:
        lines.append(
            f"| {t} | {th} | {r['weight_bytes'] / 2**20:.0f} MiB | {r['pp_tokens_per_s']['median']:.1f} | "
            f"{100 * r['prefill_peak_fraction']:.1f}% | {r['tg_tokens_per_s']['median']:.2f} | "
            f"{100 * r['decode_roofline_fraction']:.1f}% | {r['bandwidth_gb_per_s']:.1f} | {r['peak_gflop_per_s']:.0f} |")
    table = "\n".join(lines)
    if a.write:
        doc = pathlib.Path(a.write).read_text()
        start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
        pathlib.Path(a.write).write_text(doc[:start] + "\n" + table + "\n" + doc[end:])
    print(table)


if __name__ == "__main__":
    main()
