"""The course's harness: programs that measure, record and judge the numbers the lessons quote.

Run one as ``python -m benchmarks NAME [options]`` (``python -m benchmarks`` lists them). Each writes a
JSON file under ``benchmarks/results/`` with its provenance, its raw measurements and the tables the
lessons show; ``helpers`` reads those tables back and never imports this package.
"""
