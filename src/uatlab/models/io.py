"""Saving and loading uatlab models: one safetensors file holding the weights and the config.

The config travels in the safetensors header metadata (``uatlab_config``, JSON) next to a format
tag (``uatlab_format``), so a single file is a complete model. Loading checks the tag, the config
and every tensor's shape, and turns every failure into a `ModelFileError` naming the file.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import safe_open

from uatlab.errors import InputError, ModelFileError, PrecisionError
from uatlab.io_safety import folder_spelling, not_a_regular_file, require_path
from uatlab.models.finite import check_finite, refuse_non_finite
from uatlab.models.safetensors_file import write_safetensors
from uatlab.models.transformer import Transformer, TransformerConfig

FORMAT_TAG = "uatlab-transformer-v1"


def check_model_path(path: object, what: str = "save()") -> Path:
    """``path`` as a Path once it can name a model file: a str or PathLike that is not a folder, nor spelt as one
    (`uatlab.io_safety.folder_spelling`: "out/", "out/.", "out/..": Path would drop "/" or "/." and write a file
    named "out")."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what}: path must be a str or os.PathLike, not a {type(path).__name__}")
    text = os.fsdecode(os.fspath(path))
    if text == "":
        raise InputError(f"{what}: the path is empty; give the model file's name, e.g. 'model.safetensors'")
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{what}: {text} is a folder; give the model file's name, e.g. {p / 'model.safetensors'}")
    why = folder_spelling(text)
    if why is not None:
        raise InputError(f"{what}: {why}; give the model file's name, e.g. {p / 'model.safetensors'}")
    return p


def save_model(model: Transformer, path: str | os.PathLike, extra: dict[str, Any] | None = None) -> Path:
    """Write ``model`` to ``path`` atomically (temp file beside it, renamed over it). ``extra`` is saved as JSON metadata;
    the model's token encoding (``model.encoding``) is always stored with it (prefer `save`)."""
    if not isinstance(model, Transformer):
        raise TypeError(f"save_model() takes a uatlab Transformer, not a {type(model).__name__}")
    path = check_model_path(path, "save_model()")
    enc = getattr(model, "encoding", None)
    if enc is not None and not (extra and ("encoding" in extra or "tokens" in extra)):
        extra = {**(extra or {}), "encoding": enc.to_json()}
    if extra and isinstance(extra.get("encoding"), dict):
        check_encoding_fits(model.config, extra["encoding"], "save()")
    path = Path(path)
    tensors = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    refuse_non_finite(tensors, f"save(): {path}")  # `load` refuses such a file: an existing one is kept
    config = _config_of_tensors(model.config, tensors)
    metadata = {"uatlab_format": FORMAT_TAG, "uatlab_config": config.to_json()}
    if extra:
        metadata["uatlab_extra"] = json.dumps(extra, sort_keys=True, default=str)
    return write_safetensors(tensors, path, metadata)  # atomic; the same model gives the same bytes


def _float_dtypes(tensors: dict[str, Any]) -> dict[str, str]:
    """The floating-point dtypes of ``tensors`` ('float32', 'torch.float16', ...), each with the first tensor (in
    name order) that has it."""
    seen: dict[str, str] = {}
    for name in sorted(tensors):
        t = tensors[name]
        if t.is_floating_point():
            seen.setdefault(str(t.dtype).removeprefix("torch."), name)
    return seen


def one_float_dtype(tensors: dict[str, Any]) -> tuple[str | None, str | None]:
    """(The one floating-point dtype of ``tensors``, None if they have none; None, or why they cannot be a uatlab
    model: several floating-point dtypes, or one uatlab does not compute in (float16, bfloat16), naming a tensor
    of each.)"""
    seen = _float_dtypes(tensors)
    if not seen:
        return None, None
    which = ", ".join(f"{n} is {dt}" for dt, n in seen.items())
    if len(seen) > 1:
        return None, f"mixes parameter dtypes ({which})"
    dtype = next(iter(seen))
    if dtype not in ("float32", "float64"):
        return None, f"is not float32 or float64 ({which})"
    return dtype, None


def _config_of_tensors(config: TransformerConfig, tensors: dict[str, Any]) -> TransformerConfig:
    """The config to store with ``tensors``: its dtype is theirs. ``model.float()`` or ``.to(torch.float32)``
    re-types a model's tensors and leaves its config alone; a file whose header said float64 over float32
    tensors would load as a float64 model, another model than the one saved. Tensors of several floating-point
    dtypes, or of one uatlab does not compute in (float16, bfloat16), are an InputError naming them."""
    dtype, why = one_float_dtype(tensors)
    if why is not None:
        raise InputError(
            f"save(): the model {why}; uatlab models have one dtype, float32 or float64: convert it first "
            "(model.float() or model.double())"
        )
    return config if dtype is None or dtype == config.dtype else dataclasses.replace(config, dtype=dtype)


def check_encoding_fits(config: TransformerConfig, enc: dict[str, Any], where: str) -> None:
    """InputError (message starting ``where: ``) unless the stored encoding ``enc`` (`Encoding.to_json`) lists
    each token and label once, as many tokens as the model's ``vocab_size`` and as many labels as its
    ``num_labels`` (when set): the model's output i is the label listed i-th, so a short or repeated list leaves
    outputs without a name."""
    for key, size, what in (
        ("tokens", config.vocab_size, "vocab_size {}"),
        ("labels", config.num_labels, "{} outputs"),
    ):
        names = enc.get(key)
        if not isinstance(names, list):
            raise InputError(f"{where}: the encoding's {key!r} must be a list of names, got {type(names).__name__}")
        bad = next((i for i, n in enumerate(names) if not isinstance(n, (str, int)) or isinstance(n, bool)), None)
        if bad is not None:
            raise InputError(
                f"{where}: the encoding's {key!r} entry {bad} is {names[bad]!r}, a {type(names[bad]).__name__}, not a "
                "name (a string)"
            )
        from uatlab.data.dataset import first_repeated

        repeated = first_repeated(names)
        if repeated is not None:
            raise InputError(f"{where}: the encoding lists the {key[:-1]} {repeated!r} twice")
        if size is not None and len(names) != size:
            raise InputError(f"{where}: the encoding lists {len(names)} {key}, the model has {what.format(size)}")


def read_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The header metadata of a uatlab model file (raises ModelFileError if it is not one)."""
    return _read(Path(path), tensors=False)[0]


NEXT_TOKEN_TAG = "uatlab-next-token-v1"  # a next-token memorizer (`uatlab.constructions.paper_c.model_file`)
SEQ2SEQ_DEEP_TAG = "uatlab-seq2seq-deep-v1"  # a seq2seq deep memorizer (`uatlab.constructions.paper_c.seq2seq_file`)


def _require_model_file(path: Path) -> None:
    """ModelFileError naming ``path`` and what it is (`uatlab.io_safety.not_a_regular_file`: missing, a broken
    link, a loop of links, a FIFO...), unless it is a regular file."""
    if path.is_dir():
        raise ModelFileError(f"{path} is a folder, not a model file")
    why = not_a_regular_file(path)
    if why is not None:
        raise ModelFileError(f"model file {path} {why}")


def _read(path: Path, tensors: bool, accept: tuple[str, ...] = (FORMAT_TAG,)) -> tuple[dict[str, str], dict[str, Any]]:
    """Open the file once: its checked metadata and (with ``tensors``) every tensor."""
    _require_model_file(path)
    try:
        f = safe_open(str(path), framework="pt")
    except Exception as exc:  # safetensors raises its own error types for bad headers
        raise ModelFileError(f"{path} is not a readable safetensors file (truncated or corrupt?): {exc}") from None
    with f:
        meta = f.metadata() or {}
        if meta.get("uatlab_format") not in accept:
            raise ModelFileError(f"{path} is a safetensors file but not a uatlab model (no '{FORMAT_TAG}' tag)")
        try:
            read = {k: f.get_tensor(k) for k in f.keys()} if tensors else {}
        except Exception as exc:
            raise ModelFileError(f"{path}: cannot read tensors (truncated or corrupt?): {exc}") from None
    check_finite(path, read)
    return meta, read


def load_model(path: str | os.PathLike) -> tuple[Transformer, dict[str, Any]]:
    """Load a model saved by `save_model`. Returns (model in eval mode, extra metadata)."""
    path = Path(path)
    meta, tensors = _read(path, tensors=True)
    return _transformer_from(path, meta, tensors)


def _transformer_from(path: Path, meta: dict[str, str], tensors: dict[str, Any]) -> tuple[Transformer, dict[str, Any]]:
    """The model of a file's metadata and tensors as `_read` returns them (each already checked finite)."""
    try:
        config = TransformerConfig.from_json(meta["uatlab_config"])
    except (KeyError, json.JSONDecodeError, InputError, TypeError) as exc:
        raise ModelFileError(f"{path}: the stored config is invalid: {exc}") from None
    expected = Transformer(config, init_ff=False).state_dict()  # names and shapes (the FF layers allocate nothing)
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ModelFileError(f"{path}: tensors do not match the config (missing {missing}, unexpected {unexpected})")
    for k, v in tensors.items():
        if tuple(v.shape) != tuple(expected[k].shape):
            raise ModelFileError(
                f"{path}: tensor {k} has shape {tuple(v.shape)}, the config needs {tuple(expected[k].shape)}"
            )
    # the tensors are the model that was saved, whatever the config says: a file whose tensors all have one dtype
    # its config does not say (written by an older version from a model re-typed with model.float()) is that
    # dtype's model; tensors of several dtypes, or of float16 or bfloat16, are no uatlab model (cast to the
    # config's dtype they would be another model than the file holds, and a certificate would prove that one)
    dtype, why = one_float_dtype(tensors)
    if why is not None:
        raise ModelFileError(
            f"{path}: the file {why}; a uatlab model has one dtype, float32 or float64: re-save it from a model of "
            "one such dtype"
        )
    file_dtype = config.dtype
    if dtype is not None and dtype != config.dtype:
        config = dataclasses.replace(config, dtype=dtype)
    # the file's tensors, in their own dtype (nothing is cast; `_read` checked them finite) and copied (the model
    # must not depend on the file staying as it is); no random initialisation of weights overwritten at once
    model = Transformer.from_tensors(config, {k: v.clone() for k, v in tensors.items()})
    model.eval()
    if file_dtype != config.dtype:  # what the file's config said, for the certificate's ``config_dtype``
        model.file_config_dtype = file_dtype
    return model, header_object(path, meta, "uatlab_extra")


def header_object(path: Path, meta: dict[str, str], key: str) -> dict[str, Any]:
    """The JSON object in the header metadata field ``key`` (``{}`` when absent); ModelFileError naming the file
    and the field when it is not JSON or not an object (a file written otherwise, or edited)."""
    if key not in meta:
        return {}
    try:
        obj = json.loads(meta[key])
    except json.JSONDecodeError as exc:
        raise ModelFileError(f"{path}: header field {key} is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ModelFileError(f"{path}: header field {key} must be a JSON object, got {type(obj).__name__}")
    return obj


def check_facts(facts: object, where: str = "save()") -> dict[str, Any] | None:
    """``facts`` as plain JSON (tuples as lists, numpy scalars unwrapped) once it is None or a dict of JSON values:
    str keys; values None, bool, str, finite numbers, lists and dicts of these. Anything else is a TypeError (an
    object, a non-str key) or an InputError (NaN, ±inf: not JSON) naming the key, e.g. ``facts['a'][2]``."""
    if facts is None:
        return None
    if not isinstance(facts, Mapping):
        raise TypeError(f"{where}: facts must be a dict of JSON values (str keys), not a {type(facts).__name__}")
    return _json_value(facts, "facts", where)


def _json_value(value: object, at: str, where: str) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        if not math.isfinite(value):
            raise InputError(
                f"{where}: {at} is {value!r}, which JSON cannot hold; give a finite number (or a string such as 'inf')"
            )
        return float(value)
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: {at} has the key {key!r} ({type(key).__name__}); JSON keys are strings")
            out[key] = _json_value(item, f"{at}[{key!r}]", where)
        return out
    if isinstance(value, (list, tuple)):
        return [_json_value(item, f"{at}[{i}]", where) for i, item in enumerate(value)]
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise TypeError(
        f"{where}: {at} is a {type(value).__name__} ({shown}), not a JSON value (str, finite number, bool, None, "
        "list or dict)"
    )


def save(model: Any, path: str | os.PathLike, *, encoding: Any = None, facts: dict[str, Any] | None = None) -> Path:
    """Save a compiled or trained model as one file: weights, config, token encoding, construction facts and
    the uatlab version, all in the safetensors header (metadata ``uatlab_extra``).

    ``facts`` is None or a dict of JSON values (`check_facts`: str keys, finite numbers; TypeError or
    InputError naming the key otherwise), checked before anything is written.

    ``encoding`` (an `uatlab.data.Encoding`) defaults to ``model.encoding``. `load` reads it back.
    A next-token memorizer (Kajitsuka & Sato, ICLR 2025; a module with a ``memo``) is saved in the same
    safetensors format with its own header (`uatlab.constructions.paper_c.model_file`); its
    vocabularies are ``model.token_vocab`` and ``model.label_vocab`` when set. A seq2seq deep memorizer
    (``compile_seq2seq_deep``, ``uatlab compile --ff deep``) is saved with its encoding by
    `uatlab.constructions.paper_c.seq2seq_file`.
    """
    from uatlab import __version__

    if not isinstance(model, Transformer) and not hasattr(model, "memo"):
        raise TypeError(
            "save() takes a uatlab model (a Transformer, or a next-token or seq2seq deep memorizer module from "
            f"uatlab.compile_* / uatlab.load), not a {type(model).__name__}"
        )
    path = check_model_path(path)
    facts = check_facts(facts)
    check_replaceable_model(path, "path")  # a file of the user's that is not a model is never replaced
    if not isinstance(model, Transformer):
        from uatlab.constructions.paper_c.model_file import save_next_token
        from uatlab.constructions.paper_c.seq2seq_memorizer import Seq2SeqMemorizer

        if isinstance(model.memo, Seq2SeqMemorizer):
            from uatlab.constructions.paper_c.seq2seq_file import save_seq2seq_deep

            enc = encoding if encoding is not None else getattr(model, "encoding", None)
            return save_seq2seq_deep(model.memo, path, enc, {"facts_extra": facts} if facts else None)

        if encoding is not None:  # its vocabularies are the module's token_vocab and label_vocab
            raise TypeError("save(): a next-token memorizer stores token_vocab and label_vocab, not an encoding")
        return save_next_token(
            model.memo,
            path,
            getattr(model, "token_vocab", None),
            getattr(model, "label_vocab", None),
            {"facts_extra": facts} if facts else None,
        )

    from uatlab.data.dataset import Encoding

    if encoding is not None and not isinstance(encoding, Encoding):  # (a seq2seq deep model also takes its JSON)
        raise TypeError(f"save(): encoding must be a uatlab.data.Encoding (or None), not a {type(encoding).__name__}")
    enc = encoding if encoding is not None else getattr(model, "encoding", None)
    extra: dict[str, Any] = {"uatlab_version": __version__}
    if enc is not None:
        extra["encoding"] = enc.to_json()
    if facts:
        extra["facts"] = facts
    return save_model(model, path, extra=extra)


def file_format(path: str | os.PathLike) -> str | None:
    """The ``uatlab_format`` tag of a safetensors file (None if it has none); ModelFileError if unreadable."""
    path = Path(path)
    _require_model_file(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            return (f.metadata() or {}).get("uatlab_format")
    except Exception as exc:
        raise ModelFileError(f"{path} is not a readable safetensors file (truncated or corrupt?): {exc}") from None


MODEL_TAGS = (FORMAT_TAG, NEXT_TOKEN_TAG, SEQ2SEQ_DEEP_TAG)  # every kind of model file uatlab writes


def check_replaceable_model(path: str | os.PathLike, option: str = "--out") -> None:
    """InputError naming ``path`` unless nothing is there, it is an empty regular file (``mktemp``'s, made to be
    written: nothing is lost, as ``uatlab synth`` replaces one) or it is a model file uatlab wrote (its
    safetensors header's ``uatlab_format`` is one of `MODEL_TAGS`, as `file_format` reads it): a command that
    writes one model file replaces only a model, never another file of the user's. A symbolic link (to a model or
    an empty file too: the new file would replace the link, not the file it names) or a special file is
    refused."""
    path = Path(path)
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    except OSError:
        st = None  # file_format names what is wrong
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_size == 0:
        return
    if st is not None and stat.S_ISLNK(st.st_mode):  # the model would replace the link, not the file it names
        why = "a symbolic link" if path.exists() else "a broken symbolic link"
    else:
        try:
            tag = file_format(path)
            why = "a safetensors file without a uatlab model's tag" if tag not in MODEL_TAGS else None
        except ModelFileError:
            why = "not a safetensors file"
    if why is not None:
        raise InputError(
            f"{option} {path} exists and is not a uatlab model file ({why}); only a model uatlab wrote is "
            f"replaced: move it away or choose another {option}"
        )


def load(path: str | os.PathLike) -> Any:
    """Load a model saved by `save` (or by older versions); ``model.encoding`` is set when the file
    stores one. The rest of the stored metadata is ``model.saved_extra``.

    A next-token memorizer file comes back as its torch module (float64/float32 forward, or exact integer
    evaluation) with ``memo``, ``token_vocab``, ``label_vocab`` and ``saved_extra`` set. A seq2seq deep
    memorizer file comes back as its torch module with ``memo``, ``encoding``, ``saved_extra`` and
    ``predict(sentences)``.
    """
    from uatlab.data.dataset import UNK, Encoding

    require_path(path, "load")
    path = Path(path)
    meta, tensors = _read(path, tensors=True, accept=MODEL_TAGS)
    if meta.get("uatlab_format") == SEQ2SEQ_DEEP_TAG:
        from uatlab.constructions.paper_c.seq2seq_file import model_from

        return model_from(path, meta, tensors)
    if meta.get("uatlab_format") == NEXT_TOKEN_TAG:
        from uatlab.constructions.paper_c.model_file import memo_from, module_for

        memo, header = memo_from(path, meta, tensors)
        try:
            module = module_for(memo)
        except PrecisionError as exc:  # e.g. an exact-regime file whose header says float64
            raise ModelFileError(f"{path}: {exc}") from None
        module.memo = memo
        module.token_vocab = header.get("token_vocab") or [str(i) for i in range(memo.V)]
        module.label_vocab = header.get("label_vocab") or [str(c) for c in range(memo.C)]
        module.saved_extra = header
        return module

    model, extra = _transformer_from(path, meta, tensors)  # a width-0 FF layer is silenced where it is made
    enc = extra.get("encoding")
    if enc is None and "tokens" in extra and "labels" in extra:  # files written by `uatlab train` before 0.2
        enc = {"tokens": extra["tokens"], "labels": extra["labels"]}
        enc["unknown_token"] = UNK if isinstance(enc["tokens"], list) and enc["tokens"][:1] == [UNK] else None
    if enc is not None:
        if not isinstance(enc, dict):
            raise ModelFileError(
                f"{path}: header field uatlab_extra.encoding must be a JSON object, got {type(enc).__name__}"
            )
        try:
            check_encoding_fits(model.config, enc, str(path))
        except InputError as exc:
            raise ModelFileError(str(exc)) from None
        try:
            model.encoding = Encoding.from_json(enc)
        except (KeyError, TypeError, InputError) as exc:
            raise ModelFileError(f"{path}: the stored encoding is invalid: {exc}") from None
    model.saved_extra = extra
    return model
