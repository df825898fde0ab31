"""Evaluation harness (`python main.py eval`): retrieval arms scored on human-labelled sets.

One job per module:
- ``dataset``  a set directory -> questions with evidence spans in the normalised documents;
- ``metrics``  relevance, per-question figures, aggregation and the paired bootstrap;
- ``arms``     flat and tree retrieval arms over one shared index;
- ``runner``   index build/reuse, the question x arm loop, the resumable result cache;
- ``report``   the printed table and the ``--json`` dump;
- ``cli``      the ``eval`` sub-command.
"""
