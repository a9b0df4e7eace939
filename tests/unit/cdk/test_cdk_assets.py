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


def test_what_the_reading_cannot_see_is_refused_or_named(root: Path) -> None:
    # Given a star import of a vendored module, and a module only imported by name at run time
    _package(root, "starry", {"handler": "from starry.names import *\n", "names": "X = 1\n"})
    _package(
        root,
        "dynamic",
        {"handler": "import importlib\nplugin = importlib.import_module('dynamic.plugin')\n", "plugin": ""},
    )

    # Then the star import is refused with what to do instead
    with pytest.raises(AssetError, match=r"star-imports starry\.names.*import the names you use"):
        handler_modules("starry.handler", ["starry"])
    # and the dynamic import is shipped once named
    assert "dynamic.plugin" not in handler_modules("dynamic.handler", ["dynamic"])
    assert "dynamic.plugin" in handler_modules(
        "dynamic.handler", ["dynamic"], extra_modules=["dynamic.plugin"]
    )


def test_imports_guarded_by_import_error_are_optional_and_python_313_removals_are_refused(root: Path) -> None:
    # Given a handler with an optional accelerator (`except ImportError`) and one using imghdr (gone in 3.13)
    _package(
        root,
        "fast",
        {"handler": "try:\n    import ujson as json\nexcept ImportError:\n    import json\n"},
    )
    _package(root, "old", {"handler": "import imghdr\n"})

    # Then the optional import neither fails nor ships; the removed module fails the synth by name
    assert set(handler_modules("fast.handler", ["fast"])) == {"fast", "fast.handler"}
    with pytest.raises(AssetError, match=r"imports imghdr, which python3\.13 no longer has"):
        handler_modules("old.handler", ["old"])


def test_a_handler_without_a_function_and_a_namespace_package_are_refused(root: Path) -> None:
    from outbox_cdk.assets import function_code

    # Given a namespace package (no __init__.py)
    (root / "loose" / "handler.py").parent.mkdir()
    (root / "loose" / "handler.py").write_text("")

    # Then it cannot be vendored, and a handler must name module.function
    with pytest.raises(AssetError, match="must be a regular package"):
        handler_modules("loose.handler", ["loose"])
    with pytest.raises(AssetError, match=r"must be module\.function"):
        function_code(None, "handler", ["loose"])  # type: ignore[arg-type]


def test_a_staged_directory_is_reused_only_while_it_holds_exactly_its_content(tmp_path: Path) -> None:
    from outbox_cdk.assets import stage_files

    # Given a staged asset of two files
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.py").write_text("A = 1\n")
    (source / "b.py").write_text("B = 2\n")
    files = {"pkg/a.py": source / "a.py", "pkg/b.py": source / "b.py"}
    staged = stage_files(files, tmp_path / "stage")
    assert stage_files(files, tmp_path / "stage") == staged

    # When someone changes one file, deletes another and adds a third
    (staged / "pkg" / "a.py").write_text("raise SystemExit('not the real code')\n")
    (staged / "pkg" / "b.py").unlink()
    (staged / "pkg" / "evil.py").write_text("")

    # Then the next staging rebuilds it with exactly the real content
    again = stage_files(files, tmp_path / "stage")
    assert again == staged
    assert sorted(path.name for path in (again / "pkg").iterdir()) == ["a.py", "b.py"]
    assert (again / "pkg" / "a.py").read_text() == "A = 1\n"
    # and no half-built directory is left behind
    assert [path.name for path in (tmp_path / "stage").iterdir()] == [again.name]


def test_a_parallel_synth_that_staged_the_same_content_first_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import shutil

    from outbox_cdk import assets

    # Given another synth that puts the very same directory in place while this one is building it
    source = tmp_path / "a.py"
    source.write_text("A = 1\n")
    files = {"pkg/a.py": source}
    real_replace = os.replace

    def raced(building: str | Path, target: str | Path) -> None:
        shutil.copytree(building, target)  # the other synth won
        real_replace(building, target)  # and so this one fails, as on a real race

    monkeypatch.setattr(os, "replace", raced)

    # When this one finishes, Then it takes the winner's directory, and cleans up its own
    staged = assets.stage_files(files, tmp_path / "stage")
    assert (staged / "pkg" / "a.py").read_text() == "A = 1\n"
    assert [path.name for path in (tmp_path / "stage").iterdir()] == [staged.name]
