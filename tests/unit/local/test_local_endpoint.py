"""`outbox local env`'s exports, as a shell evals them."""

import subprocess

from outbox_local.endpoint import exports


def test_the_exports_set_an_endpoint_with_shell_characters_as_given() -> None:
    # Given an endpoint whose path holds characters a shell reads (a query with `&`, a `$`)
    endpoint = "http://127.0.0.1:4566/p?a=1&b=$HOME;x"

    # When a shell evals the exports, then prints the variable
    printed = subprocess.run(  # noqa: S603 - a fixed shell line
        ["/bin/sh", "-c", exports(endpoint, "eu-west-1") + 'printf %s "$AWS_ENDPOINT_URL"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    # Then the variable holds the endpoint exactly
    assert printed == endpoint


def test_a_plain_endpoint_is_exported_without_quotes() -> None:
    # Given the default endpoint / When exported / Then the line reads as the docs show it
    assert "export AWS_ENDPOINT_URL=http://127.0.0.1:4566\n" in exports("http://127.0.0.1:4566", "us-east-1")
