#!/usr/bin/env python3
"""Regenerates the tables of docs/performance.md: for each weight type and thread count, a
random-weight model of one shape is written with `spitectl mkmodel` and measured with
`spitectl bench --json` (prefill, decode, and the fractions of the machine's measured memory
bandwidth, peak FLOP/s and compute roofline, probed in the same run; decode also against a
plain read of the step's weights op by op through the same threads, which tells the kernels'
share of a gap from the memory's).

usage: tools/perf_table.py [--shape tinyllama-1.1b] [--types Q4_0,Q8_0,Q4_K_M,F16] [--threads 1,2]
                           [--vocab VOCAB.gguf] [--spitectl build/bin/spitectl] [-p 128] [-n 32] [-r 3]
                           [--parallel 2,4]
       tools/perf_table.py --kernels [--kernel-types Q4_0,...] [--threads 1,2]
Prints the Markdown table; --write docs/performance.md replaces the table between the markers.
With --parallel B[,B...] (default 2,4; 0 skips it) a second table gives, per type at the largest
thread count and each B, the total decode throughput of B sequences against one sequence timed
in the same repetitions (`bench --parallel B`: the median of the repetitions' ratios and their
range).
--kernels measures one matmul kernel per weight type instead (`spitectl bench --matmul`):
decode as one activation row against a 5632 x 2048 matrix (an FFN's down projection) taken in
turn from copies that together outgrow the caches (--cold: the fraction of the measured
bandwidth it streams from memory), prefill as 128 rows against a 2048 x 2048 matrix (GFLOP/s and
the fractions of the measured f32 FMA peak and, for quantized types, of the 8-bit multiply
peak); it has its own markers.
"""
import argparse
import json
import os
import pathlib
import subprocess
import tempfile

BEGIN, END = "<!-- perf-table:begin -->", "<!-- perf-table:end -->"
KBEGIN, KEND = "<!-- kernel-table:begin -->", "<!-- kernel-table:end -->"
KERNEL_TYPES = "Q4_0,Q4_1,Q5_0,Q5_1,Q8_0,Q2_K,Q3_K,Q4_K,Q5_K,Q6_K,IQ1_S,IQ1_M,IQ2_XXS,IQ2_XS,IQ2_S,IQ3_XXS,IQ3_S,IQ4_NL,IQ4_XS,TQ1_0,TQ2_0,F16,BF16"


def write_between(path, begin, end, table):
    """Replaces what lies between the markers `begin` and `end` of the file with `table`."""
    doc = pathlib.Path(path).read_text()
    start, stop = doc.index(begin) + len(begin), doc.index(end)
    pathlib.Path(path).write_text(doc[:start] + "\n" + table + "\n" + doc[stop:])


def bench_matmul(spitectl, spec, tokens, threads, reps, cold=False):
    out = subprocess.run([spitectl, "bench", "--matmul", spec, "--tokens", str(tokens), "-t", str(threads), "-r", str(reps),
                          "--json"] + (["--cold"] if cold else []), check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def percent(fraction):
    """A fraction as a whole percentage; a dash where there is none (float types have no 8-bit peak)."""
    return f"{100 * fraction:.0f}%" if fraction > 0 else "-"


def kernel_table(a):
    lines = ["`spitectl bench --matmul TYPE:5632:2048 --cold -t T` (decode: one activation row, each product on the next "
             "of copies of the matrix that together take 512 MiB or more, so weights come from memory) and "
             "`spitectl bench --matmul TYPE:2048:2048 --tokens 128 -t T` (prefill).",
             "",
             "| type | threads | decode ms | weights GB/s | of bandwidth | prefill GFLOP/s | of peak FLOP/s | of 8-bit peak |",
             "|---|---|---|---|---|---|---|---|"]
    for t in a.kernel_types.split(","):
        for th in a.threads.split(","):
            d = bench_matmul(a.spitectl, f"{t}:5632:2048", 1, th, a.r, cold=True)
            p = bench_matmul(a.spitectl, f"{t}:2048:2048", 128, th, a.r)
            lines.append(f"| {t} | {th} | {d['ms']['median']:.2f} | {d['weight_gb_per_s']:.1f} | "
                         f"{100 * d['bandwidth_fraction']:.0f}% | {p['gflop_per_s']:.1f} | {100 * p['peak_fraction']:.0f}% | "
                         f"{percent(p.get('int8_peak_fraction', 0))} |")
    return "\n".join(lines)


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
    ap.add_argument("--parallel", default="2,4")
    ap.add_argument("--write", default=None)
    ap.add_argument("--kernels", action="store_true")
    ap.add_argument("--kernel-types", default=KERNEL_TYPES)
    a = ap.parse_args()
    if a.kernels:
        table = kernel_table(a)
        if a.write:
            write_between(a.write, KBEGIN, KEND, table)
        print(table)
        return

    rows, batched = [], []
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
            for b in (int(v) for v in a.parallel.split(",")):
                if b < 2:
                    continue
                th = max(a.threads.split(","), key=int)
                out = subprocess.run([a.spitectl, "bench", "--model", model, "-p", "0", "-n", str(a.n), "-r", str(a.r), "-t", th,
                                      "--parallel", str(b), "--no-probes", "--json"],
                                     check=True, capture_output=True, text=True).stdout
                batched.append((t, th, b, json.loads(out)))
            os.remove(model)

    kernels = sorted({r.get("cpu_kernels", "") + (f" (decode fetch {r['cpu_decode_fetch']})" if r.get("cpu_decode_fetch") else "")
                      for _, _, r in rows} - {""})
    made_by = f" CPU kernels: {', '.join(kernels)}." if kernels else ""
    lines = [f"Shape `{a.shape}`, random weights from `spitectl mkmodel`; `spitectl bench -p {a.p} -n {a.n} -r {a.r}`.{made_by}",
             "",
             "| type | threads | size | pp t/s | of peak FLOP/s | of compute roofline | tg t/s | of bandwidth roofline | "
             "of plain read | bandwidth GB/s | plain read GB/s | peak GFLOP/s | 8-bit peak Gop/s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for t, th, r in rows:
        lines.append(
            f"| {t} | {th} | {r['weight_bytes'] / 2**20:.0f} MiB | {r['pp_tokens_per_s']['median']:.1f} | "
            f"{100 * r['prefill_peak_fraction']:.1f}% | {100 * r.get('prefill_roofline_fraction', 0):.1f}% | "
            f"{r['tg_tokens_per_s']['median']:.2f} | {100 * r['decode_roofline_fraction']:.1f}% | "
            f"{100 * r.get('decode_of_token_read', 0):.1f}% | {r['bandwidth_gb_per_s']:.1f} | "
            f"{r.get('token_read_gb_per_s', {}).get('median', 0):.1f} | "
            f"{r['peak_gflop_per_s']:.0f} | {r.get('peak_int8_gop_per_s', 0):.0f} |")
    if batched:
        lines += ["",
                  "B sequences decoding together against one alone, timed in the same repetitions: "
                  f"`spitectl bench -p 0 -n {a.n} -r {a.r} --parallel B`.",
                  "",
                  "| type | threads | B | tg t/s, 1 sequence | tg t/s, B sequences in total | ratio (by repetition) |",
                  "|---|---|---|---|---|---|"]
        for t, th, b, r in batched:
            runs = r["parallel_scaling_runs"]
            lines.append(f"| {t} | {th} | {b} | {r['single_sequence_tokens_per_s']['median']:.2f} | "
                         f"{r['tg_tokens_per_s']['median']:.2f} | {r['parallel_scaling']:.2f}x "
                         f"({runs['min']:.2f}-{runs['max']:.2f}x) |")
    table = "\n".join(lines)
    if a.write:
        write_between(a.write, BEGIN, END, table)
    print(table)


if __name__ == "__main__":
    main()
