"""The object stores the storage tests run against, as one parametrized fixture: moto's S3
server and Azurite (Azure Blob), both on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Store:
    """A fresh bucket/container on one emulator: its URL, options and a key lister."""

    name: str
    #: ``scheme://bucket`` (no trailing slash)
    root: str
    options: dict[str, str]
    keys: Callable[[str], list[str]]

    def url(self, path: str) -> str:
        return f"{self.root}/{path}"


@pytest.fixture(params=[pytest.param("s3", marks=pytest.mark.s3),
                        pytest.param("azure", marks=pytest.mark.azure)])
def store(request: pytest.FixtureRequest) -> Store:
    if request.param == "s3":
        moto = request.getfixturevalue("moto_s3")
        bucket = moto.new_bucket()
        return Store("s3", f"s3://{bucket}", moto.options,
                     lambda prefix: moto.keys(bucket, prefix))
    azurite = request.getfixturevalue("azurite")
    container = azurite.new_container()
    return Store("azure", f"abfs://{container}", azurite.options,
                 lambda prefix: azurite.blobs(container, prefix))
