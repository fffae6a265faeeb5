"""plm's index runtime, above the kernel (`plm_core`): installed plugins loaded into a
registry (`plugins`), a config assembled into live stages (`assembly`), documents loaded
(`sources`, `documents`) and synced into a store (`sync`, `cache`), derived indexes built
and opened (`builds`, `corpus`), queries answered (`search`, `filters`), all behind one
facade (`job.Job`), and the index commands (`commands`: ingest, query, delete, status,
index, config, plugins)."""
