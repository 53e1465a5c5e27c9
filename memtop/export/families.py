"""memtop's own metric families: what prometheus_client's ``Metric``, ``Sample``,
``CounterMetricFamily``, ``GaugeMetricFamily`` and ``HistogramMetricFamily`` are, under the same
names and with the same meaning (a counter's samples end in ``_total``, a histogram's are its
buckets, ``_count`` and ``_sum``), for the part memtop uses.

Why not the library's: importing prometheus_client imports its whole package (http.server, wsgiref,
email, ssl, urllib.request, ...), ~9 MiB of anonymous memory the exporter kept for weeks to use
five small classes. memtop writes both expositions itself (``memtop.export.server``); the library
is imported, lazily, only to encode what memtop's writers leave to it (a name the format would
have to escape, an escaping scheme a scraper asked for) and by the backfill.

``Sample`` is a named tuple of the four fields memtop's writers read (10,000 samples a build, and
the last build's kept beside them); the two the library's encoders also read, ``exemplar`` and
``native_histogram``, are None for every memtop sample, so a family of these still goes through
them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

TYPES = ("counter", "gauge", "summary", "histogram", "gaugehistogram", "unknown", "info", "stateset")


class Sample(NamedTuple):
    name: str
    labels: dict[str, str]
    value: float
    #: seconds since the epoch (a float) or an object whose ``str`` is the OpenMetrics timestamp
    timestamp: Any = None

    @property
    def exemplar(self) -> None:
        return None

    @property
    def native_histogram(self) -> None:
        return None


class Metric:
    """A metric family and its samples (``type``: one of :data:`TYPES`; "untyped" is "unknown")."""

    __slots__ = ("name", "documentation", "unit", "type", "samples")

    def __init__(self, name: str, documentation: str, typ: str, unit: str = "") -> None:
        if unit and not name.endswith("_" + unit):
            name += "_" + unit
        if not name:  # any other name is written (escaped, by the library's encoders), as theirs
            raise ValueError("metric name cannot be empty")
        if typ == "untyped":
            typ = "unknown"
        if typ not in TYPES:
            raise ValueError("Invalid metric type: " + typ)
        self.name = name
        self.documentation = documentation
        self.unit = unit
        self.type = typ
        self.samples: list[Sample] = []

    def add_sample(self, name: str, labels: dict[str, str], value: float, timestamp: Any = None) -> None:
        self.samples.append(Sample(name, labels, value, timestamp))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Metric)
            and self.name == other.name
            and self.documentation == other.documentation
            and self.type == other.type
            and self.unit == other.unit
            and self.samples == other.samples
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value (as the library's)

    def __repr__(self) -> str:
        return f"Metric({self.name}, {self.documentation}, {self.type}, {self.unit}, {self.samples})"


class _Labelled(Metric):
    __slots__ = ("_labelnames",)

    def __init__(
        self,
        name: str,
        documentation: str,
        typ: str,
        labels: Sequence[str] | None,
        unit: str,
        first: object = None,
        first_is: str = "value",
    ) -> None:
        """``first``: the sample given with the family (its ``first_is``), exclusive of labels."""
        if labels is not None and first is not None:
            raise ValueError(f"Can only specify at most one of {first_is} and labels.")
        super().__init__(name, documentation, typ, unit)
        self._labelnames = tuple(labels or ())


class GaugeMetricFamily(_Labelled):
    """A gauge: one sample per label set, named as the family."""

    __slots__ = ()

    def __init__(
        self,
        name: str,
        documentation: str,
        value: float | None = None,
        labels: Sequence[str] | None = None,
        unit: str = "",
    ) -> None:
        super().__init__(name, documentation, "gauge", labels, unit, value)
        if value is not None:
            self.add_metric([], value)

    def add_metric(self, labels: Sequence[str], value: float, timestamp: Any = None) -> None:
        self.samples.append(
            Sample(self.name, dict(zip(self._labelnames, labels, strict=False)), value, timestamp)
        )


class CounterMetricFamily(_Labelled):
    """A counter: the family is named without ``_total``, each sample with it (and a ``_created``
    sample beside it when given one)."""

    __slots__ = ()

    def __init__(
        self,
        name: str,
        documentation: str,
        value: float | None = None,
        labels: Sequence[str] | None = None,
        created: float | None = None,
        unit: str = "",
    ) -> None:
        if name.endswith("_total"):
            name = name[:-6]
        super().__init__(name, documentation, "counter", labels, unit, value)
        if value is not None:
            self.add_metric([], value, created)

    def add_metric(
        self, labels: Sequence[str], value: float, created: float | None = None, timestamp: Any = None
    ) -> None:
        lab = dict(zip(self._labelnames, labels, strict=False))
        self.samples.append(Sample(self.name + "_total", lab, value, timestamp))
        if created is not None:
            self.samples.append(Sample(self.name + "_created", dict(lab), created, timestamp))


class HistogramMetricFamily(_Labelled):
    """A histogram: per label set, its cumulative buckets (``le``, sorted, +Inf last), then
    ``_count`` (the +Inf bucket) and ``_sum`` when the sum is given and no bucket is negative."""

    __slots__ = ()

    def __init__(
        self,
        name: str,
        documentation: str,
        buckets: Sequence[tuple[str, float]] | None = None,
        sum_value: float | None = None,
        labels: Sequence[str] | None = None,
        unit: str = "",
    ) -> None:
        if sum_value is not None and buckets is None:
            raise ValueError("sum value cannot be provided without buckets.")
        super().__init__(name, documentation, "histogram", labels, unit, buckets, "buckets")
        if buckets is not None:
            self.add_metric([], buckets, sum_value)

    def add_metric(
        self,
        labels: Sequence[str],
        buckets: Sequence[tuple[str, float]],
        sum_value: float | None,
        timestamp: Any = None,
    ) -> None:
        pairs = list(zip(self._labelnames, labels, strict=False))
        for bucket, value in buckets:
            self.samples.append(
                Sample(self.name + "_bucket", dict([*pairs, ("le", bucket)]), value, timestamp)
            )
        if float(buckets[0][0]) >= 0 and sum_value is not None:
            self.samples.append(Sample(self.name + "_count", dict(pairs), buckets[-1][1], timestamp))
            self.samples.append(Sample(self.name + "_sum", dict(pairs), sum_value, timestamp))
