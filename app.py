#!/usr/bin/env python3
"""CDK entry point (`cdk synth`, `cdk deploy`). Knobs: see docs/deploy.md."""

from infra.app import build_app

if __name__ == "__main__":
    app, _ = build_app()
    app.synth()
