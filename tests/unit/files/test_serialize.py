"""The one serializer: each declared choice is written as declared, and each kind of value is
encoded as the JSON written before it (an Enum as its value, a head as "L.H", a tensor as lists)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import numpy as np
import pytest
import torch

from interp_toolkit.files.serialize import Jsonable, json_field, to_json
from interp_toolkit.heads.registry import HeadId


class Colour(str, Enum):
    RED = "red light"  # the value differs from the name: writing the name is caught


@dataclass(frozen=True)
class Inner:
    head: HeadId
    where: Path


@dataclass(frozen=True)
class Record(Jsonable):
    colour: Colour
    scores: torch.Tensor
    mean: np.float64
    pair: tuple[int, int]
    inner: Inner
    secret: str = field(default="hidden", metadata=json_field(skip=True))
    loss: float = field(default=0.123456, metadata=json_field(key="final_loss", digits=3))
    note: str | None = field(default=None, metadata=json_field(omit_none=True))
    extra: dict[str, int] = field(default_factory=dict, metadata=json_field(inline=True))
    counts: tuple[int, ...] = field(default=(), metadata=json_field(encode=len))

    json_extra = ("doubled",)
    json_order = ("doubled", "colour", "scores", "mean", "pair", "inner", "final_loss", "note")
    json_order += ("counts", "x")

    @property
    def doubled(self) -> list[int]:
        return [2 * p for p in self.pair]


def _record(**changes) -> Record:
    base = dict(
        colour=Colour.RED,
        scores=torch.tensor([[0.5, 0.25]]),
        mean=np.float64(1.5),
        pair=(1, 2),
        inner=Inner(HeadId(1, 3), Path("/tmp/run")),
        extra={"x": 7},
        counts=(4, 5, 6),
    )
    return Record(**{**base, **changes})


def test_every_declared_choice_is_written_as_declared():
    out = _record().to_dict()
    assert json.dumps(out) == json.dumps(
        {
            "doubled": [2, 4],
            "colour": "red light",
            "scores": [[0.5, 0.25]],
            "mean": 1.5,
            "pair": [1, 2],
            "inner": {"head": "1.3", "where": "/tmp/run"},
            "final_loss": 0.123,
            "counts": 3,
            "x": 7,
        }
    )  # the keys in json_order's order; no "secret", no "note" (None), "x" inlined
    assert type(out["scores"]) is list and type(out["scores"][0][0]) is float
    assert type(out["mean"]) is float and type(out["pair"]) is list
    assert _record(note="kept").to_dict()["note"] == "kept"


def test_wrong_encodings_are_caught():
    out = to_json(_record())
    assert (
        out["colour"] != "RED"
        and "secret" not in out
        and not isinstance(out["scores"], torch.Tensor)
    )
    assert out["inner"]["head"] != [1, 3]  # a head is "L.H", not the tuple it is


def test_a_key_missing_from_json_order_fails_loudly():
    @dataclass(frozen=True)
    class Unlisted(Jsonable):
        a: int
        b: int
        json_order = ("a",)

    with pytest.raises(TypeError, match="does not list"):
        Unlisted(1, 2).to_dict()


def test_a_class_that_still_writes_its_own_json_is_asked_for_it():
    @dataclass(frozen=True)
    class Own:
        a: int

        def to_dict(self) -> dict[str, int]:
            return {"own": self.a}

    assert to_json({"k": [Own(1)]}) == {"k": [{"own": 1}]}


def test_a_jsonable_that_is_not_a_dataclass_writes_its_extras_alone():
    """A codec (which holds arrays and a tokenizer, not fields) declares its saved form:
    attributes, properties and renamed keys, in ``json_extra``'s order."""

    class Saved(Jsonable):
        kind = "compact"
        json_extra = {"kind": "kind", "ids": "ids", "size": "n"}

        def __init__(self) -> None:
            self.ids, self._cache = np.array([3, 1]), object()

        @property
        def n(self) -> int:
            return len(self.ids)

    assert json.dumps(to_json([Saved()])) == '[{"kind": "compact", "ids": [3, 1], "size": 2}]'


def test_grouped_fields_are_written_inside_their_group_in_field_order():
    """Flat fields written in another library's groups (SAELens's evals.json): a group appears
    where its first field is, holds its fields in their order, and a renamed key keeps its
    group."""

    @dataclass(frozen=True)
    class Evals(Jsonable):
        l0: float = field(default=2.0, metadata=json_field(group="sparsity"))
        mse: float = field(default=0.5, metadata=json_field(group="quality"))
        l1: float = field(default=0.1234567, metadata=json_field(group="sparsity", digits=3))
        n: int = field(default=7, metadata=json_field(group="quality", key="tokens"))
        run: str = "r"

    want = (
        '{"sparsity": {"l0": 2.0, "l1": 0.123}, "quality": {"mse": 0.5, "tokens": 7}, "run": "r"}'
    )
    assert json.dumps(Evals().to_dict()) == want


def test_an_unknown_value_is_refused():
    with pytest.raises(TypeError, match="no JSON encoding for object"):
        to_json(object())


#: RoleCheck's keys in the order the hand-written to_dict wrote them.
RC_KEYS = ("head", "role", "removed", "of", "passed", "why")


def test_json_written_before_the_serializer_is_read_back_and_written_again_unchanged():
    """tests/snapshots/small_study.json was written by the hand-written ``to_dict``s: its role
    checks read back (``RoleChecks.from_dict``) and its machine are written again key for key."""
    from interp_toolkit.exams.role_checks import RoleChecks
    from interp_toolkit.runtime.machine import Machine

    old = json.loads((Path(__file__).parents[2] / "snapshots" / "small_study.json").read_text())
    checked = [d["role_checks"] for d in old["depths"] if d["role_checks"]]
    # a check as the old RoleCheck.to_dict wrote it (the small study's models have no role)
    one = {"head": "1.3", "role": "induction", "of": "the repeated-passage drop", "passed": True}
    removed = {"value": 0.41, "low": 0.3, "high": 0.52}
    checked.append({**checked[0], "checks": [{**one, "removed": removed, "why": ""}]})
    checked[-1]["checks"][0] = {k: checked[-1]["checks"][0][k] for k in RC_KEYS}
    for rc in checked:
        assert json.dumps(RoleChecks.from_dict(rc).to_dict()) == json.dumps(rc)
    machine = {k: v for k, v in old["machine"].items() if k != "uses_amx"}  # a derived key
    assert json.dumps(Machine(**machine).to_dict()) == json.dumps(old["machine"])


@dataclass(frozen=True)
class Tail(Jsonable):
    a: int
    b: str | None


@dataclass(frozen=True)
class Every(Jsonable):
    """A record using every choice, each field without a default unless the choice needs one:
    a choice the reader does not invert leaves a field missing (a TypeError) or different."""

    colour: Colour
    part: Inner
    parts: list[Inner]
    pair: tuple[int, str]
    steps: tuple[int, ...]
    maybe: Inner | None
    loss: float = field(metadata=json_field(key="final_loss", digits=3))
    l0: float = field(metadata=json_field(group="sparsity"))
    l1: float = field(metadata=json_field(group="sparsity", key="l_one"))
    note: str | None = field(metadata=json_field(omit_none=True))
    counts: tuple[int, ...] = field(metadata=json_field(encode=len, decode=lambda n: (0,) * n))
    tail: Tail | None = field(metadata=json_field(inline=True, omit_none=True))
    extra: dict[str, int] = field(metadata=json_field(inline=True))
    secret: str = field(default="hidden", metadata=json_field(skip=True))

    json_extra = {"doubled": "doubled"}

    @property
    def doubled(self) -> int:
        return 2 * len(self.steps)


def _every(**changes) -> Every:
    base = dict(
        colour=Colour.RED,
        part=Inner(HeadId(1, 3), Path("/tmp/a")),
        parts=[Inner(HeadId(0, 2), Path("b"))],
        pair=(4, "x"),
        steps=(1, 2),
        maybe=None,
        loss=0.125,
        l0=2.0,
        l1=0.5,
        note=None,
        counts=(0, 0, 0),
        tail=Tail(7, None),
        extra={"x": 1, "y": 2},
    )
    return Every(**{**base, **changes})


def _again(record: Jsonable) -> Jsonable:
    return type(record).from_dict(json.loads(json.dumps(record.to_dict())))


def test_every_declared_choice_is_read_back_as_written():
    for record in (
        _every(),
        _every(maybe=Inner(HeadId(2, 0), Path("c")), note="kept", tail=None, extra={}),
    ):
        back = _again(record)
        assert back == record
        assert type(back.pair) is tuple and type(back.parts[0].head) is HeadId
        assert type(back.colour) is Colour and isinstance(back.part.where, Path)
    out = _every().to_dict()
    assert "l_one" in out["sparsity"] and "doubled" in out and "x" in out  # what is inverted
    assert _again(_every(tail=Tail(3, "b"))).tail == Tail(3, "b")


def test_an_older_file_without_a_defaulted_or_optional_key_reads_and_a_required_one_fails():
    old = _every().to_dict()
    assert "note" not in old and "secret" not in old  # omitted when None; skipped
    back = Every.from_dict(old)
    assert back.note is None and back.secret == "hidden" and back == _every()
    assert Tail.from_dict({"a": 1}) == Tail(1, None)  # b: a key the file predates
    with pytest.raises(TypeError, match="'l0'"):
        Every.from_dict({**old, "sparsity": {"l_one": 0.5}})


def test_a_renamed_key_is_read_under_its_key_and_not_under_the_field_name():
    data = _every().to_dict()
    assert Every.from_dict({**data, "final_loss": 0.25}).loss == 0.25
    renamed = {("loss" if k == "final_loss" else k): v for k, v in data.items()}
    with pytest.raises(TypeError, match="'loss'"):
        Every.from_dict(renamed)  # "loss" is not its key: a file with it is refused
    assert Every.from_dict(data).extra == {"x": 1, "y": 2}  # not "doubled" nor another's key
