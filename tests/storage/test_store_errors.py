"""Object store failures reach the user as one :class:`StorageError` line naming the URL, the
store's reason in short and what to do -- never obstore's multi-line message with its Rust debug
dump, never a secret: a missing bucket, rejected or missing credentials, an endpoint that does
not answer. The server cases run against moto's S3 server on 127.0.0.1."""

from __future__ import annotations

import os
import pickle
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hoodline.broker import free_port
from hoodline.cli import app
from hoodline.errors import ConfigError, StorageError, is_retryable
from hoodline.storage import ops
from hoodline.storage.paths import ObjectPath, describe_store_error, parse_location
from hoodline.table.table import HudiTable
from tests.helpers.files_pipeline import write_files_pipeline
from tests.helpers.moto_s3 import REGION, MotoS3

runner = CliRunner()
SECRET = "s3cr3t-do-not-print"
KEY_ID = "AKIAHOODLINEKEYID"

# obstore 0.12 messages as captured from moto (request ids shortened)
NO_BUCKET = (
    'Generic S3 error: Error performing list request: Error performing GET '
    'http://127.0.0.1:51729/nobucket?list-type=2&prefix=x%2F in 40.379836ms - Server returned '
    'non-2xx status code: 404 Not Found: <?xml version="1.0" encoding="utf-8"?>\n<Error><Code>'
    'NoSuchBucket</Code><Message>The specified bucket does not exist</Message><BucketName>'
    'nobucket</BucketName><RequestId>eaJnNYdt</RequestId><HostId>9Gjjt1m+cjU4</HostId></Error>'
    '\n\nDebug source:\nGeneric {\n    store: "S3",\n    source: ListRequest {\n        '
    'source: RetryError(\n            RetryErrorImpl {\n                method: GET,\n'
    '                inner: Status {\n                    status: 404,\n    },\n}'
)
NO_CREDENTIALS = (
    'Generic S3 error: Error performing PUT http://169.254.169.254/latest/api/token in '
    '2.168985ms - Server returned non-2xx status code: 403 Forbidden: resolve_deny: denied '
    'destination\n\nDebug source:\nGeneric {\n    store: "S3",\n    source: RetryError(\n'
    '        RetryErrorImpl {\n            method: PUT,\n            uri: Some(\n'
    '                http://169.254.169.254/latest/api/token,\n            ),\n    },\n}'
)
BAD_KEY = (
    'Generic S3 error: Error performing list request: Error performing GET '
    'http://127.0.0.1:56171/lake?list-type=2&prefix=x%2F in 5.135761ms - Server returned '
    'non-2xx status code: 403 Forbidden: <?xml version="1.0" encoding="utf-8"?>\n<Error><Code>'
    'InvalidAccessKeyId</Code><Message>The AWS Access Key Id you provided does not exist in our '
    'records.</Message><BucketName>lake</BucketName><RequestId>TdYMX1kf</RequestId></Error>'
    '\n\nDebug source:\nGeneric {\n    store: "S3",\n}'
)
REFUSED = (
    'Generic S3 error: Error performing HEAD http://127.0.0.1:9/lake/x/.hoodie/hoodie.properties '
    'in 2.911845171s, after 10 retries, max_retries: 10, retry_timeout: 180s  - HTTP error: '
    'error sending request\n\nDebug source:\nGeneric {\n    store: "S3",\n    source: '
    'RetryError(\n        RetryErrorImpl {\n            retry_timeout: 180s,\n'
    '            inner: Http(\n                HttpError {\n                    kind: Connect,\n'
    '                    source: hyper_util::client::legacy::Error(\n'
    '                            ConnectError(\n                                "tcp connect '
    'error",\n                                Os {\n                                    code: '
    '111,\n                                    kind: ConnectionRefused,\n'
    '                                    message: "Connection refused",\n    },\n}'
)
AZURE_SAS_503 = (
    'Generic MicrosoftAzure error: Error performing GET '
    'https://acct.blob.core.windows.net/c/x?sv=2022&sig=SIGNATURE in 1s - Server returned '
    'non-2xx status code: 503 Service Unavailable: <?xml version="1.0" encoding="utf-8"?>'
    '<Error><Code>ServerBusy</Code><Message>The server is busy.\nRequestId:1\nTime:2</Message>'
    '</Error>\n\nDebug source:\nGeneric {}'
)


@pytest.mark.parametrize(("text", "kind", "reason", "endpoint"), [
    (NO_BUCKET, "bucket",
     "404 Not Found, NoSuchBucket: The specified bucket does not exist", "http://127.0.0.1:51729"),
    (NO_CREDENTIALS, "credentials", "403 Forbidden: resolve_deny: denied destination",
     "http://169.254.169.254"),
    (BAD_KEY, "credentials", "403 Forbidden, InvalidAccessKeyId: The AWS Access Key Id you "
     "provided does not exist in our records.", "http://127.0.0.1:56171"),
    (REFUSED, "endpoint", "connection refused, after 10 retries", "http://127.0.0.1:9"),
    (AZURE_SAS_503, "server", "503 Service Unavailable, ServerBusy: The server is busy.",
     "https://acct.blob.core.windows.net"),
])
def test_an_obstore_message_shortens_to_its_reason(
    text: str, kind: str, reason: str, endpoint: str
) -> None:
    failure = describe_store_error(text, "GenericError")
    assert (failure.kind, failure.reason, failure.endpoint) == (kind, reason, endpoint)
    assert "\n" not in failure.reason and "Debug" not in failure.reason


def test_a_head_refused_without_a_body_is_a_permission_error() -> None:
    text = ("The operation lacked the necessary privileges to complete for path x: Error "
            "performing HEAD http://127.0.0.1:1/lake/x in 7ms - Server returned non-2xx status "
            "code: 403 Forbidden: \n\nDebug source:\nNotFound {}")
    failure = describe_store_error(text, "PermissionDeniedError")
    assert (failure.kind, failure.reason) == ("permission", "403 Forbidden")


def test_a_message_never_shows_a_query_string() -> None:
    text = ("Generic MicrosoftAzure error: weird failure at "
            "https://acct.blob.core.windows.net/c?sig=SIGNATURE&sv=1")
    failure = describe_store_error(text)
    assert "SIGNATURE" not in failure.reason
    assert failure.kind == "other"


def test_the_storage_error_pickles_with_its_retryable_flag() -> None:
    for retryable in (True, False):
        error = StorageError("cannot list 's3://b': ...", retryable=retryable)
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is StorageError
        assert (str(back), back.retryable, is_retryable(back)) == (str(error), retryable,
                                                                     retryable)


# --- against moto's server ---------------------------------------------------------------------
def _bucket() -> str:
    """A bucket name no test has used (stores are cached per process by URL and options)."""
    return f"hoodline-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def moto_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoS3]:
    """A moto server that checks credentials (IAM auth on from the first request), stopped by
    PID at the end."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INITIAL_NO_AUTH_ACTION_COUNT", "0")  # inherited by the server process
        server = MotoS3(tmp_path_factory.mktemp("moto-auth") / "moto.log")
        try:
            server.start()
        except BaseException:
            server.stop()
            raise
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.s3
def test_a_missing_bucket_is_a_storage_error_not_a_missing_table(moto_s3: MotoS3) -> None:
    bucket = _bucket()
    with pytest.raises(StorageError) as caught:
        HudiTable.open(f"s3://{bucket}/dbz", storage_options=moto_s3.options)
    message = str(caught.value)
    assert f"the bucket '{bucket}' does not exist" in message
    assert "NoSuchBucket" in message and "create the bucket" in message
    assert "\n" not in message and "Debug source" not in message and "<?xml" not in message
    assert caught.value.retryable is False and not is_retryable(caught.value)
    # writing and reading a file there say the same, not "file not found"
    path = parse_location(f"s3://{bucket}/dbz/x.parquet", moto_s3.options)
    with pytest.raises(StorageError, match="does not exist"):
        path.write_bytes(b"1")
    with pytest.raises(StorageError, match="does not exist"):
        ops.list_dir(path.parent)
    with pytest.raises(StorageError, match="does not exist"):
        path.read_bytes()
    # while a missing object in a bucket that exists stays a FileNotFoundError naming its URL
    bucket = moto_s3.new_bucket()
    missing = parse_location(f"s3://{bucket}/t/missing", moto_s3.options)
    with pytest.raises(FileNotFoundError, match=f"^s3://{bucket}/t/missing$"):
        missing.read_bytes()
    with pytest.raises(FileNotFoundError, match=f"^s3://{bucket}/t/missing$"):
        missing.stat()
    assert not missing.exists()


@pytest.mark.s3
def test_hoodline_table_show_on_a_missing_bucket_says_so(
    moto_s3: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in moto_s3.env.items():
        monkeypatch.setenv(name, value)
    bucket = _bucket()
    result = runner.invoke(app, ["table", "show", f"s3://{bucket}/dbz"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert f"the bucket '{bucket}' does not exist" in lines[0]
    assert "no Hudi table" not in result.output and "Traceback" not in result.output


@pytest.mark.s3
def test_rejected_credentials_say_where_credentials_come_from(
    moto_auth: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {**moto_auth.options, "access_key_id": KEY_ID, "secret_access_key": SECRET}
    with pytest.raises(StorageError) as caught:
        HudiTable.open(f"s3://{_bucket()}/dbz", storage_options=options)
    assert caught.value.retryable is False
    # the CLI takes them from the environment
    for name, value in {**moto_auth.env, "AWS_ACCESS_KEY_ID": KEY_ID,
                        "AWS_SECRET_ACCESS_KEY": SECRET}.items():
        monkeypatch.setenv(name, value)
    result = runner.invoke(app, ["table", "show", f"s3://{_bucket()}/dbz"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for message in (str(caught.value), lines[0]):
        assert "403 Forbidden" in message
        assert "AWS_ACCESS_KEY_ID" in message and "AWS_SECRET_ACCESS_KEY" in message
        assert SECRET not in message and KEY_ID not in message
    # the pipeline's table was opened with [table.storage] options: the hint names them too;
    # the table commands have no such options: only the environment
    assert "[table.storage]" in str(caught.value)
    assert "[table.storage]" not in lines[0]


@pytest.mark.s3
def test_an_unreachable_endpoint_is_a_retryable_storage_error() -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    options = {"endpoint": endpoint, "region": REGION, "access_key_id": KEY_ID,
               "secret_access_key": SECRET, "connect_timeout": "1s", "timeout": "2s"}
    with pytest.raises(StorageError) as caught:
        HudiTable.open(f"s3://{_bucket()}/dbz", storage_options=options)
    message = str(caught.value)
    assert f"cannot reach S3 at {endpoint} (connection refused" in message
    assert "endpoint" in message and "AWS_ENDPOINT_URL" in message
    assert SECRET not in message and "\n" not in message
    assert caught.value.retryable is True and is_retryable(caught.value)
    # an outage the pipeline waits out, also as the text of a Spark job's error
    from hoodline.errors import EngineJobError
    from hoodline.storage.paths import is_store_outage

    assert is_store_outage(caught.value)
    assert is_store_outage(EngineJobError(f"the round's Spark job failed: StorageError: "
                                          f"{caught.value}"))


def test_only_an_unreachable_or_failing_store_is_an_outage_and_its_patience_is_read() -> None:
    from hoodline.errors import EngineJobError
    from hoodline.storage.paths import is_store_outage, retry_timeout_s

    assert is_store_outage(StorageError("cannot read 's3://b/t': S3 failed (503 Slow Down); "
                                        "a failure on the store's side, which may pass",
                                        retryable=True))
    assert not is_store_outage(StorageError("cannot read 's3://b/t': the bucket 'b' does not "
                                            "exist", retryable=False))
    assert not is_store_outage(EngineJobError("the round's Spark job failed: executor lost"))
    assert retry_timeout_s({}) == 180.0
    assert retry_timeout_s({"retry_timeout": "10min"}) == 600.0


@pytest.mark.s3
def test_hoodline_run_on_a_missing_bucket_gives_one_line(
    moto_s3: MotoS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"id": "a", "ts": 1}\n')
    bucket = _bucket()
    storage = "\n".join(f'{k} = "{v}"' for k, v in moto_s3.options.items())
    cfg = write_files_pipeline(tmp_path / "p.toml", tmp_path / "in", f"s3://{bucket}/dbz",
                               {"id": "string", "ts": "int64"}, f"[table.storage]\n{storage}",
                               table_lines='precombine-field = "ts"')
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    result = runner.invoke(app, ["run", str(cfg), "--once"])
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert f"cannot list 's3://{bucket}': the bucket '{bucket}' does not exist" in errors[0]
    assert "Traceback" not in result.output and "Debug source" not in result.output


@pytest.mark.s3
def test_the_file_source_on_a_missing_bucket_says_so_once(
    moto_s3: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file source's path takes its credentials from the environment alone: the listing's
    error names the bucket once, and no [table.storage] it cannot use."""
    from hoodline.connectors.files.discovery import DirectoryLister

    for name, value in moto_s3.env.items():
        monkeypatch.setenv(name, value)
    bucket = _bucket()
    with pytest.raises(StorageError) as caught:
        DirectoryLister(f"s3://{bucket}/in").list()
    message = str(caught.value)
    assert message.startswith(f"cannot list 's3://{bucket}/in': the bucket '{bucket}' does not")
    assert message.count("cannot list") == 1 and "[table.storage]" not in message
    assert caught.value.retryable is False


@pytest.mark.s3
def test_storage_options_bound_the_retries_of_an_unanswered_request() -> None:
    """obstore retries a failed request 10 times for up to 3 minutes by default; [table.storage]
    max_retries / retry_timeout bound that (an endpoint that drops packets fails in time)."""
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    options = {"endpoint": endpoint, "region": REGION, "access_key_id": KEY_ID,
               "secret_access_key": SECRET, "max_retries": "1", "retry_timeout": "5s"}
    with pytest.raises(StorageError, match=r"connection refused, after 1 retries"):
        HudiTable.open(f"s3://{_bucket()}/dbz", storage_options=options)
    location = parse_location(f"s3://{_bucket()}/t", options)
    assert isinstance(location, ObjectPath)
    assert "max_retries" not in location.root.reader_options()  # hoodline's, not hudi-rs's
    for key, bad in (("max_retries", "-1"), ("max_retries", "many"), ("retry_timeout", "soon")):
        with pytest.raises(ConfigError, match=f"storage option '{key}' = '{bad}'"):
            HudiTable.open(f"s3://{_bucket()}/dbz", storage_options={**options, key: bad})


@pytest.mark.parametrize(("url", "options", "secret"), [
    # a misspelt secret key, and Azure's aliases of the account key and its connection string
    ("s3://bucket-x/t", {"secrte_access_key": "S3CRET-1", "region": REGION}, "S3CRET-1"),
    ("az://box/t", {"account_name": "acct", "master_key": "S3CRET-2", "nope": "x"}, "S3CRET-2"),
    ("az://box/t", {"access_key": "S3CRET-3", "nope": "x"}, "S3CRET-3"),
    ("az://box/t", {"connection_string": "AccountName=a;AccountKey=S3CRET-4"}, "S3CRET-4"),
])
def test_refused_store_options_never_show_a_secret(
    url: str, options: dict[str, str], secret: str
) -> None:
    """The refusal printed every option value but those of keys with a secret marker: a
    misspelt key or one of Azure's aliases (access_key, master_key, connection_string) showed
    the account key."""
    with pytest.raises(ConfigError) as caught:
        HudiTable.open(url, storage_options=options)
    message = str(caught.value)
    assert message.startswith(f"cannot open the object store '{url.rsplit('/', 1)[0]}")
    assert secret not in message and "Debug source" not in message, message
    if "region" in options:
        assert f"'region': '{REGION}'" in message  # harmless settings stay readable


@pytest.mark.parametrize("where", ["option", "env"])
def test_an_endpoint_without_a_scheme_is_refused_naming_where_it_was_set(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was a panic of the store's Rust side at the first request: ~200 lines of backtrace."""
    endpoint = f"127.0.0.1:{free_port()}"
    options = {"region": REGION, "access_key_id": KEY_ID, "secret_access_key": SECRET}
    if where == "option":
        options["endpoint"] = endpoint
    else:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    with pytest.raises(ConfigError) as caught:
        HudiTable.open(f"s3://{_bucket()}/t", storage_options=options)
    message = str(caught.value)
    assert f"the endpoint '{endpoint}'" in message and f"http://{endpoint}" in message
    assert ("storage option 'endpoint'" if where == "option"
            else "environment variable AWS_ENDPOINT_URL") in message


def test_the_file_source_on_azure_without_its_settings_names_azures_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The hint said "e.g. AWS_ACCESS_KEY_ID" for an az:// path, after the store's multi-line
    debug dump."""
    from hoodline.connectors.files.discovery import DirectoryLister
    from hoodline.errors import FileSourceError

    for name in list(os.environ):
        if name.startswith("AZURE_"):
            monkeypatch.delenv(name)
    with pytest.raises(FileSourceError) as caught:
        DirectoryLister("az://box/in").list()
    message = str(caught.value)
    assert "AZURE_STORAGE_ACCOUNT_NAME" in message and "AWS_" not in message
    assert "Debug source" not in message and "\n" not in message, message


def test_virtual_hosted_requests_need_an_endpoint_naming_the_bucket() -> None:
    """With a custom endpoint that does not name the bucket, the store sent requests to a
    "bucket" named after the path's first folder, and said the real bucket did not exist."""
    options = {"endpoint": "http://127.0.0.1:9000", "virtual_hosted_style_request": "true",
               "region": REGION, "access_key_id": KEY_ID, "secret_access_key": SECRET}
    with pytest.raises(ConfigError, match=r"needs an endpoint that names the bucket 'lake'"):
        HudiTable.open("s3://lake/tables/t", storage_options=options)
