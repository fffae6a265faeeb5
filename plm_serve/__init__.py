"""plm as a service: `plm serve` (HTTP), `plm watch` (a folder kept indexed), `plm mcp`
(Model Context Protocol tools). A plugin package: its commands come through the
`plm_register_commands` hook, its dependencies through the `plm[serve]` extra."""
