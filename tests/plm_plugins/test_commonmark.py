"""Markdown as people write it: CommonMark's ATX headings (never in code or front matter),
attribute lists off titles, and the docs-site dialects turned into plain Markdown."""

from __future__ import annotations

from plm import Document
from plm_plugins.chunkers.markdown_semantic import MarkdownSemanticChunker
from plm_plugins.commonmark import atx_headings, clean, heading_attributes

PAGE = """---
title: t
# front matter comment
---
# Title { #top .wide }

```bash
# install the quokka package
pip install quokka
```

~~~~
# tilde fence
~~~~

- a list item

    ```python
    # in a list
    ```

    # indented: code, not a heading

## Configure {: #cfg }
#hashtag
### Closing ###
"""


def test_headings_are_never_in_code_or_front_matter() -> None:
    found = [(h.level, h.title, h.anchor) for h in atx_headings(PAGE)]
    assert found == [(1, "Title", "top"), (2, "Configure", "cfg"), (3, "Closing", "")]
    assert [h.title for h in atx_headings(PAGE, max_level=1)] == ["Title"]
    assert atx_headings("```\n# open fence to the end\n") == []


def test_attribute_lists() -> None:
    assert heading_attributes("Configure { #configure }") == ("Configure", "configure")
    assert heading_attributes("Wide {.wide data-x=1}") == ("Wide", "")
    assert heading_attributes("Set {x} in a sentence") == ("Set {x} in a sentence", "")


def test_the_chunker_reads_commonmark_headings_when_asked() -> None:
    words = " ".join(f"w{i}" for i in range(60))
    text = f"# Install {{ #install }}\n\n{words}\n\n```bash\n# a comment\nrun\n```\n\n## Next\n\n{words}\n"
    doc = Document("d", text, "D")
    poc = MarkdownSemanticChunker().run([doc])
    assert ("a comment",) in [c.heading_path for c in poc]  # the POC's rule, kept
    chunks = MarkdownSemanticChunker(headings="commonmark").run([doc])
    assert [c.heading_path for c in chunks] == [("Install",), ("Install", "Next")]
    assert "```bash\n# a comment\nrun\n```" in chunks[0].text


def test_clean_turns_dialects_into_plain_markdown() -> None:
    text = """# Page { #page }

!!! warning "Mind the gap"
    Indented body.

    Second paragraph.

??? tip
    Folded.
Back out.

=== "Python"
    print(1)

{{< highlight yaml >}}
A {{< glossary_tooltip text="Pod" term_id="pod" >}} runs [here]({{< ref "/docs/x" >}}).
## {{% heading "prerequisites" %}}
import Foo from './Foo.mdx'
export const meta = {}
See [[Some Page|the page]], [[Other#Part]] and ![[diagram.png]].

```
!!! note "in code"
[[not a link]]
```
"""
    assert (
        clean(text)
        == """# Page

**Mind the gap**
Indented body.

Second paragraph.

**Tip**
Folded.
Back out.

**Python**
print(1)

A Pod runs [here]().
## prerequisites
See [the page](Some%20Page), [Other > Part](Other#Part) and diagram.png.

```
!!! note "in code"
[[not a link]]
```
"""
    )
