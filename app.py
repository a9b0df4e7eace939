#!/usr/bin/env python3
"""CDK entry point of the sample app (`cdk synth`, `cdk deploy`; cdk.json runs it). Knobs: docs/deploy.md."""

import os
import sys
from pathlib import Path

# Before aws_cdk starts Node: jsii would print Node 20's end-of-life banner on every cdk command
# (the Makefile sets it too; this covers `npx cdk ...` run by hand).
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

# The sample's Lambda code (functions/: orders, orders_api, order_consumers) is packaged from where
# Python finds it; cdk.json runs this file, the tests and mypy put functions/ on the path themselves.
sys.path.insert(1, str(Path(__file__).resolve().parent / "functions"))

try:
    from infra.app import build_app  # after the environment it needs
except ModuleNotFoundError as missing:
    if missing.name not in ("aws_cdk", "constructs", "cdk_nag", "outbox", "outbox_cdk"):
        raise
    # cdk.json runs `python3`: the virtual environment's only once it is activated.
    sys.exit(
        f"app.py: {missing.name} is not installed for {sys.executable}: activate the virtual environment "
        "that `pip install -r requirements.txt` filled (source .venv/bin/activate), then run cdk again"
    )

if __name__ == "__main__":
    app, _ = build_app()
    app.synth()
