"""`python -m bench`: see bench.runner.

The environment comes first: the handlers' Powertools objects read theirs when their modules are imported.
"""

from bench.environment import use_fake_aws

use_fake_aws()

from bench.runner import main  # noqa: E402 - after the environment, on purpose

raise SystemExit(main())
