"""The layers the code obeys: one contract, in pyproject.toml, drawn in docs/architecture.md.

`make test` also runs import-linter on the contract; this test reads every ranch import itself
(module-level, inside functions and under TYPE_CHECKING alike), so an upward import fails here
with the file and line that made it, and the drawing cannot drift from the contract.
"""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src"


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    where: str


def contract_layers() -> list[list[str]]:
    """The layers contract of pyproject.toml, top first; names in one layer are independent."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return [[name.strip() for name in layer.split("|")] for layer in contract["layers"]]


def drawn_layers() -> list[list[str]]:
    """The layers docs/architecture.md draws, in its ```layers block."""
    block = re.search(r"```layers\n(.*?)```", (ROOT / "docs" / "architecture.md").read_text(), re.S)
    assert block is not None, "docs/architecture.md has no ```layers block"
    rows = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    return [[f"ranch.{name.strip()}" for name in row.split("|")] for row in rows if row]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(SOURCE).with_suffix("").parts).removesuffix(".__init__")


def import_edges(root: Path = SOURCE / "ranch") -> list[Edge]:
    edges = []
    for path in sorted(root.rglob("*.py")):
        importer = module_name(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            edges += [Edge(importer, name, where) for name in names if name.startswith("ranch.")]
    return edges


def layer_of(module: str, layers: list[list[str]]) -> tuple[int, str] | None:
    for index, layer in enumerate(layers):
        for name in layer:
            if module == name or module.startswith(name + "."):
                return index, name
    return None


def violations(edges: list[Edge], layers: list[list[str]]) -> list[str]:
    """Every import that goes up a layer, or across to an independent neighbour."""
    found = []
    for edge in edges:
        source, target = layer_of(edge.importer, layers), layer_of(edge.imported, layers)
        if source is None or target is None or source[1] == target[1]:
            continue
        if target[0] < source[0] or target[0] == source[0]:
            found.append(f"{edge.where}: {edge.importer} imports {edge.imported}")
    return found


def test_the_code_imports_only_downward() -> None:
    assert violations(import_edges(), contract_layers()) == []


def test_every_package_has_a_layer() -> None:
    layers = contract_layers()
    packages = {module_name(path) for path in (SOURCE / "ranch").glob("*.py")}
    packages |= {module_name(path.parent) for path in (SOURCE / "ranch").glob("*/__init__.py")}
    packages -= {"ranch", "ranch.__main__"}  # the package face and `python -m ranch` sit above it all
    assert sorted(p for p in packages if layer_of(p, layers) is None) == []


def test_an_upward_or_sideways_import_is_caught() -> None:
    layers = contract_layers()
    upward = Edge("ranch.wire.cards", "ranch.agents.base", "x.py:1")
    sideways = Edge("ranch.edge.guards", "ranch.rooms.bus", "y.py:2")
    downward = Edge("ranch.routing.router", "ranch.agents.base", "z.py:3")
    assert violations([upward, sideways, downward], layers) == [
        "x.py:1: ranch.wire.cards imports ranch.agents.base",
        "y.py:2: ranch.edge.guards imports ranch.rooms.bus",
    ]


def test_docs_draw_the_contract() -> None:
    assert drawn_layers() == contract_layers()
