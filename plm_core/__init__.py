"""plm's kernel: records, components, pipelines, plugins, configs, contracts. Imports no ML
library and nothing above it: not the index runtime (`plm_index`), not the face (`plm`),
not a plugin. `plm.Job` is the runtime's facade for library users."""

__version__ = "0.1.0"
