"""The benchmark report behind ``scripts/bench.py report`` (``scripts/report.py``), one module per job.

``scripts/report.py`` parses the command, runs the sections in order (each resuming from the rows saved under
``--out``) and writes the report; the jobs it runs live here:

- :mod:`reporting.config`: what the full and the quick report run;
- :mod:`reporting.keys`: a saved row's key, the inputs it records, the kinds of value it must hold to stand;
- :mod:`reporting.table`: section 1, every placer through ``gnplace.evaluate``;
- :mod:`reporting.learned`: section 2's rows, the learned placers with one budget (Placeto zero-shot too);
- :mod:`reporting.exact`: sections 4 and 4b's rows, against the proved optimum;
- :mod:`reporting.scale`: section 5's rows, time to place against graph size;
- :mod:`reporting.searches`: section 6's rows and figures, the search placers' learning curves;
- :mod:`reporting.points`: the points of a saved row a figure draws, and what it leaves out;
- :mod:`reporting.curves`: section 2's figure of learning curves;
- :mod:`reporting.plots`: section 2's bars and section 5's lines;
- :mod:`reporting.text`: the report's Markdown, its tables and the seeds' claims measured;
- :mod:`reporting.paths`: where the report writes, each path checked before any run;
- :mod:`reporting.elapsed`: the minutes of every run that made the saved rows.
"""
