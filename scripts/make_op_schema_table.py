"""Write kernlint/trace/aten_out_arguments.json from the installed torch's operator schemas.

    python scripts/make_op_schema_table.py        # after installing the torch release to take it from

tests/test_op_schemas.py fails when the shipped table and the installed torch disagree.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from kernlint.trace.op_schemas import TABLE_FILE, table_from_schemas

OUT = Path(__file__).resolve().parents[1] / "kernlint" / "trace" / TABLE_FILE


def main() -> None:
    ops = table_from_schemas(torch._C._jit_get_all_schemas())
    version = torch.__version__.split("+")[0]
    OUT.write_text(json.dumps({"torch": version, "ops": ops}, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"{OUT}: {len(ops)} ops from torch {version}")


if __name__ == "__main__":
    main()
