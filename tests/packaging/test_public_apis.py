"""The product uses botocore, boto3 and Powertools through their public APIs only: a private name can change
in any release of theirs, and our code would break on a dependency bump that says nothing about it.

Every module under src/, functions/ and infra/ is parsed (AST, nothing imported) and checked for:
- `from X import _y`, `import X._y`, `from X._y import z` (X one of the three packages);
- an attribute `_y` anywhere in a chain rooted at a dependency value: a name bound by an import from them,
  a module-level name assigned from calling one (`metrics = Metrics()`), a variable or parameter annotated
  with one, or `self`/`cls`/`super()` in a class that subclasses one of theirs and does not define `_y`
  itself (its own private names are ours); `getattr`/`hasattr`/`setattr` with such a name as a literal;
- a write into a dependency object's state: assigning to or deleting an attribute or item reached from a
  dependency value (`metrics.provider.metric_set[name] = ...`, directly or through a local bound to such an
  attribute chain), or calling a container's mutating method on it (`.append`, `.clear`, ...). Writes
  through `self` in a subclass are the subclass's own.
Limits: names are followed within one module and without types, so a dependency object reached through a
call's result, a container, or another module is not seen; a dunder (`__name__`) is public. What it reports
is always a real use; what it misses, review does.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPENDENCIES = ("botocore", "boto3", "aws_lambda_powertools")
PRODUCT = ("src", "functions", "infra")
EXEMPT: set[str] = set()
MUTATORS = frozenset(
    [
        "append",
        "extend",
        "insert",
        "clear",
        "update",
        "pop",
        "popitem",
        "setdefault",
        "remove",
        "add",
        "discard",
    ]
)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _ours(module: str | None) -> bool:
    return module is not None and module.split(".")[0] in DEPENDENCIES


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node


def _through_self(node: ast.expr) -> bool:
    """Rooted at `self`, `cls` or `super()` (in a subclass: its own state, or its base's)."""
    root = _root(node)
    return isinstance(root, ast.Call) or (isinstance(root, ast.Name) and root.id in ("self", "cls"))


def _chain(node: ast.expr) -> list[str]:
    """The attribute names of `node`'s chain, outermost last."""
    names = []
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
        node = node.value
    return names[::-1]


class Checker(ast.NodeVisitor):
    """Finds the uses the module docstring lists in one module."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[str] = []
        self.dependency_names: set[str] = set()
        """Names bound in the module to a dependency's module, class, function or instance."""
        self.scopes: list[set[str]] = [set()]
        """Per function: local names bound to a dependency value or an attribute chain of one."""
        self.classes: list[tuple[bool, set[str]]] = []
        """Per class being visited: does it subclass a dependency class, and the names it defines."""

    def report(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.path}:{getattr(node, 'lineno', 0)}: {what}")

    # --- what is a dependency value ---
    def is_dependency(self, node: ast.expr) -> bool:
        root = _root(node)
        if isinstance(root, ast.Call):
            return isinstance(root.func, ast.Name) and root.func.id == "super" and self.in_subclass()
        if not isinstance(root, ast.Name):
            return False
        if root.id in ("self", "cls"):
            return self.in_subclass()
        return root.id in self.dependency_names or any(root.id in scope for scope in self.scopes)

    def in_subclass(self) -> bool:
        return bool(self.classes) and self.classes[-1][0]

    def own(self, name: str) -> bool:
        return bool(self.classes) and name in self.classes[-1][1]

    def annotated(self, annotation: ast.expr | None) -> bool:
        """`X`, `X | None`, `Optional[X]` with X a dependency's class (not a container of them)."""
        if isinstance(annotation, ast.BinOp):
            return self.annotated(annotation.left) or self.annotated(annotation.right)
        if isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value).endswith("Optional"):
            return self.annotated(annotation.slice)
        return isinstance(annotation, ast.Name | ast.Attribute) and self.is_dependency(annotation)

    # --- imports ---
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _ours(alias.name):
                if any(_private(part) for part in alias.name.split(".")):
                    self.report(node, f"import {alias.name}")
                self.dependency_names.add(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not _ours(node.module):
            return
        assert node.module is not None
        if any(_private(part) for part in node.module.split(".")):
            self.report(node, f"from {node.module} import ...")
        for alias in node.names:
            if _private(alias.name):
                self.report(node, f"from {node.module} import {alias.name}")
            self.dependency_names.add(alias.asname or alias.name)

    # --- scopes ---
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        subclass = any(self.is_dependency(base) for base in node.bases)
        defined = set()
        for item in ast.walk(node):
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                defined.add(item.name)
            elif isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store):
                if isinstance(item.value, ast.Name) and item.value.id in ("self", "cls"):
                    defined.add(item.attr)
            elif isinstance(item, ast.Name) and isinstance(item.ctx, ast.Store):
                defined.add(item.id)
        self.classes.append((subclass, defined))
        self.generic_visit(node)
        self.classes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        arguments = node.args
        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg]
        every.append(arguments.kwarg)
        self.scopes.append({each.arg for each in every if each and self.annotated(each.annotation)})
        self.generic_visit(node)
        self.scopes.pop()

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.visit_FunctionDef(node)

    # --- bindings and writes ---
    def bind(self, target: ast.expr, value: ast.expr | None, annotation: ast.expr | None = None) -> None:
        if not isinstance(target, ast.Name):
            return
        bound = self.annotated(annotation) or (
            value is not None
            and (
                (isinstance(value, ast.Attribute | ast.Subscript | ast.Name) and self.is_dependency(value))
                or (len(self.scopes) == 1 and isinstance(value, ast.Call) and self.is_dependency(value.func))
            )
        )
        scope = self.scopes[-1] if len(self.scopes) > 1 else self.dependency_names
        if bound:
            scope.add(target.id)
        elif len(self.scopes) > 1:
            scope.discard(target.id)

    def write(self, target: ast.expr, node: ast.AST) -> None:
        if not isinstance(target, ast.Attribute | ast.Subscript) or not self.is_dependency(target):
            return
        if _through_self(target):
            return  # a subclass's own state
        self.report(node, f"writes into a dependency object: {ast.unparse(target)}")

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        for target in node.targets:
            self.write(target, node)
            self.bind(target, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.generic_visit(node)
        self.write(node.target, node)
        self.bind(node.target, node.value, node.annotation)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.generic_visit(node)
        self.write(node.target, node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self.generic_visit(node)
        for target in node.targets:
            self.write(target, node)

    # --- reads ---
    def visit_Attribute(self, node: ast.Attribute) -> None:
        ours = _through_self(node) and len(_chain(node)) == 1 and self.own(node.attr)
        if _private(node.attr) and self.is_dependency(node.value) and not ours:
            self.report(node, f"private name {ast.unparse(node)}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        if (
            isinstance(function, ast.Name)
            and function.id in ("getattr", "hasattr", "setattr", "delattr")
            and len(node.args) >= 2
            and isinstance(name := node.args[1], ast.Constant)
            and isinstance(name.value, str)
            and _private(name.value)
            and self.is_dependency(node.args[0])
            and not self.own(name.value)
        ):
            self.report(node, f"private name {function.id}(..., {name.value!r})")
        if (
            isinstance(function, ast.Attribute)
            and function.attr in MUTATORS
            and isinstance(function.value, ast.Attribute | ast.Subscript | ast.Name)
        ):
            receiver = function.value
            local = isinstance(receiver, ast.Name)
            aliased = local and any(receiver.id in scope for scope in self.scopes[1:])  # type: ignore[union-attr]
            chained = not local and self.is_dependency(receiver)
            if (aliased or chained) and not _through_self(receiver):
                self.report(node, f"writes into a dependency object: {ast.unparse(function)}(...)")
        self.generic_visit(node)


def check(source: str, path: str = "<module>") -> list[str]:
    checker = Checker(path)
    checker.visit(ast.parse(source, path))
    return checker.found


def _product() -> Iterator[Path]:
    for top in PRODUCT:
        yield from sorted((ROOT / top).rglob("*.py"))


def test_the_product_uses_no_private_name_or_state_of_botocore_boto3_or_powertools() -> None:
    found = []
    for path in _product():
        relative = path.relative_to(ROOT).as_posix()
        if relative not in EXEMPT:
            found += check(path.read_text(encoding="utf-8"), relative)
    assert not found, "\n".join(found)


def test_every_exemption_is_a_product_module_that_still_needs_it() -> None:
    for relative in EXEMPT:
        path = ROOT / relative
        assert path.is_file(), relative
        assert check(path.read_text(encoding="utf-8"), relative), f"{relative} needs no exemption"


@pytest.mark.parametrize(
    "source",
    [
        "from botocore.loaders import _private_thing",
        "import botocore._helpers",
        "from boto3._internal import session",
        "from aws_lambda_powertools import Tracer\nTracer._is_tracer_disabled()",
        "import botocore.session\nbotocore.session._x",
        "from botocore.loaders import Loader\nclass L(Loader):\n    def f(self):\n"
        "        return self._find_extras()",
        "from botocore.loaders import Loader\nclass L(Loader):\n    def f(self):\n"
        "        return super()._cache",
        "from botocore.loaders import Loader\nclass L(Loader):\n    def f(self):\n"
        "        return hasattr(self, '_extras_processor')",
        "from aws_lambda_powertools import Metrics\nmetrics = Metrics()\nmetrics.provider._flag = 1",
        "from aws_lambda_powertools import Metrics\nmetrics = Metrics()\n"
        "metrics.provider.metric_set['a'] = 1",
        "from aws_lambda_powertools import Metrics\ndef f(metrics: Metrics):\n"
        "    metric_set = metrics.provider.metric_set\n    metric_set['a'] = 1",
        "from aws_lambda_powertools import Metrics\ndef f(metrics: Metrics):\n"
        "    metrics.provider.metric_set.clear()",
        "from aws_lambda_powertools import Metrics\ndef f(metrics: Metrics):\n"
        "    values = metrics.provider.metric_set\n    values.update({})",
        "import boto3\nboto3.DEFAULT_SESSION = None",
    ],
)
def test_each_private_use_is_found(source: str) -> None:
    assert check(source)


@pytest.mark.parametrize(
    "source",
    [
        "from aws_lambda_powertools import Metrics\nmetrics = Metrics()\n"
        "metrics.add_metric(name='a', unit='Count', value=1)",
        "import logging\nfrom aws_lambda_powertools.metrics.provider.cloudwatch_emf import cloudwatch\n"
        "log = logging.getLogger(cloudwatch.__name__)",
        "from botocore.loaders import Loader\nclass L(Loader):\n"
        "    def _mine(self):\n        return self._own\n"
        "    def __init__(self):\n        self._own = 1\n        self.cache = {}\n        self.cache.clear()",
        "import boto3\ndef f():\n    items = []\n    items.append(boto3.client('s3'))\n    answer = {}\n"
        "    answer['a'] = 1",
        "class _Ours:\n    _x = 1\n_Ours._x",
        "from aws_lambda_powertools.metrics import MetricUnit\n"
        "STORED: dict[str, MetricUnit] = {}\nSTORED['a'] = 1",
    ],
)
def test_public_uses_and_our_own_names_pass(source: str) -> None:
    assert not check(source)
