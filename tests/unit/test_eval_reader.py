"""The eval reader's context block."""

from neocorrag_core.eval.reader import reader_context
from neocorrag_core.types import Passage


def test_a_whitespace_run_does_not_use_up_the_reader_cut() -> None:
    passage = Passage(
        id="p", title="Mountrail", text="Mountrail County." + " " * 3000 + "Its capital is Stanley."
    )
    context = reader_context([passage], max_passage_chars=80)
    assert context == "Mountrail: Mountrail County. Its capital is Stanley."


def test_without_a_cut_the_passage_is_read_as_rendered() -> None:
    passage = Passage(id="p", title="T", text="a  b\nc")
    assert reader_context([passage]) == "T: a  b\nc"
    assert reader_context([passage], chain_text="chain") == "chain\n\nT: a  b\nc"
