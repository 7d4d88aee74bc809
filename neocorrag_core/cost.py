"""What a call cost: LM tokens and seconds per stage, the same fields on every result.

Mining results, reformulation results, the reformulation loop's own bookkeeping and the
benchmark's method outputs all inherit :class:`Cost`, so token and time accounting is
spelled once and every report reads the same names.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(kw_only=True)
class Cost:
    """LM tokens and per-stage seconds of one call (keyword-only fields, so a subclass's
    positional fields stay where they were)."""

    prompt_tokens: int = 0
    """Tokens the LM read (prompts, and candidates scored exactly)."""
    generated_tokens: int = 0
    """Tokens the LM generated (beam steps count once per beam)."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds per stage; ``"total"`` when the call timed itself end to end."""

    @property
    def lm_tokens(self) -> int:
        """Every prompt and generated token the LM spent."""
        return self.prompt_tokens + self.generated_tokens

    def add_tokens(self, prompt: int, generated: int) -> None:
        """Count one more LM call."""
        self.prompt_tokens += int(prompt)
        self.generated_tokens += int(generated)


__all__ = ["Cost"]
