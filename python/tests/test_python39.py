"""The package supports Python 3.9 (abi3-py39, `requires-python`): nothing
it evaluates at import may use 3.10's `X | Y` of types. Annotations are
strings (`from __future__ import annotations` in every module); aliases,
defaults, base classes and decorators are evaluated, so they are checked
here. A wheel once failed to import on Debian 11's Python 3.9 this way."""

import ast
import pathlib

import shardset

TYPES = {"int", "str", "bool", "float", "bytes", "list", "dict", "tuple", "set", "object"}


def typeish(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is None
    if isinstance(node, ast.Name):
        return node.id in TYPES or node.id[:1].isupper()
    if isinstance(node, ast.Attribute):
        return node.attr[:1].isupper()
    if isinstance(node, ast.Subscript):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return typeish(node.left) or typeish(node.right)
    return False


def statements(node: ast.AST):
    """Every statement under `node` but those of `if TYPE_CHECKING:`
    blocks, which only type checkers read."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and isinstance(child.test, ast.Name) \
                and child.test.id == "TYPE_CHECKING":
            yield from (s for b in child.orelse for s in [b, *statements(b)])
            continue
        if isinstance(child, ast.stmt):
            yield child
        yield from statements(child)


def evaluated(tree: ast.Module):
    """The expressions Python evaluates when it runs the module or calls
    its functions (not annotations, not `if TYPE_CHECKING:` blocks)."""
    for stmt in statements(tree):
        if isinstance(stmt, ast.Assign):
            yield stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            yield stmt.value
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from stmt.args.defaults
            yield from (d for d in stmt.args.kw_defaults if d is not None)
            yield from stmt.decorator_list
        elif isinstance(stmt, ast.ClassDef):
            yield from stmt.bases
            yield from stmt.decorator_list


def test_nothing_evaluated_at_import_unions_types_with_a_bar():
    root = pathlib.Path(shardset.__file__).parent
    files = sorted(root.glob("*.py"))
    assert len(files) > 5, files
    found = []
    for f in files:
        tree = ast.parse(f.read_text(), filename=str(f))
        for expr in evaluated(tree):
            for node in ast.walk(expr):
                if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr)
                        and typeish(node.left) and typeish(node.right)):
                    found.append(f"{f.name}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "3.10-only unions evaluated at import:\n" + "\n".join(found)


def test_the_check_finds_a_union_alias():
    tree = ast.parse("from typing import Any\nP = bool | Callable[[int], Any] | None\n")
    exprs = list(evaluated(tree))
    assert any(isinstance(n, ast.BinOp) and typeish(n.left) and typeish(n.right)
               for e in exprs for n in ast.walk(e))
