"""Crash tests of the offset stores: a real driver process killed with SIGKILL, then restarted.

* :mod:`tests.crash.driver` is the streaming program under test. It runs in its own process
  (own SparkContext on ``local[2]``, own JVM and Python workers) and writes the effect of every
  record it processes: inside the store's transaction for SQLite/PostgreSQL, to an append-only
  file (fsync, written before the offsets commit) for the checkpoint, Kafka and ZooKeeper stores.
* :mod:`tests.crash.harness` produces records, starts the driver, kills its whole process group
  at seeded random points (or lets the driver kill itself at a chosen point), restarts it, lets
  the last run finish, then counts lost and duplicated effects and checks every duplicate is a
  replay of the one batch that was uncommitted at a kill.
* :mod:`tests.crash.campaign` is the long campaign command (``python -m tests.crash.campaign``).

``tests/integration/test_crash_recovery.py`` runs a few trials per store in CI. Nothing here is
named ``test_*``: pytest must not collect the driver or the campaign.
"""
