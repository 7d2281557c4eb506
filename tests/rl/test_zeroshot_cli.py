"""The zero-shot scripts' shared flags: every decoding flag reaches the placer (:mod:`gnplace.rl.zeroshot_cli`)."""

from __future__ import annotations

import argparse
import inspect

import pytest

from gnplace.exceptions import InvalidArgument
from gnplace.rl import zeroshot, zeroshot_cli


def test_the_decoding_arguments_name_every_flag_add_decoding_arguments_adds():
    """Callers pass ``DECODING_ARGUMENTS`` on to the placer: a flag left out of it would be parsed and then ignored."""
    import argparse

    parser = argparse.ArgumentParser()
    zeroshot_cli.add_decoding_arguments(parser)
    given = vars(parser.parse_args([]))
    assert tuple(given) == zeroshot_cli.DECODING_ARGUMENTS and all(value is None for value in given.values())
    assert set(zeroshot_cli.DECODING_ARGUMENTS) <= set(inspect.signature(zeroshot.PolicyPlacer).parameters)


def test_add_decoding_arguments_is_typed_as_a_parser():
    """``parser`` was ``Any``; it is the :mod:`argparse` parser its docstring names."""
    import inspect

    from gnplace.rl.zeroshot_cli import add_decoding_arguments

    assert inspect.signature(add_decoding_arguments).parameters["parser"].annotation == "argparse.ArgumentParser"


@pytest.mark.parametrize("error, flags, said", [
    ("PolicyPlacer needs rounds >= 1, got 0", {"rounds": 0}, "--rounds needs >= 1, got 0"),
    ("PolicyPlacer's module_chain needs a budget >= 1, got 10", {"module_chain": 10},
     "--module-chain needs a budget >= 1, got 10"),
    ("PolicyPlacer's temperatures: leave temperatures out, or use around=False", {"temperatures": None}, None),
    ("PolicyPlacer needs rounds >= 1, got 0", {}, None),  # no such flag: the error as it is
])
def test_named_by_flag_names_the_scripts_flag_where_it_has_one(error, flags, said):
    err = InvalidArgument(error)
    named = zeroshot_cli.named_by_flag(err, argparse.Namespace(**flags))
    assert (named is err) if said is None else str(named) == said
