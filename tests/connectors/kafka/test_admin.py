"""The metadata client's configuration: consumer-only properties stay with the consumers."""

from __future__ import annotations

from hoodline.connectors.kafka.admin import ConfluentMetadataClient


def test_the_metadata_client_gets_no_consumer_only_property() -> None:
    """A consumer property given to the admin (a producer-type client) made librdkafka warn
    that it "is a consumer property and will be ignored by this producer instance", about a
    setting the user needed for the readers (``max.partition.fetch.bytes``, wide-topics
    review). Connection and size settings both need are kept."""
    client = ConfluentMetadataClient({
        "bootstrap.servers": "127.0.0.1:9", "group.id": "g", "fetch.max.bytes": 500_000,
        "max.partition.fetch.bytes": 500_000, "fetch.message.max.bytes": 500_000,
        "auto.offset.reset": "earliest", "receive.message.max.bytes": 1_000_000,
        "security.protocol": "plaintext",
    })
    try:
        kept = {k for k in client._admin_props if k not in ("error_cb", "logger", "client.id")}
        assert kept == {"bootstrap.servers", "receive.message.max.bytes", "security.protocol"}
    finally:
        client.close()
