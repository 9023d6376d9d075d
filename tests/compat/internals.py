"""Reading a library's source for the internals a fence relies on, without importing it
(importing some, daphne's server for one, installs a Twisted reactor)."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import textwrap
from collections.abc import Callable
from pathlib import Path


def module_tree(module: str) -> ast.Module:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, f"{module} is not installed"
    return ast.parse(Path(spec.origin).read_text(), spec.origin)


def method(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == name:
                    return item
            raise AssertionError(f"{cls}.{name} is gone")
    raise AssertionError(f"class {cls} is gone")


def assigned_attributes(cls: type) -> set[str]:
    """Every ``self.<name> = ...`` in the methods of ``cls`` and its bases."""
    names = set()
    for base in cls.__mro__:
        if base is object:
            continue
        try:
            source = inspect.getsource(base)
        except (OSError, TypeError):
            continue
        for node in ast.walk(ast.parse(textwrap.dedent(source))):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                targets = [node.target]
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    names.add(target.attr)
        names |= set(vars(base))
    return names


def parameters(function: Callable[..., object]) -> list[str]:
    return list(inspect.signature(function).parameters)
