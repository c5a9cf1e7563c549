"""A sampled culprit's effect as stored: the outcome's typed `effect`, from the engine's Effect, and read from rows
written before it, which kept it among their facts."""

from bot.domain.bisect.ledger import outcome_model
from bot.domain.bisect.model import Outcome, Status
from bot.domain.bisect.readings import Effect
from bot.domain.outcome import parse_outcome

WORDS = "-8.2% +/- 1.1% at the culprit (95%)"
OLD_ROW = {
    "message": f"c11 is the first bad commit (P=0.9950; {WORDS}; culprit median 91.8)",
    "culprit": "c11",
    "facts": {
        "effect": WORDS,
        "shift": -8.2,
        "half_width": 1.1,
        "level": 0.95,
        "culprit_readings": [91.0, 92.5],
        "parent_readings": [100.0, 99.5],
    },
    "revert_pr": 7,
}


def test_an_engine_effect_is_stored_typed_and_read_back_alike():
    effect = Effect((92.0, 91.5), (100.0, 100.5), -8.4, 1.2, 0.95, 100.0, 0.7, "the level drifts", 0.05, 3.0)
    found = Outcome(Status.FOUND, "c11 is the first bad commit", culprit="c11", confidence=0.99, effect=effect)
    stored = outcome_model(found)
    assert stored.facts == {}
    again = parse_outcome(stored.as_json())  # as the store hands it back
    assert again.effect is not None and again.effect.words == effect.describe() == "-8.4% +/- 1.2% at the culprit (95%)"
    e = again.effect
    assert (e.shift, e.half_width, e.level, e.before) == (-8.4, 1.2, 0.95, 100.0)
    assert (e.noise, e.drift, e.slope) == (0.7, "the level drifts", 0.05)
    assert e.culprit == [92.0, 91.5] and e.parent == [100.0, 100.5]


def test_an_outcome_without_an_effect_stores_none():
    stored = outcome_model(Outcome(Status.NOT_REPRODUCIBLE, "nothing to bisect", facts={"sha": "b"}))
    assert stored.effect is None and "effect" not in stored.as_json() and stored.facts == {"sha": "b"}


def test_a_row_written_before_the_field_shows_its_effect_from_its_facts():
    told = parse_outcome(OLD_ROW)
    assert told.effect is not None and told.effect.words == WORDS
    assert (told.effect.shift, told.effect.half_width, told.effect.level) == (-8.2, 1.1, 0.95)
    assert told.effect.culprit == [91.0, 92.5] and told.effect.parent == [100.0, 99.5]
    assert told.effect.before is None  # never stored: not made up
    assert told.facts == {} and told.revert_pr == 7 and told.culprit == "c11"
    # rewritten (the publisher adds its facts), the row keeps the effect, typed
    rewritten = told.with_facts(evidence_on=12)
    assert rewritten.as_json()["effect"]["words"] == WORDS and rewritten.evidence_on == 12
    assert parse_outcome(rewritten.as_json()).effect == told.effect


def test_an_old_row_whose_numbers_do_not_fit_keeps_the_words_and_the_rest():
    damaged = {**OLD_ROW, "facts": {**OLD_ROW["facts"], "shift": "a lot", "other": 1}}
    told = parse_outcome(damaged)
    assert told.effect is not None and told.effect.words == WORDS and told.effect.shift is None
    assert told.facts == {"other": 1} and told.culprit == "c11" and told.revert_pr == 7


def test_facts_of_other_outcomes_are_left_alone():
    told = parse_outcome({"reason": "too_flaky", "facts": {"confidence": 0.99, "level": 3}})
    assert told.effect is None and told.facts == {"confidence": 0.99, "level": 3}
    not_words = parse_outcome({"facts": {"effect": 4.2, "shift": 1.0}})  # no effect's words: not an effect's facts
    assert not_words.effect is None and not_words.facts == {"effect": 4.2, "shift": 1.0}
