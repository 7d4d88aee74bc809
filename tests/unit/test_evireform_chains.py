"""EviReform's chain completion: open relation words, relation-qualified bridge queries,
the chain-aware top-k, and rounds that stop by themselves (hand-made cases)."""

from __future__ import annotations

import pytest

from neocorrag_core import Passage
from neocorrag_core.evireform import (
    EvidenceReformulator,
    ReformulationConfig,
    ReformulationQuery,
)
from neocorrag_core.evireform.config import ReformulationTuning
from neocorrag_core.evireform.ranking import (
    ChainLink,
    about_entity,
    chain_links,
    chain_top_k,
    question_anchors,
    shared_names,
    title_named,
    title_pointers,
)
from neocorrag_core.evireform.relations import (
    covers,
    open_relation_words,
    qualify,
    relation_position,
    relation_words,
)
from neocorrag_core.evireform.residual import names_entity, unfound_question_entities
from neocorrag_core.evireform.selection import evidence_order
from neocorrag_core.evireform.types import Proposition

NO_LM = ReformulationConfig(selection="embedding", residual_queries="entities")

# ----------------------------------------------------------------------------- relation words


def test_relation_words_are_the_lower_case_content_words():
    q = "What is the capital of the county that contains Van Hook Township?"
    assert relation_words(q) == ["capital", "county", "contains"]
    # names (capitalized), numbers, function and slot words never count
    q = "What is the place of birth of the director of film The Zone (2017 Film)?"
    assert relation_words(q) == ["birth", "director"]
    assert relation_words("Who is Jane Roe?") == []


def test_evidence_covers_words_by_prefix_and_by_listed_equivalents():
    q = "What is the capital of the county that contains Van Hook Township?"
    # "county" is covered by "Mountrail County" (same word), nothing covers "capital"
    assert open_relation_words(q, ["Van Hook Township located in Mountrail County"]) == [
        "capital",
        "contains",
    ]
    q = "Where was the director of Film X born?"
    # "directed" covers "director" (first five letters); "birth" covers "born"
    assert open_relation_words(q, ["Film X directed by Jane Roe"]) == ["born"]
    assert open_relation_words(q, ["Film X directed by Jane Roe", "Jane Roe birth Oslo"]) == []
    assert open_relation_words(q, [], max_words=1) == ["director"]


def test_qualify_appends_words_the_entity_does_not_hold():
    assert qualify("Mountrail County", ["capital", "county"]) == "Mountrail County capital"
    assert qualify("Jane  Roe", []) == "Jane Roe"
    # a name holds only its own words: "Young" is not "born"
    assert qualify("Neil Young", ["born"]) == "Neil Young born"


def test_a_name_covers_a_relation_word_only_by_its_own_letters():
    q = "When was the performer of Decade born?"
    # before: "Young" shared its first five letters with "younger", whose group held "born"
    assert open_relation_words(q, ["Decade is an album by Neil Young."]) == ["performer", "born"]
    assert open_relation_words(q, ["Neil Young was born in Toronto."]) == ["performer"]
    # a capitalised word that starts a sentence is an ordinary word
    assert open_relation_words(q, ["He sang. Born in Toronto, he moved."]) == ["performer"]
    assert open_relation_words(q, ['"Born in Toronto", the song'])[-1:] == ["performer"]
    # names of films and bands do not say when someone died
    q = "In what year had the director of Die Hard died?"
    assert open_relation_words(q, ["The film Die Hard was directed by John McTiernan."]) == ["died"]
    assert open_relation_words(q, ["The Grateful Dead toured in 1972."]) == ["director", "died"]
    # ... but a name that is the word itself (or shares its first five letters) covers it
    q = "Who is the president of the club?"
    assert open_relation_words(q, ["Its President is Jane Roe."]) == ["club"]
    assert open_relation_words("Which state is it in?", ["It is in the United States."]) == []
    # a text typed in capitals has no names
    assert open_relation_words("When was the performer born?", ["NEIL YOUNG BORN 1945"]) == [
        "performer"
    ]


def test_comparatives_are_answered_by_birth_but_do_not_answer_it():
    q = "Who is older, Jane Roe or John Doe?"
    assert open_relation_words(q, ["Jane Roe was born in 1950."]) == []
    assert open_relation_words(q, ["Jane Roe died at the age of 70."]) == []
    q = "When was the younger brother born?"
    assert open_relation_words(q, ["He was the younger of two sons."]) == ["brother", "born"]
    # an age answers "younger", never "born"
    assert open_relation_words(q, ["He retired at the age of 45."]) == ["brother", "born"]
    assert relation_position("He retired at the age of 45.", ["born"]) == -1
    assert relation_position("He retired at the age of 45.", ["older"]) == 18
    assert relation_position("Neil Young sang.", ["born"]) == -1
    assert covers("Its President is Jane Roe.", ["president"])


def test_names_entity_and_about_entity():
    assert names_entity("Thomas Stanley, 1st Earl of Derby", "Thomas Stanley")
    assert not names_entity("Jane Doe", "Jane Roe")
    assert about_entity("Forbidden Ground", "Forbidden Ground (2013 film)", "")
    assert about_entity("Hiroshima, Japan", "Hiroshima", "")  # the entity names the title
    assert not about_entity("Jane Roe", "Oslo", "Jane Roe lived in Oslo.")
    # no title: the opening of the text decides
    assert about_entity("Jane Roe", "", "Jane Roe (born 1950) is a director.")
    assert not about_entity("", "Jane Roe", "")


# ----------------------------------------------------------------------------- chain top-k


def test_chain_top_k_reserves_each_link_whole_by_hand():
    order = ["a", "b", "c", "d", "e", "s", "h", "x", "y"]
    # lead "a"; link (s, h) enters whole; the rest by order
    assert chain_top_k(order, [ChainLink("s", "h")], 4) == ["a", "b", "s", "h"]
    # a second link does not fit whole into the one slot left: it is skipped
    assert chain_top_k(order, [ChainLink("s", "h"), ChainLink("x", "y")], 4) == [
        "a", "b", "s", "h",
    ]  # fmt: skip
    # a link whose source is already in needs one slot
    assert chain_top_k(order, [ChainLink("a", "y")], 3) == ["a", "b", "y"]
    # no links, or ends unknown to the ranking: the plain top-k
    assert chain_top_k(order, [ChainLink("zz", "h")], 3) == ["a", "b", "h"]
    assert chain_top_k(order, [], 3) == ["a", "b", "c"]
    assert chain_top_k(order, [ChainLink("s", "h")], 3, lead=0) == ["a", "s", "h"]


def test_title_named_needs_the_whole_title_as_consecutive_words():
    q = "Do the drinks Gibson and Zurracapote both contain gin?"
    assert title_named(q, "Gibson (cocktail)")  # the qualifier is left out
    assert title_named(q, "zurracapote")  # case is ignored
    q = "Are Ferocactus and Silene both types of plant?"
    assert title_named(q, "Silene")
    assert not title_named(q, "Silene stenophylla")  # a longer title is another entity
    assert not title_named(q, "Ferocactus Silene")  # not consecutive in the question
    assert title_named("Is Alû a demon?", "Alu")  # accents
    assert not title_named(q, "")
    assert not title_named(q, "(plant)")


def test_question_anchors_in_first_search_order_and_capped():
    q = "Are Local H and For Against both from the United States?"
    passages = [
        Passage("truly", "Truly is a band.", title="Truly"),
        Passage("for", "For Against is a band.", title="For Against"),
        Passage("us", "The United States is a country.", title="United States"),
        Passage("local", "Local H is a band.", title="Local H"),
        Passage("untitled", "Local H is from Illinois."),  # no title: never an anchor
    ]
    first_ranks = {"local": 0, "for": 3}  # "us" came from a residual query only
    assert question_anchors(q, passages, first_ranks, limit=3) == ["local", "for", "us"]
    assert question_anchors(q, passages, first_ranks, limit=2) == ["local", "for"]
    assert question_anchors(q, passages, first_ranks, limit=0) == []
    # one anchor per title: a second "Local H" page adds no anchor, unless it ranks first
    again = Passage("local2", "Local H formed in 1990.", title="Local H (band)")
    assert question_anchors(q, [again, *passages], {**first_ranks, "local2": 1}, limit=3) == [
        "local", "for", "us",
    ]  # fmt: skip
    assert question_anchors(q, [again, *passages], {"local2": 0}, limit=2) == ["local2", "for"]


def test_chain_top_k_takes_the_anchors_first():
    order = ["a", "b", "c", "d", "e", "s", "h", "x"]
    # anchors "x" and "e", then the lead "a", then the link, then nothing fits
    assert chain_top_k(order, [ChainLink("s", "h")], 5, anchors=["x", "e"]) == [
        "a", "e", "s", "h", "x",
    ]  # fmt: skip
    # an anchor already among the lead costs nothing; unknown anchors are ignored
    assert chain_top_k(order, [], 3, anchors=["a", "zz"]) == ["a", "b", "c"]
    # anchors never take more than k slots
    assert chain_top_k(order, [], 2, anchors=["x", "h", "e"]) == ["h", "x"]


def test_title_pointers_by_hand():
    passages = [
        Passage("game", "Robodemons was released for the Nintendo Entertainment System.",
                title="Robodemons"),
        Passage("nes", "The Nintendo Entertainment System is a console by Nintendo.",
                title="Nintendo Entertainment System (console)"),  # qualifier left out
        Passage("nintendo", "Nintendo is a company in Kyoto.", title="Nintendo"),
        Passage("nintendo2", "Nintendo makes the Nintendo Entertainment System.",
                title="Nintendo"),  # same title as "nintendo": never points to it
        Passage("untitled", "Robodemons is a game."),  # no title: never pointed to
    ]  # fmt: skip
    assert title_pointers(passages) == {
        # a title inside a longer name counts too: both "Nintendo" pages are named
        "game": ["nes", "nintendo", "nintendo2"],
        "nes": ["nintendo", "nintendo2"],
        "nintendo": [],
        "nintendo2": ["nes"],
        "untitled": ["game"],
    }
    assert title_pointers([]) == {}


def test_title_pointers_need_the_name_as_written():
    passages = [
        Passage("text", "It was set up in 1990 by the band; The Band played on.", title="Tour"),
        Passage("band", "The Band was a rock group.", title="The Band"),
        Passage("it", "It is a novel.", title="It (novel)"),  # only function words
        Passage("year", "1990 was a year.", title="1990"),  # a number
        Passage("film", "A film.", title="(film)"),  # only a qualifier
    ]
    # "the band" does not name "The Band"; "The Band" does (case kept, accents ignored)
    assert title_pointers(passages)["text"] == ["band"]
    assert title_pointers([*passages[1:], Passage("t2", "the band")])["t2"] == []
    assert title_pointers([passages[1], Passage("t3", "Thé Band")])["t3"] == ["band"]


def test_chain_top_k_follows_title_pointers_hop_by_hop():
    order = ["a", "b", "c", "d", "p", "q", "r"]
    pointers = {"a": ["q"], "q": ["r"], "p": ["b"]}
    # lead "a" points to "q", "q" to "r"; then the rest by order
    assert chain_top_k(order, [], 4, pointers=pointers) == ["a", "b", "q", "r"]
    assert chain_top_k(order, [], 4) == ["a", "b", "c", "d"]
    # pointed passages come after the anchors and the links, best-ordered first
    # ("p" points to "b", which the ranking puts before "q")
    assert chain_top_k(order, [ChainLink("p", "d")], 4, pointers=pointers) == ["a", "b", "d", "p"]
    # pointers to ids outside the ranking are ignored (and the ranking goes on by order)
    assert chain_top_k(order, [], 3, pointers={"a": ["zz", "r"]}) == ["a", "b", "r"]


# ----------------------------------------------------------------------------- the loop


def _doc(pid: str, text: str, *triples: tuple[str, str, str], title: str = "") -> Passage:
    return Passage(pid, text, title=title, metadata={"triples": [list(t) for t in triples]})


QUESTION = "What is the capital of the county that contains Van Hook Township?"
TOWNSHIP = _doc(
    "township",
    "Van Hook Township is a township in Mountrail County.",
    ("Van Hook Township", "located in", "Mountrail County"),
    title="Van Hook Township",
)
COUNTY = _doc(
    "county",
    "Mountrail County is a county of North Dakota; its county seat is Stanley.",
    ("Mountrail County", "capital", "Stanley"),
    title="Mountrail County",
)
MENTIONS = [
    _doc(
        f"mention{i}",
        f"Lake {i} is a lake in Mountrail County.",
        (f"Lake {i}", "located in", "Mountrail County"),
        title=f"Lake {i}",
    )
    for i in range(6)
]
NOISE = [
    _doc(f"noise{i}", f"Township {i} has a capital idea.", (f"Township {i}", "has", "idea"))
    for i in range(4)
]


class RelationSearch:
    """Only the relation-qualified query reaches the county's page: the bare entity
    matches every passage that mentions the county, the county's own page last."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, query: str, k: int) -> list[Passage]:
        self.calls.append(query)
        key = query.casefold()
        if "mountrail county" in key and "capital" in key:
            return [COUNTY, *MENTIONS][:k]
        if "mountrail county" in key:
            return [*MENTIONS, COUNTY][:k]
        return [TOWNSHIP, *NOISE][:k]


def test_only_the_relation_qualified_query_reaches_the_second_hop(bow_embedder):
    plain = EvidenceReformulator(
        NO_LM, tuning=ReformulationTuning(relation_words=False), embedder=bow_embedder
    )
    result = plain.retrieve(QUESTION, RelationSearch(), k=5)
    assert [(q.text, q.kind) for q in result.queries[1:]] == [("Mountrail County", "entities")]
    assert "county" not in {p.id for p in result.pool}

    search = RelationSearch()
    qualified = EvidenceReformulator(NO_LM, embedder=bow_embedder)
    result = qualified.retrieve(QUESTION, search, k=5)
    query = result.queries[1]
    assert (query.text, query.kind, query.bridge) == (
        "Mountrail County capital contains",
        "template",
        "Mountrail County",
    )
    assert search.calls[1] == "Mountrail County capital contains"
    assert result.query_results[1][0] == "county"
    ids = [r.passage.id for r in result.passages]
    assert {"township", "county"} <= set(ids)


def test_chain_ranking_keeps_a_hop_that_the_mixed_score_drops(bow_embedder):
    # The hop passage shares no word with the question beyond the county's name; five
    # question-like passages outrank it under the mixed score alone.
    hop = _doc("hop", "Stanley is the seat.", ("Stanley", "is", "seat"), title="Mountrail County")
    lookalikes = [
        _doc(
            f"like{i}",
            f"The capital of the county that contains township {i}.",
            # lower-case ends: question words, but no bridge entity to search for
            ("the capital", f"of the county that contains township {i}", "the county"),
            title=f"Township {i}",
        )
        for i in range(5)
    ]

    def search(query: str, k: int) -> list[Passage]:
        if "mountrail" in query.casefold():
            return [hop]
        return [TOWNSHIP, *lookalikes][:k]

    # every fact is evidence, so the township's bridge is found beside the look-alikes
    tuning = ReformulationTuning(original_weight=0.9, evidence_margin=None, max_evidence=9)
    reformulator = EvidenceReformulator(NO_LM, tuning=tuning, embedder=bow_embedder)
    mixed = reformulator.tuned(ranking="mixed").retrieve(QUESTION, search, k=5)
    chains = reformulator.retrieve(QUESTION, search, k=5)
    assert "hop" in {p.id for p in mixed.pool}
    assert "hop" not in {r.passage.id for r in mixed.passages}
    assert {"township", "hop"} <= {r.passage.id for r in chains.passages}
    assert len(chains.passages) == 5
    assert chains.passages == sorted(chains.passages, key=lambda r: -r.score)


def test_chain_ranking_follows_the_title_a_chosen_passage_names(bow_embedder):
    # The county's page shares no word with the question; three look-alikes outrank it.
    # The township (an anchor: the question names its title) names "Mountrail County".
    county = _doc("county", "Stanley is the seat.", title="Mountrail County")
    like = "The capital of the county that contains township {}."
    lookalikes = [_doc(f"like{i}", like.format(i), title=f"Township {i}") for i in range(3)]
    queries = [ReformulationQuery(QUESTION, "original", 0)]
    pool = [TOWNSHIP, *lookalikes, county]
    reformulator = EvidenceReformulator(NO_LM, embedder=bow_embedder)
    followed = reformulator.rerank(QUESTION, queries, pool, k=3)
    # (shared names would reach the county too: the township names its title)
    plain = reformulator.tuned(follow_titles=False, follow_names=False).rerank(
        QUESTION, queries, pool, k=3
    )
    assert {"township", "county"} <= {r.passage.id for r in followed}
    assert "county" not in {r.passage.id for r in plain}
    assert "township" in {r.passage.id for r in plain}
    mixed = reformulator.tuned(ranking="mixed").rerank(QUESTION, queries, pool, k=3)
    assert "county" not in {r.passage.id for r in mixed}  # the paper's top-k has no pointers


def test_adaptive_rounds_stop_once_the_relation_words_are_covered(bow_embedder):
    # Round 1 finds the county's capital; a second round would search "Stanley".
    stanley = _doc("stanley", "Stanley is a city.", ("Stanley", "is", "city"), title="Stanley")

    def search(query: str, k: int) -> list[Passage]:
        key = query.casefold()
        if "stanley" in key:
            return [stanley]
        if "mountrail" in key:
            return [COUNTY]
        return [TOWNSHIP]

    reformulator = EvidenceReformulator(NO_LM.with_overrides(rounds=2), embedder=bow_embedder)
    result = reformulator.retrieve(QUESTION, search, k=5)
    # "contains" stays open ("located in" does not cover it), so the loop goes on ...
    assert result.rounds == 2
    question = "What is the capital of the county of Van Hook Township?"
    result = reformulator.retrieve(question, search, k=5)
    # ... but here round 1's evidence ("Mountrail County capital Stanley") covers "capital"
    assert result.rounds == 1 and "stanley" not in {p.id for p in result.pool}
    assert any(note.startswith("rounds: stopped before round 2") for note in result.notes)
    fixed = reformulator.retrieve(question, search, k=5, adaptive_rounds=False)
    assert fixed.rounds == 2 and "stanley" in {p.id for p in fixed.pool}


def test_new_settings_are_validated():
    with pytest.raises(ValueError, match="ranking"):
        ReformulationTuning(ranking="best")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_relation_words"):
        ReformulationTuning(max_relation_words=0)
    with pytest.raises(ValueError, match="max_anchors"):
        ReformulationTuning(max_anchors=-1)
    with pytest.raises(ValueError, match="chain_lead"):
        ReformulationTuning(chain_lead=-1)
    with pytest.raises(ValueError, match="follow_titles"):
        ReformulationTuning(follow_titles="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="question_entity_queries"):
        ReformulationTuning(question_entity_queries=-1)
    with pytest.raises(ValueError, match="max_per_page"):
        ReformulationTuning(max_per_page=0)
    with pytest.raises(ValueError, match="follow_names"):
        ReformulationTuning(follow_names=1)  # type: ignore[arg-type]


# ----------------------------------------------------------------- the wrapper benchmark


def test_wrapper_benchmark_summary_by_hand():
    from benchmark_scripts import load_benchmark

    bench = load_benchmark("bench_evireform_wrappers")
    rows = [
        {"framework": "langchain", "retriever": "single-shot", "recall": 0.5, "chain": 0.0,
         "seconds": 0.1},
        {"framework": "langchain", "retriever": "single-shot", "recall": 1.0, "chain": 1.0,
         "seconds": 0.3},
        {"framework": "langchain", "retriever": "evireform", "recall": 1.0, "chain": 1.0,
         "seconds": 1.0},
    ]  # fmt: skip
    table = bench.summary_table(rows, 5).splitlines()
    assert table[2] == "| langchain | single-shot | 2 | 75.0 | 50.0 | 0.20 |"
    assert table[3] == "| langchain | evireform | 1 | 100.0 | 100.0 | 1.00 |"


def test_anchors_keep_the_compared_entities_that_bridge_queries_push_out(bow_embedder):
    # A comparison question: the first search finds both bands' pages, but the residual
    # queries about the bridge "American Rock Band" move the mixed score to other bands.
    question = "Are Local H and For Against both from the United States?"
    local = _doc(
        "local",
        "Local H is an American rock band from Zion.",
        ("Local H", "is", "American Rock Band"),
        title="Local H",
    )
    against = _doc("for", "For Against formed in Lincoln.", title="For Against")
    bands = [
        _doc(
            f"band{i}",
            f"Band {i} is an American Rock Band.",
            (f"Band {i}", "is", "American Rock Band"),
            title=f"Band {i}",
        )
        for i in range(5)
    ]

    def search(query: str, k: int) -> list[Passage]:
        if query == question:
            return [local, bands[0], bands[1], against][:k]
        return bands[:k]

    # (no search for "United States", which no passage names: this case is about anchors)
    tuning = ReformulationTuning(
        original_weight=0.1, evidence_margin=None, max_evidence=9, question_entity_queries=0
    )
    reformulator = EvidenceReformulator(NO_LM, tuning=tuning, embedder=bow_embedder)
    plain = reformulator.tuned(max_anchors=0).retrieve(question, search, k=3, first_k=4)
    assert {"local", "for"}.isdisjoint(r.passage.id for r in plain.passages)
    anchored = reformulator.retrieve(question, search, k=3, first_k=4)
    assert {"local", "for"} <= {r.passage.id for r in anchored.passages}
    assert len(anchored.passages) == 3


# ------------------------------------------------------- the question's own unfound entity


def test_unfound_question_entities_by_hand():
    question = (
        "According to QS, what is the ranking of the place that employed Said Ashour in 1990?"
    )
    rankings = Passage("r", "Cairo University is ranked 551-600 by QS.", title="Egypt")
    # "According" opens the question; "QS" is named by a passage; "1990" is a number.
    assert unfound_question_entities(question, [rankings]) == ["Said Ashour"]
    about_him = Passage("a", "He taught history.", title="Said A. Ashour")
    assert unfound_question_entities(question, [rankings, about_him]) == []
    naming_him = Passage("n", "Said Ashour wrote 22 books.", title="Books")
    assert unfound_question_entities(question, [rankings, naming_him]) == []
    two = "Where did Ada Lovelace meet Charles Babbage?"
    assert unfound_question_entities(two, [], max_entities=2) == ["Ada Lovelace", "Charles Babbage"]
    assert unfound_question_entities(two, []) == ["Ada Lovelace"]
    assert unfound_question_entities(two, [], max_entities=0) == []


SCHOLAR_Q = "What is the ranking of the place that employed Said Ashour?"
SCHOLAR = _doc(
    "scholar",
    "Said A. Ashour was a professor of history at Cairo University.",
    ("Said A. Ashour", "employed by", "Cairo University"),
    title="Said Ashour",
)
RANKINGS = [
    _doc(f"rank{i}", f"University {i} has a ranking of {i}.", (f"University {i}", "has", "ranking"))
    for i in range(5)
]


def _scholar_search(calls: list[str]):
    def search(query: str, k: int) -> list[Passage]:
        calls.append(query)
        if query.startswith("Said Ashour"):  # only a search by his name finds his page
            return [*RANKINGS[:2], SCHOLAR][:k]
        return RANKINGS[:k]

    return search


def test_a_question_entity_the_first_search_missed_is_searched_and_kept(bow_embedder):
    calls: list[str] = []
    reformulator = EvidenceReformulator(NO_LM, embedder=bow_embedder)
    result = reformulator.retrieve(SCHOLAR_Q, _scholar_search(calls), k=3)
    question_queries = [q for q in result.queries if q.kind == "question"]
    assert [(q.text, q.bridge, q.round) for q in question_queries] == [
        ("Said Ashour employed", "Said Ashour", 1)
    ]
    assert calls[1] == "Said Ashour employed"
    # his page is the third result of his query and the lowest-scored for the question,
    # yet the top-3 keeps it: it starts the chain
    assert "scholar" in {r.passage.id for r in result.passages}

    calls.clear()
    off = reformulator.tuned(question_entity_queries=0).retrieve(
        SCHOLAR_Q, _scholar_search(calls), k=3
    )
    assert not [q for q in off.queries if q.kind == "question"]
    assert "scholar" not in {p.id for p in off.pool}


def test_chain_links_start_a_chain_from_a_question_query():
    queries = [
        ReformulationQuery(SCHOLAR_Q, "original", 0),
        ReformulationQuery("Said Ashour employed", "question", 1, "Said Ashour"),
    ]
    passages = {p.id: p for p in [*RANKINGS, SCHOLAR]}
    order = [*RANKINGS, SCHOLAR]
    # about him by title first, even when another result comes earlier
    links = chain_links(queries, {1: ["rank0", "scholar"]}, [], passages, order)
    assert links == [ChainLink("", "scholar")]
    # else the first result that names him anywhere
    naming = _doc("naming", "A book by Said Ashour.", title="Books")
    passages["naming"] = naming
    links = chain_links(queries, {1: ["rank0", "naming"]}, [], passages, [*order, naming])
    assert links == [ChainLink("", "naming")]
    assert chain_links(queries, {1: ["rank0"]}, [], passages, order) == []


# ------------------------------------------------------------ shared names, pages capped

KNOX_Q = "In what year did Margaret Knox's spouse pass away?"
WIFE = Passage("wife", "Margaret Knox was the second wife of John Knox.", title="Margaret Knox")
CHURCH = Passage("church", "John Knox led the Scottish Reformation in 1560.", title="Church")
SIEGE = Passage("siege", "Henry Knox brought cannons to Boston in 1775.", title="Siege of Boston")
OTHER = Passage("other", "Margaret Knox Smith sang in Boston.", title="Singers")


def test_shared_names_by_hand():
    passages = [WIFE, CHURCH, SIEGE, OTHER]
    among = {"church", "siege", "other"}
    shared = shared_names(passages, KNOX_Q, among=among)
    # "John Knox" joins the wife's page and the church's; "Margaret Knox" is the question's
    # own name and joins nothing; one word ("Knox", "Boston") is not a name to share
    assert shared["wife"] == ["church"]
    assert shared["church"] == []  # the wife's page is not among the candidates
    assert shared["siege"] == [] and shared["other"] == []
    assert shared_names(passages, KNOX_Q, among=among | {"wife"})["church"] == ["wife"]
    # the title counts as a name of its page
    page = Passage("page", "It is a place.", title="John Knox")
    assert shared_names([WIFE, page], KNOX_Q, among={"page"})["wife"] == ["page"]


def test_chain_top_k_follows_shared_names_after_pointers():
    order = ["a", "b", "c", "d", "e"]
    neighbours = {"a": ["e"], "e": ["d"]}
    assert chain_top_k(order, [], 3, neighbours=neighbours) == ["a", "d", "e"]
    # pointers first, then shared names
    assert chain_top_k(order, [], 3, pointers={"a": ["c"]}, neighbours=neighbours) == [
        "a",
        "c",
        "e",
    ]
    assert chain_top_k(order, [], 3) == ["a", "b", "c"]


def test_chain_top_k_caps_the_free_slots_per_page():
    order = ["p1", "p2", "p3", "p4", "q1", "r1"]
    pages = {"p1": "atomic", "p2": "atomic", "p3": "atomic", "p4": "atomic", "q1": "enola"}
    # "r1" has no page key: a page of its own
    assert chain_top_k(order, [], 4, pages=pages, max_per_page=2) == ["p1", "p2", "q1", "r1"]
    assert chain_top_k(order, [], 4, pages=pages) == ["p1", "p2", "p3", "p4"]
    # when nothing else is left the cap gives way: the slots are filled
    assert chain_top_k(order[:4], [], 3, pages=pages, max_per_page=2) == ["p1", "p2", "p3"]
    # anchors and links are never capped
    links = [ChainLink("p3", "p4")]
    got = chain_top_k(order, links, 4, lead=0, anchors=["p1"], pages=pages, max_per_page=1)
    assert got == ["p1", "p3", "p4", "q1"]


# ------------------------------------------------------- later rounds continue chains


def test_chain_top_k_takes_a_later_rounds_link_only_to_continue_a_chain():
    order = ["a", "b", "c", "s", "h", "x", "y"]
    first = ChainLink("a", "h")  # round 1, from the best passage
    stray = ChainLink("x", "y", round=2)  # round 2, from a passage outside the top-k
    onward = ChainLink("h", "s", round=2)  # round 2, from the chain's last hop
    # the stray link would take two slots and leave no room for the next hop
    assert chain_top_k(order, [first, stray, onward], 4) == ["a", "b", "s", "h"]
    # a first-round link needs no chosen source
    assert chain_top_k(order, [ChainLink("x", "y")], 3) == ["a", "x", "y"]
    # a continuing link still enters whole or not at all
    assert chain_top_k(order, [first, ChainLink("h", "s", round=2)], 2) == ["a", "h"]


def test_chain_links_take_a_querys_source_from_the_facts_it_was_written_from():
    young = Passage("young", "Neil Young is a Canadian singer.", title="Neil Young")
    early = Passage("early", "Decade is an album by Neil Young.", title="Decade")
    late = Passage("late", "Harvest features Neil Young.", title="Harvest")
    passages = {p.id: p for p in (young, early, late)}
    order = [late, early, young]  # the second round's fact comes from the best-ranked page
    queries = [
        ReformulationQuery("Who is the sibling of the performer of Decade?", "original", 0),
        ReformulationQuery("Neil Young sibling", "template", 1, "Neil Young"),
    ]
    evidence = [
        Proposition("Decade album by Neil Young", ("early",), surface_entities=("Neil Young",)),
        Proposition("Harvest features Neil Young", ("late",), surface_entities=("Neil Young",)),
    ]
    results = {1: ["young"]}
    # round 1 selected only the first fact: its query's chain starts at "Decade"
    links = chain_links(queries, results, evidence, passages, order, evidence_upto={1: 1, 2: 2})
    assert links == [ChainLink("early", "young", 1)]
    # every fact counting, the second round's fact would move the source
    assert chain_links(queries, results, evidence, passages, order) == [ChainLink("late", "young")]
    # a round-2 query's link carries its round
    later = [*queries, ReformulationQuery("Neil Young sibling born", "template", 2, "Neil Young")]
    got = chain_links(later, {2: ["young"]}, evidence, passages, order, evidence_upto={1: 1, 2: 2})
    assert got == [ChainLink("late", "young", 2)]


def test_the_first_hop_page_gives_the_bridge_when_no_fact_states_the_relation(bow_embedder):
    # No fact of the page "Decade" (which the question names) says "performer", but it
    # names the bridge. Three festival pages share more words with the question and take
    # every evidence slot (and every query) without the first-hop rule.
    question = "Who is the sibling of the performer of Decade?"
    decade = _doc(
        "decade",
        "Decade is a compilation album by Neil Young.",
        ("Decade", "compilation album by", "Neil Young"),
        title="Decade (Neil Young album)",
    )
    festivals = [
        _doc(
            f"fest{i}",
            f"Who is the performer of the year at Festival {name}? The jury chooses.",
            (f"Festival {name}", "is who the performer of the year is at", "the jury"),
            title=f"Festival {name}",
        )
        for i, name in enumerate(("Alpha", "Beta", "Gamma"))
    ]
    sister = _doc("sister", "Astrid Young is the half-sister of Neil Young.", title="Astrid Young")

    def search(query: str, k: int) -> list[Passage]:
        if "neil young" in query.casefold():
            return [sister]
        return [*festivals, decade][:k]

    def queries(tuning: ReformulationTuning) -> list[str]:
        reformulator = EvidenceReformulator(NO_LM, tuning=tuning, embedder=bow_embedder)
        result = reformulator.retrieve(question, search, k=5)
        return [q.text for q in result.queries[1:]]

    assert "Neil Young sibling" in queries(ReformulationTuning())
    assert not any("Neil Young" in q for q in queries(ReformulationTuning(first_hop_facts=False)))


def test_evidence_order_puts_first_hop_facts_after_stating_ones_past_the_margin():
    def fact(text: str, pid: str, *names: str) -> Proposition:
        return Proposition(text, (pid,), surface_entities=names)

    question = "Where was the performer of Decade born?"
    passages = [Passage("d", "Decade ...", title="Decade"), Passage("x", "...", title="X")]
    candidates = [
        fact("Festival X has a stage", "x", "Festival X"),  # 0: closest, no relation
        fact("Decade compilation by Jane Roe", "d", "Decade", "Jane Roe"),  # 1: first hop
        fact("Decade released by Reprise Records", "d", "Decade", "Reprise Records"),  # 2
        fact("Decade born on a farm with Jim Smith", "d", "Decade", "Jim Smith"),  # 3: states
        fact("Decade is an album", "d", "Decade"),  # 4: first hop, but names no bridge
    ]
    sims = [0.9, 0.5, 0.4, 0.3, 0.85]
    kwargs = {"wanted": ["born"], "anchors": ["Decade"], "margin": 0.1}
    with_hop = evidence_order(question, candidates, passages, sims, first_hop=["d"], **kwargs)
    # the stating fact, then the first hop's facts with a bridge (one passage: in order of
    # similarity), then the rest by similarity above the margin
    assert with_hop == [3, 1, 2, 0, 4]
    assert evidence_order(question, candidates, passages, sims, **kwargs) == [3, 0, 4]
