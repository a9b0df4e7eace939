"""The Orders API's configuration, parsed once from the environment into a typed object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from outbox.config import require

ENV_ORDERS_TABLE_NAME = "ORDERS_TABLE_NAME"
ENV_OUTBOX_TABLE_NAME = "OUTBOX_TABLE_NAME"


class OrdersApiConfig(NamedTuple):
    """The table names."""

    orders_table_name: str
    outbox_table_name: str

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> OrdersApiConfig:
        """Raises ConfigurationError naming the variable: resource names never default silently."""
        return cls(
            orders_table_name=require(env, ENV_ORDERS_TABLE_NAME),
            outbox_table_name=require(env, ENV_OUTBOX_TABLE_NAME),
        )
