"""Default effect names are part of the keys: the same however the code is run.

The module that defines an effect may run as a script (`python shop.py`, where it is
`__main__`), as a module (`python -m shop`), or be imported (`import shop`,
`import billing.shop`); a crashed run must resume under the same keys in each case.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from langgraph_durable import EffectNameWarning, effect

ROOT = Path(__file__).resolve().parents[2]

MODULE = """
from langgraph_durable import effect


@effect
def charge(amount: int) -> str:
    return "ok"


class Billing:
    @staticmethod
    @effect
    def refund(amount: int) -> str:
        return "ok"


if __name__ == "__main__":
    print(charge.__effect__.name, Billing.refund.__effect__.name)
"""


def names(cwd: Path, *command: str) -> str:
    done = subprocess.run(
        [sys.executable, *command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": f"{cwd}{os.pathsep}{ROOT}"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_script_module_and_import_give_the_same_names(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(MODULE)
    (tmp_path / "billing").mkdir()
    (tmp_path / "billing" / "__init__.py").write_text("")
    (tmp_path / "billing" / "shop.py").write_text(MODULE)
    expected = "shop.charge shop.Billing.refund"
    show = "print(shop.charge.__effect__.name, shop.Billing.refund.__effect__.name)"
    assert names(tmp_path, "shop.py") == expected
    assert names(tmp_path, "-m", "shop") == expected
    assert names(tmp_path, "-c", f"import shop; {show}") == expected
    assert names(tmp_path, "-m", "billing.shop") == expected
    assert names(tmp_path, "-c", f"import billing.shop as shop; {show}") == expected


def test_an_effect_defined_interactively_warns_that_its_name_may_not_hold(tmp_path: Path) -> None:
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "from langgraph_durable import effect\n"
        "def send(): pass\n"
        "effect(send)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode != 0
    assert "EffectNameWarning" in done.stderr
    assert "interactive session" in done.stderr


def test_a_lambda_warns_and_a_given_name_does_not() -> None:
    with pytest.warns(EffectNameWarning, match="every lambda is named"):
        effect(lambda: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        named = effect(name="crm.create_deal")(lambda: None)
    assert named.__effect__.name == "crm.create_deal"  # type: ignore[attr-defined]


def test_names_come_from_the_modules_own_name() -> None:
    @effect
    def local_send() -> None:
        return None

    name = local_send.__effect__.name  # type: ignore[attr-defined]
    assert name == "test_effect_names.test_names_come_from_the_modules_own_name.<locals>.local_send"
