"""`pip install .` into a fresh virtual environment gives a working library and `outbox` command.

The project's tracked sources are copied to a directory of their own and built into the wheel `pip install .`
would build; the wheel is installed, with its declared dependencies, into a new venv that has nothing else.
That venv then runs the README's library example and the `outbox` command, with no PYTHONPATH.

The install resolves the declared dependencies from the package index, as `make setup` does (pinned by
constraints.txt, so from pip's cache after `make setup`). The module runs on one test worker only: its
fixture builds one wheel and one venv.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.support.aws import create_tables, endpoint_client, moto_server, scan_all
from tests.support.readme import run_library_example

REPO_ROOT = Path(__file__).resolve().parents[2]
Installed = tuple[Path, Path]
"""The fresh venv's bin directory, and the wheel it was installed from."""


def _run(*command: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - fixed commands on paths this test made
        [str(part) for part in command], cwd=cwd, capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("install")
    source = root / "source"
    tracked = _run("git", "ls-files", "pyproject.toml", "README.md", "src", cwd=REPO_ROOT).stdout.split()
    for relative in tracked:
        destination = source / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO_ROOT / relative, destination)
    built = _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        root,
        source,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = root.glob("dynamodb_outbox-*.whl")
    environment = root / "v"
    venv.create(environment, with_pip=True)
    bin_dir = environment / "bin"
    # The declared dependencies, pinned as the project pins them, and nothing else.
    added = _run(
        bin_dir / "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "-c",
        REPO_ROOT / "constraints.txt",
        wheel,
    )
    assert added.returncode == 0, added.stderr
    return bin_dir, wheel


def test_the_wheel_holds_the_library_and_tools_but_not_the_sample_or_tests(
    installed: tuple[Path, Path],
) -> None:
    # Given the wheel `pip install .` builds
    _, wheel = installed

    # When its top-level packages are listed
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {name.split("/", 1)[0] for name in names if "/" in name and ".dist-info" not in name}

    # Then: the library, publisher, sweeper, operations, inbox, constructs, CLI and local runtime, typed
    assert tops == {
        "outbox",
        "outbox_inbox",
        "outbox_publisher",
        "outbox_tracing",
        "outbox_sweeper",
        "outbox_ops",
        "outbox_cdk",
        "outbox_cli",
        "outbox_local",
    }
    assert "outbox/py.typed" in names


def test_the_readme_library_example_runs_in_the_fresh_venv(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    bin_dir, _ = installed
    with moto_server() as endpoint:
        # Given the example's tables on an AWS endpoint
        dynamodb = endpoint_client(endpoint, "dynamodb")
        create_tables(dynamodb, orders="shipments", outbox="outbox")

        # When the README's example runs with the fresh venv's Python, from a directory of its own
        result = run_library_example(str(bin_dir / "python"), tmp_path, endpoint)

        # Then the business item and its outbox row are stored
        assert result.returncode == 0, result.stderr
        assert len(scan_all(dynamodb, "shipments")) == 1
        assert [row["status"]["S"] for row in scan_all(dynamodb, "outbox")] == ["PENDING"]


def test_the_outbox_command_runs_and_names_the_extra_a_local_command_needs(
    installed: tuple[Path, Path],
) -> None:
    bin_dir, _ = installed

    # When `outbox --help` runs from the fresh venv, Then it lists the commands
    helped = _run(bin_dir / "outbox", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "local" in helped.stdout
    assert "demo" in helped.stdout

    # When a local command runs without the `local` extra, Then it says how to get it
    local = _run(bin_dir / "outbox", "local", "up")
    assert local.returncode == 2
    assert "pip install 'dynamodb-outbox[local]'" in local.stderr
