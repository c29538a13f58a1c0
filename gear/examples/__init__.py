"""The example system as runnable Gear services: WEB (a web front end), REPO (a key-value
repository) and CTRL (a controller).

* ``gear.examples.contracts``: what each TYPE answers (``Repo``, ``Ctrl``, ``Instance``), declared once;
  the services implement them and call each other through typed proxies;
* ``gear.examples.repo``: REPO, stateful, addressed as ``REPO.<host>``;
* ``gear.examples.ctrl``: CTRL, stateless, addressed as ``CTRL``; it asks REPO itself (nested call);
* ``gear.examples.web``: WEB, the client-facing one, with a tiny HTTP front end;
* ``gear.examples.system``: N instances of each in one process; ``gear.examples.scenario``: the demo's script.
"""

__all__: tuple[str, ...] = ()
