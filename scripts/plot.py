#!/usr/bin/env python3
"""Plot chunkinv reports (schema chunkinv.report/1) against chunk size.

One column per input family (and family parameters); rows:
  * each error metric: the median with its p10-p90 band, per path, log axes;
  * the finite share of the inverse with its 95% Wilson interval;
  * histograms of log10(error) when the entries carry per_sample values
    (chunkinv run --per-sample).
Reads only the report JSON. Non-finite medians are drawn as crosses on a
line marked "inf" above the finite values.

usage: scripts/plot.py REPORT... -o FILE.png|pdf [--metric NAME]...
"""

import argparse
import json
import math
import os
import sys
from collections import OrderedDict

SCHEMAS = ("chunkinv.report/2", "chunkinv.report/1")
# Names of schema /1, read under today's names (docs/report-schema.md).
ALIASES = {
    "inv_stable_l_rel_rmse": "inv_gold_l_rel_rmse",
    "inv_neumann_only_rel_rmse": "inv_method_only_rel_rmse",
    "stable_l_highest_power": "gold_l_highest_power",
    "stable_l_power_max": "gold_l_power_max",
}
DEFAULT_METRICS = ["inv_total_rel_rmse", "inv_gold_l_rel_rmse"]
SHARE_METRIC = "inv_finite"
REQUIRED_STATS = ["median", "mean", "p10", "p90", "p99", "min", "max", "finite_count"]
TITLES = {
    "inv_total_rel_rmse": "INV total (vs gold inverse)",
    "inv_gold_l_rel_rmse": "INV power (the method on the gold L)",
    "inv_method_only_rel_rmse": "method only (vs inverse of I + path L)",
    "l_rel_rmse": "L (vs gold L)",
    "inverse_residual": "residual (I + gold L) INV - I",
}


class ReportError(Exception):
    pass


def number(v, where):
    """A report number: a JSON number or "inf"/"-inf"/"nan"."""
    if isinstance(v, bool):
        raise ReportError(f"{where}: expected a number, got {v!r}")
    if isinstance(v, (int, float)):
        return float(v)
    if v in ("inf", "-inf", "nan"):
        return float(v)
    raise ReportError(f"{where}: expected a number or \"inf\"/\"-inf\"/\"nan\", got {v!r}")


def read_report(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise ReportError(f"report {path}: cannot be opened ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise ReportError(f"report {path}: not valid JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("schema") not in SCHEMAS:
        raise ReportError(f"report {path}: schema is not \"{SCHEMAS[0]}\"")
    results = doc.get("results")
    if not isinstance(results, list):
        raise ReportError(f"report {path}: \"results\" is missing or not an array")
    entries = []
    for i, e in enumerate(results):
        where = f"report {path}: results[{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("axes"), dict):
            raise ReportError(f"{where}: \"axes\" is missing")
        axes = e["axes"]
        if "path" not in axes or "chunk" not in axes:
            raise ReportError(f"{where}: axes.path or axes.chunk is missing")
        if isinstance(axes["chunk"], bool) or not isinstance(axes["chunk"], (int, float)):
            raise ReportError(f"{where}: axes.chunk must be a number")
        metrics = e.get("metrics")
        if not isinstance(metrics, dict):
            raise ReportError(f"{where}: \"metrics\" is missing")
        stats = {}
        for name, s in metrics.items():
            name = ALIASES.get(name, name)
            if not isinstance(s, dict):
                raise ReportError(f"{where}: metric {name}: statistics must be an object")
            stats[name] = {k: number(v, f"{where}: metric {name}: {k}") for k, v in s.items()}
            missing = [k for k in REQUIRED_STATS if k not in stats[name]]
            if missing:
                raise ReportError(f"{where}: metric {name}: statistic \"{missing[0]}\" is missing")
        per_sample = {}
        for name, values in (e.get("per_sample") or {}).items():
            name = ALIASES.get(name, name)
            per_sample[name] = [number(v, f"{where}: per_sample {name}") for v in values]
        entries.append({"axes": axes, "report": path, "samples": e.get("samples", 0), "metrics": stats, "per_sample": per_sample})
    return entries


def group_label(axes):
    """The family and its parameters: one column of the figure."""
    label = str(axes.get("family", "?"))
    rest = [f"{k}={axes[k]}" for k in sorted(axes) if k not in ("family", "chunk", "path", "method")]
    return " ".join([label] + rest)


def series_names(entries):
    """Each entry's series: its path, or "path (report)" when several reports
    hold the same configuration (two runs side by side)."""
    seen, repeated = set(), False
    for e in entries:
        key = json.dumps(e["axes"], sort_keys=True)
        repeated = repeated or key in seen
        seen.add(key)
    methods = {str(e["axes"].get("method", "neumann")) for e in entries if "inv_total_rel_rmse" in e["metrics"]}
    for e in entries:
        name = str(e["axes"]["path"])
        if len(methods) > 1:
            name += f"/{e['axes'].get('method', 'neumann')}"
        e["series"] = f"{name} ({os.path.basename(e['report'])})" if repeated else name


def organise(entries):
    """group label -> series -> list of entries sorted by chunk, in order of appearance."""
    series_names(entries)
    groups = OrderedDict()
    for e in entries:
        paths = groups.setdefault(group_label(e["axes"]), OrderedDict())
        paths.setdefault(e["series"], []).append(e)
    for paths in groups.values():
        for series in paths.values():
            series.sort(key=lambda e: float(e["axes"]["chunk"]))
    return groups


def plot_errors(ax, paths, metric, colors, np):
    """Median with its p10-p90 band per path; non-finite values on an "inf" line."""
    finite_values, drawn = [], False
    for series in paths.values():
        for e in series:
            s = e["metrics"].get(metric)
            if s:
                finite_values += [s[k] for k in ("median", "p10", "p90") if math.isfinite(s.get(k, math.nan)) and s[k] > 0]
    if not finite_values:
        ax.text(0.5, 0.5, "no finite values", ha="center", va="center", transform=ax.transAxes)
        return
    top = 10 ** (math.ceil(math.log10(max(finite_values))) + 1)
    any_inf = False
    for path, series in paths.items():
        pts = [(float(e["axes"]["chunk"]), e["metrics"][metric]) for e in series if metric in e["metrics"]]
        if not pts:
            continue
        color = colors[path]
        c = np.array([p[0] for p in pts])
        med = np.array([p[1]["median"] for p in pts])
        lo = np.array([p[1]["p10"] for p in pts])
        hi = np.array([p[1]["p90"] for p in pts])
        clip = lambda a: np.where(np.isfinite(a) & (a > 0), a, np.where(np.isinf(a), top, np.nan))
        ax.fill_between(c, clip(lo), clip(hi), color=color, alpha=0.2, linewidth=0)
        finite = np.isfinite(med) & (med > 0)
        ax.plot(c[finite], med[finite], "o-", color=color, label=f"{path} median, p10-p90", markersize=4)
        if (~np.isfinite(med)).any():
            any_inf = True
            ax.plot(c[~np.isfinite(med)], np.full((~np.isfinite(med)).sum(), top), "x", color=color,
                    markersize=8, mew=2, label=f"{path} median = inf")
        drawn = True
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    if any_inf:
        ax.axhline(top, color="0.6", linestyle=":", linewidth=1)
        ax.text(1.0, top, " inf", transform=ax.get_yaxis_transform(), va="center", ha="left", color="0.4", fontsize=8)
    ax.set_ylim(min(finite_values) / 10, top * 3)
    ax.grid(True, which="major", alpha=0.3)
    if drawn:
        ax.legend(fontsize=7, loc="upper left")


def plot_share(ax, paths, colors, np):
    """The share of samples whose inverse is finite, with its Wilson interval."""
    for path, series in paths.items():
        pts = [(float(e["axes"]["chunk"]), e["metrics"][SHARE_METRIC]) for e in series if SHARE_METRIC in e["metrics"]]
        if not pts or path.split(" ")[0] == "gold":
            continue
        c = np.array([p[0] for p in pts])
        share = np.array([p[1]["mean"] for p in pts])
        lo = np.array([p[1].get("wilson_low", p[1]["mean"]) for p in pts])
        hi = np.array([p[1].get("wilson_high", p[1]["mean"]) for p in pts])
        ax.errorbar(c, 100 * share, yerr=[100 * (share - lo), 100 * (hi - share)], fmt="o-", color=colors[path],
                    capsize=3, markersize=4, label=f"{path} (95% Wilson)")
    ax.set_xscale("log", base=2)
    ax.set_ylim(-5, 105)
    ax.set_ylabel("inverse finite [%]")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")


def plot_histograms(ax, paths, metric, np):
    """log10 of every sample's error, one step histogram per (path, chunk)."""
    series = [(path, e) for path, es in paths.items() for e in es if metric in e["per_sample"] and path.split(" ")[0] != "gold"]
    values = [v for _, e in series for v in e["per_sample"][metric] if math.isfinite(v) and v > 0]
    if not values:
        ax.text(0.5, 0.5, "no finite per-sample values", ha="center", va="center", transform=ax.transAxes)
        return
    bins = np.linspace(math.log10(min(values)), math.log10(max(values)), 41)
    for i, (path, e) in enumerate(series):
        x = np.array(e["per_sample"][metric])
        ok = np.isfinite(x) & (x > 0)
        label = f"{path} C={e['axes']['chunk']}"
        if (~np.isfinite(x)).any():
            label += f" ({int((~np.isfinite(x)).sum())} inf)"
        ax.hist(np.log10(x[ok]), bins=bins, histtype="step", color=f"C{i % 10}", label=label)
    ax.set_xlabel(f"log10 {metric}")
    ax.set_ylabel("samples")
    ax.legend(fontsize=6, ncol=2)


# --- chunkinv search traces (--trace; docs/search.md) ------------------------
def plot_trace(argv):
    """scripts/plot.py --trace SEARCH.json... -o FILE: the best objective so far
    against evaluations, one line per report (and thin lines per lane); a
    non-finite best is drawn as a marker on the top edge."""
    parser = argparse.ArgumentParser(prog="plot.py --trace", description=plot_trace.__doc__.split("\n")[0])
    parser.add_argument("reports", nargs="+", help="chunkinv search report JSON files (schema chunkinv.search/1)")
    parser.add_argument("-o", "--output", required=True, help="FILE.png, FILE.pdf or FILE.svg")
    parser.add_argument("--no-lanes", action="store_true", help="leave out the per-lane traces")
    parser.add_argument("--hline", action="append", default=[], metavar="VALUE=LABEL",
                        help="a horizontal reference line, e.g. the random baseline's max (repeatable)")
    args = parser.parse_args(argv)
    lines = []
    for h in args.hline:
        value, _, text = h.partition("=")
        try:
            lines.append((float(value), text or value))
        except ValueError:
            parser.error(f"--hline {h}: not VALUE=LABEL")
    runs = []
    for path in args.reports:
        try:
            with open(path) as f:
                rep = json.load(f)
        except (OSError, ValueError) as e:
            raise ReportError(f"{path}: cannot be read as JSON ({e})") from None
        if rep.get("schema") != "chunkinv.search/1":
            raise ReportError(f"{path}: not a chunkinv search report (schema {rep.get('schema')!r})")
        runs.append((path, rep))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        print(f"plot.py: {sys.executable} lacks matplotlib ({err.name})", file=sys.stderr)
        return 2
    fig, ax = plt.subplots(figsize=(5.0, 3.2))
    colours = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"]
    finite_top = 0
    for i, (path, rep) in enumerate(runs):
        label = f"{rep['path']}/{rep['method']}, C={rep['space']['chunk']}"
        if len(runs) > 1 and len({(r['path'], r['method'], r['space']['chunk']) for _, r in runs}) < len(runs):
            label += f" ({os.path.basename(path)})"
        c = colours[i % len(colours)]
        traces = [(rep["trace"], 1.8, label)]
        if not args.no_lanes:
            traces += [(t, 0.6, None) for t in rep.get("lane_traces", [])]
        for t, width, lab in traces:
            xs = t["evaluations"]
            ys = [float(v) for v in t["best"]]  # numbers, or "inf"/"nan" as strings
            fin = [(x, y) for x, y in zip(xs, ys) if math.isfinite(y) and y > 0]
            if fin:
                finite_top = max(finite_top, max(y for _, y in fin))
                ax.step([x for x, _ in fin], [y for _, y in fin], where="post", color=c, lw=width, label=lab,
                        alpha=1.0 if lab else 0.45)
            inf = [x for x, y in zip(xs, ys) if not math.isfinite(y)]
            if inf and lab:
                ax.plot([inf[0]], [1.0], marker="^", color=c, transform=ax.get_xaxis_transform(), clip_on=False,
                        ls="none", label=f"non-finite at {inf[0]:,} evaluations")
    for k, (value, text) in enumerate(lines):
        ax.axhline(value, color="0.3", lw=0.8, ls=("--", ":", "-.")[k % 3], label=text)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("evaluations (thin: per lane, its own count)")
    ax.set_ylabel(f"best {runs[0][1]['objective']['name']}")
    ax.grid(True, which="major", lw=0.3, alpha=0.5)
    ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=200)
    except OSError as e:
        raise ReportError(f"output {args.output}: cannot be written ({e.strerror})") from None
    return 0


def main(argv):
    if argv and argv[0] == "--trace":
        return plot_trace(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("reports", nargs="+", help="chunkinv report JSON files")
    parser.add_argument("-o", "--output", required=True, help="FILE.png or FILE.pdf")
    parser.add_argument("--metric", action="append", dest="metrics",
                        help=f"error metric to plot (repeatable; default: {', '.join(DEFAULT_METRICS)})")
    args = parser.parse_args(argv)
    if not args.output.lower().endswith((".png", ".pdf")):
        parser.error("the output must end in .png or .pdf")
    metrics = [ALIASES.get(m, m) for m in args.metrics] if args.metrics else DEFAULT_METRICS

    entries = []
    for path in args.reports:
        entries += read_report(path)
    if not entries:
        raise ReportError("the reports hold no results")
    for m in metrics + [SHARE_METRIC]:
        if not any(m in e["metrics"] for e in entries):
            known = sorted({k for e in entries for k in e["metrics"]})
            raise ReportError(f"no entry has the metric \"{m}\"; the reports hold: {', '.join(known)}")
    groups = organise(entries)
    # One colour per path across the figure; the gold (the reference) last.
    names = list(OrderedDict.fromkeys(e["series"] for e in entries))
    gold = [n for n in names if n.split(" ")[0] == "gold"]
    names = [n for n in names if n not in gold] + gold
    colors = {p: f"C{i % 10}" for i, p in enumerate(names)}
    have_hist = any(metrics[0] in e["per_sample"] for e in entries)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError as err:
        print(f"plot.py: {sys.executable} lacks matplotlib/numpy ({err.name}); install them "
              "(Debian: apt-get install python3-matplotlib) or run the script with a Python that has them",
              file=sys.stderr)
        return 2

    rows = len(metrics) + 1 + (1 if have_hist else 0)
    cols = len(groups)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False)
    for j, (label, paths) in enumerate(groups.items()):
        for i, metric in enumerate(metrics):
            ax = axes[i][j]
            plot_errors(ax, paths, metric, colors, np)
            ax.set_title(f"{label}\n{TITLES.get(metric, metric)}" if i == 0 else TITLES.get(metric, metric), fontsize=9)
            if j == 0:
                ax.set_ylabel(f"{metric}")
        plot_share(axes[len(metrics)][j], paths, colors, np)
        for i in range(len(metrics) + 1):
            axes[i][j].set_xlabel("chunk C")
            chunks = sorted({float(e["axes"]["chunk"]) for es in paths.values() for e in es})
            axes[i][j].set_xticks(chunks)
            axes[i][j].set_xticklabels([f"{c:g}" for c in chunks], fontsize=7)
            axes[i][j].minorticks_off()
        if have_hist:
            plot_histograms(axes[rows - 1][j], paths, metrics[0], np)
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=120)
    except OSError as e:
        raise ReportError(f"output {args.output}: cannot be written ({e.strerror})") from None
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ReportError as e:
        print(f"plot.py: {e}", file=sys.stderr)
        sys.exit(2)
