#!/usr/bin/env python3
"""Render a zerotrain --trace JSON (Chrome trace-event format) as a Perfetto-like PNG.

    python3 benchmarks/trace/render_trace.py out/trace/trace.json --steps 3:4 --out trace.png

One row per rank x lane (compute, comm, copy), in the order the trace names them; every "X"
event is a box on its row, coloured by kind (forward unit, backward unit, optimizer step, stall,
collective op), labelled with its name where the label fits; slices nested in another slice of
the same lane (the `wait comm` stalls inside a unit) are drawn one level lower in the row;
flow events ("s" -> "f", the `grads ready` arrows from the backward that completes a bucket to
the bucket's reduction) are arrows. The time axis is in ms from the first slice shown.

Exit codes: 0 written; 2 bad input (unreadable or malformed trace, bad --steps, no slice in
the selected steps) or matplotlib missing — one message on stderr, never a traceback.
Real traces open in https://ui.perfetto.dev (Open trace file) or chrome://tracing (Load).
"""
import argparse
import json
import os
import sys

LANE_ORDER = {"compute": 0, "comm": 1, "copy": 2}

# Colours by kind, chosen so that adjacent kinds differ (tab10 / tab20 shades).
COLOURS = {
    "fwd": "#4e79a7", "bwd": "#f28e2b", "step": "#59a14f", "wait": "#e15759",
    "reduce_scatter": "#b07aa1", "all_reduce": "#9c755f", "all_gather": "#76b7b2",
    "broadcast": "#edc948", "barrier": "#bab0ac", "d2h": "#ff9da7", "h2d": "#8cd17d", "other": "#bab0ac",
}


class BadInput(Exception):
    """A problem with the user's input; main() prints it and exits 2."""


def parse_steps(text):
    """'3' -> (3, 3); '3:4' -> (3, 4); '3:' -> (3, None); ':4' -> (1, 4). 1-based, inclusive."""
    try:
        if ":" not in text:
            first = last = int(text)
        else:
            a, b = text.split(":", 1)
            first = int(a) if a else 1
            last = int(b) if b else None
    except ValueError:
        raise BadInput("--steps '%s': expected FIRST:LAST, 1-based steps (e.g. 3:4, 3: or 3)" % text)
    if first < 1 or (last is not None and last < first):
        raise BadInput("--steps '%s': expected 1 <= FIRST <= LAST" % text)
    return first, last


def load_trace(path):
    """The trace's events: a list of dicts. Raises BadInput naming `path` when it is not a trace."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise BadInput("%s: cannot read the trace (%s)" % (path, e.strerror or e))
    except (ValueError, UnicodeDecodeError) as e:
        raise BadInput("%s: not valid JSON (%s)" % (path, e))
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise BadInput("%s: expected a Chrome trace ({\"traceEvents\": [...]} or a list of events)" % path)
    for i, e in enumerate(events):
        if not isinstance(e, dict) or not isinstance(e.get("ph"), str):
            raise BadInput("%s: event %d is not a trace event (an object with a \"ph\" field)" % (path, i))
        need = {"X": ("name", "ts", "dur", "pid", "tid"), "s": ("id", "ts", "pid", "tid"),
                "f": ("id", "ts", "pid", "tid")}.get(e["ph"], ())
        for k in need:
            if k not in e:
                raise BadInput("%s: event %d (ph %s) has no \"%s\"" % (path, i, e["ph"], k))
        for k in ("ts", "dur"):
            if k in need and (isinstance(e[k], bool) or not isinstance(e[k], (int, float))):
                raise BadInput("%s: event %d: \"%s\" must be a number (µs)" % (path, i, k))
    return events


def kind_of(e):
    """Colour key of a slice: fwd / bwd / step / wait, or the collective's or copy's op (d2h, h2d)."""
    name = e["name"]
    op = (e.get("args") or {}).get("op")
    if op:
        return op if op in COLOURS else "other"
    for k in ("fwd", "bwd", "step", "wait"):
        if name.startswith(k):
            return k
    return "other"


def select(events, steps):
    """Slices (X) of the selected steps, and the flows whose two ends both lie on one of those
    slices (same rank and lane, within its time span; 1 µs slack for the rounding of ts)."""
    first, last = steps if steps else (1, None)

    def wanted(e):
        s = (e.get("args") or {}).get("step")
        if s is None:
            return steps is None
        return s >= first and (last is None or s <= last)

    slices = [e for e in events if e["ph"] == "X" and wanted(e)]
    spans = {}
    for e in slices:
        spans.setdefault((e["pid"], e["tid"]), []).append((e["ts"] - 1, e["ts"] + e["dur"] + 1))

    def on_a_slice(e):
        return any(a <= e["ts"] <= b for a, b in spans.get((e["pid"], e["tid"]), ()))

    ends = {}
    for e in events:
        if e["ph"] in ("s", "f") and on_a_slice(e):
            ends.setdefault((e["pid"], e["id"]), {})[e["ph"]] = e
    flows = [(d["s"], d["f"]) for d in ends.values() if "s" in d and "f" in d]
    return slices, flows


def rows_of(events, slices):
    """[(pid, tid, label)] in display order: ranks ascending, lanes compute, comm, copy."""
    pname, tname = {}, {}
    for e in events:
        if e["ph"] == "M" and e.get("name") == "process_name":
            pname[e["pid"]] = (e.get("args") or {}).get("name", "pid %s" % e["pid"])
        if e["ph"] == "M" and e.get("name") == "thread_name":
            tname[(e["pid"], e.get("tid"))] = (e.get("args") or {}).get("name", "tid %s" % e.get("tid"))
    keys = set(tname) | {(e["pid"], e["tid"]) for e in slices}
    def key(k):  # integer pids (zerotrain: the rank) first, by value; lanes in LANE_ORDER
        pid = (0, k[0], "") if isinstance(k[0], int) else (1, 0, str(k[0]))
        return pid + (LANE_ORDER.get(tname.get(k, ""), 9), str(k[1]))
    order = sorted(keys, key=key)
    return [(p, t, "%s  %s" % (pname.get(p, "pid %s" % p), tname.get((p, t), "tid %s" % t))) for p, t in order]


def depths(slices):
    """Nesting depth of each slice within its lane (0: top level), by a stack over start times,
    and the set of slices that enclose another."""
    out, parents = {}, set()
    by_lane = {}
    for i, e in enumerate(slices):
        by_lane.setdefault((e["pid"], e["tid"]), []).append(i)
    for idx in by_lane.values():
        idx.sort(key=lambda i: (slices[i]["ts"], -slices[i]["dur"]))
        stack = []  # (end time, index) of the enclosing slices
        for i in idx:
            e = slices[i]
            while stack and stack[-1][0] <= e["ts"]:
                stack.pop()
            out[i] = len(stack)
            if stack:
                parents.add(stack[-1][1])
            stack.append((e["ts"] + e["dur"], i))
    return out, parents


def select_or_fail(path, events, steps):
    """select(), raising BadInput naming `path` and the steps it holds when no slice is selected."""
    slices, flows = select(events, steps)
    if not slices:
        raise BadInput("%s: no slice in steps %s (the trace holds steps %s)" % (
            path, "%d:%s" % (steps[0], steps[1] or "") if steps else "any",
            sorted({(e.get("args") or {}).get("step") for e in events if e["ph"] == "X"} - {None}) or "none"))
    return slices, flows


def render(path, events, steps, out, width_in, dpi):
    slices, flows = select_or_fail(path, events, steps)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        raise BadInput("matplotlib not found: install it (apt-get install python3-matplotlib) to render %s" % path)

    rows = rows_of(events, slices)
    row_of = {(p, t): i for i, (p, t, _) in enumerate(rows)}
    depth, parents = depths(slices)
    t0 = min(e["ts"] for e in slices)
    t1 = max(e["ts"] + e["dur"] for e in slices)
    span_ms = max((t1 - t0) / 1e3, 1e-3)

    fig_h = 1.0 + 0.55 * len(rows)
    fig, ax = plt.subplots(figsize=(width_in, fig_h), dpi=dpi)
    px_per_ms = width_in * dpi * 0.82 / span_ms  # the axes take about 82% of the width
    row_h, level_h = 0.8, 0.28  # a row is 0.8 high; each nesting level starts this much lower
    for i, e in enumerate(slices):
        r = row_of[(e["pid"], e["tid"])]
        d = depth[i]
        x = (e["ts"] - t0) / 1e3
        w = e["dur"] / 1e3
        h = row_h - level_h * d
        y = r - row_h / 2 + level_h * d  # y grows downwards (inverted axis): nested boxes sit lower
        ax.add_patch(plt.Rectangle((x, y), max(w, span_ms * 1e-4), h, facecolor=COLOURS[kind_of(e)],
                                   edgecolor="white", linewidth=0.4))
        label = e["name"]
        fits = len(label) * 5.2 < w * px_per_ms - 2  # ~5.2 px per character at fontsize 6.5
        if not fits and (e.get("args") or {}).get("op"):
            label = (e["args"].get("label") or "")  # the bucket alone ("b4") when the op does not fit
            fits = 0 < len(label) and len(label) * 5.2 < w * px_per_ms - 2
        if fits:  # a slice with nested ones is labelled in its top band, above them
            ty = y + level_h / 2 if i in parents else y + h / 2
            ax.text(x + w / 2, ty, label, ha="center", va="center", fontsize=6.5, color="white", clip_on=True)
    for s, f in flows:
        if (s["pid"], s["tid"]) not in row_of or (f["pid"], f["tid"]) not in row_of:
            continue
        xs, ys = (s["ts"] - t0) / 1e3, row_of[(s["pid"], s["tid"])] + row_h / 2
        xf, yf = (f["ts"] - t0) / 1e3, row_of[(f["pid"], f["tid"])] - row_h / 2
        ax.annotate("", xy=(xf, yf), xytext=(xs, ys),
                    arrowprops={"arrowstyle": "->", "color": "#333333", "lw": 0.7, "shrinkA": 0, "shrinkB": 0})
    ax.set_ylim(len(rows) - 0.4, -0.6)
    ax.set_xlim(-span_ms * 0.01, span_ms * 1.01)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([label for _, _, label in rows], fontsize=8)
    ax.set_xlabel("time since the first slice shown (ms)", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(axis="x", color="#dddddd", linewidth=0.5)
    ax.set_axisbelow(True)
    for r in range(1, len(rows)):
        ax.axhline(r - 0.5, color="#cccccc", linewidth=0.5)
    shown = sorted({kind_of(e) for e in slices}, key=list(COLOURS).index)
    names = {"fwd": "forward unit", "bwd": "backward unit", "step": "norm + optimizer + param sync",
             "wait": "compute stalled on comm/copy", "d2h": "gradients down (copy)", "h2d": "parameters up (copy)"}
    ax.legend(handles=[Patch(color=COLOURS[k], label=names.get(k, k)) for k in shown] +
              ([Patch(color="#333333", label="→ grads ready (flow)")] if flows else []),
              loc="upper center", bbox_to_anchor=(0.5, -0.09 - 0.25 / fig_h), ncol=min(len(shown) + 1, 6),
              fontsize=7, frameon=False)
    step_set = sorted({(e.get("args") or {}).get("step") for e in slices} - {None})
    ax.set_title("%s — steps %s, %.1f ms" % (os.path.basename(path), ",".join(map(str, step_set)) or "all", span_ms),
                 fontsize=9)
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=dpi)
    except OSError as e:
        raise BadInput("--out %s: cannot write the PNG (%s)" % (out, e.strerror or e))
    finally:
        plt.close(fig)
    return len(slices), len(flows), len(rows)


def add_trace_args(ap, out_default, what):
    """The arguments every trace renderer takes: the trace, --steps and --out."""
    ap.add_argument("trace", help="trace JSON written by `zerotrain train --trace DIR` (DIR/trace.json: all ranks)")
    ap.add_argument("--steps", help="FIRST:LAST (1-based, inclusive; '3' or '3:' too) of the traced steps to draw; "
                    "default: every step in the trace")
    ap.add_argument("--out", default=out_default, help="%s to write (default: %s)" % (what, out_default))


def run(prog, ap, argv, draw):
    """Parse argv with `ap`, load the trace and call draw(args, steps, events) -> what was written.
    Exit 0 after printing that, 2 with one message on BadInput (argparse's own exit codes kept)."""
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on bad flags, 0 on --help
        return e.code if isinstance(e.code, int) else 2
    try:
        steps = parse_steps(a.steps) if a.steps else None
        written = draw(a, steps, load_trace(a.trace))
    except BadInput as e:
        print("%s: %s" % (prog, e), file=sys.stderr)
        return 2
    print("%s: wrote %s" % (prog, written))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Exit 0: written; 2: bad input or matplotlib missing.")
    add_trace_args(ap, "trace.png", "PNG")
    ap.add_argument("--width", type=float, default=16.0, help="figure width in inches (default 16)")
    ap.add_argument("--dpi", type=int, default=110, help="resolution (default 110)")

    def draw(a, steps, events):
        if not (1 <= a.width <= 100 and 20 <= a.dpi <= 600):
            raise BadInput("--width must be 1-100 inches and --dpi 20-600")
        return "%s (%d slices, %d flow arrows, %d rows)" % ((a.out,) + render(a.trace, events, steps, a.out,
                                                                               a.width, a.dpi))
    return run("render_trace", ap, argv, draw)


if __name__ == "__main__":
    sys.exit(main())
