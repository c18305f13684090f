"""transforms/ and templates/ install as kernelfarer.transforms and kernelfarer.templates, both for
`pip install .` and `pip install -e .` (the suite itself runs from the editable install)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_editable_install_maps_top_level_directories():
    import kernelfarer.templates
    import kernelfarer.transforms.blocking

    assert Path(kernelfarer.transforms.blocking.__file__).resolve() == REPO / "transforms" / "blocking.py"
    assert Path(kernelfarer.templates.__file__).resolve().parent == REPO / "templates"
    # Nothing generic leaks into the top-level namespace.
    assert "transforms" not in sys.modules and "templates" not in sys.modules


def test_regular_install_ships_subpackages_and_templates(tmp_path):
    pytest.importorskip("setuptools")
    target = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(REPO)],
        capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (target / "kernelfarer" / "transforms" / "blocking.py").is_file()
    assert (target / "kernelfarer" / "templates" / "driver.c.j2").is_file()
    assert (target / "kernelfarer" / "include" / "kf_parse_stubs.h").is_file()
    assert (target / "kernelfarer" / "templates" / "kernels" / "x86_avx2.c.j2").is_file()
    assert not (target / "transforms").exists() and not (target / "templates").exists()
    # The installed copy (not the repository) renders a driver.
    code = ("import kernelfarer.emit as e, kernelfarer.plan as p, kernelfarer.targets as t;"
            "print(e.__file__);"
            "print(e.render_driver(p.make_plan(t.TARGETS['generic'], t.DType.F32))[:0] or 'ok')")
    env = dict(os.environ, PYTHONPATH=str(target))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    installed_file, status = run.stdout.split()
    assert Path(installed_file).resolve().is_relative_to(target.resolve())
    assert status == "ok"


def test_templates_compiled_at_installation_spare_a_first_build_compiling_them(tmp_path):
    """The Makefile compiles the templates when it installs (emit.precompile_templates): a
    process with an empty profile directory loads them compiled and compiles none itself."""
    code = ("import sys; from kernelfarer import emit;"
            "n = emit.precompile_templates() if sys.argv[1] == 'ship' else 0;"
            "emit.environment().get_template('driver.c.j2');"
            "emit.environment().get_template('kernels/x86_avx512.c.j2'); print(n)")
    env = {**os.environ, "KERNELFARER_PROFILE_DIR": str(tmp_path / "first")}
    shipped = subprocess.run([sys.executable, "-c", code, "ship"], capture_output=True, text=True,
                             env=env, cwd=tmp_path)
    assert shipped.returncode == 0, shipped.stderr
    assert int(shipped.stdout) > 20                          # every template, compiled once
    env["KERNELFARER_PROFILE_DIR"] = str(tmp_path / "second")
    done = subprocess.run([sys.executable, "-c", code, "use"], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "second" / "templates").iterdir()) == []     # nothing compiled
