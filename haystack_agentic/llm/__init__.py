# SPDX-License-Identifier: Apache-2.0
"""
LLM call plumbing shared by the components that hold a chat generator, one module per job:

- `calls`: one chat generator call with retries, usage accounting and a tracing span (`call_generator`,
  `call_generator_async`, `CallOptions`, `role_options`, `LLMCall`, `describe_error`);
- `retries`: the one retry policy (`RetryPolicy`, on tenacity): which failures are transient, the defaults;
- `timeouts`: a time limit on a synchronous `run`;
- `prompts`: Jinja rendering, the optional system message, chunks formatted within a token budget;
- `tokens`: token counters (the model's tokenizer, tiktoken, a conservative estimate; `token_counter_for`) and
  compacting a conversation into a budget;
- `serialization`: (de)serialising and warming up an optional chat generator.
"""
