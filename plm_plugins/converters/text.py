"""Plain text (`.txt`): the file as it is, UTF-8 (a BOM is dropped; UTF-16 with its BOM, as
Windows writes it, is read too); its title is the file's name. Also what the other converters
share: reading UTF-8, importing their library, its version."""

from __future__ import annotations

import codecs
import re
from typing import TYPE_CHECKING, Any

from plm import Converted, Converter, MissingDependencyError, PlmUserError, hookimpl
from plm_plugins.loaders.files import BadInput, decode_text

if TYPE_CHECKING:
    from plm import Registry


def library_version(name: str) -> str:
    """`name 1.2.3` for an installed distribution, `name absent` otherwise (no import)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{name} {version(name)}"
    except PackageNotFoundError:
        return f"{name} absent"


def library(module: str, converter: str, package: str) -> Any:
    """`import module`, or an error naming the extra that installs it (the files of that
    format fail, one line each; the others go on)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(
            f"the {converter} converter needs {package}: pip install 'plm[formats]' "
            f"(or move its files out of the folder)"
        ) from None


def fenced(code: str, language: str = "") -> str:
    """`code` as a fenced Markdown block, its fence longer than any run of backticks in it."""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{code}\n{fence}"


def text_of(data: bytes) -> str:
    """`data` as UTF-8 text, or UTF-16 after its BOM (BadInput's reason as a PlmUserError,
    which a converter raises)."""
    try:
        if (sixteen := _utf16(data)) is not None:
            data = sixteen
        return decode_text(data, "move it out of the folder").removeprefix("\ufeff")
    except BadInput as err:
        raise PlmUserError(str(err)) from None


def _utf16(data: bytes) -> bytes | None:
    """`data` as UTF-8 when it is UTF-16 with its BOM (Notepad's "Unicode", PowerShell's `>`):
    the BOM, then text holding an ASCII character (a space, a newline), as any such file does;
    bytes that only start with FF FE are left to fail as UTF-8."""
    if not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return None
    try:
        text = data.decode("utf-16")
    except UnicodeDecodeError:
        return None
    return text.encode("utf-8") if any(" " <= ch < "\x7f" or ch in "\t\n\r" for ch in text[:4096]) else None


class TextConverter(Converter):
    """Plain text files, kept as they are."""

    name = "text"
    extensions = (".txt", ".text")

    def convert(self, data: bytes, path: str) -> Converted:
        return Converted(text_of(data))


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(TextConverter)
