"""The front ends without Textual: ``memtop snapshot``, ``record`` and ``--batch`` on the Runner
(``frontends``), snapshots from views (``snapshot``) and ``memtop doctor`` (``doctor``)."""
