"""Styled lines that need rich only where rich shows them: what the text report is made of.

A `Line` takes the calls the text report makes of rich.text.Text (a text and a style, `append`, `assemble`,
`right_crop`, a slice) and records them; `to_rich()` makes them on a rich Text, so what a terminal shows is
what it showed before. `Lines` is a rich renderable (`__rich__`), for a terminal, a caller's own Console or
parts that only rich lays out (a table). Written to a pipe or a file, a report of lines alone is its plain
text (`plain_text()`), the characters rich writes there: `kernlint check` of a clean trace then never
imports rich, a tenth of its start-up.
"""
from __future__ import annotations

from typing import Any

# What rich.text.Text leaves out of every string it is given (rich.control.STRIP_CONTROL_CODES: bell,
# backspace, vertical tab, form feed, carriage return), so that `plain` is the Text's plain.
_STRIPPED = dict.fromkeys((7, 8, 11, 12, 13))


class Line:
    """One line of styled text, as rich.text.Text would hold it (`plain` is its text)."""

    __slots__ = ("_base", "_ops", "plain")

    def __init__(self, text: str = "", style: str = "") -> None:
        self._base: tuple = ("text", text, style)
        self._ops: list[tuple] = []
        self.plain = text.translate(_STRIPPED)

    @classmethod
    def assemble(cls, *parts: str | Line | tuple[str, str]) -> Line:
        """rich's Text.assemble: strings, Lines and (text, style) pairs, in order."""
        line = cls()
        for part in parts:
            if isinstance(part, (str, Line)):
                line.append(part)
            else:
                line.append(*part)
        return line

    def _copy(self) -> Line:
        """This line as it is now (what rich copies when a Text is appended or sliced)."""
        copy = Line.__new__(Line)
        copy._base, copy._ops, copy.plain = self._base, list(self._ops), self.plain
        return copy

    def append(self, text: str | Line, style: str | None = None) -> Line:
        if isinstance(text, Line):
            if style is not None:
                raise ValueError("style must not be set when appending a Line")
            self._ops.append(("append", text._copy(), None))
        else:
            self._ops.append(("append", text, style))
        self.plain += text.plain if isinstance(text, Line) else text.translate(_STRIPPED)
        return self

    def right_crop(self, amount: int = 1) -> None:
        self._ops.append(("right_crop", amount, None))
        self.plain = self.plain[:-amount]

    def __getitem__(self, index: slice) -> Line:
        if not isinstance(index, slice) or index.indices(len(self.plain))[2] != 1:
            raise TypeError("a Line takes only slices of step 1")
        piece = Line.__new__(Line)
        piece._base, piece._ops, piece.plain = ("slice", self._copy(), index), [], self.plain[index]
        return piece

    def __len__(self) -> int:
        return len(self.plain)

    def to_rich(self) -> Any:
        """The rich.text.Text these calls make."""
        from rich.text import Text

        kind, first, second = self._base
        text = Text(first, style=second) if kind == "text" else first.to_rich()[second]
        for op, value, style in self._ops:
            if op == "append":
                text.append(value.to_rich() if isinstance(value, Line) else value, style)
            else:
                text.right_crop(value)
        return text


class Lines:
    """Lines and rich renderables, one after the other (rich's Group of them)."""

    def __init__(self, *parts: object) -> None:
        self.parts = list(parts)

    def __rich__(self) -> Any:
        from rich.console import Group

        return Group(*(p.to_rich() if isinstance(p, Line) else p for p in self.parts))

    def plain_text(self) -> str | None:
        """What a Console without colors and wrapping (kernlint.cli's to a pipe or file) writes of these lines:
        each line and a newline. None when rich must lay a part out: one that is not a Line (a table), or a
        line with a character rich treats apart (a tab, a control character) or may measure otherwise."""
        lines = []
        for part in self.parts:
            if not isinstance(part, Line) or not part.plain.isprintable():
                return None
            lines.append(part.plain)
        return "".join(line + "\n" for line in lines)
