# SPDX-License-Identifier: Apache-2.0
"""
LLM call plumbing shared by the components that hold a chat generator, one module per job:

- `calls`: one chat generator call with retries, usage accounting and a tracing span (`call_generator`,
  `call_generator_async`, `LLMCall`, `describe_error`);
- `retries`: which failures are transient, and the retry defaults;
- `timeouts`: a time limit on a synchronous `run`;
- `prompts`: Jinja rendering, the optional system message, chunks formatted within a token budget;
- `tokens`: token estimates and compacting a conversation into a budget;
- `serialization`: (de)serialising and warming up an optional chat generator.
"""
