"""ranch uses other projects through their public names only: no `from x import _private`, no
`import x._private`, no `module._private` of an imported module (`asyncio._get_running_loop`), no
`getattr(module, "_private")`. A private name can change in any release of its library; a public one
changes with notice (README "Development": the rule, and how to replace a library when one must)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("src/ranch", "bench", "scripts")
OURS = ("ranch", "bench", "_support")
"""Our own packages: their private names are ours to use."""


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _ours(module: str) -> bool:
    return module.split(".")[0] in OURS


def private_uses(source: str, filename: str = "<source>") -> list[str]:
    """Each use of another project's private name in `source`, as `line: what`."""
    tree = ast.parse(source, filename)
    modules: set[str] = set()  # local names bound to other projects' modules
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _ours(alias.name):
                    continue
                if any(_private(part) for part in alias.name.split(".")):
                    found.append(f"{node.lineno}: import {alias.name}")
                modules.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _ours(node.module):
                continue
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"{node.lineno}: from {node.module} import ...")
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
                else:
                    modules.add(alias.asname or alias.name)  # (a submodule or a class: either is theirs)
    return found + _private_attributes(tree, modules)


def _private_attributes(tree: ast.AST, modules: set[str]) -> list[str]:
    """`module._private` and `getattr(module, "_private")` of the modules in `modules`."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in modules:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in modules
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_private_name_of_another_project_is_used() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{use}"
        for folder in CHECKED
        for path in sorted((ROOT / folder).rglob("*.py"))
        for use in private_uses(path.read_text(), str(path))
    ]
    assert found == [], "\n".join(found)


def test_the_check_finds_each_kind_of_reach_in() -> None:
    source = """
import asyncio
import opentelemetry.util._decorator
from opentelemetry.trace.propagation import _SPAN_KEY
from opentelemetry import context as otel_context
from ranch.observe import _ours
asyncio._get_running_loop()
getattr(otel_context, "_RUNTIME_CONTEXT", None)
otel_context.attach(None).__class__
"""
    assert sorted(use.split(":")[0] for use in private_uses(source)) == ["3", "4", "7", "8"]
