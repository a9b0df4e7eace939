"""The asset builder's file list and staging, on small packages written for each test (no CDK, no Node)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from outbox_cdk.assets import AssetError, function_code, package_files


def _package(root: Path, name: str, modules: dict[str, str]) -> None:
    for relative, source in {"__init__": "", **modules}.items():
        path = root / name / f"{relative.replace('.', '/')}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_an_asset_holds_every_python_module_of_the_vendored_packages_and_nothing_else(root: Path) -> None:
    # Given two packages, one with a subpackage, a module the handler never imports, bytecode and a data file
    _package(
        root,
        "shop",
        {
            "handler": "from shop import model\n",
            "model": "",
            "unused": "",
            "sub.__init__": "",
            "sub.rules": "",
        },
    )
    _package(root, "money", {"currency": ""})
    (root / "shop" / "__pycache__").mkdir()
    (root / "shop" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"")
    (root / "shop" / "prices.json").write_text("{}")
    # and event schemas in a `schemas` folder, which ship with the code that loads them
    (root / "shop" / "schemas").mkdir()
    (root / "shop" / "schemas" / "OrderPlaced.v1.json").write_text("{}")

    # When the handler's files are listed
    found = package_files("shop.handler", ["shop", "money"])

    # Then they are every module of both packages and the schemas, by their path in the asset, no other file
    assert found == {
        relative: root / relative
        for relative in (
            "shop/__init__.py",
            "shop/handler.py",
            "shop/model.py",
            "shop/unused.py",
            "shop/sub/__init__.py",
            "shop/sub/rules.py",
            "money/__init__.py",
            "money/currency.py",
            "shop/schemas/OrderPlaced.v1.json",
        )
    }


def test_a_handler_outside_the_vendored_packages_and_a_missing_package_are_refused(root: Path) -> None:
    # Given a package that exists and a name that does not
    _package(root, "real", {"handler": ""})

    # Then a handler outside the vendored packages, and a vendored package Python cannot find, are errors
    with pytest.raises(AssetError, match="not a module of the vendored packages"):
        package_files("real.handler", [])
    with pytest.raises(AssetError, match="not a module of the vendored packages"):
        package_files("real.missing", ["real"])
    with pytest.raises(AssetError, match="is not importable here"):
        package_files("real.handler", ["real", "no_such_package_anywhere"])


def test_a_handler_without_a_function_and_a_namespace_package_are_refused(root: Path) -> None:
    # Given a namespace package (no __init__.py)
    (root / "loose" / "handler.py").parent.mkdir()
    (root / "loose" / "handler.py").write_text("")

    # Then it cannot be vendored, and a handler must name module.function
    with pytest.raises(AssetError, match="must be a regular package"):
        package_files("loose.handler", ["loose"])
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
