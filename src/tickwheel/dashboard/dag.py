"""Lays out a workflow's DAG for the run page: layers by dependency depth, left to right.

Computed on the server so the page needs no graph library: a task's layer is the length of the
longest dependency path that reaches it (tasks with no upstream are layer 0), so every arrow
points rightwards. Within a layer, tasks sit in the order of the mean row of their upstream
tasks (one barycentre sweep, which removes most crossings of ordinary pipelines), ties broken by
the workflow's document order. The result is plain geometry for an inline SVG."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

NODE_W = 184
NODE_H = 54
COL_GAP = 64
ROW_GAP = 18
PAD = 12
LABEL_CHARS = 22


@dataclass(frozen=True)
class Node:
    name: str
    label: str
    """The name, cut to fit the box (the full name is in the node's title)."""
    layer: int
    row: int
    x: int
    y: int


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    path: str
    """SVG path data: a curve from the source's right side to the target's left side."""


@dataclass(frozen=True)
class Layout:
    layers: list[list[str]]
    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int


def depths(tasks: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Each task's layer: 0 without upstream, else one more than its deepest upstream task.
    ``tasks`` maps a name to its ``dependsOn`` (the workflow is acyclic, checked at
    registration; names outside ``tasks`` are ignored)."""
    found: dict[str, int] = {}
    for start in tasks:
        stack = [start]
        while stack:
            name = stack[-1]
            if name in found:
                stack.pop()
                continue
            missing = [d for d in tasks[name] if d in tasks and d not in found]
            if missing:
                stack.extend(missing)
                continue
            found[name] = 1 + max((found[d] for d in tasks[name] if d in tasks), default=-1)
            stack.pop()
    return found


def layers(tasks: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Tasks by layer, each layer ordered by the barycentre of its upstream rows."""
    depth = depths(tasks)
    order = {name: i for i, name in enumerate(tasks)}
    grouped: list[list[str]] = [[] for _ in range(1 + max(depth.values(), default=-1))]
    for name in tasks:
        grouped[depth[name]].append(name)
    row: dict[str, float] = {}
    for layer in grouped:

        def key(name: str) -> tuple[float, int]:
            ups = [row[d] for d in tasks[name] if d in row]
            return (sum(ups) / len(ups) if ups else float(order[name]), order[name])

        layer.sort(key=key)
        row.update({name: float(i) for i, name in enumerate(layer)})
    return grouped


def _label(name: str) -> str:
    return name if len(name) <= LABEL_CHARS else name[: LABEL_CHARS - 1] + "…"


def layout(tasks: Mapping[str, Sequence[str]]) -> Layout:
    """Positions for every task and a curve for every dependency."""
    grouped = layers(tasks)
    tallest = max((len(layer) for layer in grouped), default=0)
    height = 2 * PAD + max(0, tallest * (NODE_H + ROW_GAP) - ROW_GAP)
    width = 2 * PAD + max(0, len(grouped) * (NODE_W + COL_GAP) - COL_GAP)
    nodes: dict[str, Node] = {}
    for index, layer in enumerate(grouped):
        # Shorter layers are centred against the tallest one.
        span = len(layer) * (NODE_H + ROW_GAP) - ROW_GAP
        top = PAD + (height - 2 * PAD - span) // 2
        for row, name in enumerate(layer):
            x = PAD + index * (NODE_W + COL_GAP)
            y = top + row * (NODE_H + ROW_GAP)
            nodes[name] = Node(name, _label(name), index, row, x, y)
    edges: list[Edge] = []
    for name, upstream in tasks.items():
        for dep in upstream:
            if dep in nodes:
                edges.append(Edge(dep, name, _curve(nodes[dep], nodes[name])))
    ordered = [nodes[name] for layer in grouped for name in layer]
    return Layout(grouped, ordered, edges, width, height)


def _curve(a: Node, b: Node) -> str:
    x1, y1 = a.x + NODE_W, a.y + NODE_H // 2
    # Stop short of the box: the arrowhead (a marker) is drawn beyond the path's end.
    x2, y2 = b.x - 8, b.y + NODE_H // 2
    bend = max(24, (x2 - x1) // 2)
    return f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}"
