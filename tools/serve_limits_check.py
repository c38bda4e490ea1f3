#!/usr/bin/env python3
"""Hostile clients against a running server, and what they cost it.

Sends, N times each: a chunked body of --chunked_mb MB, a header block of
--header_mb MB, a completion whose prompt is --prompt_mb MB of text; then
--store_cycles connect-and-close cycles on the rendezvous store (its port:
`ss -ltnp` on rank 0). Prints each answer's status line (the 4xx and the
limit it names) and rank 0's resident memory (--pid) before and after each
group. A tool to run by hand (docs/tools.md; //tools:serve_bench in
docs/performance.md); not a test.

  tools/serve_limits_check.py --port=8000 --pid=$(pgrep -o -f 'worker.*--serve') --store_port=29500
"""

import argparse
import json
import select
import socket
import time


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def answer(sock, timeout=30):
    """The status line and the error message of the server's answer."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ConnectionError):
        pass
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b"\r\n")[0].decode(errors="replace") if head else "(no answer)"
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = body[:120].decode(errors="replace")
    return status, message


def send_until_answered(sock, first, more, limit_bytes):
    """Sends `first`, then `more` repeatedly (up to limit_bytes) until the server answers or closes."""
    sock.sendall(first)
    sent = len(first)
    sock.settimeout(10)
    while sent < limit_bytes:
        readable, _, _ = select.select([sock], [], [], 0)
        if readable:
            break
        try:
            sock.sendall(more)
        except (OSError, ConnectionError):
            break
        sent += len(more)
    return sent


def chunked_body(port, mb):
    with socket.create_connection(("127.0.0.1", port)) as s:
        chunk = b"%x\r\n%s\r\n" % (1 << 16, b"x" * (1 << 16))
        sent = send_until_answered(
            s, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n", chunk, mb << 20)
        return answer(s) + (sent,)


def header_block(port, mb):
    with socket.create_connection(("127.0.0.1", port)) as s:
        line = b"X-Filler: " + b"h" * 1000 + b"\r\n"
        sent = send_until_answered(s, b"GET /health HTTP/1.1\r\nHost: x\r\n", line, mb << 20)
        return answer(s) + (sent,)


def huge_prompt(port, mb, model):
    body = json.dumps({"model": model, "prompt": "word " * ((mb << 20) // 5), "max_tokens": 1}).encode()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return answer(s) + (len(body),)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True, help="rank 0's process")
    parser.add_argument("--store_port", type=int, default=0)
    parser.add_argument("--model", default="demo")
    parser.add_argument("--times", type=int, default=20)
    parser.add_argument("--chunked_mb", type=int, default=1024)
    parser.add_argument("--header_mb", type=int, default=64)
    parser.add_argument("--prompt_mb", type=int, default=7)
    parser.add_argument("--store_cycles", type=int, default=3000)
    args = parser.parse_args()

    attacks = [
        (f"{args.chunked_mb} MB chunked body", lambda: chunked_body(args.port, args.chunked_mb)),
        (f"{args.header_mb} MB header block", lambda: header_block(args.port, args.header_mb)),
        (f"{args.prompt_mb} MB prompt", lambda: huge_prompt(args.port, args.prompt_mb, args.model)),
    ]
    for name, attack in attacks:
        before = rss_mb(args.pid)
        start = time.monotonic()
        results = [attack() for _ in range(args.times)]
        statuses = sorted({status for status, _, _ in results})
        sent = max(s for _, _, s in results)
        print(f"{name} x{args.times}: {', '.join(statuses)}: \"{results[-1][1]}\"")
        print(f"    at most {sent / (1 << 20):.1f} MB sent before the answer; "
              f"{(time.monotonic() - start) / args.times * 1e3:.0f} ms each; "
              f"rank 0 RSS {before:.1f} -> {rss_mb(args.pid):.1f} MB")
    if args.store_port:
        before = rss_mb(args.pid)
        for _ in range(args.store_cycles):
            socket.create_connection(("127.0.0.1", args.store_port)).close()
        time.sleep(1)
        print(f"store: {args.store_cycles} connect-and-close cycles: rank 0 RSS {before:.1f} -> {rss_mb(args.pid):.1f} MB")


if __name__ == "__main__":
    main()
