"""The no-op expander: the query goes to retrieval unchanged."""

from __future__ import annotations

from typing import TYPE_CHECKING

from plm import ComponentConfig, ExpandedQuery, Query, QueryExpander, hookimpl

if TYPE_CHECKING:
    from plm import Registry


class IdentityExpander(QueryExpander):
    """No expansion: passes the query through as an ExpandedQuery with nothing fired."""

    name = "none"

    class Config(ComponentConfig):
        pass

    def run(self, data: Query) -> ExpandedQuery:
        return ExpandedQuery.of(data)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(IdentityExpander)
    from plm_plugins.pending import register_pending  # stages newer than the installed entry points

    register_pending(registry)
