import pytest

from marlang.sandbox import exception_text


class _Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no")


class _Timeout(BaseException):
    pass


class _TimesOut(Exception):
    def __str__(self):
        raise _Timeout


def test_a_message_is_its_text_or_its_type_and_is_clipped():
    assert exception_text.message(ValueError("bad"), _Timeout) == "bad"
    assert exception_text.message(KeyError(), _Timeout) == "KeyError"
    assert exception_text.message(ValueError("x" * 2000), _Timeout) == "x" * exception_text.MAX_MESSAGE + "..."


def test_a_message_whose_str_raises_is_a_placeholder_but_the_callers_timeout_goes_on():
    assert exception_text.message(_Unprintable(), _Timeout) == "<unprintable _Unprintable>"
    with pytest.raises(_Timeout):
        exception_text.message(_TimesOut(), _Timeout)


def _raise():
    raise ValueError("x")


def test_the_line_note_names_the_innermost_frame_of_the_file():
    with pytest.raises(ValueError) as caught:
        _raise()
    line = _raise.__code__.co_firstlineno + 1
    assert exception_text.line_note(caught.value, __file__, "program") == f" (program line {line})"
    assert exception_text.line_note(caught.value, "<other>", "test") == ""
