"""The record stream: the Source protocol (``source``), the live source (``bridge``), the replay
source (``replay``), the recorder (``recording``) and the one tick (``runner``)."""
