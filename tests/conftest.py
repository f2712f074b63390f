"""Session-wide fixtures: one embedded broker and one Spark session for the whole run.

A process can hold only one SparkContext. :class:`SparkProvider` keeps the running session and
hands it out for as long as the same master is asked for; asking for another master (the
``local-cluster`` tests) stops it and starts that one. Collection moves the modules that use the
``local-cluster`` session to the end, so the shared ``local[2]`` session starts once. Both the
broker and Spark are stopped at the end of the session.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from hoodline import faults
from hoodline.broker import EmbeddedBroker

if TYPE_CHECKING:  # importing pyspark costs a second; tests without Spark never pay it
    from hoodline.spark.session import HoodlineSpark
    from tests.helpers.azurite import Azurite
    from tests.helpers.moto_s3 import MotoS3
    from tests.helpers.schema_registry import SchemaRegistry
    from tests.helpers.standalone import StandaloneCluster

LOCAL = "local[2]"
LOCAL_CLUSTER = "local-cluster[2,1,1024]"


class SparkProvider:
    """The process's one Spark session, restarted only when a different master is asked for."""

    def __init__(self) -> None:
        self._current: HoodlineSpark | None = None

    def get(self, master: str) -> HoodlineSpark:
        from pyspark import SparkContext

        from hoodline.pipeline.master import MasterKind, parse_master
        from hoodline.spark.session import SparkSettings, start_session

        wanted = parse_master(master)
        current = self._current
        # a test may stop the session it was given (e.g. to check stop() itself)
        if current is not None and SparkContext._active_spark_context is not current.context:
            self._current = current = None
        if current is None or current.master.url != wanted.url:
            self.release()
            current = start_session(SparkSettings(master=master, app_name="hoodline-tests"))
            self._current = current
        if wanted.kind is MasterKind.LOCAL_CLUSTER:
            current.wait_for_executors(wanted.executors, timeout_s=120)
        return current

    def release(self) -> None:
        """Stop the running session (if any)."""
        current, self._current = self._current, None
        if current is not None:
            current.stop()


@pytest.fixture(autouse=True)
def _fresh_fault_counts() -> Iterator[None]:
    """Injected ``fail`` faults count per test, not per pytest process."""
    faults.reset_counts()
    yield
    faults.reset_counts()


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """The bundled Kafka-protocol broker (Tansu), one per test session."""
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture(scope="session")
def spark_provider() -> Iterator[SparkProvider]:
    provider = SparkProvider()
    try:
        yield provider
    finally:
        provider.release()


@pytest.fixture
def spark(spark_provider: SparkProvider) -> HoodlineSpark:
    """The shared ``local[2]`` session."""
    return spark_provider.get(LOCAL)


@pytest.fixture
def spark_cluster(spark_provider: SparkProvider) -> HoodlineSpark:
    """A ``local-cluster[2,1,1024]`` session with both executors registered."""
    return spark_provider.get(LOCAL_CLUSTER)


@pytest.fixture(scope="session")
def _standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    from tests.helpers.standalone import StandaloneCluster

    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture
def standalone_cluster(_standalone_cluster: StandaloneCluster) -> StandaloneCluster:
    """A Spark standalone master and two 1-core workers on 127.0.0.1, started from pyspark's
    own launcher once per test process and stopped (daemons, executors and their Python
    workers, by PID) at its end; a worker an earlier test killed is started again first."""
    _standalone_cluster.ensure_workers()
    return _standalone_cluster


@pytest.fixture(scope="session")
def moto_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoS3]:
    """moto's S3 server on 127.0.0.1, one per test session, stopped (by PID) at the end."""
    from tests.helpers.moto_s3 import MotoS3

    server = MotoS3(tmp_path_factory.mktemp("moto") / "moto.log")
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    """Azurite's Blob service on 127.0.0.1, one per test session, stopped (by PID) at the end."""
    from tests.helpers.azurite import Azurite

    server = Azurite(tmp_path_factory.mktemp("azurite") / "azurite.log")
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[SchemaRegistry]:
    """A Confluent-API Schema Registry on 127.0.0.1 (tests/helpers/schema_registry.py); tests
    use their own subjects."""
    from tests.helpers.schema_registry import SchemaRegistry

    registry = SchemaRegistry()
    try:
        yield registry
    finally:
        registry.stop()


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


#: Fixtures that start Spark (tests with the ``spark`` marker start it too, in subprocesses).
_SPARK_FIXTURES = frozenset({"spark", "spark_provider", "spark_cluster", "standalone_cluster"})


def _needs_spark(item: pytest.Item) -> bool:
    return (item.get_closest_marker("spark") is not None
            or not _SPARK_FIXTURES.isdisjoint(getattr(item, "fixturenames", ())))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order tests: those without Spark first (they run while :func:`pytest_configure`'s build
    of the JVM class cache occupies a core on a fresh machine); then those on the shared
    ``local[2]`` session; last the modules that use the ``local-cluster`` session, so each
    test process starts either session at most once (a ``local-cluster`` test handed out
    early made its process start ``local[2]`` again after it and the cluster once more at the
    end: ~30 s of starts); the tests that stop the session themselves (``stops_spark``)
    come last of their session's tests. Within each group the ``slow`` end-to-end tests come
    first, so the two test processes (pytest-xdist, one test handed out at a time) take them
    early and finish together. A module's tests stay together otherwise (the sort is stable)."""
    uses: dict[str, set[str]] = {}
    for item in items:
        uses.setdefault(_module(item), set()).update(getattr(item, "fixturenames", ()))

    items.sort(key=lambda item: (_needs_spark(item),
                                 "spark_cluster" in uses[_module(item)],
                                 item.get_closest_marker("stops_spark") is not None,
                                 item.get_closest_marker("slow") is None))


_class_cache_build: threading.Thread | None = None


def pytest_configure(config: pytest.Config) -> None:
    """In the controlling process: build the JVM class cache in the background when it is
    missing (a fresh machine, as in CI; ~50 s), so the tests without Spark run meanwhile and
    the first Spark start waits only for the rest of the build (class_cache's lock)."""
    global _class_cache_build
    if hasattr(config, "workerinput"):  # a pytest-xdist worker
        return

    def build() -> None:
        from hoodline.spark import class_cache

        path = class_cache.archive_path()
        if path is not None:
            class_cache.build(path)

    _class_cache_build = threading.Thread(target=build, name="class-cache-build", daemon=True)
    _class_cache_build.start()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _class_cache_build is not None:
        _class_cache_build.join()
