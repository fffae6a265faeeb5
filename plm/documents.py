"""For a loader: a record made a checked document (`plm.document_from_record` is on the
face), the checks and ids it uses, YAML front matter, and whether a path stays in a folder."""

from plm_index.documents import MAX_METADATA_INT as MAX_METADATA_INT
from plm_index.documents import MissingFieldError as MissingFieldError
from plm_index.documents import check_document as check_document
from plm_index.documents import check_id as check_id
from plm_index.documents import collect_records as collect_records
from plm_index.documents import front_matter_lines as front_matter_lines
from plm_index.documents import merge_metadata_field as merge_metadata_field
from plm_index.documents import record_id as record_id
from plm_index.sources import inside as inside
