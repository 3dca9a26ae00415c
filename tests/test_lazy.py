"""The packages' lazy attributes: every one resolves to the object its home defines, a renamed
one too, and a name no package exports is an AttributeError."""

import importlib

import pytest

import marlang
import marlang.envs
import marlang.methods.neural
import marlang.methods.neural.critics
import marlang.models
import marlang.run
from marlang.lazy import home_of_each, lazy_getattr


def test_a_home_names_the_module_or_the_module_and_its_attribute():
    getattr_ = lazy_getattr("pkg", {"json": ("dumps", "loads"), "json:dumps": ("to_text",)})
    assert getattr_("dumps") is importlib.import_module("json").dumps
    assert getattr_("loads") is importlib.import_module("json").loads
    assert getattr_("to_text") is importlib.import_module("json").dumps
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'load'"):
        getattr_("load")


def test_a_name_has_one_home():
    assert home_of_each({"json": ("dumps",), "pickle": ("loads",)}) == {"dumps": "json", "loads": "pickle"}
    with pytest.raises(ValueError, match="'dumps' has two homes: 'json' and 'pickle'"):
        lazy_getattr("pkg", {"json": ("dumps",), "pickle": ("dumps",)})


@pytest.mark.parametrize("package", [marlang, marlang.models, marlang.run, marlang.envs])
def test_every_exported_name_resolves(package):
    for name in package.__all__:
        assert getattr(package, name) is not None, name
    with pytest.raises(AttributeError, match=f"module '{package.__name__}' has no attribute 'nothing_here'"):
        package.__getattr__("nothing_here")



@pytest.mark.parametrize("package", [marlang, marlang.models, marlang.run, marlang.envs, marlang.methods.neural,
                                     marlang.methods.neural.critics])
def test_every_lazy_name_is_public(package):
    table = package._EXPORTS if hasattr(package, "_EXPORTS") else package._LAZY
    assert set(home_of_each(table)) <= set(package.__all__)
