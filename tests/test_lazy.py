"""The packages' lazy attributes: every one resolves to the object its home defines, a renamed
one too, and a name no package exports is an AttributeError."""

import importlib

import pytest

import marlang
import marlang.envs
import marlang.models
import marlang.run
from marlang.lazy import lazy_getattr


def test_a_home_names_the_module_or_the_module_and_its_attribute():
    getattr_ = lazy_getattr("pkg", {"dumps": "json", "to_text": "json:dumps"})
    assert getattr_("dumps") is importlib.import_module("json").dumps
    assert getattr_("to_text") is importlib.import_module("json").dumps
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'loads'"):
        getattr_("loads")


@pytest.mark.parametrize("package", [marlang, marlang.models, marlang.run, marlang.envs])
def test_every_exported_name_resolves(package):
    for name in package.__all__:
        assert getattr(package, name) is not None, name
    with pytest.raises(AttributeError, match=f"module '{package.__name__}' has no attribute 'nothing_here'"):
        package.__getattr__("nothing_here")

