"""LM plumbing every system shares: prompts tokenized safely and generated neutrally
(``generation.py``), JSON-schema-constrained and framework structured output
(``structured.py``), and token budgets of prompt pieces (``prompt_budget.py``)."""
