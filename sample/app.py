#!/usr/bin/env python3
"""CDK entry point of the sample app (`cdk synth`, `cdk deploy`; cdk.json runs it). Knobs: docs/deploy.md."""

from sample_stack.app import build_app

if __name__ == "__main__":
    app, _ = build_app()
    app.synth()
