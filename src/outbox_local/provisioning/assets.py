"""A function's code as CloudFormation finds it: the zip `Code.S3Bucket`/`Code.S3Key` name (what cdk-assets
uploaded to the runtime's own S3 during `cdk deploy`), or `Code.ZipFile`'s inline source.

It is extracted under the runtime's work directory (`LocalRuntime.work_dir`), one directory per object and
content, so a stack deployed with new code gets a new directory while invocations under way keep reading
the old one, and what survives a restart (the work directory) holds every deployed function's code.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from outbox_local.errors import ProvisioningError
from outbox_local.provisioning.context import Clients

CODE_DIRECTORY = "lambda-code"
INLINE_MODULE = "index.py"
"""What Lambda names `Code.ZipFile`'s source for a Python runtime (handlers are `index.<function>`)."""


def extracted_code(clients: Clients, code: Mapping[str, Any], store: Path, where: str) -> Path:
    """The directory holding the function's code, extracted from S3 (or written from ZipFile) once."""
    if "ZipFile" in code:
        source = str(code["ZipFile"]).encode()
        return _once(
            store, hashlib.sha256(source).hexdigest(), lambda into: (into / INLINE_MODULE).write_bytes(source)
        )
    if "S3Bucket" not in code or "S3Key" not in code:
        raise ProvisioningError(f"{where}: Code names neither S3Bucket and S3Key nor ZipFile")
    request = {"Bucket": str(code["S3Bucket"]), "Key": str(code["S3Key"])}
    if code.get("S3ObjectVersion"):
        request["VersionId"] = str(code["S3ObjectVersion"])
    try:
        found = clients("s3").get_object(**request)
    except ClientError as error:
        # CloudFormation fails the function the same way: the code must be uploaded before the deploy.
        raise ProvisioningError(
            f"{where}: code s3://{request['Bucket']}/{request['Key']} cannot be read: "
            f"{error.response['Error']['Code']} (was the asset published? `cdk deploy` uploads it)"
        ) from error
    archive = found["Body"].read()
    digest = hashlib.sha256(archive).hexdigest()

    def unzip(into: Path) -> None:
        try:
            with zipfile.ZipFile(io.BytesIO(archive)) as bundle:
                bundle.extractall(into)  # zipfile drops absolute paths and ".." from member names
        except zipfile.BadZipFile as error:
            raise ProvisioningError(
                f"{where}: s3://{request['Bucket']}/{request['Key']} is not a zip file"
            ) from error

    return _once(store, digest, unzip)


def _once(store: Path, digest: str, write: Any) -> Path:
    """`store/lambda-code/<digest>`, written by `write` into a temporary directory renamed into place, so a
    directory that exists is complete (two deploys of the same code share it)."""
    target = store / CODE_DIRECTORY / digest
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{digest[:12]}-"))
    try:
        write(staging)
        os.replace(staging, target)
    except OSError:
        if not target.is_dir():  # not a concurrent writer that won the race
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
