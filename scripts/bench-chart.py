#!/usr/bin/env python3
"""The summary table and chart at the top of BENCHMARKS.md, from the bench's own output.

    cargo bench --bench throughput --features libzmq,omq -- --reps 3 | tee docs/bench/three.txt
    scripts/bench-chart.py docs/bench/three.txt

Each input is what the bench printed (the whole output, or only its tables): each line
"backend `NAME`, ..." names a backend, and the rows after it are its table, up to the cross
table ("crate on ..."). With more than one backend, the summary adds each later backend's rate
over the first's (`zeromq`'s, where the run has it). The script
writes the chart (`--svg`, docs/benchmarks.svg by default) and prints the Markdown table
for the top of BENCHMARKS.md. Standard library only.
"""

import argparse
import html
import re
import sys

# The rows of the summary: a label, and the start of the bench's scenario text.
ROWS = [
    ("queue: handler decodes, raw PUSH feeds", "queue, 200,000 messages, handler reads"),
    ("queue: the crate's publisher feeds", "queue, 200,000 messages, fed by the crate's publisher"),
    ("queue: 16 KiB messages", "queue, 20,000 messages of 16 KiB"),
    ("fan-out to 4 subscribers", "fan-out, 50,000 messages"),
    ("request-reply, 1 in flight", "request-reply, 20,000 requests, one in flight"),
    ("request-reply, 64 in flight", "request-reply, 200,000 requests, 64 in flight on one"),
]


def parse(path):
    """Each backend's name and its rows (scenario text -> list of cells), in order."""
    backends, rows = [], None
    with open(path, encoding="utf-8") as text:
        for line in text:
            heading = re.match(r"backend `([^`]+)`,", line)
            if heading:
                rows = {}
                backends.append((heading.group(1), rows))
            elif line.startswith("crate on "):
                rows = None
            elif rows is not None and line.startswith("| ") and not line.startswith("| scenario"):
                cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
                rows[cells[0]] = cells
    if not backends:
        sys.exit(f"{path}: no line 'backend `NAME`, ...': is it the bench's output?")
    return backends


def find(rows, start):
    for scenario, cells in rows.items():
        if scenario.startswith(start):
            return cells
    return None


def per_second(cell):
    """'crate: 1040k/s' -> 1040000.0; None where there is no rate."""
    number = re.search(r"([\d.]+)(k?)/s", cell)
    if not number:
        return None
    return float(number.group(1)) * (1000 if number.group(2) else 1)


def rate(cell):
    """'crate: 1040k/s' -> '1,040k/s'."""
    value = cell.split(":", 1)[-1].strip()
    number = re.match(r"([\d.]+)(k?)/s", value)
    if not number:
        return value
    figure = float(number.group(1))
    return f"{figure:,.0f}{number.group(2)}/s"


def cpu_ratio(cell):
    """'1.35 / 1.20 (1.13 x)' -> '1.13'."""
    found = re.search(r"\(([\d.]+) x\)", cell)
    return found.group(1) if found else "-"


def summary(backends):
    names = [name for name, _ in backends]
    head = ["Scenario"]
    for name in names:
        head += [f"`{name}`: crate / raw", "ratio", "CPU x raw"]
    # Each later backend's crate over the first's.
    head += [f"{name} / `{names[0]}`" for name in names[1:]]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, start in ROWS:
        cells, crate = [label], []
        for _, rows in backends:
            row = find(rows, start)
            if row is None:
                cells += ["-", "-", "-"]
                crate.append(None)
            else:
                cells += [f"{rate(row[1])} / {rate(row[2])}", row[3], cpu_ratio(row[4])]
                crate.append(per_second(row[1]))
        for other in crate[1:]:
            cells.append(f"{other / crate[0]:.2f}" if other and crate[0] else "-")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def chart(backends, path):
    colours = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759"]
    bar, gap, left, top, width = 14, 12, 280, 40, 360
    labels = [label for label, _ in ROWS]
    ratios = []
    for label, start in ROWS:
        ratios.append([])
        for _, rows in backends:
            row = find(rows, start)
            ratios[-1].append(float(row[3]) if row and row[3] not in ("-", "NaN") else None)
    most = max([1.0] + [r for group in ratios for r in group if r is not None])
    scale = width / (most * 1.1)
    group = bar * len(backends) + gap
    height = top + group * len(labels) + 50
    total = left + width + 60
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{total}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="18" font-weight="bold">Throughput, the crate over raw sockets of '
        f"its client (1.0 = raw)</text>",
    ]
    one = left + 1.0 * scale
    for index, (label, values) in enumerate(zip(labels, ratios)):
        y = top + index * group
        svg.append(
            f'<text x="{left - 8}" y="{y + bar * len(backends) / 2 + 4}" '
            f'text-anchor="end">{html.escape(label)}</text>'
        )
        for which, value in enumerate(values):
            if value is None:
                continue
            y_bar = y + which * bar
            svg.append(
                f'<rect x="{left}" y="{y_bar}" width="{value * scale:.1f}" height="{bar - 2}" '
                f'fill="{colours[which % len(colours)]}"/>'
            )
            svg.append(
                f'<text x="{left + value * scale + 4:.1f}" y="{y_bar + bar - 4}">{value:.2f}</text>'
            )
    bottom = top + group * len(labels)
    svg.append(
        f'<line x1="{one:.1f}" y1="{top - 6}" x2="{one:.1f}" y2="{bottom}" stroke="#333" '
        f'stroke-dasharray="4 3"/>'
    )
    svg.append(f'<text x="{one:.1f}" y="{bottom + 14}" text-anchor="middle">raw</text>')
    for which, (name, _) in enumerate(backends):
        x = left + which * 120
        svg.append(
            f'<rect x="{x}" y="{bottom + 26}" width="12" height="12" '
            f'fill="{colours[which % len(colours)]}"/>'
        )
        svg.append(f'<text x="{x + 16}" y="{bottom + 36}">{html.escape(name)}</text>')
    svg.append("</svg>")
    with open(path, "w", encoding="utf-8") as out:
        out.write("\n".join(svg) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outputs", nargs="+", help="saved outputs of the bench")
    parser.add_argument("--svg", default="docs/benchmarks.svg", help="where the chart goes")
    args = parser.parse_args()
    backends = [backend for path in args.outputs for backend in parse(path)]
    chart(backends, args.svg)
    print(summary(backends))


if __name__ == "__main__":
    main()
