"""The static group member id of a subscribing driver (pure derivation)."""

from __future__ import annotations

import re

from hypothesis import given, strategies as st

from dstream_kafka.plan.driver_consumer import (application_identity, static_instance_id,
                                                static_instance_wanted, static_membership)


@given(st.text(min_size=1), st.text(), st.text(), st.integers(0, 1000))
def test_the_derived_id_is_the_same_at_every_restart_and_valid_for_kafka(
        group: str, checkpoint: str, app: str, stream: int) -> None:
    identity = application_identity(checkpoint or None, app, stream)
    derived = static_instance_id(group, identity)
    assert derived == static_instance_id(group, application_identity(checkpoint or None, app, stream))
    assert re.fullmatch(r"[a-zA-Z0-9._-]{1,249}", derived)


def test_another_group_application_checkpoint_or_stream_gets_another_id() -> None:
    base = static_instance_id("g", application_identity("/ckpt/a", "app", 0))
    others = [static_instance_id("h", application_identity("/ckpt/a", "app", 0)),
              static_instance_id("g", application_identity("/ckpt/b", "app", 0)),
              static_instance_id("g", application_identity("/ckpt/a", "app", 1)),
              static_instance_id("g", application_identity(None, "app", 0)),
              static_instance_id("g", application_identity(None, "other", 0))]
    assert base not in others and len(set(others)) == len(others)


def test_the_checkpoint_folder_names_the_application_whatever_its_app_name() -> None:
    assert application_identity("/ckpt/a/", "one", 0) == application_identity("/ckpt/a", "two", 0)


def test_static_membership_is_asked_only_inside_its_block() -> None:
    assert static_instance_wanted() is None
    with static_membership("dstream_kafka-x"):
        assert static_instance_wanted() == "dstream_kafka-x"
    assert static_instance_wanted() is None
