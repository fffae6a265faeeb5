"""For a store that translates the metadata filter spec into its own query language (as
Postgres does into SQL); `plm.compile_filters`, the spec as a predicate, is on the face."""

from plm_index.filters import RANGE_OPS as RANGE_OPS
from plm_index.filters import as_date as as_date
from plm_index.filters import normalize_filters as normalize_filters
