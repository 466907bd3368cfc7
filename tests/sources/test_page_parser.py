"""The needed-families exposition parser (adapter/sources/page_parser.py).

The oracle is `prometheus_client`'s own full parser run over the same real vLLM 0.26.0 pages
(tests/data/, copied from shared/data/vllm-0.26.0/): whatever subset is asked for, the fast path
must return exactly the samples the full parse finds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapter.errors import ExpositionError
from adapter.sources.page_parser import Labels, Page, Parser, histogram_samples
from adapter.vocabulary import catalogue, vllm
from adapter.vocabulary.catalogue import GaugeSpec, HistogramSpec

DATA = Path(__file__).resolve().parent.parent / "data"
CAPTURES = ("metrics-idle.prom", "metrics-overloaded.prom")


def full_parse(text: str) -> Page:
    """Every sample of a page, by prometheus_client, in the Parser's shape."""
    page: Page = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels: Labels = tuple(sorted(sample.labels.items()))
            page.setdefault(sample.name, {})[labels] = sample.value
    return page


def catalogue_names() -> set[str]:
    """Every sample name the built-in metrics read, aliases included."""
    names: set[str] = set()
    for metric in catalogue.BUILTIN:
        spec = metric.spec
        if isinstance(spec, GaugeSpec):
            names.update(name for family in spec.families for name in family)
        elif isinstance(spec, HistogramSpec):
            names.update(sample for name in spec.family for sample in histogram_samples(name))
    return names


@pytest.mark.parametrize("capture", CAPTURES)
def test_catalogue_families_match_a_full_parse(capture: str) -> None:
    """On a real vLLM page the catalogue's families come out exactly as prometheus_client reads them."""
    text = (DATA / capture).read_text()
    wanted = catalogue_names()
    expected = {name: series for name, series in full_parse(text).items() if name in wanted}
    page = Parser(wanted).parse(text)
    assert page == expected
    # 3 gauges + TTFT (22 buckets + Inf, sum, count) + TPOT (19 + Inf, sum, count) on one engine
    assert sum(len(series) for series in page.values()) == 3 + 25 + 22


@pytest.mark.parametrize("capture", CAPTURES)
def test_every_sample_of_a_real_page_matches_a_full_parse(capture: str) -> None:
    """Asked for every sample name, the parser reproduces the whole page (labels with spaces,
    escapes-free quoting, `_created` gauges, `python_info`), so it is a parser of the format, not
    of a few lines."""
    text = (DATA / capture).read_text()
    expected = full_parse(text)
    assert Parser(expected).parse(text) == expected


@pytest.mark.parametrize("capture", CAPTURES)
def test_created_series_are_not_read(capture: str) -> None:
    """`_created` samples follow every histogram; asking for a histogram never yields them."""
    text = (DATA / capture).read_text()
    page = Parser(histogram_samples(vllm.TTFT[0])).parse(text)
    assert set(page) == set(histogram_samples(vllm.TTFT[0]))
    assert f"{vllm.TTFT[0]}_created" in text


def test_a_longer_name_sharing_the_prefix_is_not_read() -> None:
    """`num_requests_waiting_by_reason` starts with `num_requests_waiting` but is another family."""
    text = (DATA / "metrics-overloaded.prom").read_text()
    page = Parser(vllm.NUM_REQUESTS_WAITING).parse(text)
    assert page == {"vllm:num_requests_waiting": {(("engine", "0"), ("model_name", "llama-1b-dummy")): 575.0}}


def test_label_sets_are_shared_between_pages() -> None:
    """The same label block parsed twice yields the same tuple object: history costs no copies."""
    text = (DATA / "metrics-idle.prom").read_text()
    parser = Parser(vllm.NUM_REQUESTS_RUNNING)
    (first,) = parser.parse(text)["vllm:num_requests_running"]
    (second,) = parser.parse(text)["vllm:num_requests_running"]
    assert first is second


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param('m{a="x\\"y"} 1\n', {(("a", 'x"y'),): 1.0}, id="escaped quote in a value"),
        pytest.param('m{a="x\\\\y"} 1\n', {(("a", "x\\y"),): 1.0}, id="escaped backslash in a value"),
        pytest.param('m{a="x\\ny"} 1\n', {(("a", "x\ny"),): 1.0}, id="escaped newline in a value"),
        pytest.param(
            'm{a="x}y",b="2"} 1\n', {(("a", "x}y"), ("b", "2")): 1.0}, id="closing brace in a value"
        ),
        pytest.param('m{a="x,y"} 1\n', {(("a", "x,y"),): 1.0}, id="comma in a value"),
        pytest.param(
            'm{b="2",a="1",} 1\n', {(("a", "1"), ("b", "2")): 1.0}, id="trailing comma and unsorted labels"
        ),
        pytest.param('m{ a = "1" } 1\n', {(("a", "1"),): 1.0}, id="blanks around labels"),
        pytest.param("m{} 7\n", {(): 7.0}, id="empty label block"),
        pytest.param("m 7", {(): 7.0}, id="no labels and no final newline"),
        pytest.param("m\t7\t1700000000000\n", {(): 7.0}, id="tabs and a timestamp"),
        pytest.param('m{a="1"} 7\r\n', {(("a", "1"),): 7.0}, id="crlf line ending"),
        pytest.param("m +Inf\n", {(): float("inf")}, id="positive infinity"),
        pytest.param("m -1.5e-3\n", {(): -0.0015}, id="exponent notation"),
        pytest.param(
            "# TYPE m gauge\nother 1\nm 2\nm_created 3\nmore 4\n", {(): 2.0}, id="found among others"
        ),
    ],
)
def test_sample_lines(text: str, expected: dict[Labels, float]) -> None:
    """The text format 0.0.4 sample syntax, edge by edge."""
    assert Parser(["m"]).parse(text) == {"m": expected}


def test_nan_values_are_kept_as_nan() -> None:
    """NaN is a legal sample value; deciding what it means is the caller's job."""
    value = Parser(["m"]).parse("m NaN\n")["m"][()]
    assert value != value


def test_a_page_without_the_family_is_empty() -> None:
    """A page lacking the family (e.g. vLLM run with --disable-log-stats) parses to nothing."""
    assert Parser(["vllm:num_requests_running"]).parse("# HELP up x\nprocess_cpu_seconds_total 1\n") == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "<html><body>502 Bad Gateway</body></html>", "not a Prometheus text exposition", id="html page"
        ),
        pytest.param("\x00\x01\x02m 1", "not a Prometheus text exposition", id="binary bytes"),
        pytest.param("a 1\nm abc\n", "line 2: value 'abc' of m must be a number", id="value is not a number"),
        pytest.param("m\n", "line 1: malformed sample 'm'", id="missing value"),
        pytest.param("m 1 2 3\n", "line 1: malformed sample 'm 1 2 3'", id="too many fields"),
        pytest.param('m{a="1" 1\n', "line 1: malformed sample", id="unterminated label block"),
        pytest.param("m{a=1} 1\n", "line 1: malformed labels '{a=1}'", id="unquoted label value"),
        pytest.param('m{a="1"b="2"} 1\n', "malformed labels", id="missing comma between labels"),
        pytest.param('m{a="1",a="2"} 1\n', "line 1: label 'a' appears twice", id="label twice"),
        pytest.param(
            'x 0\ny 0\nm{a="1"} 1\nm{a="1"} 2\n', 'line 4: duplicate series m{a="1"}', id="series twice"
        ),
    ],
)
def test_garbage_is_an_error_with_its_line(text: str, message: str) -> None:
    """A page that is not an exposition, or a wanted line that does not parse, is an error naming
    the line: never a silently missing series."""
    with pytest.raises(ExpositionError, match=message.replace("{", r"\{").replace("}", r"\}")):
        Parser(["m"]).parse(text)


def test_malformed_lines_of_unwanted_families_are_not_examined() -> None:
    """Lines the filter skips are not validated: their cost is the point of skipping them."""
    assert Parser(["m"]).parse("other{garbage 1 2 3\nm 1\n") == {"m": {(): 1.0}}


def test_want_reports_new_names() -> None:
    """Adding names is idempotent and says whether anything changed (the source re-scrapes then)."""
    parser = Parser(["a"])
    assert parser.want(["a"]) is False
    assert parser.want(["a", "b"]) is True
    assert parser.names == {"a", "b"}
