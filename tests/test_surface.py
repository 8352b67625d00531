"""The public surface (issue 20): ``nc`` is the user's vocabulary, the engine is ``nc.engine``, every error is
importable from one place, and an argument of the wrong kind gets a typed error naming what was expected."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import types
import warnings

import pytest

import napkin_cat as nc
from napkin_cat import errors


def _every_error_class() -> dict:
    """Every NapkinError subclass any module of the package defines or imports, by name."""
    found = {}
    for info in pkgutil.walk_packages(nc.__path__, "napkin_cat."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, errors.NapkinError):
                found.setdefault(name, set()).add(value)
    return found


def test_every_error_is_in_napkin_cat_errors_and_in_nc():
    found = _every_error_class()
    assert len(found) >= 25
    for name, classes in found.items():
        assert classes == {getattr(errors, name)}, f"{name} is defined outside napkin_cat.errors: {classes}"
        assert name in errors.__all__ and name in nc.__all__ and getattr(nc, name) is getattr(errors, name)
        assert getattr(errors, name).__module__ == "napkin_cat.errors"


def test_the_old_import_paths_of_the_errors_still_work():
    from napkin_cat.codegen.errors import CodegenError
    from napkin_cat.hardware.errors import HardwareError
    from napkin_cat.plan.ir import PlanError
    from napkin_cat.plan.lowering.state import LoweringError
    assert (CodegenError, HardwareError, PlanError, LoweringError) == (nc.CodegenError, nc.HardwareError,
                                                                      nc.PlanError, nc.LoweringError)


ENGINE = ("Box", "KINDS", "parse", "traverse", "Netlist", "to_netlist", "to_diagram", "Obligation", "power_terms")


def test_the_vocabulary_leaves_the_engine_to_nc_engine():
    for name in ENGINE:
        assert name not in nc.__all__ and name in nc.engine.__all__ and name not in dir(nc), name
    assert "engine" in nc.__all__ and "rename" not in nc.__all__ and "renaming" in nc.__all__
    assert len(nc.__all__) == len(set(nc.__all__))


@pytest.mark.parametrize("name, new", [*((n, f"nc.engine.{n}") for n in ENGINE), ("rename", "nc.renaming")])
def test_a_name_that_left_still_resolves_and_says_where_it_lives(name, new):
    with pytest.warns(DeprecationWarning, match=rf"nc\.{name} is {new} now"):
        value = getattr(nc, name)
    assert value is (nc.renaming if name == "rename" else getattr(nc.engine, name))
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        nc.no_such_name


def test_rename_and_rename_axis_are_two_names_for_two_things():
    box = nc.renaming("n d -> m d")                        # a box: one array's axes get new names
    renamed = nc.rename_axis(nc.library.attention(), "q", "i")   # a functor: an axis renamed throughout
    assert box.cod.inside[0].names == ("m", "d") and "i" in renamed.dom.inside[0].names


def test_nc_cost_and_nc_plan_are_the_functions_not_their_folders():
    """The layer folders ``napkin_cat/cost`` and ``napkin_cat/plan`` are plain packages: the functions win
    (pytest's importlib mode imports a package already imported by its name)."""
    for name in ("cost", "plan"):
        assert isinstance(getattr(nc, name), types.FunctionType)
        package = importlib.import_module(f"napkin_cat.{name}")
        assert type(package) is types.ModuleType and not callable(package)


# ---------------------------------------------------------------------- wrong kinds of argument
@pytest.mark.parametrize("call, error, message", [
    (lambda: nc.cost("attention"), nc.ArgumentError,
     r"nc.cost takes a napkin_cat Diagram, got the str 'attention' \(a library algorithm is a call: "
     r"nc.library.attention\(\)\)"),
    (lambda: nc.draw("attention"), nc.ArgumentError, r"nc.draw takes a napkin_cat Diagram, got the str 'attention'"),
    (lambda: nc.to_tikz(3), nc.ArgumentError, r"nc.to_tikz takes a napkin_cat Diagram, got the int 3"),
    (lambda: nc.rewrite(nc.library.attention(), [], strategy="once"), nc.ArgumentError,
     r"strategy 'once' is none of 'fixpoint', a list of rule names, or a callable .*strategy=\['once'\]"),
    (lambda: nc.rewrite(nc.library.attention(), [], strategy=3), nc.ArgumentError, r"strategy 3 is none of"),
    (lambda: nc.codegen.c(nc.library.matmul()), nc.CodegenError,
     r"nc.codegen.c takes a plan \(p = nc.plan\(diagram, sizes\)\), got a Box \(plan the diagram first"),
    (lambda: nc.codegen.cuda(nc.library.attention()), nc.CodegenError, r"nc.codegen.cuda takes a plan"),
    (lambda: nc.rename_axis(nc.library.attention(), "qq", "i"), nc.AxisError,
     r"cannot rename axis 'qq': the diagram has no axis \(or size\) called 'qq'; its axes are \['d', 'q', 'x'\]"),
])
def test_a_wrong_kind_of_argument_names_what_was_expected(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_an_argument_error_is_a_type_error_and_the_rest_still_works():
    assert issubclass(nc.ArgumentError, TypeError) and issubclass(nc.ArgumentError, nc.NapkinError)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                     # the vocabulary itself warns about nothing
        d = nc.rename_axis(nc.rename_axis(nc.library.attention(), "q", "i"), "i", "q")
    assert d == nc.library.attention()
    assert nc.rename_axis(nc.substitute(nc.einsum("q d -> q"), d=2 * nc.symbol("k")), "k", "j").dom.inside[0] \
        == nc.substitute(nc.einsum("q d -> q"), d=2 * nc.symbol("j")).dom.inside[0]   # a size symbol, no axis
