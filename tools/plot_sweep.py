#!/usr/bin/python3
"""Pictures from a tpsim sweep CSV.

  tools/plot_sweep.py results.csv heatmap X_FIELD Y_FIELD [-o speedup.png] [--where FIELD=VALUE ...]
      speedup over baseline on two axes, one panel per variant, with the break-even contour
  tools/plot_sweep.py results.csv lines X_FIELD [-o time.png] [--where FIELD=VALUE ...]
      makespan against one axis, one line per variant
  tools/plot_sweep.py results.csv exposed [-o exposed.png] [--where FIELD=VALUE ...]
      a training-step sweep: communication left exposed per mesh dimension (ms per step),
      one row per point (labelled by the axes that vary, with its tokens/s per GPU)

Fields are the CSV's axis columns (workload.m, hardware, ...). Uses Debian's
python3-matplotlib and installs it when missing (as root), or says how.
"""
import argparse
import csv
import os
import subprocess
import sys


def ensure_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        probe = subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"], capture_output=True)
        if probe.returncode == 0:
            os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    if os.geteuid() == 0:
        print("plot_sweep: installing python3-matplotlib", file=sys.stderr)
        subprocess.run(["apt-get", "update", "-qq"], check=True, stdout=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "-qq", "python3-matplotlib"], check=True, stdout=sys.stderr,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit("plot_sweep: needs matplotlib; run: sudo apt-get install -y python3-matplotlib")


def save_atomic(fig, out):
    """The whole picture or none of it: written beside `out` under a temporary name, then renamed."""
    d, base = os.path.split(os.path.abspath(out))
    tmp = os.path.join(d, f".tmp_{os.getpid()}_{base}")
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format=os.path.splitext(out)[1][1:] or "png")
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def number(text):
    try:
        return float(text)
    except ValueError:
        return None


def read_rows(path, where):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"plot_sweep: {path}: no rows")
    for cond in where:
        field, _, value = cond.partition("=")
        if field not in rows[0]:
            sys.exit(f"plot_sweep: --where {cond}: no column {field!r}")
        rows = [r for r in rows if r[field] == value]
    return rows


def ordered(values):
    values = list(values)
    nums = [number(v) for v in values]
    if all(n is not None for n in nums):
        return sorted(set(values), key=float)
    return sorted(set(values))


def heatmap(rows, xf, yf, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    variants = [v for v in dict.fromkeys(r["variant"] for r in rows) if v != "baseline"]
    xs, ys = ordered(r[xf] for r in rows), ordered(r[yf] for r in rows)
    fig, axes = plt.subplots(1, len(variants), figsize=(4.2 * len(variants) + 1, 3.8), squeeze=False)
    for ax, variant in zip(axes[0], variants):
        grid = np.full((len(ys), len(xs)), np.nan)
        for r in rows:
            if r["variant"] == variant and r["speedup_vs_baseline"]:
                grid[ys.index(r[yf]), xs.index(r[xf])] = float(r["speedup_vs_baseline"])
        im = ax.imshow(grid, origin="lower", cmap="RdYlGn", vmin=0.5, vmax=1.5, aspect="auto")
        if np.nanmin(grid) < 1 < np.nanmax(grid):
            ax.contour(grid, levels=[1.0], colors="black", linewidths=1.5)
        for (i, j), v in np.ndenumerate(grid):
            if not np.isnan(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(xs)), xs, rotation=45, fontsize=8)
        ax.set_yticks(range(len(ys)), ys, fontsize=8)
        ax.set_xlabel(xf)
        ax.set_ylabel(yf)
        ax.set_title(f"{variant} speedup over baseline")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="speedup (black line: break-even)")
    save_atomic(fig, out)


def lines(rows, xf, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 4))
    numeric = all(number(r[xf]) is not None for r in rows)
    for variant in dict.fromkeys(r["variant"] for r in rows):
        pts = sorted(((float(r[xf]) if numeric else r[xf], float(r["makespan_us"])) for r in rows if r["variant"] == variant))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=variant)
    if numeric:
        ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xf)
    ax.set_ylabel("makespan (us)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    save_atomic(fig, out)


def exposed(rows, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import LogNorm
    columns = list(rows[0])
    dims = [c[len("exposed_"):-len("_ms")] for c in columns if c.startswith("exposed_") and c.endswith("_ms")]
    if not dims:
        sys.exit("plot_sweep: exposed needs a training-step sweep CSV (exposed_<dim>_ms columns)")
    axes = columns[1:columns.index("variant")]
    varying = [a for a in axes if len({r[a] for r in rows}) > 1]
    if len({r["variant"] for r in rows}) > 1:
        varying.append("variant")
    dims = [d for d in dims if any(float(r[f"exposed_{d}_ms"]) > 0 for r in rows)]
    grid = np.array([[float(r[f"exposed_{d}_ms"]) for d in dims] for r in rows])
    labels = [" / ".join(r[a] for a in varying) + f"   ({float(r['tokens_per_s_per_gpu']):.0f} tok/s/GPU)" for r in rows]
    fig, ax = plt.subplots(figsize=(1.1 * len(dims) + 4.5, 0.42 * len(rows) + 1.4))
    shown = np.where(grid > 0, grid, np.nan)
    positive = grid[grid > 0]
    im = ax.imshow(shown, cmap="OrRd", aspect="auto",
                   norm=LogNorm(vmin=max(positive.min(), 1e-3), vmax=positive.max()) if positive.size else None)
    for (i, j), v in np.ndenumerate(grid):
        dark = v > 0 and im.norm(v) > 0.65
        ax.text(j, i, f"{v:.0f}" if v >= 10 else f"{v:.1f}", ha="center", va="center", fontsize=8,
                color="white" if dark else "black")
    ax.set_xticks(range(len(dims)), dims)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.set_xlabel("mesh dimension")
    ax.set_title("communication left exposed, ms per step", fontsize=10)
    fig.colorbar(im, ax=ax, shrink=0.8, label="ms (log scale)")
    save_atomic(fig, out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv")
    p.add_argument("kind", choices=["heatmap", "lines", "exposed"])
    p.add_argument("fields", nargs="*")
    p.add_argument("-o", "--output")
    p.add_argument("--where", action="append", default=[], help="keep rows with FIELD=VALUE")
    a = p.parse_args()
    ensure_matplotlib()
    rows = read_rows(a.csv, a.where)
    for f in a.fields:
        if f not in rows[0]:
            sys.exit(f"plot_sweep: no column {f!r} (columns: {', '.join(rows[0])})")
    if a.kind == "exposed":
        if a.fields:
            sys.exit("plot_sweep: exposed takes no fields (rows are the sweep's points)")
        exposed(rows, a.output or "exposed.png")
    elif a.kind == "heatmap":
        if len(a.fields) != 2:
            sys.exit("plot_sweep: heatmap needs two fields")
        heatmap(rows, a.fields[0], a.fields[1], a.output or "speedup.png")
    else:
        if len(a.fields) != 1:
            sys.exit("plot_sweep: lines needs one field")
        lines(rows, a.fields[0], a.output or "time.png")


if __name__ == "__main__":
    main()
