"""A small reader of Dockerfiles for the image tests: instructions grouped by build stage."""

from __future__ import annotations

import dataclasses
import json
import re


@dataclasses.dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY, USER, ...
    arguments: str  # continuation lines joined, comments dropped

    def exec_form(self) -> list[str] | None:
        """The JSON array of an exec-form instruction (``ENTRYPOINT ["a", "b"]``), else None."""
        try:
            parsed = json.loads(self.arguments)
        except json.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, list) else None


@dataclasses.dataclass(frozen=True)
class Stage:
    image: str  # the FROM reference, e.g. python:3.11.14-slim-bookworm
    name: str | None  # the AS name
    instructions: tuple[Instruction, ...]

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def parse(text: str) -> list[Stage]:
    """The stages of a Dockerfile, in order; instructions before the first FROM are dropped."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    stages: list[Stage] = []
    for line in logical:
        keyword, _, arguments = line.partition(" ")
        instruction = Instruction(keyword.upper(), " ".join(arguments.split()))
        if instruction.keyword == "FROM":
            match = re.fullmatch(
                r"(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", instruction.arguments, re.I
            )
            assert match is not None, f"unreadable FROM: {line}"
            stages.append(Stage(match[1], match[2], ()))
        elif stages:
            last = stages[-1]
            stages[-1] = dataclasses.replace(last, instructions=(*last.instructions, instruction))
    return stages
