#!/usr/bin/env python3
"""Render training steps of a zerotrain --trace JSON as an SVG picture (Python 3 standard library only).

    python3 scripts/render_step_svg.py out/trace/trace.json --steps 5 --out step.svg --title "stage 2"
    python3 scripts/render_step_svg.py out/trace/trace.json --fastest --out step.svg

One lane per rank x stream (compute, comm, copy), in the order the trace names them; every slice
("X" event) of the selected steps is a box on its lane, coloured by kind (forward unit, backward
unit, optimizer step, stall, collective op) and labelled where the label fits; slices nested in
another one of the same lane (the `wait comm` stalls inside a unit) sit lower in the lane; the
`grads ready` flows are arrows. Each box carries a <title> (name, start and length in ms), shown
as a tooltip by browsers. The ranks' clocks are aligned at start-up to within the exit skew of one
barrier, which on an oversubscribed machine can reach milliseconds: a rank whose collectives would
end before the first rank entered them (or start after it left) is shifted by the least amount
that makes every collective of the drawn steps causal, and the subtitle says by how much
(--raw-clocks draws the times as recorded). Parsing, step selection and lane order are benchmarks/trace/render_trace.py's
(its PNG needs matplotlib; this picture does not).

The pictures in docs/img/step_stage{0,1,2,3}.svg were made on the CPU backend, 2 ranks, from the
repository root, with exactly these commands (docs/zero-walkthrough.md, "The step as a picture"):

    for s in 0 1 2 3; do
      launcher/zt-launch -n 2 train --config configs/ds/trace_stage$s.json --model configs/models/gpt-tiny.json \\
          --data markov:vocab=64,order=1,seed=3 --steps 24 --trace out/trace$s --trace-steps 5:24
      python3 scripts/render_step_svg.py out/trace$s/trace.json --fastest --out docs/img/step_stage$s.svg \\
          --title "ZeRO stage $s, overlap_comm on, gpt-tiny, 2 ranks (CPU backend)"
    done

Exit codes: 0 written; 2 bad input (unreadable or malformed trace, bad --steps, no slice in the
selected steps, unwritable --out) — one message on stderr, never a traceback.
"""
import argparse
import importlib.util
import math
import os
import sys
from xml.sax.saxutils import escape, quoteattr

_RT_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "trace",
                        "render_trace.py")
_spec = importlib.util.spec_from_file_location("render_trace", _RT_PATH)
rt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rt)

# Layout in px. A lane is LANE_H high; each nesting level starts LEVEL_H lower and is that much shorter.
LEFT, RIGHT, TOP, LANE_H, LEVEL_H, AXIS_H, LEGEND_H = 150, 20, 44, 30, 11, 34, 28
CHAR_W = 6.0  # width of one character at font-size 10 (sans-serif), for "does the label fit"
LEGEND_NAMES = {"fwd": "forward unit", "bwd": "backward unit", "step": "norm + optimizer + param sync",
                "wait": "compute stalled on comm/copy", "d2h": "gradients down (copy)",
                "h2d": "parameters up (copy)"}


def nice_step(span, target=8):
    """A tick spacing of 1, 2 or 5 x 10^k giving about `target` ticks over `span` (> 0)."""
    raw = span / target
    base = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * base >= raw:
            return m * base
    return 10 * base


def fmt(v):
    return ("%.2f" % v).rstrip("0").rstrip(".")


class Frame:
    """Where time and lanes land in the picture: x in px from a time in µs, y from a lane index."""

    def __init__(self, slices, n_lanes, width, legend_rows=1):
        self.t0 = min(e["ts"] for e in slices)
        self.span_ms = max((max(e["ts"] + e["dur"] for e in slices) - self.t0) / 1e3, 1e-3)
        self.width = width
        self.plot_w = width - LEFT - RIGHT
        self.px = self.plot_w / self.span_ms  # px per ms
        self.axis_y = TOP + LANE_H * n_lanes
        self.height = self.axis_y + AXIS_H + LEGEND_H * legend_rows

    def x(self, ts):
        return LEFT + (ts - self.t0) / 1e3 * self.px

    @staticmethod
    def y(lane):
        return TOP + lane * LANE_H


def svg_lines(slices, flows, rows, width, title, note):
    """The SVG document as a list of lines."""
    legend = legend_rows(slices, flows, width)
    fr = Frame(slices, len(rows), width, len(legend))
    step_set = sorted({(e.get("args") or {}).get("step") for e in slices} - {None})
    subtitle = "step %s, %.2f ms from its first slice to its last (all ranks)%s; hover a box for its name and " \
        "length" % (",".join(map(str, step_set)) or "?", fr.span_ms, " (collectives aligned: %s)" % note if note else "")
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="sans-serif" font-size="10">' % (width, fr.height, width, fr.height),
           '<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="6" markerHeight="6" '
           'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#333333"/></marker></defs>',
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="18" font-size="13" font-weight="bold">%s</text>' % (LEFT, escape(title)),
           '<text x="%d" y="34" fill="#555555">%s</text>' % (LEFT, escape(subtitle))]
    out += axis_svg(fr) + lanes_svg(fr, slices, rows) + flows_svg(fr, flows, rows)
    out += legend_svg(legend, fr.axis_y + AXIS_H + 6) + ['</svg>']
    return out


def axis_svg(fr):
    """Vertical grid lines at 1-2-5 ticks and the time axis under the lanes."""
    tick = nice_step(fr.span_ms)
    out = ['<g class="axis" stroke="#dddddd">']
    for k in range(int(fr.span_ms / tick) + 1):
        x = LEFT + k * tick * fr.px
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>' % (x, TOP, x, fr.axis_y))
        out.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#333333" stroke="none">%s</text>'
                   % (x, fr.axis_y + 14, fmt(k * tick)))
    out.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#333333" stroke="none">time (ms)</text>'
               % (LEFT + fr.plot_w / 2, fr.axis_y + 28))
    return out + ['</g>']


def lanes_svg(fr, slices, rows):
    """One <g class="lane" data-rank data-lane> per row: a labelled band and its slices; a darker
    line between ranks."""
    depth, parents = rt.depths(slices)
    out = []
    for i, (p, t, label) in enumerate(rows):
        y = fr.y(i)
        rank = p if isinstance(p, int) else escape(str(p))
        out.append('<g class="lane" data-rank="%s" data-lane=%s>' % (rank, quoteattr(label.split("  ")[-1])))
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>'
                   % (LEFT, y, fr.plot_w, LANE_H, "#f7f7f7" if i % 2 == 0 else "#ffffff"))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (LEFT - 8, y + LANE_H / 2 + 3.5,
                                                                           escape(label)))
        if i > 0 and rows[i - 1][0] != p:
            out.append('<line x1="0" y1="%d" x2="%d" y2="%d" stroke="#999999"/>' % (y, fr.width, y))
        for j, e in enumerate(slices):
            if (e["pid"], e["tid"]) == (p, t):
                out.extend(slice_svg(e, depth[j], j in parents, fr.x(e["ts"]), e["dur"] / 1e3 * fr.px, y, fr.t0))
        out.append('</g>')
    return out


def flows_svg(fr, flows, rows):
    """Flow arrows, from the bottom of the start lane to the top of the end lane."""
    row_of = {(p, t): i for i, (p, t, _) in enumerate(rows)}
    out = []
    for s, f in flows:
        if (s["pid"], s["tid"]) in row_of and (f["pid"], f["tid"]) in row_of:
            ys = fr.y(row_of[(s["pid"], s["tid"])]) + LANE_H - 2
            yf = fr.y(row_of[(f["pid"], f["tid"])]) + 2
            out.append('<line class="flow" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333333" '
                       'stroke-width="0.8" marker-end="url(#arrow)"/>' % (fr.x(s["ts"]), ys, fr.x(f["ts"]), yf))
    return out


def slice_svg(e, depth, is_parent, x, w, lane_y, t0):
    """One slice: a box with a tooltip, and its label when it fits."""
    y = lane_y + 2 + LEVEL_H * depth
    h = LANE_H - 4 - LEVEL_H * depth
    tip = "%s: %.3f ms at %.3f ms" % (e["name"], e["dur"] / 1e3, (e["ts"] - t0) / 1e3)
    lines = ['<rect class="slice" x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s" stroke="white" '
             'stroke-width="0.5"><title>%s</title></rect>'
             % (x, y, max(w, 0.5), h, rt.COLOURS[rt.kind_of(e)], escape(tip))]
    label = e["name"]
    if len(label) * CHAR_W > w - 2 and (e.get("args") or {}).get("op"):
        label = e["args"].get("label") or ""  # the bucket alone ("b4") when the op does not fit
    if label and len(label) * CHAR_W <= w - 2:
        ty = y + LEVEL_H / 2 + 3.5 if is_parent else y + h / 2 + 3.5  # above nested slices
        lines.append('<text x="%.2f" y="%.1f" text-anchor="middle" fill="white">%s</text>'
                     % (x + w / 2, ty, escape(label)))
    return lines


def legend_rows(slices, flows, width):
    """The legend's (colour, name, x) items, in rows that fit the picture's width."""
    shown = sorted({rt.kind_of(e) for e in slices}, key=list(rt.COLOURS).index)
    items = [(rt.COLOURS[k], LEGEND_NAMES.get(k, k)) for k in shown]
    if flows:
        items.append(("#333333", "→ grads ready (flow)"))
    rows, x = [[]], LEFT
    for colour, name in items:
        w = 14 + int(len(name) * CHAR_W) + 18
        if rows[-1] and x + w - 18 > width - RIGHT:
            rows.append([])
            x = LEFT
        rows[-1].append((colour, name, x))
        x += w
    return rows


def legend_svg(rows, y):
    out = ['<g class="legend">']
    for r, row in enumerate(rows):
        for colour, name, x in row:
            ry = y + r * LEGEND_H
            out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>' % (x, ry, colour))
            out.append('<text x="%d" y="%d">%s</text>' % (x + 14, ry + 9, escape(name)))
    out.append('</g>')
    return out


def fastest_step(slices):
    """The step whose slices, over every rank, span the least time: the one least disturbed by
    other load on a shared machine."""
    span = {}
    for e in slices:
        s = (e.get("args") or {}).get("step")
        a, b = span.get(s, (e["ts"], e["ts"] + e["dur"]))
        span[s] = (min(a, e["ts"]), max(b, e["ts"] + e["dur"]))
    return min((b - a, s) for s, (a, b) in span.items() if s is not None)[1]


def causal_shifts(slices):
    """Per rank (pid), the µs to add to its times so that no rank leaves a collective before the
    first rank entered it, nor enters one after the first rank left it (collectives matched by
    sequence number). The ranks' clocks are aligned at start-up by one barrier, whose exit skew
    can reach milliseconds on an oversubscribed machine; a rank needs no shift when its times are
    already causal. Ranks are compared with the first rank (pid) only."""
    by_seq = {}
    for e in slices:
        a = e.get("args") or {}
        if a.get("op") and isinstance(a.get("seq"), int):
            by_seq.setdefault(a["seq"], {})[e["pid"]] = (e["ts"], e["ts"] + e["dur"])
    pids = sorted({e["pid"] for e in slices}, key=str)
    shifts = {p: 0.0 for p in pids}
    for p in pids[1:]:
        lo, hi = -math.inf, math.inf  # p's shift d keeps: end_p + d >= start_ref, start_p + d <= end_ref
        for by in by_seq.values():
            if pids[0] in by and p in by:
                (s0, e0), (s1, e1) = by[pids[0]], by[p]
                lo, hi = max(lo, s0 - e1), min(hi, e0 - s1)
        if lo > hi:  # no shift satisfies every collective: the middle of the two bounds
            shifts[p] = (lo + hi) / 2
        elif lo > 0 or hi < 0:
            shifts[p] = lo if lo > 0 else hi
        if abs(shifts[p]) < 1:  # below the trace's 1 µs resolution
            shifts[p] = 0.0
    return shifts


def shifted(events, shifts):
    return [dict(e, ts=e["ts"] + shifts[e["pid"]]) if shifts.get(e.get("pid")) else e for e in events]


def render(path, events, steps, out, width, title, fastest=False, align=True):
    slices, flows = rt.select_or_fail(path, events, steps)
    if fastest and any((e.get("args") or {}).get("step") is not None for e in slices):
        best = fastest_step(slices)
        slices, flows = rt.select_or_fail(path, events, (best, best))
    shifts = causal_shifts(slices) if align else {}
    if any(shifts.values()):
        slices = shifted(slices, shifts)
        flows = [(shifted([s], shifts)[0], shifted([f], shifts)[0]) for s, f in flows]
    rows = rt.rows_of(events, slices)
    title = title or os.path.basename(path)
    note = ", ".join("rank %s's clock %+.3f ms" % (p, d / 1e3) for p, d in sorted(shifts.items(), key=str) if d)
    text = "\n".join(svg_lines(slices, flows, rows, width, title, note)) + "\n"
    try:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise rt.BadInput("--out %s: cannot write the SVG (%s)" % (out, e.strerror or e))
    return len(slices), len(flows), len(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Exit 0: written; 2: bad input.")
    rt.add_trace_args(ap, "step.svg", "SVG")
    ap.add_argument("--width", type=int, default=1200, help="picture width in px (default 1200)")
    ap.add_argument("--fastest", action="store_true",
                    help="draw only the selected step that took the least time (over every rank)")
    ap.add_argument("--raw-clocks", action="store_true",
                    help="draw each rank's times as recorded, without shifting a rank whose collectives "
                    "would end before another rank started them")
    ap.add_argument("--title", help="title line (default: the trace's file name)")

    def draw(a, steps, events):
        if not 400 <= a.width <= 10000:
            raise rt.BadInput("--width %d: expected 400-10000 px" % a.width)
        return "%s (%d slices, %d flow arrows, %d lanes)" % ((a.out,) + render(a.trace, events, steps, a.out,
                                                                                a.width, a.title, a.fastest,
                                                                                not a.raw_clocks))
    return rt.run("render_step_svg", ap, argv, draw)


if __name__ == "__main__":
    sys.exit(main())
