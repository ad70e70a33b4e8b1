"""Server-side SVG line charts of a queue's history (works without JavaScript, no chart library)."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from xml.sax.saxutils import escape, quoteattr

from admin_ui.format import fmt
from admin_ui.schemas import QueueHistory

WIDTH, HEIGHT = 640, 200
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 26, 22
GRID_LINES = 4
LOAD_CHART_CAP = 10.0  # 1000%
MAX_LINES = 6


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    color: str
    points: Sequence[tuple[float, float]]
    dashed: bool = False


@dataclass(frozen=True, slots=True)
class ChartSpec:
    title: str
    y_format: str
    series: tuple[tuple[str, str, str, bool], ...]  # (label, QueuePoint field, color, dashed)
    cap: float | None = None  # values above are drawn at the cap (an "infinite" load would flatten the rest)


QUEUE_CHARTS: dict[str, ChartSpec] = {
    "slots": ChartSpec("Slots", "f1", (
        ("current", "slots_current", "#1f6feb", False),
        ("average", "slots_avg", "#8250df", False),
        ("desired", "slots_desired", "#d1242f", True),
        ("min", "min_slots", "#57606a", True),
        ("max", "max_slots", "#57606a", True),
    )),
    "load": ChartSpec("Load", "pct", (("load", "load", "#d1242f", False),), cap=LOAD_CHART_CAP),
    "jobs": ChartSpec("Jobs in the queue", "int", (
        ("waiting", "waiting", "#1f6feb", False),
        ("locked", "running", "#bf8700", False),
        ("delayed", "delayed", "#57606a", True),
    )),
    "throughput": ChartSpec("Throughput", "f1", (
        ("jobs/s", "jobs_per_s", "#1a7f37", False),
        ("errors/plan", "errors", "#d1242f", True),
    )),
}


def y_axis(top: float, *, whole: bool = False) -> tuple[float, int]:
    """(step, lines): a 1, 2 or 5 x 10^k step (>= 1 if `whole`), at most MAX_LINES steps up to `top`."""
    if top <= 0:
        return (1.0 if whole else 0.25), GRID_LINES
    raw = top / MAX_LINES
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))
    if whole:
        step = max(step, 1.0)
    return step, max(1, math.ceil(top / step - 1e-9))


def _time_label(at_unix: float, span_s: float) -> str:
    moment = datetime.fromtimestamp(at_unix, UTC)
    return moment.strftime("%m-%d %H:%M" if span_s > 86400 else "%H:%M")


def line_chart(
    series: Sequence[Series], *, title: str, y_format: str, t0: float, t1: float,
    y_lines: Sequence[tuple[str, float]] = (), width: int = WIDTH, height: int = HEIGHT,
) -> str:
    """An SVG document: `series` over [t0, t1], y from 0, horizontal reference `y_lines`."""
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM
    values = [v for s in series for _, v in s.points] + [v for _, v in y_lines]
    step, lines = y_axis(max(values, default=0.0), whole=y_format == "int")
    y_max = step * lines
    span = max(t1 - t0, 1e-9)

    def x(t: float) -> float:
        return LEFT + (t - t0) / span * plot_w

    def y(v: float) -> float:
        return TOP + plot_h - v / y_max * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" font-family="sans-serif" font-size="11" role="img">',
        f"<title>{escape(title)}</title>",
        f'<text x="{LEFT}" y="14" font-weight="bold" font-size="12">{escape(title)}</text>',
    ]
    for i in range(lines + 1):
        value = step * i
        parts.append(f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
                     f'stroke="#d0d7de" stroke-width="1"/>')
        parts.append(f'<text x="{LEFT - 4}" y="{y(value) + 4:.1f}" text-anchor="end" fill="#57606a">'
                     f"{escape(fmt(value, y_format))}</text>")
    for i in range(5):
        t = t0 + span * i / 4
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        parts.append(f'<text x="{x(t):.1f}" y="{height - 6}" text-anchor="{anchor}" fill="#57606a">'
                     f"{escape(_time_label(t, span))}</text>")
    for label, value in y_lines:
        parts.append(f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
                     f'stroke="#57606a" stroke-dasharray="2 3"><title>{escape(label)}</title></line>')
    legend_x = width - RIGHT
    for s in reversed(series):
        legend_x -= 12 + 7 * len(s.name)
        parts.append(f'<rect x="{legend_x}" y="6" width="9" height="9" fill="{s.color}"/>'
                     f'<text x="{legend_x + 12}" y="14">{escape(s.name)}</text>')
    for s in series:
        if not s.points:
            continue
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in s.points)
        dash = ' stroke-dasharray="5 3"' if s.dashed else ""
        parts.append(f'<polyline fill="none" stroke="{s.color}" stroke-width="1.6"{dash} '
                     f'points={quoteattr(path)}><title>{escape(s.name)}</title></polyline>')
    if not any(s.points for s in series):
        parts.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{TOP + plot_h / 2:.1f}" text-anchor="middle" '
                     'fill="#57606a">no samples in this range</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def queue_chart(history: QueueHistory, name: str, *, target_load: float) -> str:
    """One of QUEUE_CHARTS (KeyError for another name) drawn from `history`."""
    spec = QUEUE_CHARTS[name]
    cap = spec.cap if spec.cap is not None else math.inf
    series = [
        Series(label, color, [(p.at_unix, min(getattr(p, field), cap)) for p in history.points], dashed)
        for label, field, color, dashed in spec.series
    ]
    y_lines = [("target", target_load)] if name == "load" else []
    return line_chart(series, title=f"{history.queue}: {spec.title}", y_format=spec.y_format,
                      t0=history.since_unix, t1=history.until_unix, y_lines=y_lines)
