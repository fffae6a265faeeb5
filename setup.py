"""The one compiled part: BM25's top-k kernel (plm_plugins/retrievers/_bm25_kernel.c). Optional:
where no C compiler is found the build goes on without it and BM25 answers through NumPy,
the same hits (everything else is in pyproject.toml)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "plm_plugins.retrievers._bm25_kernel",
            ["plm_plugins/retrievers/_bm25_kernel.c"],
            extra_compile_args=["-O2", "-fno-fast-math", "-ffp-contract=off"],
            optional=True,
        )
    ]
)
