"""The game engine: frames and supervisor commands in, docs/events.md events out.

Sans-IO and deterministic: time advances only through the timestamps of the
frames and commands fed in (and ``tick(now)``), so a replay of a capture
reproduces a live session event for event, ids included.

What the engine owns, module by module:

* ``facade``: :class:`Engine`, the public calls (``feed``, ``tick``,
  ``command``, ``next_deadline``, ``snapshot``), the frame dispatch and the
  one place events are made;
* ``state``: the shoe, its coups and the shuffler's commitment, as data;
* ``machine``: a shoe's phases and a coup's states, each with its one
  table of transitions (a move off the table raises);
* ``shoe``: the shoe procedure: start, burn (the first card decides how
  many), cut card, last coup, end; the shuffler's secret order;
* ``dealing``: each card taken from the shoe and placed by the tableau;
* ``fast``: the fast path: a plain card into a clean live coup, and a clean
  complete coup's RESULT, applied directly when a guard (that changes
  nothing) says the general path would do exactly that;
* ``tableau``: the profile's third-card rule, as pure functions;
* ``boundary``: where a coup ends (the dealer's RESULT, or the completed
  tableau; an early RESULT; extra cards) and its settlement;
* ``article_x``: the misdeal codes and their one policy table; every
  deviation flagged at the frame that reveals it, with the profile's
  correction applied or a supervisor's awaited until the deadline, after
  which the coup is void; a void coup is never settled;
* ``loss``: frames lost on the line: held frames, counting coup ends;
* ``device``: device faults, restarts and the link;
* ``commands``: supervisor commands as operations;
* ``analytics``: odds for the next coup and ADVANTAGE alerts;
* ``tables``: the transition and policy tables as Markdown
  (``python -m controller.engine.tables``).

Where the position of a card cannot be known (frames lost, or an unread
card whose value decides the tableau), the engine does not guess: the
coup's further frames are *held* and released in order once a supervisor
has supplied what was missing (``enter_card``, ``accept``); in the meantime
their ``card`` events wait. With the RESULT button, the RESULT that follows
ends what is held for that coup and the next coup is dealt normally.
"""

from __future__ import annotations

from controller.commands_schema import CommandError
from controller.engine.dealing import MAX_LISTED_EXTRAS
from controller.engine.facade import Engine
from controller.engine.loss import _MAX_ENDS, MAX_HELD, MIN_COUP_CARDS, _ends_possible
from controller.engine.state import AWAITING, ORDER, UNKNOWN, Coup, Shoe, _Commit

__all__ = [
    "AWAITING",
    "MAX_HELD",
    "MAX_LISTED_EXTRAS",
    "MIN_COUP_CARDS",
    "ORDER",
    "UNKNOWN",
    "_MAX_ENDS",
    "CommandError",
    "Coup",
    "Engine",
    "Shoe",
    "_Commit",
    "_ends_possible",
]
