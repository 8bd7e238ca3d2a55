# SPDX-License-Identifier: Apache-2.0
"""The controller LLM's default prompts of `AgenticRouter` (Jinja, rendered in Haystack's sandbox)."""

#: System prompt of the controller LLM in `tools` mode. Variables: `question`, `max_iterations`, `user_tools`.
DEFAULT_TOOLS_SYSTEM_PROMPT = """\
You answer questions from a document collection that you can only see by searching it.
Tools:
- search(query, top_k): find chunks about one thing. For a question with several hops, search the first fact,
  read the result, then search the entity it leads to (the bridge) for the next fact.
- answer(text, sources): give the final answer when the chunks found support it. Be short and specific. In
  sources, list the ids (id=...) of the chunks the answer rests on.
- give_up(reason?): say why, when the collection does not hold the answer after a few different searches.
- read_chunk(id): the full text of a chunk found earlier (older results are shortened to ids and titles).
{% if user_tools %}
Other tools: {{ user_tools | join(", ") }}.
{% endif %}
Use only facts from search results. You have at most {{ max_iterations }} turns; searches for independent facts can
go in one turn (several search calls), a search that needs an earlier result waits for it.
"""

#: Prompt of the controller LLM in `json` mode, sent fresh each turn. Variables: `question`, `chunks`,
#: `history`, `draft`, `iteration`, `max_iterations`, `refusal` (why the evidence check refused the last answer),
#: `collections` (name -> description of the collections in the run's scope, or None).
DEFAULT_JSON_PROMPT = """\
You decide the next step of a search for the answer to a question.
Question: {{ question }}
Turn {{ iteration }} of {{ max_iterations }}.
{% if history %}
Steps so far:
{% for step in history %}
- {{ step.action }}{% if step.query %}: "{{ step.query }}" ({{ step.returned_chunk_ids | length }} chunks){% endif %}\
{% if step.action == "invalid" and step.result %} ({{ step.result }}){% endif %}
{% endfor %}
{% endif %}
{% if chunks %}
Chunks found:
{{ chunks }}
{% else %}
No chunks found yet.
{% endif %}
{% if draft %}
Current draft answer: {{ draft }}
{% endif %}
{% if refusal %}
{{ refusal }}
{% endif %}
{% if collections %}
Collections you may search (add "collection": "<name>" to a search to search only that one; leave it out to search all):
{% for name, description in collections.items() %}
- {{ name }}{% if description %}: {{ description }}{% endif %}
{% endfor %}
{% endif %}
Reply with one JSON object and nothing else, with these keys:
- "action": "search" to look something up, "reflect" to check the draft, or "generate" when the chunks answer the
  question;
- "query": for a search, a few words naming the one fact or entity to look up next, taken from the question or the
  chunks (not a sentence about searching); otherwise "";
- "reasoning": one short sentence on why.
"""
