"""The bonus file for Prolific's bulk bonus: ``PID,amount`` lines from the payment table.

Prolific's bulk-bonus call is not idempotent: every upload pays again. So each file handed out is
a payout, recorded (the payment app's ``BonusPayout`` table: when, who, the lines, their total
and SHA-256), and a file is never made again with different totals:

- no payout yet: the file of every participant's bonus is recorded and handed out;
- the payment table still gives what was paid: the recorded file is handed out again, byte for
  byte, with a warning that uploading it again pays everyone twice;
- the payment table now gives other amounts (a participant finished after the payout, say): it
  is refused (``BonusRefused``, naming the PIDs), unless the difference is asked for: a new payout
  of only what is still owed (``difference=True``), recorded like the first. An amount lower than
  what was paid cannot be taken back by a file: that is refused whatever is asked.

``next_payout`` says what would be handed out, recording nothing (the admin page shows it: a GET
never records); ``bonus_file`` hands it out and records it (the admin's confirmed POST, the
command line).

A participant's bonus is what the payment table owes beyond Prolific's own reward, which stands for
the show-up fee: ``(payout - participation_fee) x prolific_bonus_rate``, rounded to cents (Prolific's
currency per unit of the session's: the session config's ``prolific_bonus_rate``); only online
participants with a Prolific ID and a payout, and only amounts above zero, are listed.
"""

from __future__ import annotations

import hashlib
import time


class BonusRefused(ValueError):
    """A bonus file that would pay differently from what was paid already; the message says how."""


NOT_IDEMPOTENT_WARNING = ("Prolific's bulk bonus is not idempotent: every upload of a file pays every line again. "
                          "Upload each payout's file once.")


def owed(session) -> dict:
    """{PID: amount} the payment table owes now (amounts above zero, rounded to cents)."""
    from lab.base import app_registry

    Payment = app_registry.player_model("payment")
    fee = float(session.config.get("participation_fee") or 0)
    rate = float(session.config.get("prolific_bonus_rate") or 1.0)
    amounts = {}
    for player in Payment.objects_filter(session=session):
        pid = player.participant.vars.get("prolific_pid")
        payout = player.field_maybe_none("payout")
        if not pid or payout is None:
            continue
        amount = round((float(payout) - fee) * rate, 2)
        if amount > 0:
            amounts[pid] = amount
    return amounts


def csv_text(amounts: dict) -> str:
    """Prolific's format: one ``PID,amount`` line per participant, no header."""
    return "".join(f"{pid},{amount:.2f}\n" for pid, amount in sorted(amounts.items()))


def parse(lines: str) -> dict:
    amounts = {}
    for line in lines.splitlines():
        if line.strip():
            pid, _, amount = line.partition(",")
            amounts[pid] = round(float(amount), 2)
    return amounts


def payouts(session_code: str) -> list:
    from lab.base import app_registry

    Payout = app_registry.bonus_payouts_model()
    return list(Payout.objects_filter(session_code=session_code).order_by(Payout.id))


def paid(session_code: str) -> dict:
    """{PID: amount} of every recorded payout together."""
    total = {}
    for row in payouts(session_code):
        for pid, amount in parse(row.lines).items():
            total[pid] = round(total.get(pid, 0.0) + amount, 2)
    return total


def next_payout(session, *, difference: bool = False) -> tuple[str, str, bool]:
    """(the file's text, a note for the experimenter, whether handing it out is a new payout):
    what ``bonus_file`` would hand out now, with nothing recorded (the admin page shows it before
    the experimenter confirms). Raises BonusRefused when the payment table and the payouts
    disagree (see the module)."""
    now_owed = owed(session)
    already = paid(session.code)
    recorded = payouts(session.code)
    lower = sorted(pid for pid, amount in already.items() if now_owed.get(pid, 0.0) < amount - 0.005)
    if lower:
        raise BonusRefused(f"The payment table now owes less than was paid to {', '.join(lower)}; a bonus file cannot "
                           "take money back. Nothing was recorded.")
    remaining = {pid: round(amount - already.get(pid, 0.0), 2) for pid, amount in now_owed.items()}
    remaining = {pid: amount for pid, amount in remaining.items() if amount > 0.005}
    if not recorded and not remaining:
        raise BonusRefused("No participant of this session is owed a bonus yet (online participants with a Prolific "
                           "ID and a payout above the show-up fee). Nothing was recorded.")
    if recorded and not remaining:
        last = recorded[-1]
        return last.lines, (f"Already paid: this is payout {len(recorded)} of {_when(last.created_at)} ({last.who}), "
                            f"unchanged. {NOT_IDEMPOTENT_WARNING} Do not upload it again if it was uploaded."), False
    if recorded and not difference:
        raise BonusRefused(
            f"The payment table changed since payout {len(recorded)} of {_when(recorded[-1].created_at)}: still owed to "
            f"{', '.join(sorted(remaining))} (total {sum(remaining.values()):.2f}). The recorded file is not made again "
            "with other totals. Ask for the difference (admin: a new payout of what is still owed; command line: "
            "--difference) to get a new file of only what is still owed. " + NOT_IDEMPOTENT_WARNING)
    return csv_text(remaining), (f"Payout {len(recorded) + 1}, not recorded yet: {len(remaining)} participants, "
                                 f"total {sum(remaining.values()):.2f}. {NOT_IDEMPOTENT_WARNING}"), True


def bonus_file(session, who: str, *, difference: bool = False) -> tuple[str, str]:
    """(the file's text, a note for the experimenter). Records a new payout when one is made;
    raises BonusRefused when the payment table and the payouts disagree (see the module)."""
    from lab.base import app_registry

    text, note, new = next_payout(session, difference=difference)
    if not new:
        return text, note
    amounts = parse(text)
    number = len(payouts(session.code)) + 1
    total = round(sum(amounts.values()), 2)
    app_registry.bonus_payouts_model().create(
        session_code=session.code, created_at=time.time(), who=who, kind="difference" if number > 1 else "full",
        total=total, lines=text, sha256=hashlib.sha256(text.encode()).hexdigest())
    return text, f"Payout {number} recorded: {len(amounts)} participants, total {total:.2f}. {NOT_IDEMPOTENT_WARNING}"


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def file_name(session_code: str, number: int) -> str:
    return f"prolific_bonus_{session_code}_payout{number}.csv"
