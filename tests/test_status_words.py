"""Status words are compared as the enums that hold them, never as bare strings.

A room's, an execution's and a delivery's statuses are `StrEnum`s (`ranch.protocol.vocabulary`, read
back by `ranch.db.models`). A bare `"failed"` compared in one place and `ExecutionStatus.FAILED` in
another drift apart the day a word changes; this test reads every module of `src/` and fails on a
status word compared (`==`, `!=`, `in`), set as a `status`, or held in a module's constant as a bare
string. An enum's own members (a class body) are where the words are written, once.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from ranch.protocol.vocabulary import DeliveryStatus, ExecutionStatus, RoomStatus

SOURCE = Path(__file__).resolve().parent.parent / "src" / "ranch"
WORDS = frozenset(str(member) for enum in (RoomStatus, ExecutionStatus, DeliveryStatus) for member in enum)


def bare_words(node: ast.AST) -> Iterator[ast.Constant]:
    """The status words `node` spells as bare strings: itself, or in a literal tuple, list or set
    (also given to `frozenset(...)`, `set(...)`, `tuple(...)`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in WORDS:
        yield node
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for element in node.elts:
            yield from bare_words(element)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
        if node.func.id in ("frozenset", "set", "tuple"):
            yield from bare_words(node.args[0])


def found_in(tree: ast.Module) -> Iterator[ast.Constant]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                yield from bare_words(side)
        elif isinstance(node, ast.keyword) and node.arg == "status":
            yield from bare_words(node.value)
        elif isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Attribute) and target.attr == "status" for target in node.targets
        ):
            yield from bare_words(node.value)
    for statement in tree.body:  # module constants (an enum's members are in its class body, not here)
        if isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value is not None:
            yield from bare_words(statement.value)


def bare_status_words(root: Path = SOURCE) -> list[str]:
    places = []
    for path in sorted(root.rglob("*.py")):
        words = sorted(found_in(ast.parse(path.read_text())), key=lambda word: (word.lineno, word.col_offset))
        for word in words:
            places.append(f"{path.relative_to(root.parent)}:{word.lineno}: {word.value!r}")
    return places


def test_no_bare_status_word_is_compared_in_src() -> None:
    assert bare_status_words() == []


def test_a_bare_status_word_is_caught(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "bad.py").write_text(
        'FINAL = ("completed", "failed")\n'
        'def f(row, x):\n    row.status = "done"\n    return x == "ready" or x in {"running"}\n'
    )
    (tmp_path / "tasks" / "good.py").write_text(
        "from enum import StrEnum\nclass S(StrEnum):\n    DONE = 'done'\n"
        "def f(x):\n    return x == S.DONE or x == 'other'\n"
    )
    assert [place.split(":", 1)[1] for place in bare_status_words(tmp_path)] == [
        "1: 'completed'", "1: 'failed'", "3: 'done'", "4: 'ready'", "4: 'running'"
    ]  # fmt: skip
