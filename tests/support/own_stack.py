"""A user's own stack, as the README's own-stack snippet builds it (one `outbox_cdk.Outbox`), plus one
output of the user's own, under the name `PaymentsStack`: synthesized into a directory as `cdk synth` writes
cdk.out, for the local runtime to run under its own name.

The runtime must report every output the template declares, whatever its name (the user's own included).
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.synth import CLI_CONTEXT

STACK_NAME = "PaymentsStack"
OWN_OUTPUT = "PaymentsLedgerHint"

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def synthesize_payments_stack(outdir: Path) -> Path:
    """Synthesize the stack into `outdir`; returns its template's path (`PaymentsStack.template.json`)."""
    from aws_cdk import App, CfnOutput, Stack
    from constructs import Construct

    from outbox_cdk import Outbox, add_nag_checks

    class PaymentsStack(Stack):
        def __init__(self, scope: Construct, construct_id: str) -> None:
            super().__init__(scope, construct_id)
            outbox = Outbox(self, "Outbox")
            CfnOutput(self, OWN_OUTPUT, value=f"{outbox.table.table_name} holds the payments' events")

    app = App(outdir=str(outdir), context=CLI_CONTEXT)
    PaymentsStack(app, STACK_NAME)
    add_nag_checks(app)
    app.synth()
    return outdir / f"{STACK_NAME}.template.json"
