"""`plm.testing.check_converter` and `check_loader` pass stages written from the contracts
alone and fail, naming the rule, for ones broken in one way."""

from __future__ import annotations

from pathlib import Path

import pytest

import plm
import plm.testing


class Csv(plm.Converter):
    name = "kit_csv"
    extensions = (".csv",)

    def convert(self, data: bytes, path: str) -> plm.Converted:
        try:
            rows = [line.split(",") for line in data.decode("utf-8").splitlines() if line]
        except UnicodeDecodeError as err:
            raise plm.PlmUserError(f"not UTF-8 text ({err.reason})") from None
        if not rows:
            raise plm.PlmUserError("no rows")
        return plm.Converted(
            text="\n".join(" | ".join(r) for r in rows), title=rows[0][0], metadata={"rows": len(rows)}
        )


CSV = b"name,team\npod,a\nnode,b\n"
NOT_UTF8 = b"\xff\xfe\xfa,broken\n"


def test_a_converter_written_from_the_contract_passes() -> None:
    plm.testing.check_converter(Csv(), CSV, unusable=NOT_UTF8)


class UpperCaseExtension(Csv):
    name = "kit_upper_ext"
    extensions = ("CSV",)


class PathInText(Csv):
    name = "kit_path_in_text"

    def convert(self, data: bytes, path: str) -> plm.Converted:
        out = super().convert(data, path)
        return plm.Converted(text=f"{path}\n{out.text}", title=out.title)


class CrashesOnBadBytes(Csv):
    name = "kit_crashes"

    def convert(self, data: bytes, path: str) -> plm.Converted:
        return plm.Converted(text=data.decode("utf-8"))


class SetMetadata(Csv):
    name = "kit_set_metadata"

    def convert(self, data: bytes, path: str) -> plm.Converted:
        out = super().convert(data, path)
        return plm.Converted(text=out.text, metadata={"columns": {"name", "team"}})


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (UpperCaseExtension, r"`extensions` names the files it reads, with the dot"),
        (PathInText, r"the result does not depend on `path`"),
        (CrashesOnBadBytes, r"a file it cannot use raises PlmUserError saying why\n  raised UnicodeDecodeError"),
        (SetMetadata, r"`metadata` is JSON"),
    ],
)
def test_a_broken_converter_fails_naming_the_contract(broken: type[Csv], message: str) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_converter(broken(), CSV, unusable=NOT_UTF8)
    assert str(err.value).startswith("converters contract (docs/contracts/converters.md)")


class MarkdownFiles(plm.Loader):
    """One document per .md file, its id the path from the folder without the extension."""

    name = "kit_markdown_files"

    def files(self, folder: str) -> tuple[list[str], list[plm.LoadFailure]]:
        root = Path(folder)
        if not root.is_dir():
            raise plm.PlmUserError(f"{folder}: no such folder")
        return sorted(str(p.resolve()) for p in root.rglob("*.md")), []

    def load_files(self, root: str, files: list[str]) -> tuple[list[plm.Document], list[plm.LoadFailure]]:
        base = Path(root).resolve()
        docs = []
        for f in sorted(files):
            rel = Path(f).relative_to(base).with_suffix("").as_posix()
            docs.append(plm.Document(id=rel, text=Path(f).read_text(), path=f))
        return docs, []

    def load(self, source: str) -> tuple[list[plm.Document], list[plm.LoadFailure]]:
        files, failures = self.files(source)
        docs, more = self.load_files(source, files)
        return docs, failures + more


def test_a_loader_written_from_the_contract_passes(tmp_path: Path) -> None:
    plm.testing.check_loader(MarkdownFiles())
    (tmp_path / "a.md").write_text("# A\n\ntext")
    plm.testing.check_loader(MarkdownFiles(), tmp_path)


class MissingIsEmpty(MarkdownFiles):
    name = "kit_missing_is_empty"

    def load(self, source: str) -> tuple[list[plm.Document], list[plm.LoadFailure]]:
        if not Path(source).is_dir():
            return [], []
        return super().load(source)


class StemIds(MarkdownFiles):
    name = "kit_stem_ids"

    def load_files(self, root: str, files: list[str]) -> tuple[list[plm.Document], list[plm.LoadFailure]]:
        docs, failures = super().load_files(root, files)
        return [
            plm.Document(id=d.id.split("/")[-1] + f"-{len(files)}", text=d.text, path=d.path) for d in docs
        ], failures


class RelativePaths(MarkdownFiles):
    name = "kit_relative_paths"

    def files(self, folder: str) -> tuple[list[str], list[plm.LoadFailure]]:
        files, failures = super().files(folder)
        return [str(Path(f).relative_to(Path(folder).resolve())) for f in files], failures

    def load_files(self, root: str, files: list[str]) -> tuple[list[plm.Document], list[plm.LoadFailure]]:
        return super().load_files(root, [str(Path(root).resolve() / f) for f in files])


class BlankTexts(MarkdownFiles):
    name = "kit_blank_texts"

    def load_files(self, root: str, files: list[str]) -> tuple[list[plm.Document], list[plm.LoadFailure]]:
        docs, failures = super().load_files(root, files)
        return [plm.Document(id=d.id, text=" ", path=d.path) for d in docs], failures


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (MissingIsEmpty, r"a missing source raises PlmUserError"),
        (StemIds, r"a file read alone gives the document it gives in a whole load"),
        (RelativePaths, r"files\(folder\) lists absolute paths"),
        (BlankTexts, r"each document can be stored as given"),
    ],
)
def test_a_broken_loader_fails_naming_the_contract(broken: type[MarkdownFiles], message: str) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_loader(broken())
    assert str(err.value).startswith("loaders contract (docs/contracts/loaders.md)")
