"""Workload shapes: fixed counts or a file of pairs, drawn with a seed, prompts never repeated."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.load.workload import Sampler, fixed, longest, read_pairs


def test_fixed_workload_draws_the_same_shape() -> None:
    """Every request of a fixed workload has the asked prompt length and output tokens."""
    sampler = Sampler(fixed(64, 8))
    for _ in range(5):
        prompt, output = sampler.draw()
        assert (len(prompt), output) == (64, 8)
    assert longest(fixed(64, 8)) == 72


def test_pairs_file_keeps_its_pairs(tmp_path: Path) -> None:
    """Header, comments and blank lines are skipped; commas, semicolons or blanks separate; the
    drawn requests are the file's pairs, never a prompt of one with the output of another."""
    path = tmp_path / "pairs.csv"
    path.write_text(
        "prompt_tokens,output_tokens\n# a comment\n100,10\n\n200; 20\n300 30  # trailing comment\n"
    )
    workload = read_pairs(path)
    assert workload.prompt_tokens.values == (100, 200, 300)
    assert workload.output_tokens.values == (10, 20, 30)
    assert workload.prompt_tokens.mean == 200.0 and longest(workload) == 330
    sampler = Sampler(workload, seed=3)
    drawn = {(len(prompt), output) for prompt, output in (sampler.draw() for _ in range(30))}
    assert drawn == {(100, 10), (200, 20), (300, 30)}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "100,10\nnot a pair\n", "line 2 'not a pair' must be two token counts", id="garbage line"
        ),
        pytest.param("100,0\n", "token counts must be at least 1", id="zero tokens"),
        pytest.param("# nothing\n", "has no prompt,output pairs", id="empty"),
    ],
)
def test_bad_pairs_files_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "pairs.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_pairs(path)


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unable to read workload file .*missing.csv"):
        read_pairs(tmp_path / "missing.csv")


def test_fixed_counts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="--output-tokens 0 must be at least 1"):
        fixed(10, 0)


def test_the_seed_fixes_lengths_but_never_prompt_ids(tmp_path: Path) -> None:
    """Two samplers with one seed draw the same lengths (the same traffic), but different token ids,
    so a second profile never finds the first one's prompts in the prefix cache; a reseed restarts
    the lengths."""
    path = tmp_path / "pairs.csv"
    path.write_text("".join(f"{p},{p // 10}\n" for p in range(50, 500, 10)))
    first, second = Sampler(read_pairs(path), seed=7), Sampler(read_pairs(path), seed=7)
    a = [first.draw() for _ in range(20)]
    b = [second.draw() for _ in range(20)]
    assert [(len(p), o) for p, o in a] == [(len(p), o) for p, o in b]
    assert all(pa != pb for (pa, _), (pb, _) in zip(a, b, strict=True))
    assert all(1000 <= token < 20000 for prompt, _ in a for token in prompt)
    first.reseed("again")
    second.reseed("again")
    assert [o for _, o in (first.draw() for _ in range(10))] == [
        o for _, o in (second.draw() for _ in range(10))
    ]
