"""The layers the code obeys: contracts in pyproject.toml, drawn in docs/architecture.md.

One contract layers the packages; others layer the modules inside a package (`containers`), as
between packages. `make test` also runs import-linter on them; this test reads every ranch import
itself (module-level, inside functions and under TYPE_CHECKING alike), so an upward import fails
here with the file and line that made it, and the drawings cannot drift from the contracts.
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


def layer_contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]


def contract_layers(container: str | None = None) -> list[list[str]]:
    """A layers contract of pyproject.toml, top first (the packages', or the one inside `container`),
    as full module names; names in one layer are independent."""
    (contract,) = [c for c in layer_contracts() if c.get("containers", [None]) == [container]]
    layers = contract["layers"]
    assert isinstance(layers, list)
    prefix = f"{container}." if container else ""
    return [[prefix + name.strip() for name in layer.split("|")] for layer in layers]


def containers() -> list[str]:
    """The packages whose insides a contract layers."""
    return [str(name) for c in layer_contracts() for name in c.get("containers", [])]  # type: ignore[attr-defined]


def drawn_layers(container: str | None = None) -> list[list[str]]:
    """The layers docs/architecture.md draws: the packages' in its ```layers block, a package's
    insides in its ```layers <package> block."""
    tag = f" {container.removeprefix('ranch.')}" if container else ""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(rf"```layers{re.escape(tag)}\n(.*?)```", text, re.S)
    assert block is not None, f"docs/architecture.md has no ```layers{tag} block"
    rows = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    prefix = f"{container}." if container else "ranch."
    return [[prefix + name.strip() for name in row.split("|")] for row in rows if row]


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


# -- inside a package ----------------------------------------------------------------------------------


def ignored(container: str) -> set[tuple[str, str]]:
    """The imports a package's contract ignores (`a -> b`): types named under TYPE_CHECKING only."""
    (contract,) = [c for c in layer_contracts() if c.get("containers") == [container]]
    lines = contract.get("ignore_imports", [])
    assert isinstance(lines, list)
    return {(a.strip(), b.strip()) for a, b in (line.split("->") for line in lines)}


def test_inside_each_layered_package_the_code_imports_only_downward() -> None:
    assert containers(), "no contract layers the inside of a package"
    for container in containers():
        skip = ignored(container)
        inside = [
            e
            for e in import_edges()
            if e.importer.startswith(container + ".") and (e.importer, e.imported) not in skip
        ]
        assert violations(inside, contract_layers(container)) == [], container


def test_every_module_of_a_layered_package_has_a_layer() -> None:
    for container in containers():
        package = SOURCE.joinpath(*container.split("."))
        modules = {module_name(path) for path in package.glob("*.py")} - {container}
        modules |= {module_name(path.parent) for path in package.glob("*/__init__.py")}
        layers = contract_layers(container)
        assert sorted(m for m in modules if layer_of(m, layers) is None) == [], container


def test_docs_draw_the_contracts_inside_packages() -> None:
    for container in containers():
        assert drawn_layers(container) == contract_layers(container), container
