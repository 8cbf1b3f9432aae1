#!/usr/bin/env python3
"""How many bytes the times of a trace carry, whatever codes them: the empirical entropy of
each event's gap (its start less the previous event's end in its thread, FORMAT.md §7.4) and
of its duration, given its call (kind and stack id), then given its call and the previous
one. Every thread stream of the trace is read through `tracefs cat`. This is the evidence
that lossless times cannot fit in a file that stores none (issue #14: trace size beside
heaptrack's): order-1 empirical entropy is not a bound for every coder (a richer context can
beat it, as tracefs's clock ticks do on tight loops), but a gap of several times is one no
context closes.
Usage: tests/bench/timing_entropy.py TRACEFS TRACE
"""
import collections
import json
import math
import subprocess
import sys


def entropy_bits(by_ctx):
    """Sum over contexts of n * H(values seen in that context), in bits."""
    bits = 0.0
    for c in by_ctx.values():
        n = sum(c.values())
        bits -= sum(v * math.log2(v / n) for v in c.values())
    return bits


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.rsplit("Usage: ", 1)[1].strip())
    tracefs, trace = sys.argv[1:]
    info = json.loads(subprocess.run([tracefs, "info", "--json", trace], check=True,
                                     capture_output=True, text=True).stdout)
    if (info.get("timing") or {}).get("mode", "none") == "none":
        sys.exit("timing_entropy: %s has no times" % trace)
    ctx = {k: (collections.defaultdict(collections.Counter),
               collections.defaultdict(collections.Counter)) for k in (1, 2)}
    n = 0
    for s in info["streams"]:
        path = "ranks/%d/threads/%d/events.jsonl" % (s["rank"], s["thread"])
        p = subprocess.Popen([tracefs, "cat", trace, path], stdout=subprocess.PIPE, text=True)
        prev_end, prev_call = None, ""
        for line in p.stdout:
            e = json.loads(line)
            call = "%s/%s" % (e["name"], e["args"].get("stack", ""))
            gap = e["ts"] - (e["ts"] if prev_end is None else prev_end)
            for k, key in ((1, call), (2, (call, prev_call))):
                ctx[k][0][key][gap] += 1
                ctx[k][1][key][e["dur"]] += 1
            prev_end, prev_call = e["ts"] + e["dur"], call
            n += 1
        if p.wait() != 0:
            sys.exit("timing_entropy: tracefs cat %s %s failed" % (trace, path))
    print("%s: %d events in %d streams" % (trace, n, len(info["streams"])))
    for k, what in ((1, "given the call"), (2, "given the call and the previous call")):
        g, d = entropy_bits(ctx[k][0]), entropy_bits(ctx[k][1])
        print("  %s: gaps %.2f bits/event, durations %.2f bits/event, times %.0f bytes"
              % (what, g / max(n, 1), d / max(n, 1), (g + d) / 8))


if __name__ == "__main__":
    main()
