"""The seed's system as runnable Gear services.

* ``examples.repo``: REPO, stateful, addressed as ``REPO.<host>``;
* ``examples.ctrl``: CTRL, stateless, addressed as ``CTRL``; it asks REPO itself (nested call);
* ``examples.web``: WEB, the client-facing one, with a tiny HTTP front end;
* ``examples.system``: N instances of each in one process; ``examples.scenario``: the demo's script.
"""
