"""A problem of an experiment file, as the check reports it: the file, the field's path, what is
wrong and what to change; and pydantic's validation errors said that way."""

from __future__ import annotations

import collections.abc
import re
import typing
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from experiment_design.schema import Design, shown

UNREADABLE = "unreadable"  # the file cannot be read at all (the command's exit status 2)


@dataclass(frozen=True)
class Problem:
    file: str  # the experiment file as the user named it
    field: str  # where: a dotted path in the file ("game.payoffs.A.B", [n] counts tables from 1), a locale file, or ""
    message: str  # what is wrong and what to change
    kind: str = "design"  # a short word for programs: unreadable, toml, schema, design, files, texts, clash

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.message}" if self.field else f"{self.file}: {self.message}"


class ExperimentError(ValueError):
    """An experiment that cannot run; ``problems`` says every reason found."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))


def field_path(loc: tuple) -> str:
    """('game', 'choices', 1, 'label') -> 'game.choices[2].label' (tables of an array count from 1, as read)."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part + 1}]"
        else:
            key = part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else f'"{part}"'
            text += f".{key}" if text else key
    return text


def _unwrap(annotation, description: str | None):
    """The type inside Annotated/Optional, and the description an Annotated Field gives it."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation, *metadata = typing.get_args(annotation)
            for item in metadata:
                if isinstance(item, FieldInfo) and item.description:
                    description = item.description
        elif origin is typing.Union:
            options = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
            annotation = options[0]
        else:
            return annotation, description


def _type_at(loc: tuple):
    """The schema's type at ``loc`` and its description, or (None, None) where the schema has no such place."""
    annotation, description = Design, None
    for part in loc:
        annotation, description = _unwrap(annotation, description)
        origin = typing.get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return None, None
            annotation, description = field.annotation, field.description
            for item in field.metadata:
                if isinstance(item, FieldInfo) and item.description:
                    description = item.description
        elif origin is tuple and isinstance(part, int):
            args = typing.get_args(annotation)
            annotation = args[0] if len(args) == 2 and args[1] is Ellipsis else args[min(part, len(args) - 1)]
        elif origin in (collections.abc.Mapping, dict):
            annotation = typing.get_args(annotation)[1]
        else:
            return None, None
    return _unwrap(annotation, description)


def _keys_of(loc: tuple) -> list[str]:
    annotation, _ = _type_at(loc)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return list(annotation.model_fields)
    return []


def _message(error: dict) -> str:
    loc, kind, value = tuple(error["loc"]), error["type"], error.get("input")
    _, description = _type_at(loc)
    about = f" ({description})" if description else ""
    if kind == "design":
        return error["msg"]
    if kind == "missing":
        return f"is missing: add it{about}"
    if kind == "extra_forbidden":
        known = _keys_of(loc[:-1])
        return (f"is not a key of this table: remove it or correct its spelling"
                + (f" (the keys here: {', '.join(known)})" if known else ""))
    if kind in ("model_type", "model_attributes_type", "dict_type", "mapping_type"):
        return f"is {shown(value)}, not a table: write a table{about}"
    if kind in ("tuple_type", "list_type"):
        return f"is {shown(value)}, not an array: write an array [ ... ]{about}"
    if kind in ("too_short", "too_long"):
        context = error.get("ctx", {})
        actual = context.get("actual_length")
        least, most = context.get("min_length"), context.get("max_length")
        annotation, _ = _type_at(loc)
        args = typing.get_args(annotation) if typing.get_origin(annotation) is tuple else ()
        if args and Ellipsis not in args:
            return f"has {actual} items: write exactly {len(args)}{about}"
        if kind == "too_short":
            wanted = f"at least {least}" if least is not None else "more"
        else:
            wanted = f"at most {most}"
        return f"has {actual} items: write {wanted}{about}"
    if kind == "bool_type":
        return f"is {shown(value)}: write true or false{about}"
    return f"is {shown(value)}: {error['msg']}{about}"


def schema_problems(file: str, error: ValidationError) -> list[Problem]:
    """Every error pydantic found, one problem each, in the file's terms."""
    return [Problem(file, field_path(tuple(e["loc"])), _message(e), "schema")
            for e in error.errors(include_url=False)]
