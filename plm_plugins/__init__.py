"""Built-in plm stages, one folder per family, each registered through an entry point.

"The POC", here and in docstrings across these stages, is the proof-of-concept retrieval
script plm started from (Markdown chunks, YAKE keywords and spaCy entities prepended to
each chunk, BM25 with rank_bm25 plus dense vectors, adaptive weighted RRF). Its behaviour is
written down in `POC_SPEC.md`, kept beside the repository (`../shared/POC_SPEC.md`;
"POC_SPEC section N" points there), and `configs/poc_parity.toml` reproduces it exactly.
Where a stage says "the POC's" it keeps one of the POC's choices, quirks included, on
purpose: that config must rank as the POC did (tests compare their top-5 lists). The
stages named `poc_*` exist for that config only; every other recipe is free to differ.
"""
