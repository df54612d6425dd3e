#!/usr/bin/env python3
"""Check a kernel plug-in against spite's reference ops before opening a pull request.

    python3 tools/verify/verify.py build/kernels/<family>/<model>/<arch>/lib<...>.so [--quick]

Runs `spitectl verify LIB --json` (every kernel of the library over a sweep of shapes, odd
sizes included, each op with its tolerance on the normalised error), prints one line per case
and exits 1 if any case failed, 2 if the library could not be checked at all.
spitectl is taken from --spitectl, else $SPITECTL, else build/bin/spitectl of this checkout,
else PATH.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


def find_spitectl(given: str) -> str:
    if given:
        return given
    if os.environ.get("SPITECTL"):
        return os.environ["SPITECTL"]
    in_tree = Path(__file__).resolve().parents[2] / "build" / "bin" / "spitectl"
    if in_tree.is_file():
        return str(in_tree)
    found = shutil.which("spitectl")
    if found:
        return found
    sys.exit("verify.py: spitectl not found (build it, or set SPITECTL)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("library", help="the kernel library (.so) to check")
    parser.add_argument("--quick", action="store_true", help="only the small self-test shapes")
    parser.add_argument("--spitectl", default="", help="the spitectl program to use")
    opts = parser.parse_args()

    cmd = [find_spitectl(opts.spitectl), "verify", opts.library, "--json"] + (["--quick"] if opts.quick else [])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        sys.stderr.write(proc.stderr or proc.stdout)
        print(f"verify.py: {opts.library} could not be checked", file=sys.stderr)
        return 2

    print(f"{report['library']}  ({report['path']})")
    print(f"{'kernel':<24} {'op':<10} {'dtype':<8} {'shape':<14} {'error':>10} {'tolerance':>10}  result")
    for c in report["cases"]:
        error = c["error"] if isinstance(c["error"], str) else f"{c['error']:.3e}"
        note = f": {c['note']}" if c["note"] else ""
        print(f"{c['kernel']:<24} {c['op']:<10} {c['dtype']:<8} {c['shape']:<14} {error:>10} "
              f"{c['tolerance']:>10.1e}  {c['result']}{note}")
    print(f"{report['passed']} passed, {report['failed']} failed, {report['refused']} refused by probe")
    return 0 if report["failed"] == 0 and proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
