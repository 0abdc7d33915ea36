"""The reply parsers on a corpus of realistic replies, good and bad."""

import pytest

import protocol
from agents.parsing import parse_choice, parse_message

GPT4_MESSAGE = """STEP 1: If I choose B and my associate chooses A, I will receive 80 and my associate will receive 10. If my associate also chooses B, we both receive 40.
STEP 2: If I choose A and my associate chooses A, we both receive 70. If my associate chooses B, I receive 10 and they receive 80.
STEP 3: As a FAIR-MINDED human, the ideal strategy pair is A/A, which is fair and gives both of us 70.
STEP 4: <嗨，咱们都选A吧，各拿70，公平又划算！>"""

GPT4_DECISION = """STEP 1: Choosing B could give me 80 if my associate chooses A, or 40 if they choose B.
STEP 2: Choosing A gives me 70 if my associate also chooses A, but only 10 if they choose B.
STEP 3: In the past rounds I chose A and received 70.
STEP 4: My associate agreed to choose A, and seemed sincere.
STEP 5: As a fair-minded person I will honour our agreement.
I DECIDE TO CHOOSE [A]"""

MESSAGE_CORPUS = [
    (GPT4_MESSAGE, "嗨，咱们都选A吧，各拿70，公平又划算！"),
    ("<Let's both pick A!>", "Let's both pick A!"),
    ("STEP 4: Message: **<一起选A呗～>**", "一起选A呗～"),
    ("STEP 4: ＜我们都选A，好不好？＞", "我们都选A，好不好？"),
    ("STEP 4: 〈选A吧〉", "选A吧"),
    ('STEP 4: <"Let\'s go with A, deal?">', "Let's go with A, deal?"),
    ("I'll use the format <The message you want to send>.\nSTEP 4: <A/A it is, friend>", "A/A it is, friend"),
    ("First draft: <choose A>\nFinal: <都选A，稳赚70>", "都选A，稳赚70"),
    ("<  extra   spaces\n inside  >", "extra spaces inside"),
    ("STEP 4: <好的，那就这么定了，A！> Hope this works.", "好的，那就这么定了，A！"),
]
MESSAGE_FAILURES = [
    None,
    "",
    "Let's both choose A!",  # no brackets: re-asked, not guessed
    "STEP 4: <>",
    "STEP 4: <The message you want to send>",
    "STEP 4: <嗨，咱们都选A吧，各拿",  # truncated before the closing bracket
]

CHOICE_CORPUS = [
    (GPT4_DECISION, "A"),
    ("I DECIDE TO CHOOSE [B]", "B"),
    ("I DECIDE TO CHOOSE B.", "B"),
    ("I DECIDE TO CHOOSE A", "A"),
    ("i decide to choose [b]", "B"),
    ("**I DECIDE TO CHOOSE [A]**", "A"),
    ("I DECIDE TO CHOOSE **[B]**", "B"),
    ("I DECIDE TO CHOOSE ［Ａ］", "A"),  # full-width brackets and letter
    ("I DECIDE TO CHOOSE 【B】", "B"),
    ("‘I DECIDE TO CHOOSE [A]’", "A"),
    ("I DECIDE TO CHOOSE: Option B", "B"),
    ("I DECIDE TO CHOOSE [A] because trust matters.", "A"),
    ("I DECIDE TO CHOOSE (B)", "B"),
    ("I DECIDE TO CHOOSE `A`", "A"),
    # the instruction echoed first, the decision last
    ("I need to complete 'I DECIDE TO CHOOSE []' with A or B.\nI DECIDE TO CHOOSE [B]", "B"),
    ("The sentence is I DECIDE TO CHOOSE [A] or [B].\nSTEP 5: ...\nI DECIDE TO CHOOSE [A]", "A"),
    # the same decision restated
    ("I DECIDE TO CHOOSE [B]. To be clear: I DECIDE TO CHOOSE B", "B"),
    # reasoning is never the answer
    ("<think>Maybe I DECIDE TO CHOOSE [B]</think> Final answer: I DECIDE TO CHOOSE [A]", "A"),
    ("Hmm, I DECIDE TO CHOOSE [B]?</think>\nI DECIDE TO CHOOSE [A]", "A"),
    ("我决定选择A", "A"),
]
CHOICE_FAILURES = [
    None,
    "",
    "I DECIDE TO CHOOSE []",
    "I DECIDE TO CHOOSE [A] or [B]",  # the instruction echoed: ambiguous
    "I DECIDE TO CHOOSE [A/B]",
    "I DECIDE TO CHOOSE A or B",
    "I choose A.",  # not the sentence asked for: re-asked
    "STEP 5: As a fair person I will choose",  # truncated
    "I DECIDE TO CHOOSE [C]",
    "I DECIDE TO CHOOSE Alpha",
    # conflicting, ambiguous or retracted decisions: re-asked, never guessed
    "Initially I DECIDE TO CHOOSE [A]... on reflection, I DECIDE TO CHOOSE [B]",
    "I DECIDE TO CHOOSE A and B",
    "I DECIDE TO CHOOSE [A]. Just kidding, wait, no.",
    "<think>Maybe I DECIDE TO CHOOSE [B]</think> Final answer: A",
    "<think>I DECIDE TO CHOOSE [A]",  # reasoning cut off: no answer at all
]


@pytest.mark.parametrize("reply, expected", MESSAGE_CORPUS)
def test_parse_message_reads_realistic_replies(reply, expected):
    assert parse_message(reply) == expected


@pytest.mark.parametrize("reply", MESSAGE_FAILURES)
def test_parse_message_refuses_what_it_cannot_read(reply):
    assert parse_message(reply) is None


def test_parse_message_crops_to_the_chat_limit():
    assert len(parse_message("<" + "x" * 1000 + ">")) == protocol.MESSAGE_MAX_CHARS


@pytest.mark.parametrize("reply, expected", CHOICE_CORPUS)
def test_parse_choice_reads_realistic_replies(reply, expected):
    assert parse_choice(reply) == expected


@pytest.mark.parametrize("reply", CHOICE_FAILURES)
def test_parse_choice_refuses_what_it_cannot_read(reply):
    assert parse_choice(reply) is None
