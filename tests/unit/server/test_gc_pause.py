"""The collector pause around a board's ranking (issue 38.4): off inside, back on after, counted
across overlapping pauses, and a collector someone else turned off stays off."""

from __future__ import annotations

import gc

from server.core.gc_pause import gc_paused


def test_the_collector_is_off_inside_and_back_on_after():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # another thread's pause, overlapping
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()


def test_back_on_after_an_exception():
    try:
        with gc_paused():
            raise ValueError("ranking failed")
    except ValueError:
        pass
    assert gc.isenabled()


def test_a_collector_turned_off_elsewhere_stays_off():
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
