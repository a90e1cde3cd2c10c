"""The metering proxy: the one way a CLI agent running in the sandbox reaches a model.

It answers the provider's own HTTP API (Anthropic Messages, OpenAI Chat Completions and
Responses) on a unix socket bound into the sandbox, holds each request's worst case against
the night's budgets before forwarding it upstream with the harness's own key, and books the
usage the answer reports as a model call of the night.
"""
