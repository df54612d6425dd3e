#!/usr/bin/env python3
"""Benchmark of spited's HTTP path (not a test).

1. Added latency: the median wall time of sequential 1-token completions over HTTP (one
   keep-alive connection) minus the same request over the control socket, which runs the same
   engine path without HTTP.
2. Concurrency: N clients stream chat completions at once; every one must complete. Reports
   tokens/s per client and in total, time to first token and inter-token latency (p50/p99).

usage: tools/bench_http.py --socket CTL.sock [--model NAME] [--clients 64] [--tokens 64] [--json]
The HTTP address is taken from `spitectl status --json` unless --http HOST:PORT is given.
"""
import argparse
import json
import socket
import statistics
import subprocess
import threading
import time


def http_request(sock, host, path, body):
    data = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode()
    sock.sendall(head + data)


def read_response(f):
    status = f.readline()
    headers = {}
    while True:
        line = f.readline().strip()
        if not line:
            break
        k, _, v = line.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        return status, f.read(int(headers["content-length"]))
    body = b""
    while True:  # chunked
        size = int(f.readline().strip(), 16)
        if size == 0:
            f.readline()
            return status, body
        body += f.read(size)
        f.readline()


def control_call(path, req):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    f = s.makefile("rb")
    s.sendall((json.dumps(dict(req, id=1)) + "\n").encode())
    while True:
        j = json.loads(f.readline())
        if j.get("event") in ("result", "error"):
            s.close()
            return j


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] if v else 0.0


def added_latency(host, port, ctl, model, n):
    prompt = {"model": model, "prompt": "Once", "max_tokens": 1, "temperature": 0}
    s = socket.create_connection((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = s.makefile("rb")
    http_times, ctl_times = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        http_request(s, host, "/v1/completions", prompt)
        read_response(f)
        http_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        control_call(ctl, {"cmd": "run", "model": model, "prompt": "Once", "n_predict": 1, "temperature": 0})
        ctl_times.append(time.perf_counter() - t0)
    s.close()
    return statistics.median(http_times), statistics.median(ctl_times)


def stream_client(host, port, model, tokens, out):
    body = {"model": model, "messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": tokens,
            "stream": True, "temperature": 0.8, "ignore_eos": True}
    t0 = time.perf_counter()
    stamps = []
    s = socket.create_connection((host, port))
    f = s.makefile("rb")
    http_request(s, host, "/v1/chat/completions", body)
    status = f.readline()
    while f.readline().strip():
        pass
    done = False
    while not done:
        size = int(f.readline().strip(), 16)
        if size == 0:
            break
        chunk = f.read(size)
        f.readline()
        for line in chunk.split(b"\n"):
            if line.startswith(b"data: [DONE]"):
                done = True
            elif line.startswith(b"data: "):
                j = json.loads(line[6:])
                if j.get("choices") and j["choices"][0].get("delta", {}).get("content"):
                    stamps.append(time.perf_counter())
    s.close()
    out.append({"ok": status.startswith(b"HTTP/1.1 200") and done, "start": t0, "stamps": stamps})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--model", default=None)
    ap.add_argument("--http", default=None)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--spitectl", default="build/bin/spitectl")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    status = json.loads(subprocess.check_output([a.spitectl, "status", "--socket", a.socket, "--json"]))
    host, _, port = (a.http or status["http"]).rpartition(":")
    model = a.model or status["models"][0]["name"]

    http_s, ctl_s = added_latency(host, int(port), a.socket, model, a.requests)
    results = []
    threads = [threading.Thread(target=stream_client, args=(host, int(port), model, a.tokens, results))
               for _ in range(a.clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ttft = [r["stamps"][0] - r["start"] for r in results if r["stamps"]]
    itl = [b - a_ for r in results for a_, b in zip(r["stamps"], r["stamps"][1:])]
    per_client = [len(r["stamps"]) / (r["stamps"][-1] - r["start"]) for r in results if len(r["stamps"]) > 1]
    report = {
        "model": model,
        "one_token_http_ms": http_s * 1e3,
        "one_token_control_ms": ctl_s * 1e3,
        "added_http_latency_ms": (http_s - ctl_s) * 1e3,
        "clients": a.clients,
        "completed": sum(1 for r in results if r["ok"]),
        "total_tokens_per_s": sum(len(r["stamps"]) for r in results) / wall,
        "per_client_tokens_per_s_median": statistics.median(per_client) if per_client else 0.0,
        "ttft_ms_p50": pct(ttft, 50) * 1e3,
        "ttft_ms_p99": pct(ttft, 99) * 1e3,
        "inter_token_ms_p50": pct(itl, 50) * 1e3,
        "inter_token_ms_p99": pct(itl, 99) * 1e3,
    }
    if a.json:
        print(json.dumps(report, indent=2))
    else:
        for k, v in report.items():
            print(f"{k:32} {v:.3f}" if isinstance(v, float) else f"{k:32} {v}")
    return 0 if report["completed"] == a.clients else 1


if __name__ == "__main__":
    raise SystemExit(main())
