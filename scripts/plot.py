#!/usr/bin/python3
"""Figures of chunkinv reports for papers (docs/figures.md).

One panel per facet (a value of --facet, and of every other axis that varies
besides --x, path and method), one row per metric:
  * each error metric: the median against --x with its p10-p90 band, one
    series per path (and method, when several), log y axis; above it a strip
    with the number of non-finite samples at each point, so that an infinite
    value is never drawn as a number;
  * the share of finite inverses with its 95% Wilson interval.
The legend names the series, the band, the interval and the sample count.
Sizes for one- and two-column figures (--width single|double: 3.5 in and
7.16 in; by default the one column up to two panels, the text width beyond),
the Okabe-Ito palette with a distinct marker per series, the
format from the file name (.png, .pdf, .svg). Reads only the report JSON.

Presets for `chunkinv seq` reports (--preset): `position`, o's error per
window of positions against the position (the o_rel_rmse_from_<p> windows);
`seq_len`, o's error (total and inverse only) against T, one series per path
and method, with the share of sequences whose o is finite.

usage: scripts/plot.py REPORT... -o FILE.png|pdf|svg [--x AXIS] [--facet AXIS]
                       [--metric NAME]... [--no-share] [--where AXIS=V1,V2]...
                       [--width single|double|auto] [--columns N] [--dpi N]
                       [--preset position|seq_len]
       scripts/plot.py --methods REPORT... -o FILE [--cost BENCH_JSON]... [--metric NAME]
                       [--where AXIS=V1,V2]... [--width single|double|auto] [--columns N] [--dpi N]
       scripts/plot.py --trace SEARCH_JSON... -o FILE [--no-lanes] [--hline VALUE=LABEL]...
"""

import argparse
import difflib
import json
import math
import os
import sys
import textwrap
from collections import OrderedDict

SCHEMAS = ("chunkinv.report/2", "chunkinv.report/1")
# Names of schema /1, read under today's names (docs/report-schema.md).
ALIASES = {
    "inv_stable_l_rel_rmse": "inv_gold_l_rel_rmse",
    "inv_neumann_only_rel_rmse": "inv_method_only_rel_rmse",
    "stable_l_highest_power": "gold_l_highest_power",
    "stable_l_power_max": "gold_l_power_max",
}
DEFAULT_METRICS = ["inv_total_rel_rmse"]
SHARE_METRIC = "inv_finite"
# The finite share row's label, per share metric.
SHARE_LABELS = {"inv_finite": "finite\ninverses (%)", "o_finite": "finite\noutputs (%)"}
# seq reports (docs/downstream.md): a window of o's error is the metric
# o_rel_rmse_from_<p>; the position preset makes each an entry at x = p.
WINDOW_PREFIX = "o_rel_rmse_from_"
WINDOW_METRIC = "o_rel_rmse_window"
# --preset NAME: (x axis, error metrics, share metric or None) of seq reports.
PRESETS = {
    "position": ("position", [WINDOW_METRIC], None),
    "seq_len": ("seq_len", ["o_rel_rmse", "o_rel_rmse_inverse_only"], "o_finite"),
}
REQUIRED_STATS = ["median", "mean", "p10", "p90", "p99", "min", "max", "finite_count"]
# The y label of a metric's row; others are shown by name.
METRIC_LABELS = {
    "inv_total_rel_rmse": "INV total\nrel. RMSE",
    "inv_gold_l_rel_rmse": "INV on gold $L$\nrel. RMSE",
    "inv_method_only_rel_rmse": "method only\nrel. RMSE",
    "l_rel_rmse": "$L$ rel. RMSE",
    "inverse_residual": "residual",
    "power_max": "max power magnitude",
    "gold_l_power_max": "max power magnitude",
    "o_rel_rmse": "o rel. RMSE",
    "o_rel_rmse_inverse_only": "o rel. RMSE,\ninverse only",
    "o_rel_rmse_storage": "o rel. RMSE,\nstorage only",
    "ht_rel_rmse": "final state\nrel. RMSE",
    "state_rel_rmse_max": "max state\nrel. RMSE",
    WINDOW_METRIC: "o rel. RMSE\nper window",
}
# How an axis reads on a figure: (axis label, facet title format).
AXIS_LABELS = {
    "chunk": ("chunk size $C$", "$C = {}$"),
    "decay_floor": ("decay floor", "decay floor ${}$"),
    "dim": ("head dim $d$", "$d = {}$"),
    "log_decay": ("log decay", "log decay ${}$"),
    "beta": (r"$\beta$", r"$\beta = {}$"),
    "method": ("method", "{}"),
    "path": ("path", "{}"),
    "family": ("family", "{}"),
    "seq_len": ("sequence length T", "T = {}"),
    "position": ("position (window start)", "position {}"),
    "value_dim": ("value dim V", "V = {}"),
    "storage": ("storage", "{}"),
}
# Okabe & Ito's colour-blind-safe palette (black last), one marker per series.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
WIDTHS = {"single": 3.5, "double": 7.16}  # inches: one column, the full text width
MAX_COLUMNS = {"single": 3, "double": 5}  # facets per row before they wrap
# --width auto (the default): one column for up to AUTO_SINGLE panels, the
# text width beyond, where three or more panels in 3.5 in clip their titles.
AUTO_SINGLE = 2


def resolve_width(width, panels):
    """single or double: --width as given, or by the panel count for auto."""
    if width != "auto":
        return width
    return "single" if panels <= AUTO_SINGLE else "double"


def balanced_columns(panels, most):
    """Columns for `panels` in rows of at most `most`, the rows as even as can be (6 in 5: 3 + 3, not 5 + 1)."""
    rows = math.ceil(panels / most)
    return math.ceil(panels / rows)
SERIES_AXES = ("path", "method")
EXTENSIONS = (".png", ".pdf", ".svg")


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
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
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
        # A null axis is a parameter the family leaves unset (real_gates' decay_floor): not an axis.
        axes = {k: v for k, v in e["axes"].items() if v is not None}
        if "path" not in axes:
            raise ReportError(f"{where}: axes.path is missing")
        for k, v in axes.items():
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                raise ReportError(f"{where}: axes.{k} must be a string or a number")
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
        samples = e.get("samples")
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
            raise ReportError(f"{where}: \"samples\" must be a non-negative integer")
        # Schema /1 had no method axis: the gold's own entry is the exact
        # solve (it has no error against itself), every other one Neumann's.
        axes.setdefault("method", "neumann" if "inv_total_rel_rmse" in stats else "exact")
        entries.append({"axes": axes, "report": path, "samples": samples, "metrics": stats})
    return entries


def nearest(name, choices):
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f" (did you mean \"{close[0]}\"?)" if close else ""


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def value_text(v):
    if isinstance(v, float) and v == int(v):
        return str(int(v))
    return str(v)


def tick_text(v):
    """An axis value as a figure shows it: numbers with a true minus sign."""
    return value_text(v).replace("-", "\u2212") if is_number(v) else value_text(v)


def distinct(values):
    """Distinct axis values in a stable order: numbers ascending, text as first seen."""
    out = list(OrderedDict.fromkeys(values))
    if all(is_number(v) for v in out):
        out.sort()
    return out


def parse_where(items, axes_present):
    """--where AXIS=V1,V2: keep entries whose AXIS is one of the values."""
    filters = {}
    for item in items or []:
        if "=" not in item:
            raise ReportError(f"--where {item}: expected AXIS=VALUE[,VALUE...]")
        axis, values = item.split("=", 1)
        if axis not in axes_present:
            raise ReportError(f"--where: no entry has the axis \"{axis}\"{nearest(axis, axes_present)}; "
                              f"axes: {', '.join(sorted(axes_present))}")
        filters.setdefault(axis, set()).update(v.strip() for v in values.split(","))
    return filters


def keep(entry, filters):
    return all(value_text(entry["axes"].get(axis, "")) in values for axis, values in filters.items())


class Layout:
    """What goes where: the x axis, the facets, the series, each entry's place."""

    def __init__(self, entries, x, facet):
        self.entries = entries
        axes = list(OrderedDict.fromkeys(k for e in entries for k in e["axes"]))
        values = {a: distinct(e["axes"][a] for e in entries if a in e["axes"]) for a in axes}
        varying = [a for a in axes if len(values[a]) > 1]
        for flag, name in (("--x", x), ("--facet", facet)):
            if name is not None and name not in axes:
                raise ReportError(f"{flag} {name}: the reports have no such axis{nearest(name, axes)}; "
                                  f"axes: {', '.join(axes)}")
        if x is None:
            numeric = [a for a in varying if a not in SERIES_AXES and all(is_number(v) for v in values[a])]
            x = "chunk" if "chunk" in varying else numeric[0] if numeric else varying[0] if varying else "chunk"
            if x not in axes:
                raise ReportError("the reports have no axis to put on x; name one with --x")
        if facet == x:
            raise ReportError(f"--facet {facet} is also the x axis")
        self.x = x
        self.x_values = values[x]
        self.x_numeric = all(is_number(v) for v in self.x_values)
        # Facets: the named axis, then every other axis that varies and is
        # neither x nor a series axis, so that no two points share a place.
        self.facet_axes = [facet] if facet else []
        self.facet_axes += [a for a in varying if a not in (x, facet) and a not in SERIES_AXES]
        # Path and method name every series, even when one is the same for
        # all: "gold" alone would hide that it is a method on the gold L.
        self.series_axes = [a for a in SERIES_AXES if a not in (x, facet) and a in axes]
        # The same configuration from several reports: the report names the series too.
        seen, repeated = set(), False
        for e in entries:
            key = json.dumps(e["axes"], sort_keys=True)
            repeated = repeated or key in seen
            seen.add(key)
        self.by_report = repeated
        self.facets = list(OrderedDict.fromkeys(self.facet_key(e) for e in entries))
        self.facets.sort(key=lambda k: [(0, v, "") if is_number(v) else (1, 0, str(v)) for v in k])
        self.series = list(OrderedDict.fromkeys(self.series_key(e) for e in entries))

    def facet_key(self, e):
        return tuple(e["axes"].get(a, "") for a in self.facet_axes)

    def series_key(self, e):
        key = tuple(value_text(e["axes"].get(a, "")) for a in self.series_axes)
        return key + ((os.path.basename(e["report"]),) if self.by_report else ())

    def facet_title(self, key):
        parts = []
        for axis, v in zip(self.facet_axes, key):
            fmt = AXIS_LABELS.get(axis, (axis, axis + " = {}"))[1]
            text = value_text(v)
            parts.append(fmt.format(text.replace("-", "{-}") if "$" in fmt else text))
        return ", ".join(parts)

    def series_label(self, key):
        """ "emulated / neumann", and "(report.json)" after it when reports are compared."""
        if self.by_report:
            return " / ".join(key[:-1]) + f" ({key[-1]})"
        return " / ".join(key)

    def x_label(self):
        return AXIS_LABELS.get(self.x, (self.x, ""))[0]

    def x_position(self, v):
        return float(v) if self.x_numeric else float(self.x_values.index(v))

    def points(self, facet, series, metric):
        """(x position, entry) of one series in one facet, sorted by x."""
        pts = [(self.x_position(e["axes"][self.x]), e) for e in self.entries
               if self.x in e["axes"] and self.facet_key(e) == facet and self.series_key(e) == series
               and metric in e["metrics"]]
        return sorted(pts, key=lambda p: p[0])


def sample_counts(entries):
    counts = sorted({e["samples"] for e in entries})
    if not counts:
        return ""
    return f"$n = {counts[0]}$" if len(counts) == 1 else f"$n = {counts[0]}$ to ${counts[-1]}$"


def style(plt):
    """A paper's figure: 8 pt text, thin lines, fonts embedded as text."""
    plt.rcParams.update({
        "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7,
        "xtick.labelsize": 7, "ytick.labelsize": 7, "axes.linewidth": 0.6,
        "xtick.major.width": 0.6, "ytick.major.width": 0.6, "xtick.minor.width": 0.4,
        "ytick.minor.width": 0.4, "xtick.major.size": 2.5, "ytick.major.size": 2.5,
        "xtick.minor.size": 1.5, "ytick.minor.size": 1.5, "lines.linewidth": 1.0,
        "lines.markersize": 3.5, "axes.spines.top": False, "axes.spines.right": False,
        "pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "none", "svg.hashsalt": "chunkinv",
    })


def set_x_axis(ax, layout, panel_w):
    """Ticks at the values swept: every k-th number labelled where they would
    crowd, names slanted where they would run into each other."""
    from matplotlib.ticker import NullLocator

    labels = [tick_text(v) for v in layout.x_values]
    step = math.ceil(len(labels) / max(2, int(panel_w / 0.27))) if layout.x_numeric else 1
    labels = [t if (len(labels) - 1 - i) % step == 0 else "" for i, t in enumerate(labels)]
    if layout.x_numeric:
        xs = [float(v) for v in layout.x_values]
        if layout.x in ("chunk", "dim", "seq_len") and min(xs) > 0 and max(xs) / min(xs) >= 4:
            ax.set_xscale("log", base=2)
            ax.set_xlim(min(xs) / 2 ** 0.3, max(xs) * 2 ** 0.3)
        elif max(xs) > min(xs):
            pad = (max(xs) - min(xs)) * 0.07
            ax.set_xlim(min(xs) - pad, max(xs) + pad)
        if len(xs) <= 16:
            ax.set_xticks(xs)
            ax.set_xticklabels(labels)
            ax.xaxis.set_minor_locator(NullLocator())
    else:
        ax.set_xticks(range(len(layout.x_values)))
        ax.set_xlim(-0.5, len(layout.x_values) - 0.5)
        # About 0.055 in a character at 7 pt.
        if max(len(t) for t in labels) * 0.055 * len(labels) > 0.85 * panel_w:
            ax.set_xticklabels(labels, rotation=30, ha="right", rotation_mode="anchor")
        else:
            ax.set_xticklabels(labels)


def dodge(layout, index, count):
    """A small horizontal offset per series on a categorical x, so error bars do not overlap."""
    return 0.0 if layout.x_numeric or count < 2 else (index - (count - 1) / 2) * 0.12


def value_range(layout, metric):
    """The finite medians and p10-p90 of a metric over the figure: one y range per row."""
    values = [e["metrics"][metric][k] for e in layout.entries if metric in e["metrics"] for k in ("median", "p10", "p90")]
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return None, True
    log_y = min(values) > 0
    lo, hi = min(values), max(values)
    if log_y:
        return (lo / 2.5, hi * 2.5), True
    pad = (hi - lo) * 0.08 or 1.0
    return (lo - pad, hi + pad), False


def plot_metric(ax, strip, layout, facet, metric, strip_rows, styles, top, first_column, stagger, np):
    """Median and p10-p90 band; the non-finite counts in the strip above (each
    row's series marker in the first column only: the rows are the same in all)."""
    for i, key in enumerate(layout.series):
        pts = layout.points(facet, key, metric)
        if not pts:
            continue
        colour, marks = styles[key]
        x = np.array([p + dodge(layout, i, len(layout.series)) for p, _ in pts])
        s = [e["metrics"][metric] for _, e in pts]
        med = np.array([v["median"] for v in s])
        lo = np.array([v["p10"] for v in s])
        hi = np.array([v["p90"] for v in s])
        finite_med = np.isfinite(med)
        band = np.isfinite(lo) & np.isfinite(hi)
        # A band between neighbouring points, a bar where a point stands alone.
        alone = band.copy()
        if layout.x_numeric:
            joined = band[1:] & band[:-1]
            alone[1:] &= ~joined
            alone[:-1] &= ~joined
            ax.fill_between(x, np.where(band, lo, np.nan), np.where(band, hi, np.nan), color=colour,
                            alpha=0.18, linewidth=0)
        if alone.any():
            ax.vlines(x[alone], lo[alone], hi[alone], color=colour, alpha=0.35, linewidth=3)
        # Where p90 is not finite the band is open upwards: a dashed line to the top.
        open_top = np.isfinite(lo) & ~np.isfinite(hi)
        for xv, lv in zip(x[open_top], lo[open_top]):
            ax.plot([xv, xv], [lv, top], color=colour, linestyle=(0, (2, 1.5)), linewidth=0.8, alpha=0.8)
        # The median line breaks where the median is not finite. (An artist
        # without data is not drawn: matplotlib would place it at the origin
        # when laying the figure out.)
        if finite_med.any():
            ax.plot(x, np.where(finite_med, med, np.nan), color=colour, markersize=4,
                    linestyle="-" if layout.x_numeric else "none", **marks)
        if strip is not None and key in strip_rows:
            # One row per series, its marker at the left; the number of
            # non-finite samples at each x ("all" when every sample is).
            row = strip_rows.index(key)
            if first_column:
                strip.plot([-0.05], [row], transform=strip.get_yaxis_transform(), linestyle="none",
                           color=colour, markersize=3.2, clip_on=False, **marks)
            for xv, (_, e), v in zip(x, pts, s):
                bad = e["samples"] - v["finite_count"]
                # Where the x values stand close, every second count one line lower.
                y = row + (0.22 if layout.x_values.index(e["axes"][layout.x]) % 2 else -0.22) if stagger else row
                if bad > 0:
                    strip.text(xv, y, "all" if bad == e["samples"] else f"{int(bad)}", fontsize=5.5,
                               ha="center", va="center", color=colour, clip_on=False)


def plot_share(ax, layout, facet, styles, np, metric=SHARE_METRIC):
    """The share of samples whose inverse (o, for seq) is finite, with its 95% Wilson interval."""
    for i, key in enumerate(layout.series):
        pts = layout.points(facet, key, metric)
        if not pts:
            continue
        colour, marks = styles[key]
        x = np.array([p + dodge(layout, i, len(layout.series)) for p, _ in pts])
        s = [e["metrics"][metric] for _, e in pts]
        share = 100 * np.array([v["mean"] for v in s])
        lo = 100 * np.array([v.get("wilson_low", v["mean"]) for v in s])
        hi = 100 * np.array([v.get("wilson_high", v["mean"]) for v in s])
        ax.errorbar(x, share, yerr=[share - lo, hi - share], color=colour, markersize=4, capsize=1.5,
                    elinewidth=0.7, linestyle="-" if layout.x_numeric else "none", linewidth=1.0, **marks)
    ax.set_ylim(-8, 108)
    ax.set_yticks([0, 50, 100])


def series_style(i):
    """Series i's colour and marker: Okabe-Ito colours, a shape each, every
    second one hollow so that series lying on one another both show."""
    colour = PALETTE[i % len(PALETTE)]
    if i % 2 == 0:
        marks = dict(marker=MARKERS[i % len(MARKERS)], markerfacecolor=colour, markeredgecolor="white",
                     markeredgewidth=0.4)
    else:
        marks = dict(marker=MARKERS[i % len(MARKERS)], markerfacecolor="none", markeredgecolor=colour,
                     markeredgewidth=0.9)
    return colour, marks


def legend_handles(layout, metrics, with_share, styles):
    """The series, then what the band, the open band, the error bars and n stand for."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Line2D([], [], color=styles[k][0], markersize=4.5, label=layout.series_label(k), **styles[k][1])
               for k in layout.series]
    n = sample_counts(layout.entries)
    handles.append(Patch(facecolor="0.5", alpha=0.35, linewidth=0, label=f"median, p10–p90 of {n}"))
    if any(math.isfinite(e["metrics"][m]["p10"]) and not math.isfinite(e["metrics"][m]["p90"])
           for m in metrics for e in layout.entries if m in e["metrics"]):
        handles.append(Line2D([], [], color="0.4", linestyle=(0, (2, 1.5)), linewidth=0.8,
                              label="p90 not finite"))
    if with_share:
        handles.append(Line2D([], [], color="0.3", marker="|", markersize=6, linestyle="none",
                              label="95% Wilson interval"))
    return handles


LEGEND_STYLE = dict(frameon=False, handlelength=1.6, columnspacing=1.0, handletextpad=0.4, borderaxespad=0,
                    borderpad=0)


def figure_frame(plt, np, fig_w, handles, block, block_h, nblocks, ncols, note="", note_h=0.0):
    """The figure both layouts draw into: the legend on top, `nblocks` blocks
    of facets (each a grid of the `block` rows by `ncols`), and a note under
    them where there is one. Returns the figure, its parts and the grids."""
    legend_cols, legend_h = legend_size(handles, fig_w, plt)
    legend_h += 0.06
    heights = [legend_h] + [block_h] * nblocks + ([note_h] if note else [])
    fig = plt.figure(figsize=(fig_w, sum(heights)), layout="constrained")
    fig.get_layout_engine().set(h_pad=0.01, w_pad=0.01, hspace=0.0, wspace=0.0)
    parts = list(np.atleast_1d(fig.subfigures(len(heights), 1, height_ratios=heights)))
    legend_ax = parts[0].add_subplot()
    legend_ax.axis("off")
    legend_ax.legend(handles=handles, loc="center", ncol=legend_cols, **LEGEND_STYLE)
    if note:
        parts[-1].text(0.0, 0.5, note, ha="left", va="center", fontsize=6, color="0.25", linespacing=1.25)
    grids = [parts[1 + b].add_gridspec(len(block), ncols, height_ratios=[h for _, _, h in block])
             for b in range(nblocks)]
    return fig, parts, grids


def legend_size(handles, width, plt):
    """The most legend columns that fit the width, and the legend's height in
    inches, measured on a scratch figure."""
    scratch = plt.figure(figsize=(width, 2))
    renderer = scratch.canvas.get_renderer()
    try:
        for ncol in range(len(handles), 0, -1):
            box = scratch.legend(handles=handles, ncol=ncol, **LEGEND_STYLE).get_window_extent(renderer)
            scratch.legends.clear()
            if box.width <= 0.98 * width * scratch.dpi or ncol == 1:
                return ncol, box.height / scratch.dpi
    finally:
        plt.close(scratch)


def figure(layout, metrics, with_share, width, columns, plt, np, share=SHARE_METRIC):
    series = layout.series
    styles = {k: series_style(i) for i, k in enumerate(series)}
    # Strip rows: the series that have a non-finite sample of the metric anywhere.
    strips = {m: [k for k in series if any(layout.series_key(e) == k and m in e["metrics"]
                                           and e["samples"] - e["metrics"][m]["finite_count"] > 0
                                           for e in layout.entries)] for m in metrics}
    facets = layout.facets
    width = resolve_width(width, len(facets))
    ncols = min(len(facets), columns or balanced_columns(len(facets), MAX_COLUMNS[width]))
    nblocks = math.ceil(len(facets) / ncols)
    fig_w = WIDTHS[width]
    panel_h = min(max(fig_w / ncols * 0.7, 1.15), 1.7)
    # Counts in the strip need about 0.15 in each ("999", "all" at 5.5 pt).
    stagger = 0.85 * fig_w / ncols / max(1, len(layout.x_values)) < 0.15
    # The rows of one block of facets, with their heights in inches: per
    # metric a strip (when it has non-finite samples) and a panel, then the
    # share panel. Titles, tick labels and x labels come on top.
    block = []
    for m in metrics:
        if strips[m]:
            block.append(("strip", m, (0.19 if stagger else 0.1) * len(strips[m]) + 0.04))
        block.append(("metric", m, panel_h))
    if with_share:
        block.append(("share", share, panel_h * 0.55))
    block_h = sum(h for _, _, h in block) + (0.18 if layout.facet_axes else 0) + 0.36
    handles = legend_handles(layout, metrics, with_share, styles)
    fig, parts, grids = figure_frame(plt, np, fig_w, handles, block, block_h, nblocks, ncols)
    for f, facet in enumerate(facets):
        b, col = divmod(f, ncols)
        sub, grid = parts[1 + b], grids[b]
        top_ax, strip = None, None
        for r, (kind, m, _) in enumerate(block):
            if kind == "strip":
                strip = sub.add_subplot(grid[r, col])
                top_ax = top_ax or strip
                continue
            # Panels of a row share their y range (set explicitly below), not
            # their axes: shared axes across subfigures upset the layout.
            ax = sub.add_subplot(grid[r, col])
            top_ax = top_ax or ax
            if kind == "metric":
                limits, log_y = value_range(layout, m)
                if log_y:
                    ax.set_yscale("log")
                top = limits[1] * 10 if limits else 1.0
                has_strip = r > 0 and block[r - 1][0] == "strip"
                plot_metric(ax, strip if has_strip else None, layout, facet, m, strips[m], styles, top, col == 0,
                            stagger, np)
                if limits:
                    ax.set_ylim(*limits)
                else:
                    ax.text(0.5, 0.5, "no finite values", ha="center", va="center", transform=ax.transAxes,
                            fontsize=7, color="0.4")
                if col == 0:
                    ax.set_ylabel(METRIC_LABELS.get(m, m.replace("_", " ")))
                if has_strip:
                    style_strip(strip, ax, len(strips[m]), col == 0)
            else:
                plot_share(ax, layout, facet, styles, np, share)
                if col == 0:
                    ax.set_ylabel(SHARE_LABELS.get(share, "finite\n" + share.replace("_", " ") + " (%)"))
            set_x_axis(ax, layout, fig_w / ncols)
            ax.grid(True, which="major", color="0.88", linewidth=0.5)
            ax.set_axisbelow(True)
            if col != 0:
                ax.tick_params(axis="y", which="both", labelleft=False)
            if r == len(block) - 1:
                ax.set_xlabel(layout.x_label())
            else:
                ax.tick_params(axis="x", which="both", labelbottom=False)
        if layout.facet_axes:
            top_ax.set_title(layout.facet_title(facet), pad=3)
    return fig


def style_strip(strip, ax, rows, first_column):
    """The strip above a panel: same x as the panel, one row per series, no axes drawn."""
    strip.sharex(ax)
    strip.set_ylim(rows - 0.5, -0.5)
    strip.set_yticks([])
    strip.tick_params(axis="x", which="both", bottom=False, labelbottom=False)
    for side in ("left", "right", "top", "bottom"):
        strip.spines[side].set_visible(False)
    strip.patch.set_facecolor("0.94")
    if first_column:
        strip.set_ylabel("non-finite", rotation=0, ha="right", va="center", fontsize=6, labelpad=9)


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
    libs = import_matplotlib()
    if libs is None:
        return 2
    plt, _ = libs
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


# --- method comparison (--methods; docs/figures.md) -------------------------
# The tail drawn: p99.9 where every entry drawn holds it (reports of this
# version do), else p99 (older reports hold p10, p90, p99 only); set by plot_methods.
TAIL = "p99"


def window_entries(entries):
    """--preset position: each window o_rel_rmse_from_<p> of a seq entry as an
    entry of its own at axis position = p, its statistics under one name."""
    out = []
    for e in entries:
        for name, stats in e["metrics"].items():
            if name.startswith(WINDOW_PREFIX) and name[len(WINDOW_PREFIX):].isdigit():
                out.append({**e, "axes": {**e["axes"], "position": int(name[len(WINDOW_PREFIX):])},
                            "metrics": {WINDOW_METRIC: stats}})
    if not out:
        raise ReportError("--preset position: no entry has windows of o's error (o_rel_rmse_from_<p>): "
                          "the reports are not chunkinv seq's")
    return out


def axes_key(axes):
    """Axes as one string, equal where the configurations are (-5 and -5.0 alike)."""
    return json.dumps({k: float(v) if is_number(v) else v for k, v in axes.items()}, sort_keys=True)


def read_bench(path):
    """A `chunkinv bench --format json` report: per row its axes, the cost per
    sample in microseconds (the GPU's own time of the launches, compute_ms,
    where the path has one; the path's wall time, path_ms, on a CPU path), and
    how many methods shared the timed run it comes from."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise ReportError(f"bench report {path}: cannot be opened ({e.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ReportError(f"bench report {path}: not valid JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list) or "cpu_samples" not in doc:
        raise ReportError(f"bench report {path}: not the JSON of chunkinv bench (\"results\", \"cpu_samples\")")
    rows = []
    for i, r in enumerate(doc["results"]):
        where = f"bench report {path}: results[{i}]"
        if not isinstance(r, dict) or not isinstance(r.get("axes"), dict) or "path" not in r["axes"]:
            raise ReportError(f"{where}: \"axes\" with a path is missing")
        samples = r.get("samples")
        if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
            raise ReportError(f"{where}: \"samples\" must be a positive integer")
        gpu = r.get("compute_ms") is not None
        field = "compute_ms" if gpu else "path_ms"
        ms = number(r[field], f"{where}: {field}") if r.get(field) is not None else math.nan
        axes = dict(r["axes"])
        axes.setdefault("method", "neumann")
        if axes["path"] == "gold" and axes["method"] == "exact":
            continue  # the gold's own entry: the reference, run by no path, in every bench of the gold
        rows.append({"axes": axes, "option": r.get("path_option", axes["path"]), "field": field,
                     "cost": ms * 1e3 / samples, "threads": doc.get("threads"), "bench": path})
    # Bench times each method in runs of its own ("methods_timed_apart"); an
    # older bench ran every method of a configuration in one timed run, and
    # those rows hold one time, not one per method.
    if doc.get("methods_timed_apart") is True:
        for r in rows:
            r["shared"] = 1
        return rows
    runs = {}
    for r in rows:
        config = {k: v for k, v in r["axes"].items() if k != "method"}
        runs.setdefault((r["option"], axes_key(config)), []).append(r)
    for run in runs.values():
        for r in run:
            r["shared"] = len(run)
    return rows


class MethodLayout:
    """A panel per family and chunk size (and per value of any other axis that
    varies, but path and method), a row of panels per path, a series per
    method; x is the cost per sample, or the method where there is no cost."""

    def __init__(self, entries, costs):
        self.entries = entries
        self.costs = costs
        # Where x is a cost, a panel or a row with nothing to place is left out
        # (the note under the figure names what has no bench row).
        placed = [e for e in entries if self.x_of(e) is not None] if costs is not None else entries
        axes = list(OrderedDict.fromkeys(k for e in entries for k in e["axes"]))
        values = {a: distinct(e["axes"][a] for e in entries if a in e["axes"]) for a in axes}
        self.facet_axes = [a for a in ("family", "chunk") if a in axes]
        self.facet_axes += [a for a in axes if len(values[a]) > 1 and a not in self.facet_axes + list(SERIES_AXES)]
        order = {a: {value_text(v): i for i, v in enumerate(values[a])} for a in self.facet_axes}
        self.facets = sorted(OrderedDict.fromkeys(self.facet_key(e) for e in placed),
                             key=lambda k: [order[a].get(value_text(v), -1) for a, v in zip(self.facet_axes, k)])
        # A row of panels per family when the chunk sizes fit in one.
        self.chunks = len(values["chunk"]) if "chunk" in values else 0
        self.paths = distinct(e["axes"]["path"] for e in placed)
        self.methods = distinct(e["axes"]["method"] for e in entries)
        seen, repeated = set(), False
        for e in entries:
            key = axes_key(e["axes"])
            repeated = repeated or key in seen
            seen.add(key)
        self.by_report = repeated
        self.reports = distinct(os.path.basename(e["report"]) for e in entries)
        self.series = list(OrderedDict.fromkeys(self.series_key(e) for e in entries))
        # What set_x_axis asks of a layout, where x is the method.
        self.x, self.x_values, self.x_numeric = "method", self.methods, False

    facet_title = Layout.facet_title
    series_label = Layout.series_label

    def facet_key(self, e):
        return tuple(e["axes"].get(a, "") for a in self.facet_axes)

    def series_key(self, e):
        key = (value_text(e["axes"]["method"]),)
        return key + ((os.path.basename(e["report"]),) if self.by_report else ())

    def cost_row(self, e):
        return self.costs.get(axes_key(e["axes"])) if self.costs is not None else None

    def x_of(self, e):
        """The cost per sample (None where the bench has none), or the method's
        place, set apart per report where several hold it."""
        if self.costs is not None:
            row = self.cost_row(e)
            return row["cost"] if row and math.isfinite(row["cost"]) and row["cost"] > 0 else None
        x = float(self.methods.index(e["axes"]["method"]))
        if self.by_report:
            x += dodge(self, self.reports.index(os.path.basename(e["report"])), len(self.reports))
        return x

    def points(self, facet, path, series):
        return [e for e in self.entries if self.facet_key(e) == facet and e["axes"]["path"] == path
                and self.series_key(e) == series and self.x_of(e) is not None]


def pareto_front(points):
    """The (cost, error) points that no other point beats on both, by cost:
    each has a lower error than every cheaper one."""
    front, best = [], math.inf
    for x, y in sorted(points):
        if y < best:
            front.append((x, y))
            best = y
    return front


def cost_note(layout, wrap):
    """What the cost on x is, whether it is a cost per method, and what has none."""
    if layout.costs is None:
        return ""
    shown = [layout.cost_row(e) for e in layout.entries]
    rows = [r for r in shown if r is not None]
    measures = OrderedDict()
    for r in rows:
        what = ("GPU time of its launches (compute_ms)" if r["field"] == "compute_ms"
                else f"CPU wall time of the path (path_ms, {r['threads']} threads)")
        measures.setdefault(what, []).append(r["axes"]["path"])
    parts = ["x: time per sample from chunkinv bench; " + "; ".join(
        f"{', '.join(OrderedDict.fromkeys(paths))}: {what}" for what, paths in measures.items())
        + ". A path's time covers its whole work on a sample: forming its L, and each method on it and on the gold "
        "L (once on the gold)."]
    shared = max((r["shared"] for r in rows), default=1)
    if shared > 1:
        parts.append(f"Not a cost per method: bench timed up to {shared} methods in one run of a path, so methods "
                     "of one configuration share one time. Bench one method per run to separate them.")
    missing = [e for e, r in zip(layout.entries, shown) if r is None]
    if missing:
        names = list(OrderedDict.fromkeys(f"{e['axes']['path']} / {e['axes']['method']}" for e in missing))
        more = f" and {len(names) - 4} more" if len(names) > 4 else ""
        parts.append(f"Not drawn, no bench row: {', '.join(names[:4])}{more} ({len(missing)} entries).")
    return "\n".join(textwrap.fill(p, wrap) for p in parts)


def tail_label():
    return {"p999": "p99.9"}.get(TAIL, TAIL)


def methods_legend(layout, metric, styles, with_front):
    """The methods drawn, then what the marker, the line and the ring stand for."""
    from matplotlib.lines import Line2D

    drawn = {layout.series_key(e) for e in layout.entries if layout.x_of(e) is not None}
    handles = [Line2D([], [], color=styles[k][0], markersize=4.5, linestyle="none", label=layout.series_label(k),
                      **styles[k][1]) for k in layout.series if k in drawn]
    n = sample_counts(layout.entries)
    handles.append(Line2D([], [], color="0.4", marker="_", markersize=5, markeredgewidth=0.9, linewidth=0.9,
                          label=f"median, line up to {tail_label()} of {n}"))
    if any(math.isfinite(e["metrics"][metric]["median"]) and not math.isfinite(e["metrics"][metric][TAIL])
           for e in layout.entries):
        handles.append(Line2D([], [], color="0.4", linestyle=(0, (2, 1.5)), linewidth=0.8,
                              label=f"{tail_label()} not finite"))
    if with_front:
        handles.append(Line2D([], [], color="0.25", linestyle=":", linewidth=0.8, marker="o", markersize=6.5,
                              markerfacecolor="none", markeredgecolor="0.2", markeredgewidth=0.6,
                              label="Pareto front of the medians"))
    return handles


def plot_methods_panel(ax, strip, layout, facet, path, metric, strip_rows, styles, top, first_column, stagger):
    """Each method's median with a line up to its tail; the non-finite counts
    in the strip above; the Pareto front of the medians where x is a cost."""
    from matplotlib.transforms import offset_copy

    front = []
    for key in layout.series:
        colour, marks = styles[key]
        pts = layout.points(facet, path, key)
        for e in pts:
            x, s = layout.x_of(e), e["metrics"][metric]
            med, tail = s["median"], s[TAIL]
            if not math.isfinite(med):
                continue
            if math.isfinite(tail):
                ax.plot([x, x], [med, tail], color=colour, linewidth=0.9, alpha=0.7)
                ax.plot([x], [tail], color=colour, marker="_", markersize=5, markeredgewidth=0.9)
            else:  # open upwards: a dashed line to the top
                ax.plot([x, x], [med, top], color=colour, linestyle=(0, (2, 1.5)), linewidth=0.8, alpha=0.8)
            ax.plot([x], [med], color=colour, markersize=4, linestyle="none", zorder=3, **marks)
            front.append((x, med))
        if strip is not None and key in strip_rows:
            # Where x is a cost, methods may share a place: a row each. Where x
            # is the method, one row holds every count.
            row = strip_rows.index(key) if layout.costs is not None else 0
            if first_column and layout.costs is not None:
                # 4 pt left of the panel, whatever its width, clear of the strip's label.
                at = offset_copy(strip.get_yaxis_transform(), fig=strip.figure, x=-4, units="points")
                strip.plot([0], [row], transform=at, linestyle="none", color=colour, markersize=3.2,
                           clip_on=False, **marks)
            for e in pts:
                bad = e["samples"] - e["metrics"][metric]["finite_count"]
                y = row + (0.22 if layout.methods.index(e["axes"]["method"]) % 2 else -0.22) if stagger else row
                if bad > 0:
                    strip.text(layout.x_of(e), y, "all" if bad == e["samples"] else f"{int(bad)}", fontsize=5.5,
                               ha="center", va="center", color=colour, clip_on=False)
    if layout.costs is not None:
        front = pareto_front(front)
        if front:
            xs, ys = [p[0] for p in front], [p[1] for p in front]
            ax.step(xs, ys, where="post", color="0.25", linestyle=":", linewidth=0.8, zorder=1)
            ax.plot(xs, ys, linestyle="none", marker="o", markersize=7.5, markerfacecolor="none",
                    markeredgecolor="0.2", markeredgewidth=0.6, zorder=1)


def text_width(plt, text, size=8):
    """The width of a line of text in inches, measured on a scratch figure."""
    scratch = plt.figure(figsize=(2, 1))
    try:
        box = scratch.text(0, 0, text, fontsize=size).get_window_extent(scratch.canvas.get_renderer())
        return box.width / scratch.dpi
    finally:
        plt.close(scratch)


def cost_axis(ax, lo, hi):
    """A log axis over the costs; within two decades ticks at 1, 2 and 5 and
    their labels as plain numbers, so that a narrow range still reads."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.set_xlim(lo / 2 ** 0.7, hi * 2 ** 0.7)
    if hi / lo < 100:
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())


def methods_figure(layout, metric, width, columns, plt, np):
    series, facets = layout.series, layout.facets
    styles = {k: series_style(i) for i, k in enumerate(series)}
    with_cost = layout.costs is not None
    strips = {p: [k for k in series if any(e["axes"]["path"] == p and layout.series_key(e) == k
                                           and layout.x_of(e) is not None
                                           and e["samples"] - e["metrics"][metric]["finite_count"] > 0
                                           for e in layout.entries)] for p in layout.paths}
    strip_heights = {p: len(rows) if with_cost else min(1, len(rows)) for p, rows in strips.items()}
    width = resolve_width(width, len(facets))
    fit = layout.chunks if 0 < layout.chunks <= MAX_COLUMNS[width] else balanced_columns(len(facets), MAX_COLUMNS[width])
    ncols = min(len(facets), columns or fit)
    nblocks = math.ceil(len(facets) / ncols)
    fig_w = WIDTHS[width]
    panel_w = fig_w / ncols
    panel_h = min(max(panel_w * 0.7, 1.15), 1.7)
    stagger = not with_cost and 0.85 * panel_w / max(1, len(layout.methods)) < 0.15
    block = []
    for p in layout.paths:
        if strips[p]:
            block.append(("strip", p, (0.19 if stagger else 0.1) * strip_heights[p] + 0.04))
        block.append(("metric", p, panel_h))
    # Method names under the last row, slanted where they crowd, upright where
    # even slanted they would not fit (about 0.055 in a character at 7 pt).
    longest = max(len(m) for m in map(str, layout.methods))
    steep = not with_cost and panel_w / len(layout.methods) < 0.3
    labels = 0.36 if with_cost else 0.2 + (1.0 if steep else 0.5) * 0.055 * longest
    # Titles on two lines where "family, C = 16" is wider than a panel (the
    # width less the y labels'), and smaller where a family's name alone is.
    room = (fig_w - 0.5) / ncols - 0.1
    titles = [layout.facet_title(f) for f in facets]
    two_lines = max(text_width(plt, t) for t in titles) > room
    if two_lines:
        titles = [t.replace(", ", "\n", 1) for t in titles]
    widest = max(text_width(plt, line) for t in titles for line in t.split("\n"))
    title_size = 8 if widest <= room else max(5.5, 8 * room / widest)
    block_h = sum(h for _, _, h in block) + (0.3 if two_lines else 0.18) + labels
    # One y range per path, over every panel; x (a cost) one range for all.
    limits = {}
    for p in layout.paths:
        v = [e["metrics"][metric][k] for e in layout.entries if e["axes"]["path"] == p for k in ("median", TAIL)]
        v = [x for x in v if math.isfinite(x)]
        limits[p] = None if not v else (min(v) / 2.5, max(v) * 2.5) if min(v) > 0 else (min(v) - 1, max(v) + 1)
    xs = [x for x in (layout.x_of(e) for e in layout.entries) if x is not None]

    # A front wherever a cost and a finite median meet.
    with_front = with_cost and any(layout.x_of(e) is not None and math.isfinite(e["metrics"][metric]["median"])
                                   for e in layout.entries)
    note = cost_note(layout, int(fig_w / 0.048))
    note_h = 0.115 * (note.count("\n") + 1) + 0.06 if note else 0
    handles = methods_legend(layout, metric, styles, with_front)
    fig, parts, grids = figure_frame(plt, np, fig_w, handles, block, block_h, nblocks, ncols, note, note_h)
    for f, facet in enumerate(facets):
        b, col = divmod(f, ncols)
        sub, grid = parts[1 + b], grids[b]
        top_ax, strip = None, None
        for r, (kind, p, _) in enumerate(block):
            if kind == "strip":
                strip = sub.add_subplot(grid[r, col])
                top_ax = top_ax or strip
                continue
            ax = sub.add_subplot(grid[r, col])
            top_ax = top_ax or ax
            lim = limits[p]
            if lim and lim[0] > 0:
                ax.set_yscale("log")
            has_strip = r > 0 and block[r - 1][0] == "strip"
            plot_methods_panel(ax, strip if has_strip else None, layout, facet, p, metric, strips[p], styles,
                               lim[1] * 10 if lim else 1.0, col == 0, stagger)
            if lim:
                ax.set_ylim(*lim)
            else:
                ax.text(0.5, 0.5, "no finite values", ha="center", va="center", transform=ax.transAxes,
                        fontsize=7, color="0.4")
            if col == 0:
                ax.set_ylabel(f"{p}\n" + METRIC_LABELS.get(metric, metric.replace("_", " ")))
            if has_strip:
                style_strip(strip, ax, strip_heights[p], col == 0)
            if with_cost:
                cost_axis(ax, min(xs), max(xs))
            else:
                set_x_axis(ax, layout, panel_w)
                if steep:
                    ax.set_xticklabels([tick_text(m) for m in layout.methods], rotation=90, ha="center")
            ax.grid(True, which="major", color="0.88", linewidth=0.5)
            ax.set_axisbelow(True)
            if col != 0:
                ax.tick_params(axis="y", which="both", labelleft=False)
            if r == len(block) - 1:
                ax.set_xlabel("time per sample (µs)" if with_cost else "method")
            else:
                ax.tick_params(axis="x", which="both", labelbottom=False)
        top_ax.set_title(titles[f], pad=3, fontsize=title_size)
    return fig


def save(fig, output, dpi):
    ext = os.path.splitext(output)[1].lower()
    # No dates in the file: the same report gives the same bytes.
    metadata = {".png": {"Software": None}, ".pdf": {"CreationDate": None, "ModDate": None},
                ".svg": {"Date": None}}[ext]
    try:
        fig.savefig(output, dpi=dpi, metadata=metadata)
    except OSError as e:
        raise ReportError(f"output {output}: cannot be written ({e.strerror})") from None


# Pythons that may have matplotlib when the one running this lacks it: the
# system's (Debian's python3-matplotlib), then the python3 on PATH; or only
# the one named by CHUNKINV_PLOT_PYTHON.
OTHER_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
REEXEC_ENV = "CHUNKINV_PLOT_REEXEC"  # set in the re-executed script: never a second hop


def python_with_matplotlib():
    """Another interpreter that imports matplotlib and numpy, or None. Compared by path, not by the file it
    links to: a venv's python3 is a link to the system's and still lacks the system's packages."""
    import shutil
    import subprocess

    named = os.environ.get("CHUNKINV_PLOT_PYTHON")
    seen = {os.path.abspath(sys.executable)}
    for cand in (named,) if named else (*OTHER_PYTHONS, shutil.which("python3")):
        if not cand or not os.access(cand, os.X_OK) or os.path.abspath(cand) in seen:
            continue
        seen.add(os.path.abspath(cand))
        if subprocess.run([cand, "-c", "import matplotlib, numpy"], capture_output=True).returncode == 0:
            return cand
    return None


def import_matplotlib():
    """(plt, np), or None after one line on stderr saying how to get them. Where this interpreter lacks them
    and another has them (a venv's python3 beside the system's), the script is run again with that one."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError as err:
        other = None if os.environ.get(REEXEC_ENV) else python_with_matplotlib()
        if other:
            sys.stdout.flush()
            os.environ[REEXEC_ENV] = "1"
            os.execv(other, [other, os.path.abspath(__file__), *sys.argv[1:]])
        print(f"plot.py: {sys.executable} lacks {err.name} and no other Python here has matplotlib and numpy; "
              "install them (Debian: apt-get install python3-matplotlib; else pip install matplotlib) or name a "
              "Python that has them in CHUNKINV_PLOT_PYTHON", file=sys.stderr)
        return None
    return plt, np


def plot_methods(argv):
    """scripts/plot.py --methods REPORT... -o FILE [--cost BENCH_JSON]...: each
    method's error per family and chunk size, its median with a line up to its
    p99.9 (p99 for older reports), against its cost per sample from `chunkinv bench --format json` (the
    Pareto front marked), or against the method where no cost is given."""
    parser = argparse.ArgumentParser(prog="plot.py --methods", description=plot_methods.__doc__.split("\n")[0])
    parser.add_argument("reports", nargs="+", help="chunkinv report JSON files with a method axis")
    parser.add_argument("-o", "--output", required=True, help="FILE.png, FILE.pdf or FILE.svg")
    parser.add_argument("--cost", action="append", default=[], metavar="BENCH_JSON",
                        help="chunkinv bench --format json output (repeatable: one per bench run)")
    parser.add_argument("--metric", default=DEFAULT_METRICS[0],
                        help=f"the error (default {DEFAULT_METRICS[0]}; inv_gold_l_rel_rmse: on the exact L)")
    parser.add_argument("--where", action="append", metavar="AXIS=V1,V2",
                        help="only entries whose AXIS is one of the values (repeatable)")
    parser.add_argument("--width", choices=[*sorted(WIDTHS), "auto"], default="auto",
                        help="single: one column (3.5 in), double: the text width (7.16 in), auto (default): "
                             f"single for up to {AUTO_SINGLE} panels, else double")
    parser.add_argument("--columns", type=int,
                        help="panels per row (default: the chunk sizes where they fit, else at most 3 single, "
                             "5 double, in even rows)")
    parser.add_argument("--dpi", type=int, default=300, help="resolution of a PNG (default 300)")
    args = parser.parse_args(argv)
    if not args.output.lower().endswith(EXTENSIONS):
        parser.error("the output must end in .png, .pdf or .svg")
    if args.columns is not None and args.columns < 1:
        parser.error("--columns must be at least 1")
    metric = ALIASES.get(args.metric, args.metric)
    entries = []
    for path in args.reports:
        entries += read_report(path)
    filters = parse_where(args.where, {k for e in entries for k in e["axes"]})
    entries = [e for e in entries if keep(e, filters)]
    if not entries:
        raise ReportError("no results to plot" + (" (--where left none)" if filters else ""))
    if not any(metric in e["metrics"] for e in entries):
        known = sorted({k for e in entries for k in e["metrics"]})
        raise ReportError(f"no entry has the metric \"{metric}\"{nearest(metric, known)}; "
                          f"the reports hold: {', '.join(known)}")
    # The gold's own entry (the reference) has no error: not drawn.
    entries = [e for e in entries if metric in e["metrics"]]
    costs = None
    if args.cost:
        costs = {}
        for path in args.cost:
            for row in read_bench(path):
                key = axes_key(row["axes"])
                if key in costs:
                    raise ReportError(f"--cost: {row['axes']['path']} / {row['axes']['method']} at one configuration "
                                      f"is timed in {costs[key]['bench']} and in {path} (path {costs[key]['option']} "
                                      f"and {row['option']}); give one")
                costs[key] = row
    global TAIL
    TAIL = "p999" if all("p999" in e["metrics"][metric] for e in entries) else "p99"
    layout = MethodLayout(entries, costs)
    if not layout.facets:
        raise ReportError(f"--cost: no bench row has the configuration of an entry plotted (the bench holds "
                          f"{len(costs)} rows; were it and the run given the same axes?)")
    libs = import_matplotlib()
    if libs is None:
        return 2
    plt, np = libs
    style(plt)
    save(methods_figure(layout, metric, args.width, args.columns, plt, np), args.output, args.dpi)
    return 0


def main(argv):
    if argv and argv[0] == "--trace":
        return plot_trace(argv[1:])
    if "--methods" in argv:
        return plot_methods([a for a in argv if a != "--methods"])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("reports", nargs="+", help="chunkinv report JSON files")
    parser.add_argument("-o", "--output", required=True, help="FILE.png, FILE.pdf or FILE.svg")
    parser.add_argument("--x", help="the axis on x (default: chunk when it varies, else the first varying number)")
    parser.add_argument("--facet", help="one panel per value of this axis (any other varying axis facets too)")
    parser.add_argument("--metric", action="append", dest="metrics",
                        help=f"error metric, one row each (repeatable; default: {', '.join(DEFAULT_METRICS)})")
    parser.add_argument("--no-share", action="store_true", help="leave out the row of finite shares")
    parser.add_argument("--where", action="append", metavar="AXIS=V1,V2",
                        help="only entries whose AXIS is one of the values (repeatable)")
    parser.add_argument("--width", choices=[*sorted(WIDTHS), "auto"], default="auto",
                        help="single: one column (3.5 in), double: the text width (7.16 in), auto (default): "
                             f"single for up to {AUTO_SINGLE} panels, else double")
    parser.add_argument("--columns", type=int,
                        help="facets per row (default: at most 3 single, 5 double, in rows as even as can be)")
    parser.add_argument("--dpi", type=int, default=300, help="resolution of a PNG (default 300)")
    parser.add_argument("--preset", choices=sorted(PRESETS),
                        help="a chunkinv seq report: position (o's error per window against the position) or "
                             "seq_len (o's error, total and inverse only, against T per method, and o's finite share)")
    args = parser.parse_args(argv)
    if not args.output.lower().endswith(EXTENSIONS):
        parser.error("the output must end in .png, .pdf or .svg")
    if args.columns is not None and args.columns < 1:
        parser.error("--columns must be at least 1")
    metrics = [ALIASES.get(m, m) for m in args.metrics] if args.metrics else DEFAULT_METRICS
    share = SHARE_METRIC
    x = args.x

    entries = []
    for path in args.reports:
        entries += read_report(path)
    if args.preset:
        x_preset, metrics_preset, share_preset = PRESETS[args.preset]
        if args.preset == "position":
            if args.metrics or (x is not None and x != "position"):
                parser.error("--preset position draws the windows of o's error against the position: "
                             "leave out --metric and --x")
            entries = window_entries(entries)
        x = x or x_preset
        metrics = metrics if args.metrics else metrics_preset
        share = share_preset or share
        if share_preset is None:
            args.no_share = True
    axes_present = {k for e in entries for k in e["axes"]}
    filters = parse_where(args.where, axes_present)
    entries = [e for e in entries if keep(e, filters)]
    if not entries:
        raise ReportError("no results to plot" + (" (--where left none)" if filters else ""))
    known = sorted({k for e in entries for k in e["metrics"]})
    for m in metrics:
        if not any(m in e["metrics"] for e in entries):
            raise ReportError(f"no entry has the metric \"{m}\"{nearest(m, known)}; the reports hold: {', '.join(known)}")
    # The entries of the figure: those with an error metric shown (the gold's
    # own entry, the reference, has none).
    entries = [e for e in entries if any(m in e["metrics"] for m in metrics)]
    with_share = not args.no_share and any(share in e["metrics"] for e in entries)
    layout = Layout(entries, x, args.facet)

    libs = import_matplotlib()
    if libs is None:
        return 2
    plt, np = libs
    style(plt)
    save(figure(layout, metrics, with_share, args.width, args.columns, plt, np, share), args.output, args.dpi)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ReportError as e:
        print(f"plot.py: {e}", file=sys.stderr)
        sys.exit(2)
