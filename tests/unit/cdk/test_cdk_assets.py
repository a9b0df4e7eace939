"""The asset builder's import analysis, on small packages written for each test (no CDK, no Node)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from outbox_cdk.assets import AssetError, handler_modules


def _package(root: Path, name: str, modules: dict[str, str]) -> None:
    for relative, source in {"__init__": "", **modules}.items():
        path = root / name / f"{relative.replace('.', '/')}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_handler_takes_what_it_imports_transitively_and_nothing_else(root: Path) -> None:
    # Given a package whose handler imports two of its four modules, one of them relatively
    _package(
        root,
        "shop",
        {
            "handler": "import json\nimport boto3\nfrom shop import model\nfrom .rules import limit\n",
            "model": "from shop.money import Money\n",
            "money": "from decimal import Decimal\nMoney = Decimal\n",
            "rules": "limit = 3\n",
            "unused": "import shop.model\n",
        },
    )

    # When the handler's modules are computed
    found = handler_modules("shop.handler", ["shop"])

    # Then they are the handler, the package and what it reaches; the unused module is left out
    assert set(found) == {"shop", "shop.handler", "shop.model", "shop.money", "shop.rules"}


def test_imports_only_for_type_checking_are_not_followed(root: Path) -> None:
    # Given a handler that imports a module only under TYPE_CHECKING
    _package(
        root,
        "typed",
        {
            "handler": """
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from typed import heavy
                else:
                    from typed import light
            """,
            "heavy": "import pandas\n",
            "light": "",
        },
    )

    # When its modules are computed
    found = handler_modules("typed.handler", ["typed"])

    # Then the TYPE_CHECKING branch is skipped (its third-party import raises nothing), the else kept
    assert set(found) == {"typed", "typed.handler", "typed.light"}


def test_a_third_party_import_lambda_does_not_provide_fails_with_its_name(root: Path) -> None:
    # Given a handler importing a package neither the runtime nor the layer has
    _package(root, "needy", {"handler": "import requests\n"})

    # When its modules are computed, Then the synth-time error names the import and the way out
    with pytest.raises(AssetError, match=r"needy\.handler imports requests.*vendor it"):
        handler_modules("needy.handler", ["needy"])


def test_a_handler_outside_the_vendored_packages_and_a_missing_package_are_refused(root: Path) -> None:
    # Given a package that exists and a name that does not
    _package(root, "real", {"handler": ""})

    # Then a handler outside the vendored packages, and a vendored package Python cannot find, are errors
    with pytest.raises(AssetError, match="not a module of the vendored packages"):
        handler_modules("real.handler", [])
    with pytest.raises(AssetError, match="is not importable here"):
        handler_modules("real.handler", ["real", "no_such_package_anywhere"])
