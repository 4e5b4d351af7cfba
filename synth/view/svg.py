"""Charts and the schema diagram, drawn server-side as inline SVG (no JavaScript library)."""

from __future__ import annotations

from typing import Any, Callable

from markupsafe import Markup, escape

from synth.view.dbread import TableInfo


def _text(x: float, y: float, s: Any, cls: str = "", anchor: str = "start") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" class="{cls}" text-anchor="{anchor}">{escape(str(s))}</text>'


def bar_chart(items: list[tuple[str, float | None]], fmt: Callable[[float], str] = lambda v: f"{v:,.0f}",
              title: str = "", width: int = 520, label_width: int = 130) -> Markup:
    """Horizontal bars, one per (label, value); a missing value draws no bar."""
    bar_h, gap, top = 20, 6, 24 if title else 4
    height = top + len(items) * (bar_h + gap) + 4
    biggest = max((v or 0 for _, v in items), default=0) or 1
    room = width - label_width - 90
    parts = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             f'role="img" aria-label="{escape(title)}">']
    if title:
        parts.append(_text(0, 15, title, "chart-title"))
    for i, (label, value) in enumerate(items):
        y = top + i * (bar_h + gap)
        w = max(1.0, room * (value or 0) / biggest) if value else 0
        parts.append(_text(label_width - 6, y + 14, label, "chart-label", "end"))
        parts.append(f'<rect x="{label_width}" y="{y}" width="{w:.1f}" height="{bar_h}" class="bar"><title>'
                     f'{escape(label)}: {escape(fmt(value or 0))}</title></rect>')
        parts.append(_text(label_width + w + 6, y + 14, "-" if value is None else fmt(value), "chart-value"))
    parts.append("</svg>")
    return Markup("".join(parts))


def funnel_chart(funnel: dict[str, int | None]) -> Markup:
    first = next((v for v in funnel.values() if v), 0) or 1
    return bar_chart([(k.replace("_", "-"), v) for k, v in funnel.items()],
                     fmt=lambda v: f"{v:,.0f} ({100 * v / first:.0f}%)", title="funnel")


# ---------------------------------------------------------------------------- schema diagram

BOX_W, ROW_H, HEAD_H, COL_GAP, BOX_GAP, MAX_COLS = 230, 17, 24, 90, 26, 40


def _layers(tables: dict[str, TableInfo]) -> dict[str, int]:
    """A table's column in the diagram: 0 when it references nothing, else one right of what it references."""
    layer: dict[str, int] = {}

    def depth(name: str, seen: frozenset[str]) -> int:
        if name in layer:
            return layer[name]
        refs = [fk.ref_table for fk in tables[name].foreign_keys
                if fk.ref_table in tables and fk.ref_table != name and fk.ref_table not in seen]
        d = 1 + max((depth(r, seen | {name}) for r in refs), default=-1)
        layer[name] = d
        return d

    for name in tables:
        depth(name, frozenset())
    return layer


def schema_diagram(tables: list[TableInfo]) -> Markup:
    """Tables as boxes (columns listed, PK and FK marked) and foreign keys as curves to what they reference."""
    by_name = {t.name: t for t in tables}
    layer = _layers(by_name)
    pos: dict[str, tuple[float, float]] = {}
    heights: dict[str, float] = {}
    column_y = [0.0] * (max(layer.values(), default=0) + 1)
    for t in sorted(tables, key=lambda t: (layer[t.name], t.name)):
        col = layer[t.name]
        h = HEAD_H + min(len(t.columns), MAX_COLS) * ROW_H + 6
        pos[t.name] = (10 + col * (BOX_W + COL_GAP), 10 + column_y[col])
        heights[t.name] = h
        column_y[col] += h + BOX_GAP
    width = 20 + len(column_y) * (BOX_W + COL_GAP) - COL_GAP
    height = 10 + max(column_y, default=0)

    def row_y(table: str, column: str) -> float:
        names = [c.name for c in by_name[table].columns][:MAX_COLS]
        i = names.index(column) if column in names else 0
        return pos[table][1] + HEAD_H + i * ROW_H + ROW_H / 2 + 2

    edges, boxes = [], []
    for t in tables:
        for fk in t.foreign_keys:
            if fk.ref_table not in by_name:
                continue
            x1, y1 = pos[t.name][0], row_y(t.name, fk.columns[0])
            px, _ = pos[fk.ref_table]
            y2 = row_y(fk.ref_table, fk.ref_columns[0] or next((c.name for c in by_name[fk.ref_table].columns
                                                                if c.pk), ""))
            if px < x1:  # the usual case: what is referenced sits to the left
                x2, c1, c2 = px + BOX_W, x1 - COL_GAP / 2, px + BOX_W + COL_GAP / 2
            else:  # same column (a cycle or self reference): loop out to the left
                x2, c1, c2 = px, x1 - COL_GAP / 2, px - COL_GAP / 2
            label = f"{t.name}.{','.join(fk.columns)} → {fk.ref_table}.{','.join(fk.ref_columns)}"
            edges.append(f'<path class="fk" d="M{x1:.1f},{y1:.1f} C{c1:.1f},{y1:.1f} {c2:.1f},{y2:.1f} '
                         f'{x2:.1f},{y2:.1f}"><title>{escape(label)}</title></path>')
    for t in tables:
        x, y = pos[t.name]
        fk_cols = {c for fk in t.foreign_keys for c in fk.columns}
        boxes.append(f'<g class="table" data-table="{escape(t.name)}">'
                     f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{heights[t.name]}" rx="4" class="box"/>'
                     f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{HEAD_H}" rx="4" class="box-head"/>')
        boxes.append(_text(x + 8, y + 16, f"{t.name}", "box-title"))
        boxes.append(_text(x + BOX_W - 8, y + 16, f"{t.rows:,} rows", "box-rows", "end"))
        for i, c in enumerate(t.columns[:MAX_COLS]):
            cy = y + HEAD_H + i * ROW_H + 13
            mark = "PK" if c.pk else ("FK" if c.name in fk_cols else "")
            boxes.append(_text(x + 8, cy, mark, "col-mark"))
            boxes.append(_text(x + 32, cy, c.name, "col-name" + (" col-pk" if c.pk else "")))
            boxes.append(_text(x + BOX_W - 8, cy, c.type.lower()[:16], "col-type", "end"))
        if len(t.columns) > MAX_COLS:
            boxes.append(_text(x + 8, y + heights[t.name] - 2, f"+{len(t.columns) - MAX_COLS} more", "col-type"))
        boxes.append("</g>")
    return Markup(f'<svg class="schema" width="{width}" height="{height:.0f}" viewBox="0 0 {width} {height:.0f}" '
                  f'role="img" aria-label="schema diagram">{"".join(edges)}{"".join(boxes)}</svg>')
