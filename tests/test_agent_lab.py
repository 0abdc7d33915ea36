"""The experimenter's warnings on agents' messages (the agents page)."""

import pytest

from lab.experimenter.agents_report import message_warnings, word_count


@pytest.mark.parametrize("text", [
    "As an AI, I think we should both pick A.",
    "I'm just a language model but A is best",
    "作为人工智能，我建议我们都选A",
    "我是AI，咱们选A吧",
    "Als KI würde ich sagen: nimm A",
    "Ich bin nur ein Sprachmodell, aber A ist am besten",
])
def test_messages_revealing_an_ai_are_flagged(text):
    assert "reveals it is an AI" in message_warnings(text)


@pytest.mark.parametrize("text", ["Let's both choose A, we each get 70!", "一起选A呗，大家都不亏～",
                                  "Lass uns beide A nehmen, 70 für jeden!", "", None])
def test_ordinary_messages_have_no_warning(text):
    assert message_warnings(text) == []


def test_messages_over_twenty_words_are_flagged():
    long_english = " ".join(["word"] * 21)
    assert word_count(long_english) == 21
    assert message_warnings(long_english) == ["over 20 words (21)"]
    # Chinese has no spaces: two characters count as one word.
    assert word_count("我们" * 20) == 20 and message_warnings("我们" * 20) == []
    assert message_warnings("我们" * 21)
    # A German word with an umlaut is one word.
    assert word_count("Schöne Grüße, nimm A") == 4
