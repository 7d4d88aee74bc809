"""LM plumbing every system shares: prompts tokenized safely and generated neutrally
(``generation.py``), the one chat interface a hosted or framework LLM is asked through
(``chat.py``: ``ChatModel.ask(messages, schema)``; the adapters translate framework LLMs
into it), JSON-schema-constrained local output (``structured.py``), and token budgets of
prompt pieces (``prompt_budget.py``)."""
