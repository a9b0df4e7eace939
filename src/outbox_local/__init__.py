"""The local runtime: the synthesized CloudFormation template, run on a moto server with no AWS account.

The template `cdk synth` wrote is the single description of the system; this package provisions it into
an in-process moto server, runs its Lambda functions in execution environments (worker processes, each
function's invocations concurrently, or all in process, one at a time), emulates the DynamoDB stream event
source mapping faithfully (partial batch failures, bisect, retries, record age, on-failure destination),
serves the HTTP API on localhost and fires schedule rules.
"""
