"""Values in and out: JSON documents, command-line values, files (docs/cli.md, "Files").

Everything a user hands gradcli as a number passes through here, and every bad value becomes
an :class:`~gradcli.errors.InputError` whose message names the input and the cause. Output
goes the other way: arrays become plain Python lists of floats and non-finite numbers become
the strings ``"nan"``, ``"inf"``, ``"-inf"`` so that every response is strict JSON. Where
the text comes from (EXPR, ``-f``, ``--inputs``, stdin) is :mod:`gradcli.inputs`.

Nothing here uses ``eval``, ``exec`` or pickle; ``.npy`` files are read with
``allow_pickle=False`` and their header is checked before any data is read.

The package's names are all imported from here; its modules, each a part of the work:

=============  ==========================================================================
``jsonio``     JSON out (:func:`json_array`, :func:`dumps`) and in (:func:`parse_json_text`)
``values``     values from JSON (:func:`value_from_json`, :func:`read_inputs_object`), lazy
               arrays checked (:func:`lazy_value`)
``files``      ``NAME=VALUE`` (:func:`parse_cli_value`), ``@path`` and ``@-`` values
``npfiles``    ``.npy`` and ``.npz`` files (:func:`read_npy`, :func:`load_npz_inputs`)
``csvtext``    CSV and text files of numbers
``bounded``    reads bounded by the element limit (:func:`read_file_text`, …)
``save``       ``--save``: :func:`save_result`, :func:`save_npz`, :class:`ReplacedFile`
=============  ==========================================================================
"""

from __future__ import annotations

from ..errors import shorten
from .bounded import (
    FILE_BYTES_PER_ELEMENT,
    FILE_BYTES_SLACK,
    max_file_bytes,
    read_at_most,
    read_file_text,
)
from .files import (
    SUPPORTED_EXTENSIONS,
    is_zarr,
    load_file_value,
    parse_cli_value,
    split_zarr,
    value_from_bytes,
)
from .jsonio import dumps, json_array, numbers_text, parse_json_text, quote_short, write_json
from .npfiles import load_npz_inputs, read_npy, read_npz_arrays
from .save import (
    SAVE_EXTENSIONS,
    arrays_to_save,
    check_save_path,
    save_npz,
    save_result,
)
from .save import ReplacedFile as ReplacedFile  # imported from here, not in __all__
from .values import MAX_DIMS, DTypeArg, lazy_value, read_inputs_object, value_from_json

__all__ = [
    "FILE_BYTES_PER_ELEMENT",
    "FILE_BYTES_SLACK",
    "MAX_DIMS",
    "SAVE_EXTENSIONS",
    "SUPPORTED_EXTENSIONS",
    "DTypeArg",
    "arrays_to_save",
    "check_save_path",
    "dumps",
    "is_zarr",
    "json_array",
    "lazy_value",
    "load_file_value",
    "load_npz_inputs",
    "max_file_bytes",
    "numbers_text",
    "parse_cli_value",
    "parse_json_text",
    "quote_short",
    "read_at_most",
    "read_file_text",
    "read_inputs_object",
    "read_npy",
    "read_npz_arrays",
    "save_npz",
    "save_result",
    "shorten",
    "split_zarr",
    "value_from_bytes",
    "value_from_json",
    "write_json",
]
