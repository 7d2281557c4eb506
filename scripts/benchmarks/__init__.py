"""The benchmarks behind ``scripts/bench.py``, one module per part of gnplace they measure.

Each module's ``add_parsers(sub)`` adds its subcommands to ``bench.py``'s parser; a subcommand's
handler (``args.handler``) runs it, prints its figures and returns the exit status, and its
docstring is the subcommand's ``--help``. The ``bench_*`` functions return the rows (tests call
them); ``scripts/report.py`` (its jobs in ``scripts/reporting/``) shares :mod:`benchmarks.common`'s graphs and
learning-curve readers.

- :mod:`benchmarks.speed`: the simulator, the PyTorch importer and coarsening at scale;
- :mod:`benchmarks.heuristics`: the fast placers against the exact one, and their speed;
- :mod:`benchmarks.search`: the search placers against ``auto``, their learning curves, PPO's speed;
- :mod:`benchmarks.zeroshot`: the pretrained policy's zero-shot placement, its latency, its constructor;
- :mod:`benchmarks.finetune`: fine-tuning against PPO from scratch, and fine-tuning's screen;
- :mod:`benchmarks.execute`: real steps (simulator fidelity, ``gnplace.apply``) and ``device_map`` exports;
- :mod:`benchmarks.common`: what several of them, and the report, share.
"""
