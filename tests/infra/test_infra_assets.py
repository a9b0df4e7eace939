"""Each function's asset holds its vendored packages and everything its handler imports from this project.

The proof is an import, not a reading of the builder: each asset is imported in a fresh interpreter that
sees only the asset, the standard library and the third-party packages Lambda provides (boto3 and
botocore in the runtime, Powertools in the layer). None of this project's own source is on that path.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from tests.infra.template_queries import resources
from tests.support.synth import Synthesized

# The top-level packages of this repository's Lambda code.
FIRST_PARTY = {
    "outbox",
    "outbox_publisher",
    "outbox_sweeper",
    "outbox_inbox",
    "orders",
    "orders_api",
    "order_consumers",
}

_PROBE = """
import json, sys
handler_module, asset, first_party = sys.argv[1], sys.argv[2], set(sys.argv[3].split(","))
__import__(handler_module)
for start_up in sys.argv[4:]:  # functions of the module to call, as the handler does at start-up
    getattr(sys.modules[handler_module], start_up)()
loaded = {}
for name, module in list(sys.modules.items()):
    if name.partition(".")[0] in first_party:
        loaded[name] = getattr(module, "__file__", None)
print(json.dumps(loaded))
"""


def _functions(synthesized: Synthesized) -> dict[str, tuple[str, Path]]:
    """Logical id -> (handler module, asset directory), for every function of the template."""
    found = {}
    for logical_id, function in resources(synthesized.template, "AWS::Lambda::Function").items():
        properties = function["Properties"]
        asset_hash = properties["Code"]["S3Key"].removesuffix(".zip")
        found[logical_id] = (
            properties["Handler"].rpartition(".")[0],
            synthesized.outdir / f"asset.{asset_hash}",
        )
    return found


def _import_alone(handler_module: str, asset: Path, *start_up: str) -> dict[str, str | None]:
    """Import the handler with only the asset and Lambda's own packages importable; what got loaded."""
    # What a `-S` interpreter starts with (the standard library), then the asset first; then third-party
    # packages (boto3, botocore, Powertools) from the venv's site-packages: `-S` skips its .pth files, so
    # the editable install of this project is NOT on the path.
    path = [str(asset), *[entry for entry in _base_path() if entry], sysconfig.get_path("purelib")]
    script = f"import sys; sys.path[:] = {path!r}\n{_PROBE}"
    result = subprocess.run(  # noqa: S603 - this interpreter, our own probe
        [
            sys.executable,
            "-S",
            "-B",
            "-c",
            script,
            handler_module,
            str(asset),
            ",".join(sorted(FIRST_PARTY)),
            *start_up,
        ],
        capture_output=True,
        text=True,
        check=False,
        env={"AWS_DEFAULT_REGION": "us-east-1", "POWERTOOLS_TRACE_DISABLED": "true", "PATH": ""},
        cwd=asset,
    )
    assert result.returncode == 0, result.stderr
    loaded: dict[str, str | None] = json.loads(result.stdout)
    return loaded


def _base_path() -> list[str]:
    probe = subprocess.run(
        [sys.executable, "-S", "-c", "import json, sys; print(json.dumps(sys.path))"],
        capture_output=True,
        text=True,
        check=True,
    )
    base: list[str] = json.loads(probe.stdout)
    return base


def _shipped_modules(asset: Path) -> dict[str, Path]:
    shipped = {}
    for path in asset.rglob("*"):
        if path.is_file():
            relative = path.relative_to(asset)
            if path.suffix == ".json":
                # The one kind of data an asset ships: event schemas, beside the code that loads them.
                assert relative.parent.name == "schemas", f"{relative} is data outside a schemas folder"
                continue
            assert path.suffix == ".py", f"{relative} is not Python source: assets hold code only"
            parts = relative.with_suffix("").parts
            shipped[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return shipped


@pytest.fixture(scope="module")
def functions(synthesized: Synthesized) -> dict[str, tuple[str, Path]]:
    found = _functions(synthesized)
    assert len(found) == 5
    return found


def test_functions_that_vendor_the_same_packages_share_one_asset(
    functions: dict[str, tuple[str, Path]],
) -> None:
    # Given every function of the synthesized sample app
    # When their assets are compared
    assets = dict(functions.values())

    # Then each exists, and only functions shipping the same code share one: one upload, not one each
    assert all(asset.is_dir() for asset in assets.values())
    assert assets["outbox_publisher.handler"] == assets["outbox_sweeper.handler"]
    assert assets["order_consumers.summary_handler"] == assets["order_consumers.cancellations_handler"]
    assert len(set(assets.values())) == 3


def test_each_asset_runs_its_handler_with_nothing_but_itself_and_what_lambda_provides(
    functions: dict[str, tuple[str, Path]],
) -> None:
    for logical_id, (handler_module, asset) in functions.items():
        # Given the function's asset alone on the path
        # When its handler module is imported
        loaded = _import_alone(handler_module, asset)

        # Then it imports, and every first-party module came from the asset
        outside = {name: file for name, file in loaded.items() if not str(file).startswith(str(asset))}
        assert outside == {}, f"{logical_id} imported first-party code from outside its asset"
        assert set(loaded) <= set(_shipped_modules(asset)), logical_id


def test_the_publisher_ships_no_sample_code_and_the_api_no_publishing_code(
    functions: dict[str, tuple[str, Path]],
) -> None:
    # Given the functions' assets
    by_handler: dict[str, Any] = {module: _shipped_modules(asset) for module, asset in functions.values()}

    # When their top-level packages are read
    tops = {module: {name.partition(".")[0] for name in shipped} for module, shipped in by_handler.items()}

    # Then the publisher and the sweeper carry the library's Lambda packages; the Orders API the library, the
    # tracer and the sample
    for function in ("outbox_publisher.handler", "outbox_sweeper.handler"):
        assert tops[function] == {"outbox", "outbox_tracing", "outbox_publisher", "outbox_sweeper"}
    assert tops["orders_api.handler"] == {"outbox", "outbox_tracing", "orders", "orders_api"}
    # and each consumer the library, the tracer, the inbox and its own projections
    for consumer in ("order_consumers.summary_handler", "order_consumers.cancellations_handler"):
        assert tops[consumer] == {"outbox", "outbox_tracing", "outbox_inbox", "order_consumers"}
    # and the API does not carry what only publishing needs (the claims of rows), which the publisher does
    assert "outbox_publisher.leases" in by_handler["outbox_publisher.handler"]
    assert "outbox_publisher.leases" not in by_handler["orders_api.handler"]


def test_the_orders_api_loads_its_event_schemas_from_its_asset_with_the_layers_fastjsonschema(
    functions: dict[str, tuple[str, Path]],
) -> None:
    # Given the Orders API's asset alone on the path (and the Powertools layer's packages)
    asset = next(asset for module, asset in functions.values() if module == "orders_api.handler")
    # When its schemas are loaded as the handler loads them at start-up
    loaded = _import_alone("orders.event_schemas", asset, "load_schemas")
    # Then they load and compile, from the asset's files and code
    assert loaded["outbox.schemas"] == str(asset / "outbox" / "schemas.py")
    assert loaded["orders.event_schemas"] == str(asset / "orders" / "event_schemas.py")
    assert sorted(path.name for path in (asset / "orders" / "schemas").iterdir()) == [
        "OrderCancelled.v1.json",
        "OrderConfirmed.v1.json",
        "OrderPlaced.v1.json",
    ]
