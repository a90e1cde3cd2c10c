"""What the harness and a model say to each other: requests, responses, tool specs, the usage
a response is billed for, and the structured answers the harness asks for. Plain data, below
everything that sends or stores a message."""
