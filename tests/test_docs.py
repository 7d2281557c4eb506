"""The documentation's code: the README's quick start runs, every command it shows names real options, every link leads.

Each command shown in ``README.md``, the model card and ``docs/`` (in ``sh`` blocks, and inline in
backticks) is checked against the ``--help`` of the program it calls: the subcommand must exist and
every option it passes must be one that program accepts, so a renamed flag cannot leave the docs
behind. Placeholders (``GRAPH``, ``C``, ``PATH``) and optional parts in brackets are fine: only the
program, the subcommand and the option names are checked. Each relative link of those files and of
``datasets/README.md`` must name a file that exists and, for a Markdown file, a heading it has, so text
moved between them cannot leave a link behind.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "checkpoints" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: every document whose links are checked
LINKED = [*DOCS, ROOT / "datasets" / "README.md"]
#: scripts whose first argument is a subcommand
WITH_SUBCOMMANDS = {"bench"}


def _blocks(text: str, language: str) -> list[str]:
    """The fenced code blocks of ``text`` in ``language``."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def _commands(path: Path) -> list[str]:
    """The ``gnplace ...`` and ``python scripts/X.py ...`` commands that ``path`` shows."""
    text = path.read_text()
    found = []
    for block in _blocks(text, "sh"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line.startswith(("gnplace ", "python scripts/")):
                found.append(line)
    found += re.findall(r"`((?:gnplace|python scripts/\w+\.py) [^`]*)`", text)
    return found


def _prose(text: str) -> str:
    """``text`` without its fenced code blocks, where a ``](`` or a ``#`` line is code, not a link or a heading."""
    return re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@functools.cache
def _anchors(path: Path) -> frozenset[str]:
    """The anchors of ``path``'s headings; a repeated heading's later ones get ``-1``, ``-2``, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} +(.*?) *$", _prose(path.read_text()), flags=re.MULTILINE):
        slug = _slug(heading)
        found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return frozenset(found)


def _links(path: Path) -> list[str]:
    """The relative link targets of ``path``'s prose (``[text](target)``; web addresses left out)."""
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", _prose(path.read_text())) if not re.match(r"[a-z]+:", t)]


def _broken_links(doc: Path) -> list[str]:
    """``doc``'s relative links that name no file, or no heading of the Markdown file they name, with why."""
    broken = []
    for target in _links(doc):
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target} (no heading #{anchor} in {file.name})")
    return broken


def _program(command: str) -> tuple[str, list[str], list[str]]:
    """``(program, subcommand words, option names)`` of a documented command."""
    words = shlex.split(command.replace("[", " ").replace("]", " "))
    if words[0] == "gnplace":
        program, rest = "gnplace", words[1:]
        head = rest[:1]
    else:
        program, rest = Path(words[1]).stem, words[2:]
        head = rest[:1] if program in WITH_SUBCOMMANDS else []
    if head and head[0].startswith("-"):
        head = []
    options = [w.split("=")[0] for w in rest if re.fullmatch(r"--?[A-Za-z][\w-]*(=.*)?", w)]
    return program, head, options


def _cases() -> list[tuple[str, str]]:
    return [(f"{path.relative_to(ROOT)}", command) for path in DOCS for command in _commands(path)]


@pytest.fixture(scope="module")
def helps(load_script_in_module):
    """``help(program, subcommand words)``: its ``--help`` text, and the exit status of asking for it."""
    from gnplace.cli import main as gnplace_main

    cache: dict[tuple[str, tuple[str, ...]], tuple[int, str]] = {}
    load = functools.cache(load_script_in_module)  # each script once, whatever its subcommands

    def help_of(program: str, head: list[str]) -> tuple[int, str]:
        key = (program, tuple(head))
        if key not in cache:
            main = gnplace_main if program == "gnplace" else load(program).main
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                try:
                    status = main([*head, "--help"])
                except SystemExit as stop:
                    status = stop.code
            cache[key] = (int(status or 0), out.getvalue())
        return cache[key]

    return help_of


def test_every_document_shows_commands():
    """The parsing below finds what it checks (a regex that matches nothing would pass every case)."""
    cases = _cases()
    assert len(cases) > 60
    assert {doc for doc, _ in cases} >= {"README.md", "checkpoints/README.md"}


def test_slug_and_anchors_follow_github(tmp_path):
    """The anchors the link check expects are GitHub's: the rules this module reimplements, on known cases."""
    assert _slug("Measured (zero-shot, simulator)") == "measured-zero-shot-simulator"
    assert _slug("The seeds' learned placers, and the benchmark report") == "the-seeds-learned-placers-and-the-benchmark-report"
    assert _slug("Graph files (`.gnpg`, version 2)") == "graph-files-gnpg-version-2"
    doc = tmp_path / "doc.md"
    doc.write_text("# A\n\n## Measured\n\n```sh\n# not a heading\n```\n\n## Measured\n")
    assert _anchors(doc) == {"a", "measured", "measured-1"}


@pytest.mark.parametrize("doc", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_somewhere(doc):
    """Every relative link names a file that exists and, in a Markdown file, one of its headings."""
    broken = _broken_links(doc)
    assert not broken, f"{doc.relative_to(ROOT)}: " + ", ".join(broken)


def test_link_check_finds_broken_links(tmp_path):
    """A missing file, a missing heading (in this file or another) is found; a link in code or to the web is not one."""
    (tmp_path / "other.md").write_text("# Other\n\n## Part two\n")
    doc = tmp_path / "doc.md"
    doc.write_text("# Doc\n\n[a](other.md) [b](other.md#part-two) [c](#doc) [d](https://example.com/x#y)\n"
                   "[e](gone.md) [f](other.md#part-three) [g](#nowhere)\n\n```sh\necho [h](code.md)\n```\n")
    assert _broken_links(doc) == ["gone.md (no such file)", "other.md#part-three (no heading #part-three in other.md)",
                                  "#nowhere (no heading #nowhere in doc.md)"]
    links = _links(ROOT / "README.md")  # and the README's own links are seen, both kinds
    assert any(t.startswith("docs/") for t in links) and any(t.startswith("#") for t in links)


@pytest.mark.parametrize(("doc", "command"), _cases())
def test_documented_command_names_real_options(doc, command, helps):
    program, head, options = _program(command)
    assert (ROOT / "scripts" / f"{program}.py").exists() or program == "gnplace", f"{doc}: no program {program}"
    status, text = helps(program, head)
    assert status == 0, f"{doc}: `{command}`: {' '.join([program, *head])} --help exits {status}: {text[-300:]}"
    unknown = [o for o in options if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", text)]
    assert not unknown, f"{doc}: `{command}`: {program} {' '.join(head)} has no option {', '.join(unknown)}"


def test_readme_quick_start_runs(monkeypatch, capsys):
    """The README's Python quick start, run as written from the repository root: the main job included."""
    blocks = _blocks((ROOT / "README.md").read_text(), "python")
    assert blocks
    monkeypatch.chdir(ROOT)
    session: dict = {}  # the blocks continue one session, as a reader would type them
    for block in blocks:
        exec(compile(block, "README.md", "exec"), session)  # noqa: S102 - the README's own example
    printed = capsys.readouterr().out
    assert re.search(r"\d+\.\d{3} ms, bound \d+\.\d{3} ms", printed)
    step = {m.group(1): float(m.group(2)) for m in re.finditer(r"^(single|auto|policy|bound) +(\d+\.\d{3}) ms$",
                                                                printed, re.MULTILINE)}
    assert step.keys() == {"single", "auto", "policy", "bound"}, printed
    assert step["bound"] <= step["policy"] <= step["auto"] <= step["single"]  # zero-shot is never slower than auto
    # the figures its comments state are what it prints (the policy's said revision 15's 18.409 ms under revision 18)
    stated = [float(x) for block in blocks for comment in re.findall(r"#(.*)$", block, flags=re.MULTILINE)
              for x in re.findall(r"\d+\.\d{3}", comment)]
    assert stated == pytest.approx([step[name] for name in ("single", "auto", "policy", "bound")], rel=1e-3), printed


#: a docstring's Sphinx cross-reference to a name of the package: ``:func:`gnplace.x.y```, ``:class:`~gnplace.x.Y```
_XREF = re.compile(r":(?:func|class|meth|data|attr|mod|exc|obj):`(?:[^`<]*<)?~?(gnplace\b[^`>]*)>?`")


def _resolves(target: str) -> bool:
    """Whether ``target`` (``gnplace.mod.name.attr``) names a module, or something in one, that exists."""
    import importlib
    import inspect

    if re.search(r"\s", target):  # a reference broken over two lines names nothing
        return False
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if hasattr(found, name):
                found = getattr(found, name)
            elif inspect.isclass(found) and (
                any(name in getattr(c, "__annotations__", {}) for c in found.__mro__)  # a dataclass field
                or re.search(rf"\bself\.{name}\b[^=\n]*=", inspect.getsource(found))  # one each instance sets
            ):
                return name == parts[-1]
            else:
                return False
        return True
    return False


def test_package_cross_references_resolve():
    """Every ``:mod:``, ``:func:``, ``:class:``, ... of a ``gnplace.`` name in the package's docstrings names one.

    ``rl/env.py`` pointed at a ``gnplace.rl.reward`` module there never was (the reward is
    ``gnplace.rl.problem.reward``), and two references broken over two lines named nothing.
    """
    broken = []
    for path in sorted((ROOT / "gnplace").rglob("*.py")):
        text = path.read_text()
        for match in _XREF.finditer(text):
            if not _resolves(match.group(1)):
                line = text.count("\n", 0, match.start()) + 1
                broken.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0)!r}")
    assert len(broken) == 0, "cross-references to nothing:\n  " + "\n  ".join(broken)


def test_cross_reference_check_finds_what_names_nothing():
    """The check above accepts modules, functions, class attributes and instance attributes, and no more."""
    assert _resolves("gnplace.rl.problem") and _resolves("gnplace.rl.problem.reward")
    assert _resolves("gnplace.graph.OpGraph.op_kinds")  # set by each instance
    assert _resolves("gnplace.placement.GraphKey.digest")  # a dataclass field without a default
    assert _resolves("gnplace.sim.timer.StepTimer.time")
    assert not _resolves("gnplace.rl.reward") and not _resolves("gnplace.graph.OpGraph.no_such")
    assert not _resolves("gnplace.policy.features.\nNODE_FEATURES")
    assert _XREF.search(":data:`~gnplace.policy.features.NODE_FEATURES`").group(1) == "gnplace.policy.features.NODE_FEATURES"


def _what_is_here(readme: str) -> str:
    """The README's "What is here" table: the section from that heading to the next."""
    section = readme.split("\n## What is here\n", 1)[1]
    return section.split("\n## ", 1)[0].split("\n### ", 1)[0]


def test_what_is_here_names_every_top_level_module():
    """The README's layout table names each module of ``gnplace/`` (``__main__`` aside), and each subpackage or a file of it.

    Seven modules were missing: ``exceptions``, ``limits``, ``units``, ``seed``, ``runlock``, ``shipped``,
    ``cstdout``, all of them used across the package.
    """
    table = _what_is_here((ROOT / "README.md").read_text())
    package = ROOT / "gnplace"
    names = [f"gnplace/{p.name}" for p in sorted(package.glob("*.py")) if p.name not in ("__init__.py", "__main__.py")]
    names += [f"gnplace/{p.name}/" for p in sorted(package.iterdir()) if (p / "__init__.py").is_file()]
    missing = [name for name in names if (f"`{name}" if name.endswith("/") else f"`{name}`") not in table]
    assert not missing, f"README.md's 'What is here' leaves out {', '.join(missing)}"


def test_every_output_schema_is_checked_against_what_its_command_writes():
    """docs/outputs.md lists each output's keys; a table no test compares with its command's output could drift."""
    names = re.findall(r"<!-- schema: ([\w-]+) -->", (ROOT / "docs" / "outputs.md").read_text())
    checked = {name for path in (ROOT / "tests").rglob("test_*.py")
               for name in re.findall(r'documented_keys\("([\w-]+)"', path.read_text())}
    assert len(names) >= 10 and len(set(names)) == len(names)
    assert set(names) == checked


def test_the_output_schema_check_finds_a_key_missing_or_extra(documented_keys):
    report = {"graph": "g", "ops": 1, "groups": 1, "num_ops": 1, "num_groups": 1, "cluster": "c", "placer": "p",
              "placement_file": None,
              "mode": "default", "step_time_s": 1.0, "oom": False, "bound_s": 1.0, "critical_path_s": 1.0,
              "work_bound_s": 1.0, "ratio_to_bound": 1.0,
              "devices": [{"name": "d", "busy_s": 1.0, "utilisation": 1.0, "peak_memory_bytes": 0.0,
                           "memory_capacity_bytes": 1.0, "oom": False}]}
    documented_keys("simulate-json", report)
    with pytest.raises(AssertionError, match=r"written but not documented \['step_ms'\]"):
        documented_keys("simulate-json", {**report, "step_ms": 1.0})
    with pytest.raises(AssertionError, match=r"documented but not written \['devices\[\]\.oom'\]"):
        documented_keys("simulate-json", {**report, "devices": [{"name": "d", "busy_s": 1.0, "utilisation": 1.0,
                                                                 "peak_memory_bytes": 0.0,
                                                                 "memory_capacity_bytes": 1.0}]})


def test_the_model_card_gives_the_readme_zero_shot_figures_of_the_shipped_file():
    """The model card's zero-shot table and README's are one measurement (the shipped file, seed 0): the same
    ``policy`` and greedy-decode means. README's greedy test-split mean moved to 1.067 (over the placements that
    fit) while the model card kept 1.065."""
    def rows(path: Path, labels: tuple[str, ...]) -> dict[str, tuple[str, str]]:
        found = {}
        for line in path.read_text().splitlines():
            cells = [c.strip().strip("*") for c in line.strip().strip("|").split("|")]
            for label in labels:
                if cells[0].startswith(label):
                    # README: policy first, the greedy decode before the OOM count; the card: pairs, policy, ...
                    found[label] = (cells[1] if path.parent == ROOT else cells[2], cells[-2])
        return found

    labels = ("test splits, 24 graphs", "real models, 10 graphs", "9 test graphs x 4")
    readme, card = rows(ROOT / "README.md", labels), rows(ROOT / "checkpoints" / "README.md", labels)
    assert set(readme) == set(card) == set(labels)
    assert readme == card


def test_a_modules_examples_run_alone():
    """``pytest gnplace/cluster.py gnplace/placement.py`` runs those modules' examples and passes.

    Collected before anything had imported gnplace, ``gnplace/cluster.py`` was imported a second time by its
    file, so placement's examples made clusters of another ``Cluster`` class, refused as no Cluster (the
    whole suite passed: its tests import gnplace first). The root ``conftest.py`` now imports it first.
    """
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "gnplace/cluster.py::gnplace.cluster.Cluster", "gnplace/placement.py::gnplace.placement.Placement"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:]


def _undocumented_options(readme: str) -> list[str]:
    """The options of ``gnplace``'s subcommands that ``readme`` never names, as ``"SUBCOMMAND --option"``."""
    import argparse

    from gnplace.cli import build_parser

    found = []
    for action in build_parser()._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for name, sub in action.choices.items():
            for option in sub._actions:
                if isinstance(option, argparse._HelpAction) or not option.option_strings:
                    continue
                if not any(re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", readme) for o in option.option_strings):
                    found.append(f"{name} {option.option_strings[0]}")
    return found


def test_every_option_of_the_command_is_named_in_the_readme():
    """The other way from the check above: an option --help lists that the README never names is a feature no reader
    finds. finetune's --epochs, --lr, --no-zero-shot and --checkpoint-every, import's --name, inspect's --top and
    generate's --test-count were named nowhere in it."""
    assert _undocumented_options((ROOT / "README.md").read_text()) == []
    assert _undocumented_options("`gnplace finetune --epochs 4`") != []  # the check sees what is missing


def test_the_quick_starts_note_remakes_its_example_graph_byte_for_byte(tmp_path, monkeypatch):
    """A wheel carries no ``datasets/``: the quick start says how to make its example graph elsewhere, and the
    expression it gives (run as written, in a folder of its own) writes the checkout's file, byte for byte."""
    import gnplace

    quick_start = (ROOT / "README.md").read_text().split("\n## Quick start\n", 1)[1].split("```", 1)[0]
    text = quick_start.replace("\n", " ")
    imports, calls = re.findall(r"`(from gnplace[^`]*)`", text), re.findall(r"`(gnplace\.save_graph\([^`]*)`", text)
    assert len(imports) == len(calls) == 1, quick_start
    monkeypatch.chdir(tmp_path)
    (tmp_path / "datasets" / "examples").mkdir(parents=True)
    exec(f"{imports[0]}\n{calls[0]}", {"gnplace": gnplace})  # noqa: S102 - the README's own example
    name = "datasets/examples/mlp2x8w2048b512.gnpg"
    assert (tmp_path / name).read_bytes() == (ROOT / name).read_bytes()


#: ``-O NAME.KEY=VALUE`` namespaces that name no placer: ``bench.py finetune``'s PPO from scratch is ``ppo``
_OPTION_ALIASES = {"scratch": "ppo"}


def _placer_options_taken_by_none(docs: list[Path]) -> list[str]:
    """The ``-O PLACER.NAME=VALUE`` (``--option``) of ``docs`` whose placer does not take ``NAME``."""
    from gnplace.exceptions import GnplaceError
    from gnplace.placers.registry import check_placer_options

    bad = []
    for doc in docs:
        for placer, name in re.findall(r"(?:-O|--option)\s*\"?([a-z_0-9]+)\.([a-z_0-9]+)=", doc.read_text()):
            try:
                check_placer_options(_OPTION_ALIASES.get(placer, placer), {name: None})
            except GnplaceError:
                bad.append(f"{doc.name}: -O {placer}.{name}")
    return sorted(set(bad))


def test_every_placer_option_the_docs_pass_is_one_its_placer_takes(tmp_path):
    """The check of documented commands reads ``-O`` as one option and never looks inside: a placer option renamed
    (``-O policy.samples``, ``-O exact.time_limit``, ``-O ppo.screen``) would leave 70-odd documented settings behind."""
    assert _placer_options_taken_by_none(DOCS) == []
    doc = tmp_path / "doc.md"
    doc.write_text("`gnplace place G -p policy -O policy.samples=4 -O policy.sample=4 --option exact.time=5`")
    assert _placer_options_taken_by_none([doc]) == ["doc.md: -O exact.time", "doc.md: -O policy.sample"]


def test_the_readme_names_every_suffix_import_writes_and_no_other():
    """``gnplace import -o`` refuses a name that is not ``.gnpg``, ``.json.gz`` or ``.json``: the README's graph
    files section named ``.json`` alone beside the format, and nothing said another name is refused."""
    from gnplace.cli.import_onnx import GRAPH_SUFFIXES

    section = (ROOT / "README.md").read_text().split("\n### Graph files", 1)[1].split("\n### ", 1)[0]
    taken = re.search(r"`gnplace import -o` takes\s(.*?)\sand refuses", section, flags=re.DOTALL)
    assert taken, "README's graph files section does not say which names gnplace import -o takes"
    assert set(re.findall(r"`(\.[\w.]+)`", taken.group(1))) == set(GRAPH_SUFFIXES)


def _unit_examples(text: str) -> list[str]:
    """The sizes and times shown as the CLI prints them, in the parentheses after "largest unit that keeps it at
    least 1" (``3.000 ns``, ``1.00 KiB``)."""
    found = []
    for said in re.findall(r"largest\s+unit\s+that keeps it at least 1 \((.*?)\)[.;]", text, flags=re.DOTALL):
        found += re.findall(r"`(-?\d[\d.]* (?:[KMGT]iB|B|ns|us|ms|s|[kMGTP]?FLOP))`", said)
    return found


def test_the_unit_examples_are_what_the_cli_prints():
    """README and docs/outputs.md show how the CLI prints times and sizes; each example must be what
    ``format_seconds`` / ``format_bytes`` print for its own value (``231.7 ms`` or ``512 KiB`` are not: the CLI
    prints ``231.700 ms`` and ``512.00 KiB``)."""
    from gnplace.units import format_bytes, format_flops, format_seconds, parse_bytes, parse_flops, parse_seconds

    def printed(example: str) -> str:
        if example.endswith("FLOP"):
            return format_flops(parse_flops(f"{example}/s"))  # the rate parser reads the count's prefixes
        return format_bytes(parse_bytes(example)) if example.endswith("B") else format_seconds(parse_seconds(example))

    examples = [e for doc in (ROOT / "README.md", ROOT / "docs" / "outputs.md") for e in _unit_examples(doc.read_text())]
    assert len(examples) >= 9, examples
    assert [e for e in examples if printed(e) != e] == []
    assert [e for e in _unit_examples("the largest unit that keeps it at least 1 (`231.7 ms`, `512 KiB`).")
            if printed(e) != e] == ["231.7 ms", "512 KiB"]


def test_outputs_md_names_the_commands_with_json_as_the_parser_has_them():
    """docs/outputs.md said pretrain prints JSON with --json "like every other command"; evaluate and generate take
    no --json."""
    from gnplace.cli import build_parser

    text = " ".join((ROOT / "docs" / "outputs.md").read_text().split())
    said = re.search(r"with `--json` as JSON alone on stdout, as (.*?) do; (.*?) have no `--json`", text)
    assert said is not None
    has, lacks = (set(re.findall(r"`(\w+)`", part)) for part in said.groups())
    commands = next(a for a in build_parser()._actions if a.choices and "place" in a.choices).choices
    takes = {name for name, sub in commands.items() if any("--json" in a.option_strings for a in sub._actions)}
    assert has | {"pretrain"} == takes and not lacks & takes and has | lacks | {"pretrain"} == set(commands)
