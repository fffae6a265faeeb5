"""plm_eval: datasets, evaluation runs, YAML validation cases and the `run`, `eval` and
`validate` commands, plugged into the `plm` CLI through `plm_register_commands`."""
