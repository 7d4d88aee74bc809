"""SpacyTripleExtractor on handwritten sentences: each rule, titles, and bad inputs."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("spacy")

from neocorrag_core.triples import SpacyTripleExtractor, TripleSource
from neocorrag_core.triples.extractor import canonical_title
from neocorrag_core.types import Passage


@pytest.fixture(scope="module")
def extractor() -> SpacyTripleExtractor:
    ex = SpacyTripleExtractor()
    try:
        ex.nlp  # noqa: B018 - load once for the module
    except ImportError as exc:
        pytest.skip(str(exc))
    return ex


def keys(extractor: SpacyTripleExtractor, text: str, title: str = "") -> set[tuple[str, str, str]]:
    [triples] = extractor.extract([Passage("p", text=text, title=title)])
    assert all(t.source_ids == ("p",) for t in triples)
    return {t.key() for t in triples}


def test_subject_verb_object_with_conjunctions(extractor) -> None:
    got = keys(extractor, "Marie Curie discovered polonium and radium.")
    assert ("Marie Curie", "discovered", "polonium") in got
    assert ("Marie Curie", "discovered", "radium") in got


def test_participle_after_copula_attaches_to_the_subject(extractor) -> None:
    got = keys(extractor, "Forbidden Ground is a Hungarian film directed by Pál Gábor.")
    assert ("Forbidden Ground", "directed by", "Pál Gábor") in got
    assert ("Forbidden Ground", "is", "Hungarian film") in got


def test_copula_with_preposition_becomes_the_relation(extractor) -> None:
    got = keys(extractor, "Teutberga was the wife of Lothair.")
    assert ("Teutberga", "wife of", "Lothair") in got


def test_apposition_and_born_clause(extractor) -> None:
    got = keys(extractor, "Ada Lovelace, an English mathematician, worked with Charles Babbage.")
    assert ("Ada Lovelace", "is", "English mathematician") in got
    assert ("Ada Lovelace", "worked with", "Charles Babbage") in got
    got = keys(extractor, "Tim Berners-Lee, born 1955, invented the World Wide Web.")
    assert ("Tim Berners-Lee", "born", "1955") in got


def test_named_entities_are_kept_whole(extractor) -> None:
    got = keys(extractor, "The treaty was signed by Charles de Gaulle in New York City.")
    objects = {o for _, _, o in got}
    assert "Charles de Gaulle" in objects
    assert "New York City" in objects


def test_life_dates_and_birthplace_of_an_encyclopedic_lead(extractor) -> None:
    got = keys(
        extractor,
        "Carl Boese (26 August 1887 – 6 July 1958) was a German film director.",
        title="Carl Boese",
    )
    assert ("Carl Boese", "born", "26 August 1887") in got
    assert ("Carl Boese", "died", "6 July 1958") in got
    got = keys(
        extractor,
        "Denys Desjardins (born 1966 in Montreal, Quebec) is a film director.",
        title="Denys Desjardins",
    )
    assert ("Denys Desjardins", "born in", "Montreal, Quebec") in got


def test_life_dates_go_to_the_person_named_before_them(extractor) -> None:
    # Rules version 2: version 1 gave every lead parenthesis to the title.
    got = keys(
        extractor,
        "Casablanca is a 1942 American film directed by Michael Curtiz (1886 – 1962).",
        title="Casablanca",
    )
    assert {("Michael Curtiz", "born", "1886"), ("Michael Curtiz", "died", "1962")} <= got
    assert not {k for k in got if k[0] == "Casablanca" and k[1] in ("born", "died")}
    # A reign after the main verb is not a life; the lead's own parenthesis still is.
    got = keys(
        extractor,
        "Lothair II (835 – 8 August 869) was the king of Lotharingia (855 – 869).",
        title="Lothair II",
    )
    assert {k for k in got if k[1] in ("born", "died")} == {
        ("Lothair II", "born", "835"),
        ("Lothair II", "died", "8 August 869"),
    }
    # An alias of the title before the parenthesis still dates the title.
    got = keys(
        extractor,
        "Johann Hulsman, or Hans Holsman (1610 – 1652), was a German Baroque painter.",
        title="Johann Hulsman",
    )
    assert {("Johann Hulsman", "born", "1610"), ("Johann Hulsman", "died", "1652")} <= got


def test_a_lead_cut_inside_its_parenthesis_still_dates_the_title(extractor) -> None:
    # spaCy ends this lead's first sentence at "31", so its root is the name itself.
    text = "Jean-Luc Vandenbroucke (born 31 May 1955 in Mouscron) is a Belgian former racer."
    got = keys(extractor, text, title="Jean-Luc Vandenbroucke")
    assert ("Jean-Luc Vandenbroucke", "born", "31 May 1955") in got
    # Only the first parenthesis: the later ones of a verbless lead are other people's.
    text = (
        "Hellenistic Geometers such as Archimedes (c. 287 – 212 BC), Apollonius of Perga "
        "(c. 262 – c. 190 BC), and Euclid (c. 325 – 265 BC), whose Elements became the "
        "most important textbook."
    )
    got = keys(extractor, text, title="Hellenistic period")
    assert {k for k in got if k[1] in ("born", "died")} == {
        ("Archimedes", "born", "287"),
        ("Archimedes", "died", "212 BC"),
    }


def test_an_event_has_no_birth_or_death(extractor) -> None:
    got = keys(
        extractor,
        "World War II (1939 – 1945) was a global war that involved most nations.",
        title="World War II",
    )
    assert not {k for k in got if k[1] in ("born", "died")}
    assert ("World War II", "is", "global war") in got


def test_a_longer_name_containing_the_title_is_another_entity(extractor) -> None:
    got = keys(extractor, "London is the capital of England. Jack London wrote a novel.", "London")
    assert ("Jack London", "wrote", "novel") in got
    assert not {k for k in got if k[:2] == ("London", "wrote")}
    text = "New York is a city in the United States. The New York Yankees play in the Bronx."
    got = keys(extractor, text, title="New York")
    assert ("New York Yankees", "play in", "Bronx") in got
    # Words inside a longer title, or a generational suffix, still name the title.
    text = "Shawn Levy is a Canadian film director. Shawn Adam Levy directed Free Guy."
    assert ("Shawn Levy", "directed", "Free Guy") in keys(extractor, text, title="Shawn Levy")
    text = "Silas Daniels is a football player. Silas Daniels III signed with the Ravens."
    assert ("Silas Daniels", "signed with", "Ravens") in keys(extractor, text, "Silas Daniels")
    # A title ending in a suffix keeps it; "King Henry V" is still the title.
    text = "Henry V was King of England. King Henry V invaded France in 1415."
    assert ("Henry V", "invaded", "France") in keys(extractor, text, title="Henry V")
    # An entity that spaCy runs on into a parenthesis is still the title it starts with.
    text = 'Bleddyn ap Cynfyn (Old Welsh: "Bledynt uab Kynwyn" ; 1073) was a Welsh king.'
    got = keys(extractor, text, title="Bleddyn ap Cynfyn")
    assert ("Bleddyn ap Cynfyn", "is", "Welsh king") in got
    assert not {k for k in got if "(" in k[0]}


def test_title_resolves_pronouns_and_references(extractor) -> None:
    text = (
        "Shawn Adam Levy is a Canadian film director. He directed Free Guy. "
        "His wife is Serena Levy."
    )
    got = keys(extractor, text, title="Shawn Levy")
    assert ("Shawn Levy", "directed", "Free Guy") in got  # "He" -> title
    assert ("Shawn Levy", "wife", "Serena Levy") in got  # "His wife was" -> (owner, wife, ...)
    assert ("Shawn Levy", "is", "Canadian film director") in got  # lead subject -> title
    film = "Bloody Moon is a 1981 slasher film. The film stars Olivia Pascal. It was shot in Spain."
    got = keys(extractor, film, title="Bloody Moon (1981 film)")
    assert ("Bloody Moon", "stars", "Olivia Pascal") in got  # "the film" -> title
    assert ("Bloody Moon", "shot in", "Spain") in got  # "It" -> title, qualifier dropped


def test_without_a_title_pronouns_give_no_triple(extractor) -> None:
    got = keys(extractor, "He directed Free Guy.")
    assert all(s.lower() != "he" for s, _, _ in got)


def test_canonical_title_drops_only_a_trailing_qualifier() -> None:
    assert canonical_title("The Zone (2017 film)") == "The Zone"
    assert canonical_title("  Lothair   II ") == "Lothair II"
    assert canonical_title("(film)") == "(film)"


def test_bad_inputs_never_fail(extractor, caplog) -> None:
    passages = [
        Passage("empty", text=""),
        Passage("blank", text="   \n "),
        Passage("none", text="it is raining again, sadly."),
        Passage("fr", text="Le chat dort sur le canapé depuis ce matin."),
        Passage("zh", text="北京是中华人民共和国的首都。"),
    ]
    out = extractor.extract(passages)
    assert [len(t) for t in out[:2]] == [0, 0]
    for triples in out:
        assert all(t.subject.strip() and t.relation.strip() and t.object.strip() for t in triples)
    long = Passage("long", text="Marie Curie discovered polonium. " * 2000)
    with caplog.at_level(logging.WARNING):
        [triples] = SpacyTripleExtractor(max_words=50).extract([long])
    assert "only the first 50 are read" in caplog.text
    assert ("Marie Curie", "discovered", "polonium") in {t.key() for t in triples}


def test_is_a_triple_source_with_a_cache_identity(extractor) -> None:
    assert isinstance(extractor, TripleSource)
    assert extractor.extractor_id.startswith("spacy:en_core_web_sm")
    assert extractor.version
    assert SpacyTripleExtractor(use_title=False).extractor_id != extractor.extractor_id


def test_missing_pipeline_says_what_to_install() -> None:
    with pytest.raises(ImportError, match="pip install"):
        SpacyTripleExtractor("no_such_spacy_pipeline_xyz").extract([Passage("p", text="A b.")])


def test_pickles_without_its_pipeline(extractor) -> None:
    import pickle

    clone = pickle.loads(pickle.dumps(extractor))
    assert not clone._nlp.loaded
    text = "Marie Curie discovered polonium."
    assert keys(clone, text) == keys(extractor, text)


def test_a_non_default_max_words_is_part_of_the_store_key(extractor) -> None:
    from neocorrag_core.triples import CachedTripleSource, TripleStore

    default_id = f"spacy:{extractor.model_name}"
    assert extractor.extractor_id == default_id  # the default key is unchanged
    assert SpacyTripleExtractor(max_words=1500).extractor_id == default_id
    short = SpacyTripleExtractor(max_words=8)
    assert short.extractor_id == f"{default_id},w8"
    assert SpacyTripleExtractor(max_words=8, use_title=False).extractor_id == (
        f"{default_id},notitle,w8"
    )
    # A store filled by the short extractor must not serve its cut triples to the full one.
    short._nlp = extractor._nlp  # share the loaded pipeline
    passage = Passage(
        "p1",
        title="Alice Smith",
        text="Alice Smith is a British actress. She was born in London. "
        "She married Bob Jones in 1990.",
    )
    store = TripleStore(":memory:")
    cut = CachedTripleSource(store, short).triples_for([passage])[0]
    full = CachedTripleSource(store, extractor).triples_for([passage])[0]
    assert ("Alice Smith", "born in", "London") not in {t.key() for t in cut}
    assert [t.key() for t in full] == [t.key() for t in extractor.extract([passage])[0]]
    assert ("Alice Smith", "born in", "London") in {t.key() for t in full}


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"max_words": 0}, "max_words must be >= 1"),
        ({"max_words": -1}, "max_words must be >= 1"),
        ({"max_words": 2.5}, "max_words must be an integer"),
        ({"batch_size": 0}, "batch_size must be >= 1"),
        ({"batch_size": True}, "batch_size must be an integer"),
        ({"use_title": "no"}, "use_title must be True or False"),
        ({"fast": 1}, "fast must be True or False"),
    ],
)
def test_bad_settings_raise_config_errors(kwargs, fragment) -> None:
    from neocorrag_core.errors import ConfigError

    with pytest.raises(ConfigError, match=fragment):
        SpacyTripleExtractor(**kwargs)


def test_truncate_words_refuses_a_count_below_one() -> None:
    from neocorrag_core.triples.extractor import truncate_words

    with pytest.raises(ValueError, match=">= 1"):
        truncate_words("Alice met Bob in Paris", -1, passage_id="p", extractor="x")
    assert truncate_words("Alice met Bob", 2, passage_id="p", extractor="x") == "Alice met"


# -- FastPipeline: the same annotations and triples as spaCy's own nlp.pipe -----------------

TRICKY = [
    "I'm gonna go, ain't I? Y'all gotta see it, c'mon. Nothin' doin', let's go.",
    "There is a house in Oslo. There were two of them, and there's one left.",
    "He'd have done it; she's been there. Do you have it? He does. They did. It got better.",
    "That is what those are. But this one is mine, not yours, and I gave it to you.",
    "Oslo  is\n the capital  of Norway .  It has   a port.",
    "Carl Boese (26 August 1887 – 6 July 1958) was a German film director. His wife was Ada.",
    "Forbidden Ground is a Hungarian film directed by Pál Gábor and produced by MAFILM.",
]


@pytest.fixture(scope="module")
def plain() -> SpacyTripleExtractor:
    return SpacyTripleExtractor(fast=False)


def annotations(doc, lemma) -> list[tuple]:
    return [
        (t.text, t.tag_, t.pos_, str(t.morph), t.dep_, t.head.i, lemma(t), t.ent_iob_, t.ent_type_)
        for t in doc
    ] + [(s.start, s.end) for s in doc.sents]


def test_the_fast_pipeline_annotates_like_spacy(extractor, plain) -> None:
    from neocorrag_core.triples.spacy_extractor import FastPipeline

    fast = FastPipeline(extractor.nlp)
    assert {"memoized attribute_ruler", "lazy lemmatizer"} <= set(fast.speedups)
    expected = [annotations(d, lambda t: t.lemma_) for d in plain.nlp.pipe(TRICKY)]
    got = [annotations(d, fast.lemma) for d in fast.pipe(TRICKY, batch_size=3)]
    assert got == expected
    # Twice: the second pass reads the memo only.
    assert [annotations(d, fast.lemma) for d in fast.pipe(TRICKY, batch_size=64)] == expected


def test_fast_and_plain_extract_the_same_triples(extractor, plain) -> None:
    passages = [Passage(f"p{i}", text=t, title="Carl Boese") for i, t in enumerate(TRICKY)]
    passages.append(Passage("x", text=TRICKY[0]))
    assert extractor.fast and not plain.fast
    fast = [[t.key() for t in found] for found in extractor.extract(passages)]
    assert fast == [[t.key() for t in found] for found in plain.extract(passages)]
    assert any(fast)


def test_the_memoized_ruler_sets_what_the_attribute_ruler_sets() -> None:
    spacy = pytest.importorskip("spacy")
    from neocorrag_core.triples.spacy_extractor import _MemoAttributeRuler

    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    ruler.add([[{"LOWER": {"REGEX": "^ap"}}]], {"LEMMA": "ap-word", "POS": "NOUN"})
    ruler.add([[{"LOWER": "new"}, {"LOWER": "york"}]], {"LEMMA": "NYC"}, index=-1)
    ruler.add([[{"LOWER": {"IN": ["the", "a"]}}]], {"POS": "DET"})
    ruler.add([[{"LOWER": {"NOT_IN": ["the"]}, "IS_SPACE": False}]], {"MORPH": "Foo=Bar"})
    ruler.add([[{"IS_SPACE": True}]], {"TAG": "_SP", "POS": "SPACE"})
    ruler.add([[{"LOWER": "apple"}]], {"POS": "PROPN"})  # later rules win
    memo = _MemoAttributeRuler.build(ruler)
    assert memo is not None and memo.longer is not None
    texts = ["The apple  and an apricot in New York", "new york new  York apple the A"]
    for text in texts * 2:
        want, got = ruler(nlp.make_doc(text)), memo(nlp.make_doc(text))
        assert [(t.lemma_, t.pos_, t.tag_, str(t.morph)) for t in got] == [
            (t.lemma_, t.pos_, t.tag_, str(t.morph)) for t in want
        ]
    other = nlp.add_pipe("attribute_ruler", name="other")
    other.add([[{"ORTH": "x", "OP": "+"}]], {"LEMMA": "y"})
    assert _MemoAttributeRuler.build(other) is None  # an operator: the ruler runs as it is
