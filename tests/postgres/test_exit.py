"""A sync store left open when the program ends: tenure closes its own pool at exit, while
its threads can still stop (on Python 3.13, psycopg_pool's ``__del__`` during the
interpreter's finalization waits 5 s for each of them and warns), and leaves a caller's
pool to its caller."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.backends import POSTGRES_URL

SCRIPT = textwrap.dedent(
    """
    import atexit, sys, threading

    from psycopg_pool import ConnectionPool

    def pool_threads():
        return sorted(t.name for t in threading.enumerate() if t.name.startswith("tenure:"))

    # Registered before tenure's own hook, so it runs after it (atexit runs hooks in
    # reverse order): what tenure's hook left behind.
    def at_exit():
        print("at exit:", pool_threads(), "caller's pool closed:", callers.closed, flush=True)
        callers.close()  # the caller's to close, which this caller does

    atexit.register(at_exit)

    import tenure
    from tenure.stores.postgres import PostgresDriver

    url, schema = sys.argv[1], sys.argv[2]
    store = tenure.connect(f"{url}?schema={schema}")
    store.submit("left-open")
    callers = ConnectionPool(url, kwargs={"autocommit": True},
                             configure=PostgresDriver.configure, min_size=1, name="caller")
    theirs = tenure.Store(PostgresDriver.open(pool=callers, schema=schema))
    assert theirs.get("left-open").state == "ready"
    print("running:", pool_threads(), flush=True)
    """
)


def test_a_store_left_open_is_closed_at_exit(schema: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, POSTGRES_URL.split("?")[0], schema],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    running, at_exit = done.stdout.splitlines()
    assert f"tenure:{schema}-worker-0" in running  # the pool's threads ran
    assert at_exit == "at exit: [] caller's pool closed: False"
    assert "couldn't stop thread" not in done.stderr
