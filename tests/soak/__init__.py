"""The soak and fault campaign.

:mod:`tests.soak.campaign` is the harness: the fake shoe on a pseudo-terminal
with every fault kind enabled, the daemon as a subprocess, a real Mosquitto
and an independent MQTT subscriber; the broker is restarted and the daemon
``kill -9``-ed during the run, and at the end every coup the fake dealt is
accounted for against what the subscriber received.

``tests/test_soak_short.py`` runs a short campaign inside ``make test``;
``python -m tests.soak --coups 10000`` (``make soak``) runs the long one.
"""
