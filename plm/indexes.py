"""For a stage that keeps an index (`plm.SavedIndex`, `plm.SegmentedIndex`): the segments a
search reads (`State`, its rows' chunk ids `Picked`, a build's `Rows`), build folders, and
memory-mapped columns beside an index's files."""

from plm_index.builds import build_matches as build_matches
from plm_index.builds import build_path as build_path
from plm_index.builds import load_npy as load_npy
from plm_index.builds import open_build as open_build
from plm_index.builds import save_build as save_build
from plm_index.builds import stage_folder as stage_folder
from plm_index.columns import IDS_FILE as IDS_FILE
from plm_index.columns import VECTORS_FILE as VECTORS_FILE
from plm_index.columns import load_ids as load_ids
from plm_index.columns import load_vectors as load_vectors
from plm_index.columns import save_ids as save_ids
from plm_index.columns import save_vectors as save_vectors
from plm_index.columns import take_ids as take_ids
from plm_index.segments import Picked as Picked
from plm_index.segments import Rows as Rows
from plm_index.segments import State as State
