"""The routes of `plm serve`, one module per concern, each an `add_..._routes` function that puts
its routes on a FastAPI `APIRouter` (the app's own), over a started `Service`;
plm_serve/server.py's `create_app` calls them in this order (the OpenAPI schema's):

- `query`: `POST /query` and `GET /query`, the search.
- `documents`: `GET /documents/{id}` (one stored document, rendered) and `GET /files/{id}`
  (its original file).
- `pages`: the two HTML pages, `GET /` (search) and `GET /doc` (one document).
- `operations`: `GET /health`, `/ready`, `/status`, the writes (`POST /documents`, `DELETE
  /documents/{id}`) and `GET /metrics`.

Each module imports FastAPI at its top: only create_app imports them, when serving.
"""
