"""The local runtime: the synthesized CloudFormation template, run on a moto server with no AWS account.

The template `cdk synth` wrote is the single description of the system; this package provisions it into
an in-process moto server, hosts its Lambda functions in process, emulates the DynamoDB stream event source
mapping faithfully (partial batch failures, bisect, retries, record age, on-failure destination), serves the
HTTP API on localhost and fires schedule rules.
"""
