"""Plots of reports (matplotlib, Agg backend; written atomically)."""
from __future__ import annotations

import io
from typing import Any

from .formats import atomic_write


def compare_plot(result: dict[str, Any], path: str) -> str:
    """Interactivity (tokens/s per user) against energy efficiency (tokens per joule) and against throughput
    per cost (tokens/s per $M of capex), one point per fabric."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fabrics = result["fabrics"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), constrained_layout=True)
    for ax, key, label in ((axes[0], "energy_per_token_j", "energy efficiency (tokens / J)"),
                           (axes[1], "tokens_per_s_per_musd", "throughput per cost (tokens/s per $M capex)")):
        for name, r in fabrics.items():
            x = r["tokens_per_s_per_user"]
            y = 1.0 / r[key] if key == "energy_per_token_j" else r[key]
            ax.scatter([x], [y], s=60 if name != result["baseline"] else 110,
                       marker="o" if name != result["baseline"] else "*")
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=9)
        ax.set_xlabel("interactivity (tokens/s per user)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{result.get('instance', '')}: fabrics compared ({result.get('fidelity', '')}), "
                 f"baseline {result['baseline']}")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return atomic_write(path, buf.getvalue())
